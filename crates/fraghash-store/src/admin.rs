//! Reshaping a table: add, split, remove, rebalance (each a journaled
//! migration, see [`crate::migration`]), verify and compact.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use fraghash::{AnyScheme, FragmentScheme, MigrationPlan, Move, PlanKind, SchemeError};

use crate::error::{Error, Result};
use crate::failpoint;
use crate::fragment::{Fragment, BUCKET_BITS};
use crate::manifest::{sync_dir, Journal, Manifest};
use crate::migration::{read, run_moves, write, Motion, MoverCounts};
use crate::report::{MigrationProgress, MigrationReport};
use crate::table::{Inner, Table};

/// What [`Table::verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// Fragments checked.
    pub fragments: u32,
    /// Records checked.
    pub records: u64,
    /// Every problem found, one line each; empty when the table is sound.
    pub problems: Vec<String>,
}

impl VerifyReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// What [`Table::compact`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactReport {
    /// Bytes of all fragment files before.
    pub bytes_before: u64,
    /// Bytes after.
    pub bytes_after: u64,
}

fn lock_admin(inner: &Inner) -> MutexGuard<'_, Manifest> {
    inner.admin.lock().unwrap_or_else(|e| e.into_inner())
}

fn file_bytes(frags: &[Arc<Fragment>]) -> u64 {
    frags
        .iter()
        .map(|f| std::fs::metadata(&f.path).map_or(0, |m| m.len()))
        .sum()
}

impl Inner {
    /// Moves what is left of the migration in progress, then finishes it.
    pub(crate) fn complete(&self, admin: &mut Manifest) -> Result<MoverCounts> {
        let (kind, estimated) = {
            let v = read(&self.view);
            let Some(m) = &v.motion else {
                return Ok(MoverCounts::default());
            };
            (m.plan.kind, estimate(&v.frags, &m.plan))
        };
        let batch = self.batch.load(Ordering::Relaxed);
        let mut last = MoverCounts::default();
        let progress = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        run_moves(&self.view, batch, &mut |c| {
            last = c;
            if let Some(f) = progress.as_ref() {
                f(&MigrationProgress {
                    kind,
                    examined: c.examined,
                    moved: c.moved,
                    estimated,
                });
            }
        })?;
        drop(progress);
        self.finish(admin)?;
        Ok(last)
    }

    /// Writes the final manifest, switches the view, deletes a removed file.
    fn finish(&self, admin: &mut Manifest) -> Result<()> {
        failpoint::hit("finish.before-manifest")?;
        let motion = match &read(&self.view).motion {
            Some(m) => m.clone(),
            None => return Ok(()),
        };
        let mut m = admin.clone();
        let journal = m.journal.take().expect("a migration has a journal");
        m.scheme_state = journal.new_state;
        let removed = match motion.plan.kind {
            PlanKind::Remove { fragment } => Some(fragment as usize),
            _ => None,
        };
        if let Some(r) = removed {
            m.files.swap_remove(r);
        }
        m.store(&self.dir)?;
        *admin = m;
        failpoint::hit("finish.after-manifest")?;
        let gone = {
            let mut v = write(&self.view);
            v.scheme = motion.new_scheme.clone();
            v.motion = None;
            removed.map(|r| v.frags.swap_remove(r))
        };
        if let Some(f) = gone {
            let path = f.path.clone();
            drop(f);
            // Best effort: a file left behind is deleted on the next open.
            if std::fs::remove_file(&path).is_ok() {
                if let Some(p) = path.parent() {
                    let _ = sync_dir(p);
                }
            }
        }
        Ok(())
    }

    /// Journals and runs the migration `op` makes.
    fn migrate(
        &self,
        op: impl FnOnce(&mut AnyScheme, &[Arc<Fragment>]) -> Result<MigrationPlan>,
    ) -> Result<MigrationReport> {
        let mut admin = lock_admin(self);
        // A migration stopped by an error in this process is finished first.
        self.complete(&mut admin)?;
        let t0 = Instant::now();
        let (mut scheme, frags) = {
            let v = read(&self.view);
            (v.scheme.clone(), v.frags.clone())
        };
        let plan = op(&mut scheme, &frags)?;
        let adds = matches!(plan.kind, PlanKind::Add { .. } | PlanKind::Split { .. });
        let mut m = admin.clone();
        let mut new_frag = None;
        if adds {
            let entry = m.place(m.next_file_no);
            m.next_file_no += 1;
            let path = Manifest::file_path(&self.dir, &entry);
            // Never reuse this number in this process, whatever happens.
            admin.next_file_no = m.next_file_no;
            new_frag = Some(Fragment::create(&path, m.table_id, entry.file_no)?);
            failpoint::hit("start.after-new-file")?;
            m.files.push(entry);
        }
        m.journal = Some(Journal {
            new_state: scheme.to_state_bytes(),
            plan: plan.clone(),
        });
        if let Err(e) = m.store(&self.dir) {
            if let Some(f) = new_frag {
                let p = f.path.clone();
                drop(f);
                let _ = std::fs::remove_file(p);
            }
            return Err(e);
        }
        *admin = m;
        failpoint::hit("start.after-journal")?;
        {
            let mut v = write(&self.view);
            if let Some(f) = new_frag {
                v.frags.push(Arc::new(f));
            }
            v.motion = Some(Arc::new(Motion::new(plan.clone(), scheme)));
        }
        let counts = self.complete(&mut admin)?;
        Ok(MigrationReport::of(
            &plan,
            counts,
            t0.elapsed().as_secs_f64(),
        ))
    }
}

/// Records a plan will read: the named fragments for filter moves; for range
/// moves, the buckets' share of the moving ranges.
fn estimate(frags: &[Arc<Fragment>], plan: &MigrationPlan) -> u64 {
    let mut total = 0u64;
    let mut seen = Vec::new();
    for m in &plan.moves {
        match m {
            Move::Filter { from } => {
                if !seen.contains(from) {
                    seen.push(*from);
                    total += frags.get(*from as usize).map_or(0, |f| f.records());
                }
            }
            Move::Ranges { from, ranges, .. } => {
                let Some(f) = frags.get(*from as usize) else {
                    continue;
                };
                let share: f64 = ranges.iter().map(|r| r.fraction()).sum();
                let all: u64 = frags.iter().map(|f| f.records()).sum();
                total += ((all as f64) * share).min(f.records() as f64) as u64;
            }
        }
    }
    total
}

/// Bytes per slot of a `slots` scheme, from the fragments' buckets. With
/// more slots than buckets a bucket's bytes are spread evenly over its slots.
fn slot_sizes(frags: &[Arc<Fragment>], slot_bits: u32) -> Result<Vec<u64>> {
    let mut sizes = vec![0u64; 1usize << slot_bits];
    for f in frags {
        for (b, _, bytes) in f.buckets()? {
            if slot_bits <= BUCKET_BITS {
                sizes[(b >> (BUCKET_BITS - slot_bits)) as usize] += bytes;
            } else {
                let per = 1usize << (slot_bits - BUCKET_BITS);
                let first = (b as usize) << (slot_bits - BUCKET_BITS);
                for (i, s) in sizes[first..first + per].iter_mut().enumerate() {
                    *s += bytes / per as u64 + u64::from((i as u64) < bytes % per as u64);
                }
            }
        }
    }
    Ok(sizes)
}

impl Table {
    /// Adds a fragment and moves its share of records into it, online.
    pub fn add_fragment(&self) -> Result<MigrationReport> {
        self.inner.migrate(|s, _| Ok(s.add_fragment()?))
    }

    /// `slots` only: a new fragment takes half of fragment `id`'s slots.
    pub fn split_fragment(&self, id: u32) -> Result<MigrationReport> {
        self.inner.migrate(|s, _| Ok(s.split(id)?))
    }

    /// Removes fragment `id`, moving its records to the others, online. With
    /// `ring` and `slots` any fragment can go (the last one then takes its
    /// id); `linear` and `jump` remove only the last.
    pub fn remove_fragment(&self, id: u32) -> Result<MigrationReport> {
        self.inner.migrate(|s, _| Ok(s.remove_fragment(id)?))
    }

    /// `slots` only: moves whole slots until every fragment holds its share
    /// of the bytes (within one slot), measured from the per-slot sizes the
    /// store keeps.
    pub fn rebalance(&self) -> Result<MigrationReport> {
        self.inner.migrate(|s, frags| {
            let bits = match s.as_slots() {
                Some(sl) => sl.slot_bits(),
                None => {
                    return Err(SchemeError::Unsupported {
                        scheme: s.scheme_spec().name(),
                        operation: "rebalance",
                    }
                    .into())
                }
            };
            let sizes = slot_sizes(frags, bits)?;
            Ok(s.rebalance(&sizes)?)
        })
    }

    /// Checks the whole table: every record sits in the fragment the scheme
    /// names and its stored hash is right (so no key is in two fragments),
    /// the statistics match the records, and every file the manifest lists
    /// is there and belongs to it. Waits for a migration in progress. A
    /// damaged fragment file ([`Error::is_damage`]) is a problem found,
    /// naming the file; the other fragments are still checked.
    pub fn verify(&self) -> Result<VerifyReport> {
        let admin = lock_admin(&self.inner);
        let v = read(&self.inner.view);
        let mut report = VerifyReport {
            fragments: v.frags.len() as u32,
            ..VerifyReport::default()
        };
        if admin.journal.is_some() || v.motion.is_some() {
            report
                .problems
                .push("a migration is unfinished; reopen the table to finish it".into());
        }
        if admin.files.len() != v.frags.len() {
            report.problems.push(format!(
                "the manifest lists {} files for {} open fragments",
                admin.files.len(),
                v.frags.len()
            ));
        }
        for (i, f) in v.frags.iter().enumerate() {
            if let Some(e) = admin.files.get(i) {
                let p = Manifest::file_path(&self.inner.dir, e);
                if p != f.path || e.file_no != f.file_no {
                    report.problems.push(format!(
                        "fragment {i}: manifest names {} but {} is open",
                        p.display(),
                        f.path.display()
                    ));
                }
            }
            if !f.path.exists() {
                report.problems.push(format!(
                    "fragment {i}: file {} is missing",
                    f.path.display()
                ));
            }
            let id = i as u32;
            let check = match f.verify(|h| v.scheme.locate(h) == id) {
                Ok(check) => check,
                // A damaged file is a problem found; the others are still checked.
                Err(e) if e.is_damage() => {
                    report.problems.push(format!("fragment {i}: {e}"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            report.records += check.records;
            for p in check.problems {
                let file = f.path.display();
                report.problems.push(format!("fragment {i} ({file}): {p}"));
            }
        }
        Ok(report)
    }

    /// Compacts every fragment file, returning free pages to the file
    /// system. Waits for a migration; fails with [`Error::Busy`] while a
    /// scan is open.
    pub fn compact(&self) -> Result<CompactReport> {
        let _admin = lock_admin(&self.inner);
        let mut v = write(&self.inner.view);
        let bytes_before = file_bytes(&v.frags);
        for f in v.frags.iter_mut() {
            let frag = Arc::get_mut(f)
                .ok_or_else(|| Error::Busy("a scan holds the fragments open".into()))?;
            frag.compact()?;
        }
        Ok(CompactReport {
            bytes_before,
            bytes_after: file_bytes(&v.frags),
        })
    }
}
