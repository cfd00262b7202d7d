//! Statistical tests: 1,000,000 random short keys (fixed seed) over 50
//! fragments. Every bound is derived in a comment from the math, not fitted
//! to a run.

use fraghash::keys::ShortKeys;
use fraghash::{key_hash, AnyScheme, FragmentScheme, Stats};

const KEYS: usize = 1_000_000;
const FRAGMENTS: u32 = 50;

fn hashes() -> Vec<u64> {
    let mut g = ShortKeys::new(20_091_119);
    let mut buf = Vec::new();
    (0..KEYS)
        .map(|_| {
            g.next_into(&mut buf);
            key_hash(&buf)
        })
        .collect()
}

fn counts(s: &AnyScheme, hs: &[u64]) -> Vec<u64> {
    let mut c = vec![0u64; s.fragments() as usize];
    for &h in hs {
        c[s.locate(h) as usize] += 1;
    }
    c
}

/// A perfect scheme puts each key in a fragment uniformly at random, so the
/// population variance of the 50 counts, divided by the binomial variance
/// `M p (1 - p)`, is distributed about as chi-squared with 49 degrees of
/// freedom over 50. P(chi2_49 > 72) ≈ 0.018, and 72/50 = 1.44 = 1.2^2: a
/// perfect scheme stays below 1.2 × floor with probability about 98%. The
/// seed is fixed, so the test is deterministic; a scheme with real extra
/// spread (ring: ~7 × floor, linear: ~500 × floor) fails by far.
#[test]
fn slots_and_jump_at_the_sampling_floor() {
    let hs = hashes();
    for spec in ["slots", "jump"] {
        let s = AnyScheme::new(spec, FRAGMENTS).unwrap();
        let st = Stats::from_counts(&counts(&s, &hs));
        assert!(
            st.stddev <= 1.2 * st.floor,
            "{spec}: stddev {:.1} > 1.2 × floor {:.1}",
            st.stddev,
            st.floor
        );
    }
}

/// With P points, a fragment's share is a sum of P arc lengths, each about
/// exponential with mean 1/(N·P): relative stddev 1/sqrt(P) = 10% at
/// P = 100. The sample stddev of 50 fragments has relative error about
/// 1/sqrt(2·49) ≈ 10%, so 10% ± 1% (one sigma); 5% and 15% are five sigma
/// away. Sampling noise (0.7% of the mean) adds nothing visible.
#[test]
fn ring_100_points_spreads_about_10_percent() {
    let hs = hashes();
    let s = AnyScheme::new("ring", FRAGMENTS).unwrap();
    let st = Stats::from_counts(&counts(&s, &hs));
    let rel = st.stddev / st.mean;
    assert!((0.05..=0.15).contains(&rel), "ring stddev/mean = {rel:.4}");
}

/// Linear hashing with 50 fragments: L = 5, fragments 18..31 (14 of them)
/// own two of the 64 low-bit buckets, the other 36 own one. So the biggest
/// expected share is 2/64 against a mean of 1/50: max/mean = 1.5625. The
/// maximum of 14 counts of mean 31,250 (sd ≈ 174) lies about 1.7 sd above
/// it, +1%: about 1.578, within 2% of 1.56 (1.529..1.591).
#[test]
fn linear_max_over_mean_as_mnesia() {
    let hs = hashes();
    let s = AnyScheme::new("linear", FRAGMENTS).unwrap();
    let c = counts(&s, &hs);
    let st = Stats::from_counts(&c);
    assert!(
        (st.max_over_mean - 1.56).abs() <= 0.02 * 1.56,
        "max/mean = {}",
        st.max_over_mean
    );
    // The structure itself: exactly 14 fragments hold about twice the rest.
    let big = c.iter().filter(|&&x| x as f64 > 1.5 * st.mean).count();
    assert_eq!(big, 14);
}

/// Going to 51 fragments moves ideally 1/51 of the keys (19,608 of 1M).
/// slots gives the new fragment exactly its target of S/51 slots, within
/// one slot (0.15% of its share); jump moves each key with probability
/// 1/51. The moved count is then binomial: sd ≈ 139, 0.7% of the ideal, so
/// 3% is over four sigma.
#[test]
fn adding_the_51st_moves_the_ideal_share() {
    let hs = hashes();
    let ideal = KEYS as f64 / 51.0;
    for spec in ["slots", "jump"] {
        let mut s = AnyScheme::new(spec, FRAGMENTS).unwrap();
        let before: Vec<u32> = hs.iter().map(|&h| s.locate(h)).collect();
        s.add_fragment().unwrap();
        let moved = hs
            .iter()
            .zip(&before)
            .filter(|(&h, &b)| s.locate(h) != b)
            .count() as f64;
        assert!(
            (moved / ideal - 1.0).abs() <= 0.03,
            "{spec}: moved {moved} keys, ideal {ideal:.0}"
        );
    }
}
