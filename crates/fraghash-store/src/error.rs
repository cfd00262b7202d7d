//! Typed errors of the store. Every message is one line and names the file
//! or the limit involved.

use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Result of store operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Who holds a table's lock, for [`Error::TableLocked`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockHolder {
    /// A `Table` of this process has it open: open a table once per process
    /// and clone the `Table` to share it.
    ThisProcess,
    /// Another process has it open.
    OtherProcess,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LockHolder::ThisProcess => {
                "this process has it open already (open a table once and clone the Table to share it)"
            }
            LockHolder::OtherProcess => "another process has it open",
        })
    }
}

/// Any error of the store.
#[derive(Debug, Error)]
pub enum Error {
    /// A `Table` has the table open already, in this process or another.
    #[error("table {dir} is locked: {holder}")]
    TableLocked {
        /// The table directory.
        dir: PathBuf,
        /// Which process holds it.
        holder: LockHolder,
    },
    /// `create` found a table already there.
    #[error("a table already exists in {dir}")]
    TableExists {
        /// The table directory.
        dir: PathBuf,
    },
    /// `create` was given a directory that holds files but no table: a
    /// table is created only in a new or empty directory, so it never mixes
    /// with other files.
    #[error("{dir} is not empty and holds no table; create the table in a new or empty directory")]
    DirNotEmpty {
        /// The directory given.
        dir: PathBuf,
    },
    /// `open` found no manifest.
    #[error("no table in {dir}: {manifest} does not exist")]
    NotATable {
        /// The directory given.
        dir: PathBuf,
        /// The manifest path looked for.
        manifest: PathBuf,
    },
    /// The manifest is not a fraghash manifest at all.
    #[error("{path} is not a fraghash-store manifest (bad magic)")]
    ForeignManifest {
        /// The manifest file.
        path: PathBuf,
    },
    /// The manifest is damaged (truncated, bad checksum, undecodable).
    #[error("corrupt manifest {path}: {reason}")]
    CorruptManifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The manifest was written by a newer format.
    #[error("manifest {path} has format version {found}; this build reads version {supported}")]
    UnsupportedFormat {
        /// The manifest file.
        path: PathBuf,
        /// Version found.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// A fragment file listed in the manifest does not exist. It is never
    /// re-created: that would silently lose its records.
    #[error("fragment {fragment} file {path} is missing; restore it (it is never re-created)")]
    MissingFragment {
        /// Fragment id.
        fragment: u32,
        /// The expected file.
        path: PathBuf,
    },
    /// A fragment file exists but is not the one the manifest names.
    #[error("fragment {fragment} file {path} does not belong to this table: {reason}")]
    ForeignFragment {
        /// Fragment id.
        fragment: u32,
        /// The file.
        path: PathBuf,
        /// What did not match.
        reason: String,
    },
    /// A key longer than [`crate::MAX_KEY_LEN`].
    #[error("key of {len} bytes is over the limit of {max} bytes")]
    KeyTooLong {
        /// The key's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A value longer than [`crate::MAX_VALUE_LEN`].
    #[error("value of {len} bytes is over the limit of {max} bytes")]
    ValueTooLong {
        /// The value's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The disk (or the process's file size limit) is full. The write did
    /// not happen; the table stays consistent. Reopen it once space returns.
    #[error(
        "no space left writing {path}: the write was not applied; free space and reopen the table"
    )]
    DiskFull {
        /// The file being written.
        path: PathBuf,
    },
    /// A scheme refused the operation (unknown spec, removing a fragment the
    /// scheme cannot remove, too many fragments...).
    #[error(transparent)]
    Scheme(#[from] fraghash::Error),
    /// A migration stopped on an error and its state in memory is no longer
    /// trusted for writes of moving keys. Reopen the table: opening finishes it.
    #[error("a migration was interrupted ({reason}); reopen the table to finish it")]
    MigrationInterrupted {
        /// The error that stopped it.
        reason: String,
    },
    /// The operation needs the table to itself and something else holds it
    /// (an open scan during `compact`).
    #[error("table is busy: {0}")]
    Busy(String),
    /// An option given to `create` is invalid.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// A fragment's redb file is damaged: redb found it corrupt, or failed
    /// on it (see [`Error::is_damage`]). Restore the file from a copy.
    #[error("fragment file {path} is damaged: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What redb found, or where it failed.
        reason: String,
    },
    /// An error inside a fragment's redb file.
    #[error("storage error in {path}: {source}")]
    Storage {
        /// The file.
        path: PathBuf,
        /// redb's error.
        source: redb::Error,
    },
    /// An I/O error on a file of the table.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A failpoint fired (tests only; see [`crate::failpoint`]).
    #[error("failpoint {0} fired")]
    Failpoint(String),
}

fn io_is_full(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::FileTooLarge | io::ErrorKind::QuotaExceeded
    ) || matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EFBIG))
}

impl Error {
    /// An I/O error on `path`, as [`Error::DiskFull`] when the disk is full.
    pub(crate) fn io(path: &Path, source: io::Error) -> Error {
        if io_is_full(&source) {
            Error::DiskFull {
                path: path.to_path_buf(),
            }
        } else {
            Error::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    }

    /// A redb error on `path`, as [`Error::DiskFull`] when the disk is full.
    pub(crate) fn storage(path: &Path, source: impl Into<redb::Error>) -> Error {
        let source = source.into();
        match &source {
            redb::Error::Io(e) if io_is_full(e) => {
                return Error::DiskFull {
                    path: path.to_path_buf(),
                };
            }
            redb::Error::Corrupted(reason) => {
                return Error::Corrupt {
                    path: path.to_path_buf(),
                    reason: reason.clone(),
                };
            }
            _ => {}
        }
        Error::Storage {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Whether this error reports a damaged file of the table: a damaged
    /// fragment ([`Error::Corrupt`]) or manifest ([`Error::CorruptManifest`]),
    /// or a fragment file that is not a readable redb file of this table
    /// ([`Error::ForeignFragment`]). `fraghash table verify` reports these
    /// as problems found.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. } | Error::CorruptManifest { .. } | Error::ForeignFragment { .. }
        )
    }

    /// Whether this is [`Error::DiskFull`].
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::DiskFull { .. })
    }
}

impl From<fraghash::SchemeError> for Error {
    fn from(e: fraghash::SchemeError) -> Error {
        Error::Scheme(e.into())
    }
}

/// Adds the file to a redb or I/O error.
pub(crate) trait Ctx<T> {
    /// Converts the error, naming `path`.
    fn at(self, path: &Path) -> Result<T>;
}

impl<T, E: Into<redb::Error>> Ctx<T> for std::result::Result<T, E> {
    fn at(self, path: &Path) -> Result<T> {
        self.map_err(|e| Error::storage(path, e))
    }
}

/// Adds the file to an I/O error.
pub(crate) trait IoCtx<T> {
    /// Converts the error, naming `path`.
    fn io_at(self, path: &Path) -> Result<T>;
}

impl<T> IoCtx<T> for io::Result<T> {
    fn io_at(self, path: &Path) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}
