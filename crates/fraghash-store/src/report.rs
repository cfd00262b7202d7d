//! What a migration reports: its progress while it runs (to the callback a
//! table is given) and what it did. Below both the table, which holds the
//! callback and the report of a migration recovered at open, and the
//! operations that run migrations (`admin`, `open`), so that neither
//! reaches into the other for these.

use fraghash::{MigrationPlan, PlanKind};

use crate::migration::MoverCounts;

/// Progress of a migration, given to the callback of [`Table::set_progress`](crate::Table::set_progress).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MigrationProgress {
    /// What the migration does.
    pub kind: PlanKind,
    /// Records read so far.
    pub examined: u64,
    /// Records moved so far.
    pub moved: u64,
    /// Estimate of the records the migration will read.
    pub estimated: u64,
}

/// What a migration did.
#[derive(Debug, Clone, PartialEq)]
pub struct MigrationReport {
    /// What it did.
    pub kind: PlanKind,
    /// Fragments before.
    pub fragments_before: u32,
    /// Fragments after.
    pub fragments_after: u32,
    /// Moves in the plan.
    pub moves: usize,
    /// Hash ranges in the plan (0 for filter plans).
    pub ranges: usize,
    /// Whether the plan was a range plan (reads only what moves).
    pub range_plan: bool,
    /// Records read.
    pub keys_examined: u64,
    /// Records moved.
    pub keys_moved: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl MigrationReport {
    /// The report of running `plan`, which read and moved `counts`.
    pub(crate) fn of(plan: &MigrationPlan, counts: MoverCounts, seconds: f64) -> MigrationReport {
        MigrationReport {
            kind: plan.kind,
            fragments_before: plan.fragments_before,
            fragments_after: plan.fragments_after,
            moves: plan.moves.len(),
            ranges: plan.range_count(),
            range_plan: plan.is_range_plan(),
            keys_examined: counts.examined,
            keys_moved: counts.moved,
            seconds,
        }
    }

    /// Records read per record moved (1.0 for a range plan).
    pub fn examined_per_moved(&self) -> f64 {
        if self.keys_moved == 0 {
            if self.keys_examined == 0 {
                1.0
            } else {
                f64::INFINITY
            }
        } else {
            self.keys_examined as f64 / self.keys_moved as f64
        }
    }
}
