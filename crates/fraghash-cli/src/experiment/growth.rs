//! Growth curves: max/mean and stddev at every fragment count from 1 to MAX,
//! as a table grows one fragment at a time. Exact for every scheme, without
//! rehashing or relocating every key at every step:
//!
//! - range schemes (`ring`, `slots`): start with one fragment holding every
//!   key, then apply each add's plan to per-fragment counts, counting the keys
//!   of each moved hash range by binary search over the sorted hashes;
//! - `linear`: the fragment depends only on the low `floor(log2 N) + 1` bits
//!   of the hash, so one histogram of the low bits serves every step;
//! - `jump`: an add moves keys only into the new fragment, so each key's
//!   whole history follows from a short chain of lookups back from MAX
//!   (about ln MAX of them), summed in a difference table over (N, fragment).
//!
//! Each curve ends with a check against a direct count at MAX fragments.

use fraghash::scheme::ring::Ring;
use fraghash::{AnyScheme, FragmentScheme, Move, SchemeSpec, Stats};
use serde::Serialize;

use super::keys::count_in;
use super::progress::Progress;

/// The largest `--growth` (jump's exact table is MAX²/2 32-bit counters a
/// thread: 33 MB at 4096).
pub const MAX_GROWTH: u32 = 4096;

/// One scheme's curve.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// The spec.
    pub scheme: String,
    /// How the curve was computed (always exact: no sampling).
    pub method: &'static str,
    /// Fragment counts 1..=MAX.
    pub fragments: Vec<u32>,
    /// max/mean at each count.
    pub max_over_mean: Vec<f64>,
    /// Population stddev of the counts at each count.
    pub stddev: Vec<f64>,
    /// stddev / binomial floor at each count (0 at one fragment).
    pub stddev_over_floor: Vec<f64>,
}

/// Computes every curve, the schemes spread over `threads` threads.
pub fn curves(
    specs: &[SchemeSpec],
    max: u32,
    sorted: &[u64],
    threads: usize,
    progress: &Progress,
) -> Result<Vec<Curve>, String> {
    let bar = progress.bar("growing", specs.len() as u64 * u64::from(max));
    // Work queue: the slowest (biggest rings) first.
    let mut order: Vec<usize> = (0..specs.len()).collect();
    order.sort_by_key(|&i| match specs[i] {
        SchemeSpec::Ring { points } => std::cmp::Reverse(points),
        _ => std::cmp::Reverse(0),
    });
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(usize, Result<Curve, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.clamp(1, specs.len().max(1)))
            .map(|_| {
                let (order, next, bar) = (&order, &next, &bar);
                s.spawn(move || {
                    let mut out = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&i) = order.get(k) else { break };
                        out.push((i, curve(specs[i], max, sorted, bar)));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("growth thread panicked"))
            .collect()
    });
    bar.finish_and_clear();
    let mut slots: Vec<Option<Curve>> = vec![None; specs.len()];
    for (i, r) in results {
        slots[i] = Some(r?);
    }
    Ok(slots.into_iter().flatten().collect())
}

/// One scheme's curve from 1 to `max` fragments.
pub fn curve(
    spec: SchemeSpec,
    max: u32,
    sorted: &[u64],
    bar: &indicatif::ProgressBar,
) -> Result<Curve, String> {
    let name = spec.to_string();
    let mut c = Curve {
        scheme: name.clone(),
        method: "",
        fragments: Vec::with_capacity(max as usize),
        max_over_mean: Vec::with_capacity(max as usize),
        stddev: Vec::with_capacity(max as usize),
        stddev_over_floor: Vec::with_capacity(max as usize),
    };
    let mut push = |counts: &[u64]| {
        let s = Stats::from_counts(counts);
        c.fragments.push(counts.len() as u32);
        c.max_over_mean.push(s.max_over_mean);
        c.stddev.push(s.stddev);
        c.stddev_over_floor.push(s.stddev_over_floor());
        bar.inc(1);
    };
    let last =
        match spec {
            SchemeSpec::Linear => linear(max, sorted, &mut push),
            SchemeSpec::Jump => jump(max, sorted, &mut push),
            SchemeSpec::Ring { points } => ring(points, max, sorted, &mut push)
                .map_err(|e| format!("growth of {name}: {e}"))?,
            SchemeSpec::Slots => by_plans(spec, max, sorted, &mut push)
                .map_err(|e| format!("growth of {name}: {e}"))?,
        };
    c.method = match spec {
        SchemeSpec::Linear => "exact: histogram of the low hash bits",
        SchemeSpec::Jump => "exact: each key's chain of lookups back from MAX",
        SchemeSpec::Ring { .. } => {
            "exact: each new point takes the arc before it, counted over sorted hashes"
        }
        SchemeSpec::Slots => "exact: add plans applied to per-range counts over sorted hashes",
    };
    // The last step against a direct count of every key.
    let scheme = last.1;
    let mut direct = vec![0u64; max as usize];
    for &h in sorted {
        direct[scheme.locate(h) as usize] += 1;
    }
    if direct != last.0 {
        return Err(format!(
            "internal error: growth of {name} disagrees with a direct count at {max} fragments"
        ));
    }
    Ok(c)
}

type Last = (Vec<u64>, AnyScheme);

fn by_plans(
    spec: SchemeSpec,
    max: u32,
    sorted: &[u64],
    push: &mut impl FnMut(&[u64]),
) -> Result<Last, fraghash::SchemeError> {
    let prefix = BucketPrefix::new(sorted);
    let mut scheme = AnyScheme::from_spec(spec, 1)?;
    let mut counts = vec![sorted.len() as u64];
    push(&counts);
    for _ in 1..max {
        let plan = scheme.add_fragment()?;
        counts.push(0);
        for m in &plan.moves {
            if let Move::Ranges { from, to, ranges } = m {
                let k: u64 = ranges
                    .iter()
                    .map(|r| prefix.count(sorted, r.start, r.end))
                    .sum();
                counts[*from as usize] -= k;
                counts[*to as usize] += k;
            }
        }
        push(&counts);
    }
    Ok((counts, scheme))
}

/// Keys per 2^-20 of the hash space, as prefix sums: a range on those
/// boundaries (every slot range, while slots are at most 2^20) is counted by
/// two loads instead of two binary searches over the hashes.
struct BucketPrefix {
    prefix: Vec<u64>,
}

impl BucketPrefix {
    const BITS: u32 = 20;

    fn new(sorted: &[u64]) -> BucketPrefix {
        let mut prefix = vec![0u64; (1 << Self::BITS) + 1];
        for &h in sorted {
            prefix[(h >> (64 - Self::BITS)) as usize + 1] += 1;
        }
        for i in 1..prefix.len() {
            prefix[i] += prefix[i - 1];
        }
        BucketPrefix { prefix }
    }

    /// Keys in `start..=end`.
    fn count(&self, sorted: &[u64], start: u64, end: u64) -> u64 {
        let mask = (1u64 << (64 - Self::BITS)) - 1;
        if start & mask == 0 && end & mask == mask {
            let a = (start >> (64 - Self::BITS)) as usize;
            let b = (end >> (64 - Self::BITS)) as usize + 1;
            self.prefix[b] - self.prefix[a]
        } else {
            count_in(sorted, start, end)
        }
    }
}

fn ring(
    points: u32,
    max: u32,
    sorted: &[u64],
    push: &mut impl FnMut(&[u64]),
) -> Result<Last, fraghash::SchemeError> {
    // The core rebuilds the whole ring on every add (O(N·P log N·P) a step);
    // here every point of every fragment up to MAX is placed once, and each
    // add inserts its points into the ring: a new point takes the keys of
    // the arc ending at it from the owner of the next point. Ids are tokens
    // when a ring only grows; equal positions go to the smallest
    // (token, point), as in the core. Checked against the core at MAX.
    let scheme = AnyScheme::from_spec(SchemeSpec::Ring { points }, max)?;
    let mut all: Vec<(u64, u32, u32)> = Vec::with_capacity(max as usize * points as usize);
    for t in 0..max {
        for p in 0..points {
            all.push((Ring::point_position(u64::from(t), p), t, p));
        }
    }
    all.sort_unstable();
    all.dedup_by_key(|e| e.0);
    let mut by_fragment: Vec<Vec<usize>> = vec![Vec::new(); max as usize];
    for (i, e) in all.iter().enumerate() {
        by_fragment[e.1 as usize].push(i);
    }
    // rank[i]: keys with hash <= position i, by one merge over both sorted lists.
    let mut rank: Vec<u64> = Vec::with_capacity(all.len());
    let mut j = 0usize;
    for e in &all {
        while j < sorted.len() && sorted[j] <= e.0 {
            j += 1;
        }
        rank.push(j as u64);
    }
    let m = sorted.len() as u64;
    // Keys in the arc (pos[a], pos[b]], wrapping when b is before a.
    let arc = |a: usize, b: usize| -> u64 {
        if a < b {
            rank[b] - rank[a]
        } else {
            m - rank[a] + rank[b]
        }
    };
    let mut present: std::collections::BTreeSet<usize> = by_fragment[0].iter().copied().collect();
    let mut counts = vec![sorted.len() as u64];
    push(&counts);
    for n in 1..max {
        counts.push(0);
        for &i in &by_fragment[n as usize] {
            let pred = present
                .range(..i)
                .next_back()
                .or(present.iter().next_back());
            let succ = present.range(i..).next().or(present.iter().next());
            if let (Some(&a), Some(&b)) = (pred, succ) {
                let k = arc(a, i);
                counts[all[b].1 as usize] -= k;
                counts[n as usize] += k;
            }
            present.insert(i);
        }
        push(&counts);
    }
    Ok((counts, scheme))
}

fn linear(max: u32, sorted: &[u64], push: &mut impl FnMut(&[u64])) -> Last {
    // floor(log2 max) + 1 low bits decide the fragment at every N <= max.
    let bits = 32 - max.leading_zeros();
    let mask = (1u64 << bits) - 1;
    let mut hist = vec![0u64; 1 << bits];
    for &h in sorted {
        hist[(h & mask) as usize] += 1;
    }
    let mut counts = Vec::new();
    let mut scheme = AnyScheme::new("linear", 1).expect("linear with one fragment");
    for n in 1..=max {
        scheme = AnyScheme::new("linear", n).expect("linear fragment count in range");
        counts = vec![0u64; n as usize];
        for (low, &k) in hist.iter().enumerate() {
            counts[scheme.locate(low as u64) as usize] += k;
        }
        push(&counts);
    }
    (counts, scheme)
}

fn jump(max: u32, sorted: &[u64], push: &mut impl FnMut(&[u64])) -> Last {
    // An add moves keys only into the new fragment, so a key in fragment f at
    // MAX fragments arrived there when f was created (N = f + 1) and stayed;
    // before that it was where the scheme puts it among f fragments. One
    // chain of lookups per key, f0 = locate(MAX), f1 = locate(f0), ..., 0,
    // gives its whole history: fragment f_(i+1) for N in f_(i+1)+1 ..= f_i.
    let schemes: Vec<AnyScheme> = (1..=max)
        .map(|n| AnyScheme::new("jump", n).expect("jump fragment count in range"))
        .collect();
    // delta[row(N) + f]: change of fragment f's count when going to N fragments.
    let row = |n: u32| (n as usize - 1) * n as usize / 2;
    let threads = 2usize;
    let chunk = sorted.len().div_ceil(threads).max(1);
    let tables: Vec<Vec<i32>> = std::thread::scope(|s| {
        let hs: Vec<_> = sorted
            .chunks(chunk)
            .map(|part| {
                let schemes = &schemes;
                s.spawn(move || {
                    let mut delta = vec![0i32; row(max + 1)];
                    for &h in part {
                        // `upto`: the last fragment count at which the key is in `f`.
                        let mut upto = max;
                        loop {
                            let f = schemes[upto as usize - 1].locate(h);
                            delta[row(f + 1) + f as usize] += 1;
                            if upto < max {
                                delta[row(upto + 1) + f as usize] -= 1;
                            }
                            if f == 0 {
                                break;
                            }
                            upto = f;
                        }
                    }
                    delta
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("jump thread"))
            .collect()
    });
    let mut counts: Vec<i64> = Vec::with_capacity(max as usize);
    let mut out: Vec<u64> = Vec::new();
    for n in 1..=max {
        counts.push(0);
        let r = row(n);
        for (f, c) in counts.iter_mut().enumerate() {
            *c += tables.iter().map(|t| i64::from(t[r + f])).sum::<i64>();
        }
        out = counts.iter().map(|&c| c as u64).collect();
        push(&out);
    }
    let last = schemes.into_iter().next_back().expect("max >= 1");
    (out, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(spec: &str, n: u32, v: &[u64]) -> Vec<u64> {
        let s = AnyScheme::new(spec, n).unwrap();
        let mut c = vec![0u64; n as usize];
        for &h in v {
            c[s.locate(h) as usize] += 1;
        }
        c
    }

    #[test]
    fn bucket_prefix_counts_like_binary_search() {
        let mut g = fraghash::keys::SplitMix64::new(2);
        let mut v: Vec<u64> = (0..50_000).map(|_| g.next()).collect();
        v.sort_unstable();
        let p = BucketPrefix::new(&v);
        let step = 1u64 << 44;
        for (s, e) in [
            (0, u64::MAX),
            (0, step - 1),
            (step * 5, step * 9 - 1),
            (123, 456_789_012_345),
            (step, u64::MAX),
            (v[10], v[20_000]),
        ] {
            assert_eq!(p.count(&v, s, e), count_in(&v, s, e), "{s} {e}");
        }
    }

    #[test]
    fn curves_match_direct_counts() {
        let mut g = fraghash::keys::SplitMix64::new(11);
        let mut v: Vec<u64> = (0..30_000).map(|_| g.next()).collect();
        v.sort_unstable();
        let bar = indicatif::ProgressBar::hidden();
        for spec in ["linear", "jump", "ring:10", "ring:3"] {
            let c = curve(spec.parse().unwrap(), 40, &v, &bar).unwrap();
            assert_eq!(c.fragments.len(), 40);
            for n in [1u32, 2, 7, 16, 17, 33, 40] {
                let s = Stats::from_counts(&direct(spec, n, &v));
                assert_eq!(
                    c.max_over_mean[n as usize - 1],
                    s.max_over_mean,
                    "{spec} {n}"
                );
                assert_eq!(c.stddev[n as usize - 1], s.stddev, "{spec} {n}");
            }
        }
        assert!(curve("slots".parse().unwrap(), 40, &v, &bar).is_ok());
    }
}
