//! redb panics on some damaged pages (an `unreachable!`, a slice index out
//! of range) instead of returning an error. The [`super::Db`] calls that
//! reach redb run under [`guarded`], which turns such a panic into
//! [`DbError::Corrupt`] naming the file: damage is refused and explained,
//! never a crash (in the Mnesia backend, never a backtrace on the node's
//! terminal).
//!
//! Rust's default panic hook prints a caught panic's message (and, with
//! `RUST_BACKTRACE`, a backtrace) before `catch_unwind` sees it. So the
//! first guarded call installs a hook that stays silent for panics inside
//! a guarded call on the same thread and hands every other panic to the
//! hook that was there before. A program that sets its own hook later
//! replaces this one: caught panics then print again, and are still
//! caught. (The NIF is a library with its own copy of the standard
//! library, so there this hook sees only the NIF's panics.)

use std::cell::Cell;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;

use super::DbError;

thread_local! {
    /// How many guarded calls this thread is inside (they nest: a write
    /// reads, a flush commits).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

static QUIET_HOOK: Once = Once::new();

/// Whether this thread is inside a guarded call.
pub(crate) fn inside_guard() -> bool {
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

/// The message a panic's payload carries.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("no message")
}

/// Runs `f`, which reads or writes the redb file `path`; a panic inside
/// becomes [`DbError::Corrupt`] naming `path`, and prints nothing. Costs a
/// thread-local counter and a `Once` check when nothing panics.
///
/// Every [`super::Db`] call that reaches redb runs so already; callers
/// (the NIF) use it around their own work on a `Db`, so that no panic
/// escapes them either.
pub fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T, DbError>) -> Result<T, DbError> {
    install_quiet_hook();
    DEPTH.with(|d| d.set(d.get() + 1));
    let outcome = catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get() - 1));
    outcome.unwrap_or_else(|payload| {
        Err(DbError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("redb failed on it: {}", panic_message(&*payload)),
        })
    })
}

/// A redb database whose drop runs guarded. Dropping a database closes it,
/// and redb commits then: on some damaged files that commit panics, after
/// every call had returned its error. A drop has no caller to tell, so
/// the panic is swallowed, silently. The [`super::Db`] holds it last, so
/// that its read transactions are gone when it closes (redb closes a
/// database when the last of them goes, and that drop is not guarded).
pub(super) struct QuietClose {
    /// Always `Some` until the drop or [`QuietClose::into_inner`] takes it.
    db: Option<redb::Database>,
    path: PathBuf,
}

impl QuietClose {
    /// Wraps `db`, the database in file `path`.
    pub(super) fn new(db: redb::Database, path: &Path) -> QuietClose {
        QuietClose {
            db: Some(db),
            path: path.to_path_buf(),
        }
    }

    /// The database, to close it and hear how that went.
    pub(super) fn into_inner(mut self) -> redb::Database {
        self.db
            .take()
            .expect("only the drop and into_inner take it")
    }
}

impl Deref for QuietClose {
    type Target = redb::Database;

    fn deref(&self) -> &redb::Database {
        self.db
            .as_ref()
            .expect("only the drop and into_inner take it")
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
        let e = guarded::<()>(Path::new("/x/db.redb"), || {
            panic!("entered unreachable code")
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "/x/db.redb: the database is corrupt: redb failed on it: entered unreachable code"
        );
        assert!(!inside_guard(), "the depth is restored after a panic");
        assert_eq!(guarded(Path::new("f"), || Ok(7)).unwrap(), 7);
    }
}
