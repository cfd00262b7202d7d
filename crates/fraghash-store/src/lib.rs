//! A durable fragmented table on [redb](https://docs.rs/redb): records are
//! spread over fragments (one redb file each) by a [`fraghash`] scheme, and
//! fragments are added, split, removed and rebalanced **online** and
//! **crash-safely**.
//!
//! # Example
//!
//! ```
//! use fraghash_store::{Table, TableOptions};
//!
//! let dir = std::env::temp_dir().join(format!("fraghash-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let table = Table::create(&dir, &TableOptions { scheme: "slots".into(), fragments: 4, dirs: vec![] })?;
//! table.put(b"user:1", b"alice")?;
//! table.put(b"user:2", b"bob")?;
//! assert_eq!(table.get(b"user:1")?, Some(b"alice".to_vec()));
//!
//! // Grow to 5 fragments: only the records the new fragment takes are read.
//! let report = table.add_fragment()?;
//! assert_eq!(report.fragments_after, 5);
//! assert_eq!(report.keys_examined, report.keys_moved);
//! assert!(table.verify()?.is_ok());
//!
//! // Reopen: same records, same placement.
//! drop(table);
//! let table = Table::open(&dir)?;
//! assert_eq!(table.len(), 2);
//! assert_eq!(table.scan()?.count(), 2);
//! # drop(table);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), fraghash_store::Error>(())
//! ```
//!
//! # What is where
//!
//! A table is a directory holding `MANIFEST` (scheme state, fragment files,
//! migration journal; replaced atomically), `LOCK` (held with `flock` while
//! open) and one redb file per fragment, unless [`TableOptions::dirs`]
//! spreads them over other directories. Inside a fragment, records are keyed
//! by `(h as big-endian u64, key)` with `h = fraghash::key_hash(key)`, so a
//! hash range is one range scan.
//!
//! # Migrations and crashes
//!
//! An add, split, remove or rebalance writes its plan into the manifest
//! before any record moves; records then move in batches (commit on the
//! target, then delete on the source). Reads and writes from other threads
//! go on meanwhile: a get looks in the source, then in the destination, and
//! so never misses a present key. A crash at any point is finished by the
//! next [`Table::open`], which tells what it finished in
//! [`Table::recovered_migration`]. See [`migration`] and `docs/store.md`.
//!
//! # Limits
//!
//! - Keys: at most [`MAX_KEY_LEN`] bytes (the empty key is allowed).
//! - Values: at most [`MAX_VALUE_LEN`] bytes.
//! - Fragments: the scheme's limit ([`fraghash::SchemeSpec::max_fragments`]).
//! - One `Table` has a table open at a time, in one process ([`Error::TableLocked`]
//!   says whether this process or another holds it); clone it to share it.
//! - Every `put`, `delete` and fragment's part of a batch is one fsynced redb
//!   transaction: batch writes for throughput.

#![warn(missing_docs)]

mod admin;
mod error;
pub mod failpoint;
mod fragment;
mod guard;
mod manifest;
pub mod migration;
mod open;
mod report;
mod table;

pub use admin::{CompactReport, VerifyReport};
pub use error::{Error, LockHolder, Result};
pub use fraghash::PlanKind;
pub use manifest::{FORMAT_VERSION, MANIFEST_FILE};
pub use open::DEFAULT_BATCH;
pub use report::{MigrationProgress, MigrationReport};
pub use table::{
    FragmentStats, ProgressFn, Scan, Table, TableOptions, TableStats, WriteBatch, MAX_KEY_LEN,
    MAX_VALUE_LEN,
};

/// Whether manifest bytes hold a migration journal (for the crash tests).
#[doc(hidden)]
pub fn __journal_present(manifest: &[u8]) -> bool {
    manifest::Manifest::decode(std::path::Path::new(MANIFEST_FILE), manifest)
        .is_ok_and(|m| m.journal.is_some())
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<crate::Table>();
    }
}
