//! One redb database file holding many named tables.
//!
//! A [`Db`] is one file; each table in it (one per Mnesia table) maps keys
//! to values, both bytes, in the bytewise order of the keys. Keys are meant
//! to be order keys ([`crate::term::order_key`]) and values the records'
//! external-format bytes, but this layer only sees bytes.
//!
//! - [`Db::write`] applies a batch of puts, deletes and clears across any
//!   number of tables: all of it, or none of it. The caller chooses the
//!   [`Durability`] of each batch: synced before the call returns
//!   ([`Durability::Immediate`]), written to the database's log first so
//!   that it survives the death of the process ([`Durability::Logged`],
//!   see [the memtable and the log](self#the-memtable-and-the-log)), or
//!   neither ([`Durability::Deferred`]).
//! - Reads see every batch written so far: [`Db::get`], [`Db::chunk`] (up
//!   to a given number of records from a bound, in either direction),
//!   [`Db::first`], [`Db::last`], [`Db::next`], [`Db::prev`], [`Db::len`].
//!
//! The file holds, besides the tables, a format mark (so that a redb file of
//! another program is refused, not written to) and a catalogue of the
//! tables with bytes the caller keeps for each (its properties). Opening
//! maps every failure to a [`DbError`]: the file open elsewhere, not a
//! database of this crate, corrupt, a full disc. redb panics on some
//! damaged pages instead of returning an error: every call that reaches
//! redb, reads and writes as well as opening, turns such a panic into
//! [`DbError::Corrupt`] naming the file, and prints nothing.
//!
//! A `Db` is `Send + Sync`: reads run concurrently with each other, with
//! writes and with a flush; writes wait for each other.
//!
//! # The memtable and the log
//! A synced redb commit costs a sync of every page it wrote (milliseconds
//! to tens of milliseconds on the machines measured). A redb commit without
//! a sync costs less, but is lost if the process dies, and redb cannot
//! reuse the pages it replaced until a synced commit: a database written
//! so must sync often, or grow.
//!
//! So a [`Durability::Logged`] batch commits nothing in redb. It is
//! appended to the log beside the database (`<database>.log`, one
//! positioned write, no sync), then applied to the memtable (`memtable`),
//! an ordered map per table of the keys changed since the last flush,
//! which reads look at before redb. [`Db::flush`], meant for a thread of
//! its own, commits the memtable to redb in one synced transaction: it
//! freezes the memtable (batches go on into a fresh one) and turns the log
//! to its second file (`<database>.log2`), commits the frozen layer
//! without holding the writer lock, and once that commit is durable,
//! swaps the frozen layer for redb's new state and empties the file it
//! turned from. A flush thus touches each changed page once, however many
//! batches changed it, and writers wait for it only when the memtable
//! passes four times [`OpenOptions::memtable_bytes`]. Opening replays the
//! records redb does not hold. [`Db::sync`] commits everything
//! with a sync at once, and a clean [`Db::close`] leaves the log empty.
//! What each level survives:
//!
//! | level | the process killed | the OS crashed, the power cut |
//! |---|---|---|
//! | `Immediate` | yes | yes |
//! | `Logged` | yes | only once a later flush, synced commit or [`Db::sync`] returned |
//! | `Deferred` | only once a later flush, synced commit or [`Db::sync`] returned | the same |
//!
//! A crash loses the deferred batches since the last flush or synced
//! commit, never a part of one; logged batches after them are replayed
//! without them.

mod error;
mod guard;
mod log;
mod memtable;
mod op;
mod read;
mod write;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex, MutexGuard, RwLock};

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use error::At;
pub use error::DbError;
pub use guard::guarded;
pub use log::LogRepair;
pub use memtable::Direction;
pub use op::Op;
use read::View;
pub use read::{Chunk, Start};
use write::Writer;

/// The longest table name, in bytes.
pub const MAX_TABLE_NAME: usize = 1024;

/// The format mark, under key `format` of the meta table.
const FORMAT: &[u8] = b"fraghash-redb 1";
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("fraghash-redb/meta");
/// Table name -> the properties its creator gave.
const CATALOGUE: TableDefinition<&str, &[u8]> = TableDefinition::new("fraghash-redb/tables");
/// Tables' data live under this prefix, apart from the two above.
const DATA_PREFIX: &str = "t/";
/// The meta key of the number of the last logged batch committed.
const LOG_SEQ: &str = "log_seq";
/// The meta key present once the database has its log's two files, so
/// that a missing one is noticed.
const LOG_FILES: &str = "log_files";

type DataDef<'a> = TableDefinition<'a, &'static [u8], &'static [u8]>;

/// How [`Db::open`] opens a file.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Create the database when the file does not exist or is empty.
    /// Default: `true`.
    pub create: bool,
    /// redb's cache, in bytes. Default: 64 MiB.
    pub cache_bytes: usize,
    /// Check every page's checksum on open (reads the whole file). Without
    /// it, redb checks the file only after a crash, and damage elsewhere is
    /// found when it is read. Default: `false`.
    pub verify: bool,
    /// The memtable's size past which [`Db::wants_flush`] says to flush
    /// it, in bytes (keys, values and 64 bytes per change). A batch finding
    /// four times this much flushes first (or waits for the flush under
    /// way), which bounds the memory, the log and the work of replaying
    /// it. It also bounds the room a flush takes in the file: its commit
    /// writes every page it changes afresh while the pages they replace
    /// are kept until it is durable. Measured with 16 Mnesia writers on
    /// 1,000,000 records (a 185 MB file), about 28,000 writes a second
    /// whatever the size, the file took 206, 215, 238, 282 and 362 MB
    /// with 256 KiB, 512 KiB, 1, 2 and 8 MiB. Default: 1 MiB.
    pub memtable_bytes: usize,
    /// Open even when a log file is damaged in the middle or missing
    /// ([`DbError::LogDamaged`], [`DbError::LogMissing`]): the damaged
    /// part and everything after it in that file are dropped, a missing
    /// file is made anew, and [`Db::log_repairs`] says what was dropped.
    /// Default: `false`.
    pub repair_log: bool,
    /// The bytes each log file keeps allocated past its end, so that a
    /// full disc is seen ([`Db::has_room`] turns false) while the logged
    /// batches of the writes under way still fit (Linux only). Default:
    /// 4 MiB.
    pub log_reserve_bytes: u64,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            create: true,
            cache_bytes: 64 << 20,
            verify: false,
            memtable_bytes: 1 << 20,
            repair_log: false,
            log_reserve_bytes: 4 << 20,
        }
    }
}

/// When a committed batch is on disc (see [the log](self#the-log)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Synced before [`Db::write`] returns.
    Immediate,
    /// In the log file before [`Db::write`] returns: kept if the process
    /// dies; synced with the next synced commit or [`Db::sync`].
    Logged,
    /// Visible to reads at once, but on disc only after a later synced
    /// commit or [`Db::sync`]; a crash before then loses it, never a part
    /// of one.
    Deferred,
}

/// A database file open for reading and writing (see the [module
/// documentation](self)).
pub struct Db {
    path: PathBuf,
    /// The writer lock (see [`write`](self::write)).
    writer: Mutex<Writer>,
    /// Signalled when a flush ends.
    flushed: Condvar,
    memtable_bytes: usize,
    /// The names of the catalogue's tables, as its last commit left them:
    /// a batch checks its tables here instead of opening the catalogue
    /// (about a fifth of a one-record commit). Changed only with the
    /// writer lock held, by the commits that change the catalogue.
    names: Mutex<HashSet<String>>,
    /// What opening with `repair_log` dropped from the log.
    log_repairs: Vec<LogRepair>,
    /// The options it was opened with, for [`Db::reopen`].
    options: OpenOptions,
    /// The disc is full: the log could not reserve its room, or a synced
    /// commit failed for want of room (see [`Db::has_room`]).
    room_low: AtomicBool,
    /// What reads see: the memtable's layers and redb's state under them.
    view: RwLock<View>,
    /// Last, so that it drops after the read transactions of `view` (see
    /// [`guard::QuietClose`]).
    db: guard::QuietClose,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish()
    }
}

fn data_def(name: &str) -> DataDef<'_> {
    // `name` is checked non-empty, so the prefixed name is never empty,
    // which is all `new` asserts.
    TableDefinition::new(name)
}

fn check_name(name: &str) -> Result<(), DbError> {
    let bad = |reason| {
        Err(DbError::BadTableName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        bad("it is empty")
    } else if name.len() > MAX_TABLE_NAME {
        bad("it is longer than 1024 bytes")
    } else {
        Ok(())
    }
}

/// The log of the database in `path`: `<path>.log`.
fn log_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".log");
    PathBuf::from(p)
}

/// Checks the format mark; marks a database that has no tables at all and
/// answers `true` for it (a database made now).
fn check_format(db: &redb::Database, p: &Path, create: bool) -> Result<bool, DbError> {
    let foreign = |reason: &str| DbError::Foreign {
        path: p.to_path_buf(),
        reason: reason.to_owned(),
    };
    let txn = db.begin_read().at(p)?;
    let has_tables = txn.list_tables().at(p)?.next().is_some();
    let mark = match txn.open_table(META) {
        Ok(meta) => meta.get("format").at(p)?.map(|v| v.value().to_vec()),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(foreign(&format!("its meta table is unreadable ({e})"))),
    };
    match mark {
        Some(m) if m == FORMAT => return Ok(false),
        Some(_) => return Err(foreign("its format mark is another program's or version's")),
        None if has_tables => return Err(foreign("a redb database of another program")),
        None if !create => return Err(foreign("an empty redb database, not created here")),
        None => {}
    }
    drop(txn);
    let txn = db.begin_write().at(p)?;
    txn.open_table(META).at(p)?.insert("format", FORMAT).at(p)?;
    txn.open_table(CATALOGUE).at(p)?;
    txn.commit().at(p)?;
    Ok(true)
}

/// Stores `seq` as the number of the last log record that a synced commit
/// of `txn` holds.
fn mark_log_seq(txn: &redb::WriteTransaction, p: &Path, seq: u64) -> Result<(), DbError> {
    let mut meta = txn.open_table(META).at(p)?;
    meta.insert(LOG_SEQ, &seq.to_le_bytes()[..]).at(p)?;
    Ok(())
}

/// The number of the last logged batch in the database's durable state.
fn has_meta(db: &redb::Database, p: &Path, key: &str) -> Result<bool, DbError> {
    let txn = db.begin_read().at(p)?;
    let meta = match txn.open_table(META) {
        Ok(m) => m,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(false),
        Err(e) => return Err(DbError::redb(p, e)),
    };
    Ok(meta.get(key).at(p)?.is_some())
}

fn durable_log_seq(db: &redb::Database, p: &Path) -> Result<u64, DbError> {
    let txn = db.begin_read().at(p)?;
    let meta = txn.open_table(META).at(p)?;
    let seq = meta.get(LOG_SEQ).at(p)?;
    match seq.map(|v| <[u8; 8]>::try_from(v.value())) {
        Some(Ok(b)) => Ok(u64::from_le_bytes(b)),
        Some(Err(_)) => Err(DbError::Corrupt {
            path: p.to_path_buf(),
            reason: "its log number is not 8 bytes".to_owned(),
        }),
        None => Ok(0),
    }
}

impl Db {
    /// Opens the database in `path`, creating it if allowed (see
    /// [`OpenOptions`]).
    ///
    /// Errors: [`DbError::Locked`] when the file is open in another process
    /// or another `Db`; [`DbError::Foreign`] for a file that is not a redb
    /// database, or a redb database of another program (one with tables but
    /// no format mark of this crate); [`DbError::Corrupt`] for a damaged
    /// database; [`DbError::DiskFull`], [`DbError::NotFound`],
    /// [`DbError::Io`] for those failures of the file system. A file that
    /// makes redb panic (damage its checks do not catch) is reported as
    /// corrupt.
    pub fn open(path: impl AsRef<Path>, options: &OpenOptions) -> Result<Db, DbError> {
        let path = path.as_ref();
        guard::guarded(path, || Self::open_inner(path, options))
    }

    fn open_inner(path: &Path, options: &OpenOptions) -> Result<Db, DbError> {
        let mut builder = redb::Builder::new();
        builder
            .set_cache_size(options.cache_bytes)
            .set_check_integrity_on_open(options.verify);
        let db = if options.create {
            builder.create(path)
        } else {
            builder.open(path)
        }
        .at(path)?;
        let created = check_format(&db, path, options.create)?;
        let log_path = log_path(path);
        if created {
            // A log beside a database made just now is another database's.
            match std::fs::remove_file(&log_path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(DbError::io(&log_path, e))
                }
                _ => {}
            }
        }
        let durable = durable_log_seq(&db, path)?;
        let had_log = !created && has_meta(&db, path, LOG_FILES)?;
        let (mut log, records, log_repairs) =
            log::Log::open(&log_path, durable, had_log, options.repair_log)?;
        log.set_reserve(options.log_reserve_bytes);
        let room_low = AtomicBool::new(log.low_room());
        let base = read::Base::open(&db, path)?;
        let db = Db {
            db: guard::QuietClose::new(db),
            path: path.to_path_buf(),
            writer: Mutex::new(Writer::new(log)),
            flushed: Condvar::new(),
            memtable_bytes: options.memtable_bytes,
            names: Mutex::new(HashSet::new()),
            log_repairs,
            options: options.clone(),
            room_low,
            view: RwLock::new(View {
                active: memtable::Layer::default(),
                frozen: None,
                base,
            }),
        };
        db.reload_names()?;
        if !had_log {
            db.mark_log_files()?;
        }
        if records.is_empty() {
            // Records redb holds already: an append after them would have
            // to follow their numbering, so they go.
            db.lock_writer().log.clear();
        } else {
            db.replay(&records, &log_path)?;
        }
        Ok(db)
    }

    /// Commits the logged batches redb lost, in one synced commit.
    fn replay(&self, records: &[log::Record], log_path: &Path) -> Result<(), DbError> {
        let ops: Vec<Op> = records
            .iter()
            .flat_map(|r| r.ops.iter().map(log::OwnedOp::as_op))
            .collect();
        let mut w = self.lock_writer();
        match self.commit_all(&mut w, |txn| self.apply_ops(txn, &ops)) {
            Ok(()) => Ok(()),
            // Every table a record names existed when it was logged, and
            // only a synced commit (which the record then precedes) can
            // remove a table.
            Err(DbError::NoSuchTable { name }) => Err(DbError::Corrupt {
                path: log_path.to_path_buf(),
                reason: format!("the log names table {name:?}, which the database does not hold"),
            }),
            Err(e) => Err(e),
        }
    }

    /// Reads the table names from the catalogue's committed state.
    fn reload_names(&self) -> Result<(), DbError> {
        let names = self.tables()?.into_iter().map(|(name, _)| name).collect();
        *self.lock_names() = names;
        Ok(())
    }

    /// As [`Db::reload_names`]; when that fails, no name is left: writes
    /// then fail rather than write to a table without its catalogue entry.
    fn reload_names_or_clear(&self) {
        if self.reload_names().is_err() {
            self.lock_names().clear();
        }
    }

    fn lock_names(&self) -> MutexGuard<'_, HashSet<String>> {
        self.names.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Closes the database without a sync and opens its file again with
    /// the same options (never creating it): for a database that an I/O
    /// error left unusable ([`DbError::Poisoned`]). The log replays every
    /// batch written since the last synced commit, so nothing that
    /// returned is lost; the reopen fails as an open does (a disc still
    /// full, say), and can be tried again.
    pub fn reopen(self) -> Result<Db, DbError> {
        let path = self.path.clone();
        let options = OpenOptions {
            create: false,
            repair_log: false,
            ..self.options.clone()
        };
        drop(self);
        Db::open(path, &options)
    }

    /// What opening with [`OpenOptions::repair_log`] dropped from the log
    /// (nothing when the log was whole).
    pub fn log_repairs(&self) -> &[LogRepair] {
        &self.log_repairs
    }

    /// Marks, durably, that the database has its log's files, so that a
    /// later open notices one missing.
    fn mark_log_files(&self) -> Result<(), DbError> {
        let p = &self.path;
        let txn = self.db.begin_write().at(p)?;
        {
            let mut meta = txn.open_table(META).at(p)?;
            meta.insert(LOG_FILES, &b"2"[..]).at(p)?;
        }
        txn.commit().at(p)
    }

    /// The file this database is in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates an empty table `name`, keeping `props` with it (any bytes;
    /// [`Db::tables`] gives them back). Durable when it returns, with every
    /// batch written before.
    pub fn create_table(&self, name: &str, props: &[u8]) -> Result<(), DbError> {
        check_name(name)?;
        let p = &self.path;
        let mut w = self.lock_idle_writer();
        self.commit_all(&mut w, |txn| {
            let mut cat = txn.open_table(CATALOGUE).at(p)?;
            if cat.get(name).at(p)?.is_some() {
                return Err(DbError::TableExists {
                    name: name.to_owned(),
                });
            }
            cat.insert(name, props).at(p)?;
            let data = format!("{DATA_PREFIX}{name}");
            txn.open_table(data_def(&data)).at(p)?;
            Ok(())
        })
    }

    /// Deletes table `name` and its records. Durable when it returns, with
    /// every batch written before.
    pub fn delete_table(&self, name: &str) -> Result<(), DbError> {
        check_name(name)?;
        let p = &self.path;
        let mut w = self.lock_idle_writer();
        self.commit_all(&mut w, |txn| {
            let mut cat = txn.open_table(CATALOGUE).at(p)?;
            if cat.remove(name).at(p)?.is_none() {
                return Err(DbError::NoSuchTable {
                    name: name.to_owned(),
                });
            }
            let data = format!("{DATA_PREFIX}{name}");
            txn.delete_table(data_def(&data)).at(p)?;
            Ok(())
        })
    }

    /// Replaces the records of table `name` with those of table `from`,
    /// which goes, in one synced commit: a table filled aside (a copy
    /// loaded from elsewhere) takes the place of the one it replaces at
    /// once, and a crash before the call returned leaves `name` as it was.
    /// `name` keeps its properties. Durable when it returns, with every
    /// batch written before (the batches to `from` included).
    pub fn replace_table(&self, name: &str, from: &str) -> Result<(), DbError> {
        check_name(name)?;
        check_name(from)?;
        if name == from {
            return Err(DbError::BadTableName {
                name: from.to_owned(),
                reason: "a table cannot replace itself",
            });
        }
        let p = &self.path;
        let mut w = self.lock_idle_writer();
        self.commit_all(&mut w, |txn| {
            let mut cat = txn.open_table(CATALOGUE).at(p)?;
            if cat.get(name).at(p)?.is_none() {
                return Err(DbError::NoSuchTable {
                    name: name.to_owned(),
                });
            }
            if cat.remove(from).at(p)?.is_none() {
                return Err(DbError::NoSuchTable {
                    name: from.to_owned(),
                });
            }
            let data = format!("{DATA_PREFIX}{name}");
            let from_data = format!("{DATA_PREFIX}{from}");
            txn.delete_table(data_def(&data)).at(p)?;
            txn.rename_table(data_def(&from_data), data_def(&data))
                .at(p)?;
            Ok(())
        })
    }

    /// Every table, with the properties it was created with, by name.
    pub fn tables(&self) -> Result<Vec<(String, Vec<u8>)>, DbError> {
        guard::guarded(&self.path, || self.tables_unguarded())
    }

    fn tables_unguarded(&self) -> Result<Vec<(String, Vec<u8>)>, DbError> {
        let p = &self.path;
        let txn = self.db.begin_read().at(p)?;
        let cat = txn.open_table(CATALOGUE).at(p)?;
        let mut out = Vec::new();
        for item in cat.iter().at(p)? {
            let (k, v) = item.at(p)?;
            out.push((k.value().to_owned(), v.value().to_vec()));
        }
        Ok(out)
    }
}
