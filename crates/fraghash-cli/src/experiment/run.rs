//! One scheme's figures: the distribution over N fragments, then one add and
//! one remove, each measured on every key and checked against the plan.

use fraghash::{AnyScheme, FragmentScheme, HashRange, MigrationPlan, Move, SchemeSpec, Stats};
use serde::Serialize;

use super::keys::count_in;
use super::progress::Progress;

/// The figures of one scheme.
#[derive(Debug, Clone, Serialize)]
pub struct SchemeReport {
    /// The spec (`ring:1000`...).
    pub scheme: String,
    /// Fragment count N.
    pub fragments: u32,
    /// Key count M.
    pub keys: u64,
    /// Keys in each fragment.
    pub counts: Vec<u64>,
    /// M / N.
    pub mean: f64,
    /// Population variance of the counts.
    pub variance: f64,
    /// Population standard deviation of the counts.
    pub stddev: f64,
    /// The binomial floor sqrt(M p (1-p)), p = 1/N.
    pub floor: f64,
    /// stddev / floor.
    pub stddev_over_floor: f64,
    /// Smallest fragment.
    pub min: u64,
    /// Biggest fragment.
    pub max: u64,
    /// max / mean.
    pub max_over_mean: f64,
    /// Adding fragment N.
    pub add: Change,
    /// Removing one fragment.
    pub remove: Change,
}

/// The figures of one add or remove.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The fragment added or removed (old numbering).
    pub fragment: u32,
    /// Fragment count after.
    pub fragments_after: u32,
    /// `"ranges"` (hash ranges) or `"filter"` (scan whole fragments).
    pub plan: &'static str,
    /// Keys that changed fragment (measured on every key).
    pub moved: u64,
    /// The least a scheme can move: M/(N+1) on add, M/N on remove.
    pub ideal: f64,
    /// moved / ideal.
    pub moved_over_ideal: f64,
    /// Keys the plan reads ([`MigrationPlan::keys_scanned`]).
    pub scanned: u64,
    /// Fragments the plan reads (its sources).
    pub sources: u32,
    /// Fragments that lose or gain keys (sources and destinations).
    pub fragments_touched: u32,
    /// Hash ranges in the plan (0 for filter plans).
    pub ranges: u64,
    /// Every moved key is covered by the plan and, for range plans, every
    /// covered key moves, to the fragment the plan names.
    pub plan_exact: bool,
    /// After the change: stddev of the counts.
    pub stddev_after: f64,
    /// After the change: max / mean.
    pub max_over_mean_after: f64,
    /// After the change: keys in each fragment, in the new numbering.
    pub counts_after: Vec<u64>,
}

/// Per-thread tallies over a chunk of hashes.
struct Tally {
    before: Vec<u64>,
    after_add: Vec<u64>,
    after_remove: Vec<u64>,
    add: Checks,
    remove: Checks,
}

#[derive(Default)]
struct Checks {
    moved: u64,
    /// Moved but not covered, or sent elsewhere than the plan says.
    wrong: u64,
    /// Old-numbering fragments that received keys.
    received: Vec<bool>,
}

impl Checks {
    fn merge(&mut self, o: Checks) {
        self.moved += o.moved;
        self.wrong += o.wrong;
        for (a, b) in self.received.iter_mut().zip(o.received) {
            *a |= b;
        }
    }
}

/// Which fragment the experiment removes: the last for schemes that can
/// remove only the last, the middle one for the others.
pub fn removed_fragment(spec: SchemeSpec, n: u32) -> u32 {
    if spec.removes_any() {
        n / 2
    } else {
        n - 1
    }
}

/// Measures one scheme over the sorted hashes, on `threads` threads.
pub fn evaluate(
    spec: SchemeSpec,
    n: u32,
    sorted: &[u64],
    threads: usize,
    progress: &Progress,
) -> Result<SchemeReport, String> {
    let name = spec.to_string();
    let fail = |e: fraghash::SchemeError| format!("scheme {name}: {e}");
    let before = AnyScheme::from_spec(spec, n).map_err(fail)?;
    let mut added = before.clone();
    let add_plan = added.add_fragment().map_err(fail)?;
    let mut removed = before.clone();
    let which = removed_fragment(spec, n);
    let remove_plan = removed.remove_fragment(which).map_err(fail)?;

    let bar = progress.bar(&format!("measuring {name}"), sorted.len() as u64);
    let chunk = sorted.len().div_ceil(threads.max(1)).max(1);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = sorted
            .chunks(chunk)
            .map(|part| {
                let (b, a, r) = (&before, &added, &removed);
                let (pa, pr, bar) = (&add_plan, &remove_plan, &bar);
                s.spawn(move || tally(part, b, a, r, pa, pr, bar))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("measuring thread panicked"))
            .collect()
    });
    bar.finish_and_clear();

    let mut it = tallies.into_iter();
    let mut t = it.next().unwrap_or_else(|| empty_tally(n));
    for o in it {
        add_into(&mut t.before, &o.before);
        add_into(&mut t.after_add, &o.after_add);
        add_into(&mut t.after_remove, &o.after_remove);
        t.add.merge(o.add);
        t.remove.merge(o.remove);
    }

    let stats = Stats::from_counts(&t.before);
    let m = sorted.len() as u64;
    let add = change(
        &add_plan,
        n,
        &t.before,
        t.after_add,
        t.add,
        m as f64 / f64::from(n + 1),
        sorted,
    );
    let remove = change(
        &remove_plan,
        which,
        &t.before,
        t.after_remove,
        t.remove,
        m as f64 / f64::from(n),
        sorted,
    );
    Ok(SchemeReport {
        scheme: name,
        fragments: n,
        keys: m,
        mean: stats.mean,
        variance: stats.variance,
        stddev: stats.stddev,
        floor: stats.floor,
        stddev_over_floor: stats.stddev_over_floor(),
        min: stats.min,
        max: stats.max,
        max_over_mean: stats.max_over_mean,
        counts: t.before,
        add,
        remove,
    })
}

fn empty_tally(n: u32) -> Tally {
    Tally {
        before: vec![0; n as usize],
        after_add: vec![0; n as usize + 1],
        after_remove: vec![0; n as usize - 1],
        add: Checks {
            received: vec![false; n as usize + 1],
            ..Checks::default()
        },
        remove: Checks {
            received: vec![false; n as usize],
            ..Checks::default()
        },
    }
}

fn add_into(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

#[allow(clippy::too_many_arguments)]
fn tally(
    part: &[u64],
    before: &AnyScheme,
    added: &AnyScheme,
    removed: &AnyScheme,
    add_plan: &MigrationPlan,
    remove_plan: &MigrationPlan,
    bar: &indicatif::ProgressBar,
) -> Tally {
    let mut t = empty_tally(before.fragments());
    for (i, &h) in part.iter().enumerate() {
        let f = before.locate(h);
        t.before[f as usize] += 1;
        let g = added.locate(h);
        t.after_add[g as usize] += 1;
        if g != f {
            check(&mut t.add, add_plan, h, f, g);
        }
        let r = removed.locate(h);
        t.after_remove[r as usize] += 1;
        let r_old = remove_plan.new_to_old(r);
        if r_old != f {
            check(&mut t.remove, remove_plan, h, f, r_old);
        }
        if i % (1 << 20) == (1 << 20) - 1 {
            bar.inc(1 << 20);
        }
    }
    t
}

/// A key moved from `f` to `to` (old numbering): is the plan right about it?
#[inline]
fn check(c: &mut Checks, plan: &MigrationPlan, h: u64, f: u32, to: u32) {
    c.moved += 1;
    c.received[to as usize] = true;
    let ok = if plan.is_range_plan() {
        plan.destination(h, f) == plan.old_to_new(to)
    } else {
        plan.covers(h, f)
    };
    if !ok {
        c.wrong += 1;
    }
}

fn change(
    plan: &MigrationPlan,
    fragment: u32,
    before: &[u64],
    counts_after: Vec<u64>,
    checks: Checks,
    ideal: f64,
    sorted: &[u64],
) -> Change {
    let range_keys = |r: &HashRange| count_in(sorted, r.start, r.end);
    let scanned = plan.keys_scanned(|f| before[f as usize], range_keys);
    let range_plan = plan.is_range_plan();
    // Range plans are exact both ways: the keys in the ranges are the moved ones.
    let in_ranges_ok = !range_plan || plan.keys_in_ranges(range_keys) == checks.moved;
    let sources = plan.sources();
    let mut touched: Vec<bool> = checks.received;
    for &s in &sources {
        touched[s as usize] = true;
    }
    for m in &plan.moves {
        if let Move::Ranges { to, .. } = m {
            touched[*to as usize] = true;
        }
    }
    let after = Stats::from_counts(&counts_after);
    Change {
        fragment,
        fragments_after: plan.fragments_after,
        plan: if range_plan { "ranges" } else { "filter" },
        moved: checks.moved,
        ideal,
        moved_over_ideal: if ideal > 0.0 {
            checks.moved as f64 / ideal
        } else {
            0.0
        },
        scanned,
        sources: sources.len() as u32,
        fragments_touched: touched.iter().filter(|&&x| x).count() as u32,
        ranges: plan.range_count() as u64,
        plan_exact: checks.wrong == 0 && in_ranges_ok,
        stddev_after: after.stddev,
        max_over_mean_after: after.max_over_mean,
        counts_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_direct_counts() {
        let mut g = fraghash::keys::SplitMix64::new(9);
        let mut v: Vec<u64> = (0..20_000).map(|_| g.next()).collect();
        v.sort_unstable();
        for spec in ["linear", "ring:10", "jump", "slots"] {
            let spec: SchemeSpec = spec.parse().unwrap();
            let r = evaluate(spec, 7, &v, 2, &Progress::hidden()).unwrap();
            let s = AnyScheme::from_spec(spec, 7).unwrap();
            let mut c = vec![0u64; 7];
            for &h in &v {
                c[s.locate(h) as usize] += 1;
            }
            assert_eq!(r.counts, c);
            assert!(r.add.plan_exact && r.remove.plan_exact, "{spec}");
            assert_eq!(r.add.counts_after.iter().sum::<u64>(), 20_000);
            assert_eq!(r.add.counts_after[7], r.add.moved);
            assert_eq!(r.remove.moved, c[r.remove.fragment as usize]);
        }
    }
}
