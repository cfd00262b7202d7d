//! redb panics on some damaged pages (an `unreachable!`, a slice index out
//! of range) instead of returning an error. Every call into redb runs
//! under [`guarded`], which turns such a panic into [`Error::Corrupt`]
//! naming the file, so damage is refused and explained, never a crash.
//! The guard, and how it keeps a caught panic from printing, is
//! [`fraghash::guard`]'s; this module gives it the error.

use std::path::Path;

use fraghash::guard::QuietDrop;

use crate::error::{Error, Result};

/// Runs `f`, which reads or writes the redb file `path`; a panic inside
/// becomes [`Error::Corrupt`] naming `path`, and prints nothing (see
/// [`fraghash::guard::guarded`]).
pub(crate) fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    fraghash::guard::guarded(f, |message| Error::Corrupt {
        path: path.to_path_buf(),
        reason: format!("redb failed on it: {message}"),
    })
}

/// A redb database whose drop (which commits, and on some damaged files
/// panics, after every call had returned its error) runs guarded and
/// silent.
pub(crate) type QuietClose = QuietDrop<redb::Database>;

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
    }
}
