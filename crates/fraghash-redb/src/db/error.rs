//! The errors of [`super::Db`], and how redb's errors map to them.

use std::io;
use std::path::{Path, PathBuf};

/// Why a database operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The file is open already: by another process, or by another [`super::Db`]
    /// in this one.
    #[error("{}: the database is open elsewhere (another process or handle holds its lock)", path.display())]
    Locked {
        /// The database file.
        path: PathBuf,
    },
    /// The file is not a database of this crate: not a redb file at all, a
    /// redb file of another program, or a format this version does not read.
    #[error("{}: not a fraghash-redb database: {reason}", path.display())]
    Foreign {
        /// The database file.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// The file is a redb database, damaged.
    #[error("{}: the database is corrupt: {reason}", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What redb found.
        reason: String,
    },
    /// The device holding the file is full (or the user's quota is used up).
    #[error("{}: no space left on the device", path.display())]
    DiskFull {
        /// The database file.
        path: PathBuf,
    },
    /// The file does not exist, and the database was opened without
    /// [`super::OpenOptions::create`].
    #[error("{}: no such database file", path.display())]
    NotFound {
        /// The database file.
        path: PathBuf,
    },
    /// Any other I/O error on the file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The database file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Any other error redb reported.
    #[error("{}: {message}", path.display())]
    Storage {
        /// The database file.
        path: PathBuf,
        /// redb's message.
        message: String,
    },
    /// A log file is damaged in the middle: whole batches follow bytes
    /// that fail their check, so cutting there would drop batches that
    /// were acknowledged. Opening with [`super::OpenOptions::repair_log`]
    /// cuts it and says what it dropped.
    #[error("{}: the log is damaged at offset {offset}, with {records_after} whole logged \
             batch(es) after it that would be lost; keep a copy of the file, then open with \
             the log repair to drop the damaged part and everything after it", path.display())]
    LogDamaged {
        /// The log file.
        path: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// The whole batches after it.
        records_after: usize,
    },
    /// A log file is missing beside a database that had it: the batches
    /// it held since the last synced commit would be lost without a word.
    /// Opening with [`super::OpenOptions::repair_log`] makes it anew.
    #[error("{}: the log file is missing, so the writes it held since the database's last \
             sync are lost; restore it, or open with the log repair to go on without them",
            path.display())]
    LogMissing {
        /// The missing file.
        path: PathBuf,
    },
    /// An earlier I/O error (a full disc during a commit, say) left redb
    /// refusing every operation until the database is opened again
    /// ([`super::Db::reopen`]); the log holds every batch written since
    /// the last synced commit, and the next open replays them.
    #[error("{}: an earlier I/O error left the database unusable until it is opened again", path.display())]
    Poisoned {
        /// The database file.
        path: PathBuf,
    },
    /// The table does not exist in the database.
    #[error("no table named {name:?}")]
    NoSuchTable {
        /// The table's name.
        name: String,
    },
    /// A table of that name exists already.
    #[error("a table named {name:?} exists already")]
    TableExists {
        /// The table's name.
        name: String,
    },
    /// The name cannot name a table (empty, or longer than
    /// [`super::MAX_TABLE_NAME`] bytes).
    #[error("{name:?} is not a valid table name: {reason}")]
    BadTableName {
        /// The name given.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
}

fn is_disk_full(e: &io::Error) -> bool {
    // ENOSPC and EDQUOT on Linux; StorageFull where std maps them.
    e.kind() == io::ErrorKind::StorageFull || matches!(e.raw_os_error(), Some(28) | Some(122))
}

impl DbError {
    /// The error for an I/O error on the file at `path`.
    pub(super) fn io(path: &Path, e: io::Error) -> DbError {
        let path = path.to_path_buf();
        if is_disk_full(&e) {
            DbError::DiskFull { path }
        } else if e.kind() == io::ErrorKind::NotFound {
            DbError::NotFound { path }
        } else {
            DbError::Io { path, source: e }
        }
    }

    /// The error for any redb error on the file at `path`.
    pub(super) fn redb(path: &Path, e: impl Into<redb::Error>) -> DbError {
        let p = path.to_path_buf();
        match e.into() {
            redb::Error::DatabaseAlreadyOpen | redb::Error::LockProtocolMismatch => {
                DbError::Locked { path: p }
            }
            redb::Error::Corrupted(reason) => DbError::Corrupt { path: p, reason },
            redb::Error::UpgradeRequired(v) => DbError::Foreign {
                path: p,
                reason: format!("a redb file of an older format ({v})"),
            },
            redb::Error::Io(e) if e.kind() == io::ErrorKind::InvalidData => DbError::Foreign {
                path: p,
                reason: format!("not a redb file ({e})"),
            },
            redb::Error::Io(e) => DbError::io(path, e),
            redb::Error::TableDoesNotExist(name) => DbError::NoSuchTable { name },
            redb::Error::PreviousIo => DbError::Poisoned { path: p },
            other => DbError::Storage {
                path: p,
                message: other.to_string(),
            },
        }
    }
}

/// `.at(path)`: a redb result with its error mapped to a [`DbError`] that
/// names the file.
pub(super) trait At<T> {
    fn at(self, path: &Path) -> Result<T, DbError>;
}

impl<T, E: Into<redb::Error>> At<T> for Result<T, E> {
    fn at(self, path: &Path) -> Result<T, DbError> {
        self.map_err(|e| DbError::redb(path, e))
    }
}
