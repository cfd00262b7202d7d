//! Writes: batches into the memtable and the log, flushes of the memtable
//! to redb, and the synced commits that hold everything written so far.
//!
//! Every change of state goes through the writer lock ([`Writer`]): a
//! batch's append to the log and its application to the active layer, a
//! flush's freezing of that layer and its emptying of the log, and every
//! synced commit made here. A flush commits its frozen layer to redb
//! *without* the lock, so batches go on meanwhile; the synced commits
//! made under the lock ([`Db::sync`], [`Durability::Immediate`] batches,
//! clears, tables created or deleted) first wait for a flush under way to
//! end, so that only one redb write transaction is ever open.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use super::error::At;
use super::guard::guarded;
use super::memtable::Layer;
use super::{check_name, data_def, log, mark_log_seq, Db, DbError, Durability, Op, DATA_PREFIX};

/// A memtable batch of [`Db::write`] or [`Db::write_logged`] waits (and
/// [`Db::try_write_logged`] does not start) once the memtable holds this
/// many times [`OpenOptions::memtable_bytes`](super::OpenOptions).
const FULL: usize = 4;
/// The same for a batch of [`Db::write_bulk`].
const BULK_FULL: usize = 2;

/// What the writer lock guards.
#[derive(Debug)]
pub(super) struct Writer {
    pub(super) log: log::Log,
    /// A flush is committing the frozen layer (without the lock).
    flushing: bool,
    /// The number of the last log record the frozen layer holds.
    frozen_seq: u64,
    /// Batches written since the database was opened, of any durability.
    batches: u64,
    /// The value of `batches` when the frozen layer was frozen.
    frozen_batches: u64,
    /// The batches a synced commit holds: the first `durable_batches`
    /// written are durable (see [`Db::sync_written`]).
    durable_batches: u64,
}

impl Writer {
    pub(super) fn new(log: log::Log) -> Writer {
        Writer {
            log,
            flushing: false,
            frozen_seq: 0,
            batches: 0,
            frozen_batches: 0,
            durable_batches: 0,
        }
    }
}

impl Db {
    /// Applies `ops` in order as one batch, with `durability`. Either every
    /// op takes effect or, on any error (a table that does not exist, a
    /// failed write), none does.
    ///
    /// A [`Durability::Logged`] or [`Durability::Deferred`] batch goes to
    /// the memtable (a logged one to the log first); when the memtable
    /// holds four times [`OpenOptions::memtable_bytes`](super::OpenOptions)
    /// the batch first waits for a flush under way, or flushes itself. An
    /// [`Durability::Immediate`] batch, and any batch that clears a table,
    /// is a synced commit of everything written so far with it.
    pub fn write(&self, ops: &[Op], durability: Durability) -> Result<(), DbError> {
        guarded(&self.path, || {
            self.write_unguarded(ops, durability, FULL).map(|_| ())
        })
    }

    /// As [`Db::write`] with [`Durability::Logged`], for a caller that
    /// keeps the memtable flushed itself rather than through one writer
    /// process: `Ok(true)` when the memtable held nothing before this batch
    /// (no flush is due for it yet: the caller arms one within its sync
    /// interval) or now holds enough to be flushed ([`Db::wants_flush`]);
    /// `Ok(false)` when a flush already due covers it. The answer is taken
    /// under the writer lock, where a flush takes the memtable: a batch
    /// that lands in a memtable a flush has just emptied is told so.
    pub fn write_logged(&self, ops: &[Op]) -> Result<bool, DbError> {
        guarded(&self.path, || {
            self.write_unguarded(ops, Durability::Logged, FULL)
        })
    }

    /// Applies `ops` as a [`Durability::Logged`] batch that gives way to
    /// other writers: it first waits while the memtable holds twice
    /// [`OpenOptions::memtable_bytes`](super::OpenOptions) or more,
    /// flushing it itself when no flush is under way. A bulk load written
    /// so (a copy of a table from another node) keeps the memtable below
    /// the four times at which every batch waits for a flush, so other
    /// writers' batches go on at their usual cost while it runs.
    pub fn write_bulk(&self, ops: &[Op]) -> Result<(), DbError> {
        guarded(&self.path, || {
            self.write_unguarded(ops, Durability::Logged, BULK_FULL)
                .map(|_| ())
        })
    }

    /// A batch of [`Db::write`], [`Db::write_logged`] or
    /// [`Db::write_bulk`]: a memtable batch waits while the memtable holds
    /// `full` times [`OpenOptions::memtable_bytes`](super::OpenOptions) or
    /// more. Answers as [`Db::write_logged`] (`false` for a synced commit).
    fn write_unguarded(
        &self,
        ops: &[Op],
        durability: Durability,
        full: usize,
    ) -> Result<bool, DbError> {
        if durability == Durability::Immediate || clears(ops)? {
            let mut w = self.lock_idle_writer();
            return self
                .commit_all(&mut w, |txn| self.apply_ops(txn, ops))
                .map(|_| false);
        }
        let mut w = self.lock_writer();
        while self.view().active.bytes() >= full * self.memtable_bytes {
            if w.flushing {
                w = self.wait_flushed(w);
            } else {
                drop(w);
                self.flush()?;
                w = self.lock_writer();
            }
        }
        self.append_batch(&mut w, ops, durability)
    }

    /// As [`Db::write_logged`], for a caller that must not wait (a normal
    /// scheduler of the Erlang VM): `Ok(None)`, nothing written, where the
    /// batch would wait for the writer lock or for a flush, or clears a
    /// table. It may still read the disc, for the pages of its keys that
    /// are not in redb's cache.
    pub fn try_write_logged(&self, ops: &[Op]) -> Result<Option<bool>, DbError> {
        guarded(&self.path, || {
            if clears(ops)? {
                return Ok(None);
            }
            let mut w = match self.writer.try_lock() {
                Ok(w) => w,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Ok(None),
            };
            if self.view().active.bytes() >= FULL * self.memtable_bytes {
                return Ok(None);
            }
            self.append_batch(&mut w, ops, Durability::Logged).map(Some)
        })
    }

    /// A memtable batch, under the writer lock `w`: to the log first when
    /// `Logged`, then to the active layer. Answers as [`Db::write_logged`].
    fn append_batch(
        &self,
        w: &mut MutexGuard<'_, Writer>,
        ops: &[Op],
        durability: Durability,
    ) -> Result<bool, DbError> {
        self.check_tables(ops)?;
        let existed = self.existed(ops)?;
        if durability == Durability::Logged {
            w.log.append(ops)?;
            if w.log.low_room() {
                self.room_low.store(true, Ordering::Relaxed);
            }
        }
        let mut view = self.view_mut();
        let was_empty = view.active.is_empty();
        for (op, existed) in ops.iter().zip(existed) {
            match *op {
                Op::Put { table, key, value } => {
                    view.active.set(table, key, Some(value.to_vec()), existed)
                }
                Op::Delete { table, key } => view.active.set(table, key, None, existed),
                Op::Clear { .. } => unreachable!("clears commit in write_unguarded"),
            }
        }
        w.batches += 1;
        Ok(was_empty || view.active.bytes() >= self.memtable_bytes)
    }

    /// Whether the disc has room for more writes: `false` once the log
    /// could not keep its reserve ([`OpenOptions::log_reserve_bytes`](super::OpenOptions))
    /// or a flush or synced commit failed for want of room, until a flush
    /// finds room again. A caller that stops taking writes while it is
    /// `false` (and calls [`Db::flush`] now and then) never has a logged
    /// batch fail for a full disc, as long as the batches under way fit
    /// in the reserve. One atomic load.
    pub fn has_room(&self) -> bool {
        !self.room_low.load(Ordering::Relaxed)
    }

    /// Notes a full disc reported by a commit (see [`Db::has_room`]).
    pub(super) fn note_room(&self, result: &Result<(), DbError>) {
        if matches!(result, Err(DbError::DiskFull { .. })) {
            self.room_low.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the memtable holds enough to be flushed
    /// ([`OpenOptions::memtable_bytes`](super::OpenOptions)).
    pub fn wants_flush(&self) -> bool {
        self.view().active.bytes() >= self.memtable_bytes
    }

    /// Commits the memtable to redb in one synced transaction, while
    /// batches go on into a fresh layer: `Ok(true)` once committed,
    /// `Ok(false)` when there was nothing to flush or another flush was
    /// under way. Meant to run on a thread of its own (the caller of
    /// [`Db::write`] waits for it only when the memtable is full). A flush
    /// that fails leaves its layer frozen, read as before, and the next
    /// flush commits it again.
    pub fn flush(&self) -> Result<bool, DbError> {
        guarded(&self.path, || self.flush_unguarded())
    }

    fn flush_unguarded(&self) -> Result<bool, DbError> {
        let (frozen, seq) = {
            let mut w = self.lock_writer();
            if w.flushing {
                return Ok(false);
            }
            // A full disc is tried again here: the log's reserve, and
            // below the commit (a failed one leaves its layer frozen).
            let room = w.log.reserve_room();
            self.room_low.store(!room, Ordering::Relaxed);
            let mut view = self.view_mut();
            if !room && (view.frozen.is_some() || !view.active.is_empty()) {
                // A commit into a full disc fails and leaves redb refusing
                // everything until the database is opened again: held back
                // until the log finds room.
                return Err(DbError::DiskFull {
                    path: self.path.clone(),
                });
            }
            if view.frozen.is_none() {
                if view.active.is_empty() {
                    return Ok(false);
                }
                let active = std::mem::take(&mut view.active);
                view.frozen = Some(Arc::new(active));
                // The other file was emptied by the last flush, which
                // ended before this one could begin.
                w.log.rotate();
                w.frozen_seq = w.log.last_seq();
                w.frozen_batches = w.batches;
            }
            w.flushing = true;
            (
                Arc::clone(view.frozen.as_ref().expect("frozen above")),
                w.frozen_seq,
            )
        };
        let committed = self.commit_layer(&frozen, seq);
        let mut w = self.lock_writer();
        w.flushing = false;
        let done = committed.and_then(|()| {
            // Readers switch from the old state with the frozen layer to
            // the new state without it in one step.
            let base = self.open_base()?;
            let mut view = self.view_mut();
            view.frozen = None;
            view.base = base;
            Ok(())
        });
        if done.is_ok() {
            w.durable_batches = w.durable_batches.max(w.frozen_batches);
            w.log.drop_old();
            self.room_low.store(w.log.low_room(), Ordering::Relaxed);
        } else {
            self.note_room(&done);
        }
        drop(w);
        self.flushed.notify_all();
        done.map(|()| true)
    }

    /// Makes every batch written so far durable (a synced commit of the
    /// memtable), and empties the log.
    pub fn sync(&self) -> Result<(), DbError> {
        guarded(&self.path, || self.sync_unguarded())
    }

    fn sync_unguarded(&self) -> Result<(), DbError> {
        let mut w = self.lock_idle_writer();
        self.commit_all(&mut w, |_| Ok(()))
    }

    /// Makes every batch written before the call durable, as [`Db::sync`]
    /// does, without holding writers up: it flushes (see [`Db::flush`])
    /// until a synced commit holds those batches, while later batches go
    /// on into a fresh layer. [`Db::sync`] holds every writer for the
    /// whole synced commit of the memtable, which a bulk load leaves at
    /// four times [`OpenOptions::memtable_bytes`](super::OpenOptions);
    /// this waits only as a writer does when the memtable is full. The
    /// log keeps the later batches (it is emptied by [`Db::sync`] only).
    pub fn sync_written(&self) -> Result<(), DbError> {
        guarded(&self.path, || self.sync_written_unguarded())
    }

    fn sync_written_unguarded(&self) -> Result<(), DbError> {
        let target = self.lock_writer().batches;
        loop {
            {
                let w = self.lock_writer();
                if w.durable_batches >= target {
                    return Ok(());
                }
                if w.flushing {
                    drop(self.wait_flushed(w));
                    continue;
                }
            }
            // Freezes the active layer (which holds the batches not yet
            // committed) and commits it, or first commits the layer a
            // failed flush left frozen; the next turn sees the result.
            self.flush_unguarded()?;
        }
    }

    /// The bytes in the log: what the logged batches not yet in redb's
    /// durable state take (0 when there are none).
    pub fn log_bytes(&self) -> u64 {
        self.lock_writer().log.len()
    }

    /// Syncs (which empties the log) and closes the database, reporting an
    /// error of either (dropping a `Db` closes it without the sync: its log
    /// is replayed at the next open), giving back the room its log kept
    /// for writes ([`OpenOptions::log_reserve_bytes`](super::OpenOptions)). A file of at most
    /// `COMPACT_AT_CLOSE_MAX` whose free and fragmented room is a quarter
    /// of it or more is compacted first (see `compact_if_worth`).
    pub fn close(self) -> Result<(), DbError> {
        let synced = self.sync();
        if synced.is_ok() {
            // Empty now: the room kept for writes goes back to the disc.
            self.lock_writer().log.release_room();
        }
        let Db { db, path, view, .. } = self;
        synced?;
        // Compaction needs every read transaction gone: the view's are.
        drop(view);
        let mut db = db.into_inner();
        guarded(&path, || {
            compact_if_worth(&mut db, &path);
            db.close().at(&path)
        })
    }

    /// The writer lock (see [`Writer`]). A panic while it was held leaves
    /// the log as its last completed call left it.
    pub(super) fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The writer lock once no flush is under way.
    pub(super) fn lock_idle_writer(&self) -> MutexGuard<'_, Writer> {
        let mut w = self.lock_writer();
        while w.flushing {
            w = self.wait_flushed(w);
        }
        w
    }

    fn wait_flushed<'a>(&self, w: MutexGuard<'a, Writer>) -> MutexGuard<'a, Writer> {
        self.flushed.wait(w).unwrap_or_else(|p| p.into_inner())
    }

    /// One synced commit of the frozen layer (if any), the active layer and
    /// what `change` adds, marked with the log's last number; then readers
    /// see it, the layers are empty and so is the log. Called with the
    /// writer lock held and no flush under way.
    pub(super) fn commit_all(
        &self,
        w: &mut Writer,
        change: impl FnOnce(&redb::WriteTransaction) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let (frozen, active_empty) = {
            let view = self.view();
            (view.frozen.clone(), view.active.is_empty())
        };
        let committed = self.synced_commit(w.log.last_seq(), |txn| {
            if let Some(frozen) = &frozen {
                self.apply_layer(txn, frozen)?;
            }
            if !active_empty {
                // No batch can change the active layer: the writer lock is
                // held.
                self.apply_layer(txn, &self.view().active)?;
            }
            change(txn)
        });
        self.note_room(&committed);
        let base = committed.and_then(|()| self.open_base());
        // After a failed commit redb may hold part of it (a failed sync
        // once its pages were written): the catalogue is read again.
        self.reload_names_or_clear();
        let base = base?;
        let mut view = self.view_mut();
        view.frozen = None;
        view.active = Layer::default();
        view.base = base;
        drop(view);
        w.log.clear();
        w.durable_batches = w.batches;
        Ok(())
    }

    /// The synced commit of a flush: layer `layer`, marked with `seq`.
    fn commit_layer(&self, layer: &Layer, seq: u64) -> Result<(), DbError> {
        self.synced_commit(seq, |txn| self.apply_layer(txn, layer))
    }

    /// One synced redb transaction of what `fill` writes, marked with log
    /// number `seq` (the last record it holds). Every commit of a
    /// [`Db`]'s batches goes through here.
    fn synced_commit(
        &self,
        seq: u64,
        fill: impl FnOnce(&redb::WriteTransaction) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        guarded(&self.path, || self.synced_commit_unguarded(seq, fill))
    }

    fn synced_commit_unguarded(
        &self,
        seq: u64,
        fill: impl FnOnce(&redb::WriteTransaction) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let p = &self.path;
        let mut txn = self.db.begin_write().at(p)?;
        txn.set_durability(redb::Durability::Immediate).at(p)?;
        fill(&txn)?;
        mark_log_seq(&txn, p, seq)?;
        txn.commit().at(p)
    }

    /// Writes every change of `layer` in `txn`.
    fn apply_layer(&self, txn: &redb::WriteTransaction, layer: &Layer) -> Result<(), DbError> {
        let p = &self.path;
        for (name, changes) in &layer.tables {
            let data = format!("{DATA_PREFIX}{name}");
            let mut table = txn.open_table(data_def(&data)).at(p)?;
            for (key, change) in &changes.entries {
                match change {
                    Some(value) => {
                        table.insert(key.as_slice(), value.as_slice()).at(p)?;
                    }
                    None => {
                        table.remove(key.as_slice()).at(p)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Fails with [`DbError::NoSuchTable`] unless every table `ops` names
    /// is in the catalogue.
    fn check_tables(&self, ops: &[Op]) -> Result<(), DbError> {
        let known = self.lock_names();
        match ops.iter().find(|op| !known.contains(op.table())) {
            Some(op) => Err(DbError::NoSuchTable {
                name: op.table().to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// Writes `ops` in order in `txn`.
    pub(super) fn apply_ops(
        &self,
        txn: &redb::WriteTransaction,
        ops: &[Op],
    ) -> Result<(), DbError> {
        self.check_tables(ops)?;
        let p = &self.path;
        let mut open = HashMap::new();
        let data = |table: &str| format!("{DATA_PREFIX}{table}");
        for op in ops {
            if let Op::Clear { table } = op {
                open.remove(table);
                txn.delete_table(data_def(&data(table))).at(p)?;
            }
            let table = match open.entry(op.table()) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(txn.open_table(data_def(&data(op.table()))).at(p)?)
                }
            };
            match *op {
                Op::Put { key, value, .. } => {
                    table.insert(key, value).at(p)?;
                }
                Op::Delete { key, .. } => {
                    table.remove(key).at(p)?;
                }
                Op::Clear { .. } => {}
            }
        }
        Ok(())
    }

    /// Whether each op's key held a record just before it: the batch's
    /// earlier ops, then the layers and redb's state.
    fn existed(&self, ops: &[Op]) -> Result<Vec<bool>, DbError> {
        let view = self.view();
        let mut batch: HashMap<(&str, &[u8]), bool> = HashMap::new();
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            let (table, key, now) = match *op {
                Op::Put { table, key, .. } => (table, key, true),
                Op::Delete { table, key } => (table, key, false),
                Op::Clear { .. } => unreachable!("clears commit in Db::write"),
            };
            let before = match batch.get(&(table, key)) {
                Some(&b) => b,
                None => self.lookup(&view, table, key)?.is_some(),
            };
            out.push(before);
            batch.insert((table, key), now);
        }
        Ok(out)
    }
}

/// The largest file [`Db::close`] compacts: compaction copies the live
/// pages, about a second per few hundred megabytes, and a stop must not
/// take minutes.
pub const COMPACT_AT_CLOSE_MAX: u64 = 1 << 30;

/// Compacts `db` (file `path`, synced, no transaction open) when its free
/// and fragmented bytes are a quarter of the file or more and the file is
/// between 1 MiB and [`COMPACT_AT_CLOSE_MAX`]: redb reuses freed pages but
/// never gives them back, so a file written over at random holds about
/// two flushes' worth of replaced pages. A compaction that fails (a full
/// disc) leaves the file as it was, and the next close tries again; one
/// a crash interrupts is repaired at the next open (redb's commits).
fn compact_if_worth(db: &mut redb::Database, path: &std::path::Path) {
    let Ok(file) = std::fs::metadata(path).map(|m| m.len()) else {
        return;
    };
    if !(1 << 20..=COMPACT_AT_CLOSE_MAX).contains(&file) {
        return;
    }
    let free = match db.begin_write() {
        Ok(txn) => {
            let stats = txn.stats();
            let _ = txn.abort();
            match stats {
                Ok(s) => s.fragmented_bytes(),
                Err(_) => return,
            }
        }
        Err(_) => return,
    };
    if free * 4 < file {
        return;
    }
    // Each call moves what it can; a few are enough.
    for _ in 0..4 {
        if !matches!(db.compact(), Ok(true)) {
            break;
        }
    }
}

/// Whether the batch `ops` clears a table (it then commits synced, not
/// through the memtable), once every table it names is a valid name.
fn clears(ops: &[Op]) -> Result<bool, DbError> {
    for op in ops {
        check_name(op.table())?;
    }
    Ok(ops.iter().any(|op| matches!(op, Op::Clear { .. })))
}
