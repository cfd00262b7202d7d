//! The migration state machine: which fragment holds a key while records
//! move, and the mover that moves them in batches.
//!
//! States, each durable before the next begins:
//! 1. *idle*: the manifest has no journal.
//! 2. *journaled*: the manifest holds the plan and the new scheme state (and
//!    names the new fragment's file, already created). No record has moved.
//! 3. *moving*: batch after batch, the records of one move are read from the
//!    source, committed on the target, then deleted from the source. The
//!    moves run in plan order and each in hash order, so an in-memory cursor
//!    `(move, hash)` splits every moving key into "moved" (it lives in the
//!    target) and "not yet" (it lives in the source).
//! 4. *finished*: the manifest holds the new state and no journal; a removed
//!    fragment's file is deleted.
//!
//! A crash in state 2 or 3 is finished on the next open by running every move
//! again from the start. That is idempotent: a batch copies what is still in
//! the source (overwriting an earlier copy of the same record, which has the
//! same value since writes of moving keys wait while a batch runs) and then
//! deletes it there. The cursor is therefore never persisted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use fraghash::{AnyScheme, FragmentScheme, HashRange, MigrationPlan, Move};

use crate::error::{Error, Result};
use crate::failpoint;
use crate::fragment::{Fragment, MoveBatch};

/// Takes a read lock, ignoring poisoning (the data behind it stays valid:
/// every update is a single assignment).
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// Takes a write lock, ignoring poisoning.
pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// What the table looks like in memory: the scheme, the open fragments and
/// the migration in progress.
#[derive(Debug)]
pub(crate) struct View {
    /// The current scheme (the old one while migrating).
    pub scheme: AnyScheme,
    /// Open fragments by id in the current numbering; while an add or split
    /// migrates, the new fragment is the last entry.
    pub frags: Vec<Arc<Fragment>>,
    /// The migration in progress.
    pub motion: Option<Arc<Motion>>,
}

/// Where the mover is.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    /// Index of the move in progress (all before it are done).
    pub m: usize,
    /// Hash from which the move in progress still has to run.
    pub h: u64,
    /// Set when a batch failed half-way: writes of moving keys are refused
    /// until the migration is resumed.
    pub poisoned: Option<String>,
}

/// A migration in progress.
#[derive(Debug)]
pub(crate) struct Motion {
    pub plan: MigrationPlan,
    pub new_scheme: AnyScheme,
    by_from: HashMap<u32, Vec<usize>>,
    /// Writers of moving keys hold it shared; a batch holds it exclusively.
    pub cursor: RwLock<Cursor>,
    /// Records read by the mover.
    pub examined: AtomicU64,
    /// Records moved.
    pub moved: AtomicU64,
}

fn ranges_contain(ranges: &[HashRange], h: u64) -> bool {
    let i = ranges.partition_point(|r| r.end < h);
    i < ranges.len() && ranges[i].start <= h
}

impl Motion {
    /// A migration of `plan`, at its start.
    pub fn new(plan: MigrationPlan, new_scheme: AnyScheme) -> Motion {
        let mut by_from: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, m) in plan.moves.iter().enumerate() {
            by_from.entry(m.from()).or_default().push(i);
        }
        Motion {
            plan,
            new_scheme,
            by_from,
            cursor: RwLock::new(Cursor::default()),
            examined: AtomicU64::new(0),
            moved: AtomicU64::new(0),
        }
    }

    /// Where a key of move `mv` goes (current numbering), `None` if it stays.
    fn dest_in(&self, mv: &Move, h: u64) -> Option<u32> {
        match mv {
            Move::Ranges { to, ranges, .. } => ranges_contain(ranges, h).then_some(*to),
            Move::Filter { from } => {
                let n = self.plan.new_to_old(self.new_scheme.locate(h));
                (n != *from).then_some(n)
            }
        }
    }

    /// If the key with hash `h`, placed in `o` by the old scheme, moves:
    /// its move's index and its destination.
    pub fn moving(&self, h: u64, o: u32) -> Option<(usize, u32)> {
        let idx = self.by_from.get(&o)?;
        idx.iter()
            .find_map(|&i| self.dest_in(&self.plan.moves[i], h).map(|d| (i, d)))
    }
}

impl View {
    /// Fragments to read a key from, in order: the source, then (while it
    /// moves) its destination. Reading in this order never misses a key: a
    /// batch commits on the target before it deletes on the source.
    pub fn read_route(&self, h: u64) -> (u32, Option<u32>) {
        let o = self.scheme.locate(h);
        let n = self
            .motion
            .as_ref()
            .and_then(|m| m.moving(h, o))
            .map(|x| x.1);
        (o, n)
    }

    /// The fragment a write goes to. `cursor` must be held (shared) if the
    /// key moves (as [`View::any_moving`] tells the caller).
    pub fn write_route(&self, h: u64, cursor: Option<&Cursor>) -> Result<u32> {
        let o = self.scheme.locate(h);
        let (Some(motion), Some(cur)) = (&self.motion, cursor) else {
            return Ok(o);
        };
        match motion.moving(h, o) {
            None => Ok(o),
            Some((m, n)) => {
                if let Some(reason) = &cur.poisoned {
                    return Err(Error::MigrationInterrupted {
                        reason: reason.clone(),
                    });
                }
                Ok(if (m, h) < (cur.m, cur.h) { n } else { o })
            }
        }
    }

    /// Whether any of these hashes moves in the migration in progress.
    pub fn any_moving(&self, hashes: impl Iterator<Item = u64>) -> bool {
        match &self.motion {
            None => false,
            Some(m) => {
                let mut hs = hashes;
                hs.any(|h| m.moving(h, self.scheme.locate(h)).is_some())
            }
        }
    }
}

/// Counts the mover reports after each batch.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MoverCounts {
    pub examined: u64,
    pub moved: u64,
}

/// Runs the moves of the migration in `view` from its cursor to the end,
/// `batch` moving records at a time. Reads and writes of other threads go on
/// between batches (writes of keys that move wait for the batch in
/// progress). Calls `progress` after every batch.
pub(crate) fn run_moves(
    view: &RwLock<View>,
    batch: usize,
    progress: &mut dyn FnMut(MoverCounts),
) -> Result<()> {
    let full = [HashRange::new(0, u64::MAX)];
    loop {
        let v = read(view);
        let Some(motion) = v.motion.clone() else {
            return Ok(());
        };
        let mut cur = write(&motion.cursor);
        if cur.m >= motion.plan.moves.len() {
            cur.poisoned = None;
            return Ok(());
        }
        // One batch gathers consecutive moves (an add has one per donor)
        // until it holds `batch` records: one commit per fragment touched.
        let (mut m, mut h) = (cur.m, cur.h);
        let mut parts: Vec<(u32, MoveBatch)> = Vec::new();
        let mut taken = 0usize;
        while let Some(mv) = motion.plan.moves.get(m) {
            let (from, ranges): (u32, &[HashRange]) = match mv {
                Move::Ranges { from, ranges, .. } => (*from, ranges),
                Move::Filter { from } => (*from, &full),
            };
            let limit = batch.max(1) - taken;
            let b = v.frags[from as usize]
                .read_move_batch(ranges, h, limit, |x| motion.dest_in(mv, x))?;
            taken += b.records.len();
            let next = b.next;
            parts.push((from, b));
            match next {
                Some(n) => {
                    h = n;
                    break;
                }
                None => {
                    m += 1;
                    h = 0;
                }
            }
            if taken >= batch.max(1) {
                break;
            }
        }
        let moved = (|| -> Result<()> {
            let mut dests: Vec<u32> = parts
                .iter()
                .flat_map(|p| p.1.records.iter().map(|r| r.0))
                .collect();
            dests.sort_unstable();
            dests.dedup();
            for d in dests {
                let recs = parts
                    .iter()
                    .flat_map(|p| p.1.records.iter())
                    .filter(|r| r.0 == d)
                    .map(|r| &r.1);
                v.frags[d as usize].put_moved(recs)?;
            }
            failpoint::hit("move.after-target-commit")?;
            let mut sources: Vec<u32> = parts.iter().map(|p| p.0).collect();
            sources.sort_unstable();
            sources.dedup();
            for s in sources {
                let recs = parts
                    .iter()
                    .filter(|p| p.0 == s)
                    .flat_map(|p| p.1.records.iter().map(|r| &r.1));
                v.frags[s as usize].delete_moved(recs)?;
            }
            failpoint::hit("move.after-source-delete")
        })();
        if let Err(e) = moved {
            cur.poisoned = Some(e.to_string());
            return Err(e);
        }
        (cur.m, cur.h) = (m, h);
        cur.poisoned = None;
        let n: u64 = parts.iter().map(|p| p.1.records.len() as u64).sum();
        let ex: u64 = parts.iter().map(|p| p.1.examined).sum();
        let examined = motion.examined.fetch_add(ex, Ordering::Relaxed) + ex;
        let moved = motion.moved.fetch_add(n, Ordering::Relaxed) + n;
        drop(cur);
        drop(v);
        progress(MoverCounts { examined, moved });
    }
}
