//! Failpoints: named places in the migration state machine where a test can
//! make the process crash or the operation fail.
//!
//! Two triggers, both off unless set:
//! - the environment variable `FRAGHASH_STORE_FAILPOINT=name` (or
//!   `name:n`, the `n`th time the point is reached) makes the process
//!   **abort** there, with no cleanup, like a crash; the crash tests use it in
//!   a child process;
//! - [`set`] makes the point return [`crate::Error::Failpoint`] in this
//!   process, to test error paths.
//!
//! The cost when off is one relaxed atomic load per point.
//!
//! The points, in the order a migration reaches them, are listed in
//! [`POINTS`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::error::{Error, Result};

/// Every failpoint, in the order a migration reaches them.
pub const POINTS: &[&str] = &[
    // A new fragment file (add, split) exists; the manifest does not name it yet.
    "start.after-new-file",
    // The new manifest (with the journal) is written to its temporary file, not renamed.
    "manifest.after-tmp-write",
    // The new manifest is renamed into place, the directory not yet synced.
    "manifest.after-rename",
    // The journal is in the manifest; no record has moved.
    "start.after-journal",
    // A batch is committed on its target fragment(s), not yet deleted from the source.
    "move.after-target-commit",
    // A batch is deleted from the source; the cursor has not advanced.
    "move.after-source-delete",
    // Every record has moved; the final manifest is not written.
    "finish.before-manifest",
    // The final manifest is written; a removed fragment's file is not yet deleted.
    "finish.after-manifest",
];

static ARMED: AtomicBool = AtomicBool::new(false);
static LOCAL: Mutex<Option<String>> = Mutex::new(None);
static HITS: AtomicU64 = AtomicU64::new(0);

fn env_point() -> &'static Option<(String, u64)> {
    static ENV: OnceLock<Option<(String, u64)>> = OnceLock::new();
    ENV.get_or_init(|| {
        let v = std::env::var("FRAGHASH_STORE_FAILPOINT").ok()?;
        let (name, n) = match v.split_once(':') {
            Some((a, b)) => (a.to_string(), b.parse().unwrap_or(1)),
            None => (v, 1),
        };
        ARMED.store(true, Ordering::Relaxed);
        Some((name, n.max(1)))
    })
}

/// Makes `name` return [`Error::Failpoint`] in this process from now on
/// (`None` clears it). For tests.
#[doc(hidden)]
pub fn set(name: Option<&str>) {
    *LOCAL.lock().unwrap_or_else(|e| e.into_inner()) = name.map(str::to_string);
    ARMED.store(name.is_some() || env_point().is_some(), Ordering::Relaxed);
}

/// Reads the environment once (call at start-up so that points are armed).
pub(crate) fn init() {
    let _ = env_point();
}

/// The failpoint `name`: aborts the process or fails if armed there.
pub(crate) fn hit(name: &'static str) -> Result<()> {
    if !ARMED.load(Ordering::Relaxed) {
        return Ok(());
    }
    if let Some((p, n)) = env_point() {
        if p == name && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            std::process::abort();
        }
    }
    if LOCAL.lock().unwrap_or_else(|e| e.into_inner()).as_deref() == Some(name) {
        return Err(Error::Failpoint(name.to_string()));
    }
    Ok(())
}
