//! redb panics on some damaged pages (an `unreachable!`, a slice index out
//! of range) instead of returning an error. Every call into redb runs
//! under [`guarded`], which turns such a panic into [`Error::Corrupt`]
//! naming the file, so damage is refused and explained, never a crash.
//!
//! Rust's default panic hook prints a caught panic's message (and, with
//! `RUST_BACKTRACE`, a backtrace) before `catch_unwind` sees it. So the
//! first guarded call installs a hook that stays silent for panics inside
//! a guarded call on the same thread and hands every other panic to the
//! hook that was there before. A program that sets its own hook later
//! replaces this one: then caught panics print again, and are still
//! caught.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;

use crate::error::{Error, Result};

thread_local! {
    /// How many guarded calls this thread is inside (they can nest).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

static QUIET_HOOK: Once = Once::new();

fn inside_guard() -> bool {
    DEPTH.try_with(|d| d.get() > 0).unwrap_or(false)
}

fn install_quiet_hook() {
    // Changing the hook from a panicking thread is itself a panic.
    if std::thread::panicking() {
        return;
    }
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !inside_guard() {
                previous(info);
            }
        }));
    });
}

/// The message a panic carried.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("no message")
}

/// Runs `f`, which reads or writes the redb file `path`; a panic inside
/// becomes [`Error::Corrupt`] naming `path`, and prints nothing. Costs a
/// thread-local counter and a `Once` check when nothing panics.
pub(crate) fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    install_quiet_hook();
    DEPTH.with(|d| d.set(d.get() + 1));
    let outcome = catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get() - 1));
    outcome.unwrap_or_else(|payload| {
        Err(Error::Corrupt {
            path: path.to_path_buf(),
            reason: format!("redb failed on it: {}", panic_message(&*payload)),
        })
    })
}

/// A redb database whose drop runs guarded. Dropping a database closes it,
/// and redb commits then: on some damaged files that commit panics, after
/// every call had returned its error. A drop has no caller to tell, so
/// the panic is swallowed, silently.
pub(crate) struct QuietClose {
    /// Always `Some` until the drop takes it.
    db: Option<redb::Database>,
    path: PathBuf,
}

impl QuietClose {
    /// Wraps `db`, the database in file `path`.
    pub(crate) fn new(db: redb::Database, path: &Path) -> QuietClose {
        QuietClose {
            db: Some(db),
            path: path.to_path_buf(),
        }
    }
}

impl Deref for QuietClose {
    type Target = redb::Database;

    fn deref(&self) -> &redb::Database {
        self.db.as_ref().expect("only the drop takes the database")
    }
}

impl DerefMut for QuietClose {
    fn deref_mut(&mut self) -> &mut redb::Database {
        self.db.as_mut().expect("only the drop takes the database")
    }
}

impl Drop for QuietClose {
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            let _ = guarded(&self.path, || {
                drop(db);
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_corrupt_error_naming_the_file() {
        let e = guarded::<()>(Path::new("/x/f.redb"), || {
            panic!("entered unreachable code")
        })
        .unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }));
        assert_eq!(
            e.to_string(),
            "fragment file /x/f.redb is damaged: redb failed on it: entered unreachable code"
        );
        assert!(!inside_guard(), "the depth is restored after a panic");
    }

    #[test]
    fn results_pass_through() {
        assert_eq!(guarded(Path::new("f"), || Ok(7)).unwrap(), 7);
        let e = guarded::<()>(Path::new("f"), || Err(Error::Busy("x".into()))).unwrap_err();
        assert!(matches!(e, Error::Busy(_)));
    }
}
