//! redb panics on some damaged pages (an `unreachable!`, a slice index out
//! of range) instead of returning an error. The [`super::Db`] calls that
//! reach redb run under [`guarded`], which turns such a panic into
//! [`DbError::Corrupt`] naming the file: damage is refused and explained,
//! never a crash (in the Mnesia backend, never a backtrace on the node's
//! terminal). The guard, and how it keeps a caught panic from printing,
//! is [`fraghash::guard`]'s; this module gives it the error.

use std::path::Path;

use fraghash::guard::QuietDrop;

use super::DbError;

/// Runs `f`, which reads or writes the redb file `path`; a panic inside
/// becomes [`DbError::Corrupt`] naming `path`, and prints nothing (see
/// [`fraghash::guard::guarded`]).
///
/// Every [`super::Db`] call that reaches redb runs so already; callers
/// (the NIF) use it around their own work on a `Db`, so that no panic
/// escapes them either.
pub fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T, DbError>) -> Result<T, DbError> {
    fraghash::guard::guarded(f, |message| DbError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("redb failed on it: {message}"),
    })
}

/// A redb database whose drop (which commits, and on some damaged files
/// panics) runs guarded and silent. The [`super::Db`] holds it last, so
/// that its read transactions are gone when it closes (redb closes a
/// database when the last of them goes, and that drop is not guarded).
pub(super) type QuietClose = QuietDrop<redb::Database>;

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
    }
}
