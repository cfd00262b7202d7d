//! Distribution statistics over per-fragment key counts.

use serde::{Deserialize, Serialize};

/// Summary of how keys spread over fragments.
///
/// `floor` is the binomial floor `sqrt(M * p * (1 - p))` with `p = 1/N`: the
/// standard deviation of one fragment's count when `M` keys fall uniformly at
/// random into `N` fragments. A perfect scheme still shows it by chance, so
/// `stddev / floor` near 1 means "as even as randomness allows".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of fragments `N`.
    pub fragments: usize,
    /// Number of keys `M`.
    pub keys: u64,
    /// `M / N`.
    pub mean: f64,
    /// Population variance of the counts.
    pub variance: f64,
    /// Population standard deviation of the counts.
    pub stddev: f64,
    /// Smallest count.
    pub min: u64,
    /// Largest count.
    pub max: u64,
    /// `max / mean` (0 when there are no keys).
    pub max_over_mean: f64,
    /// The binomial floor `sqrt(M p (1 - p))`, `p = 1/N`.
    pub floor: f64,
}

impl Stats {
    /// Computes the statistics of `counts` (one entry per fragment).
    ///
    /// An empty slice gives all zeros. O(N).
    ///
    /// ```
    /// let s = fraghash::Stats::from_counts(&[10, 20, 30]);
    /// assert_eq!(s.mean, 20.0);
    /// assert_eq!(s.max, 30);
    /// assert!((s.max_over_mean - 1.5).abs() < 1e-12);
    /// ```
    pub fn from_counts(counts: &[u64]) -> Stats {
        let n = counts.len();
        if n == 0 {
            return Stats {
                fragments: 0,
                keys: 0,
                mean: 0.0,
                variance: 0.0,
                stddev: 0.0,
                min: 0,
                max: 0,
                max_over_mean: 0.0,
                floor: 0.0,
            };
        }
        let keys: u64 = counts.iter().sum();
        let mean = keys as f64 / n as f64;
        let variance = counts
            .iter()
            .map(|&c| {
                let d = c as f64 - mean;
                d * d
            })
            .sum::<f64>()
            / n as f64;
        let min = counts.iter().copied().min().unwrap_or(0);
        let max = counts.iter().copied().max().unwrap_or(0);
        Stats {
            fragments: n,
            keys,
            mean,
            variance,
            stddev: variance.sqrt(),
            min,
            max,
            max_over_mean: if keys == 0 { 0.0 } else { max as f64 / mean },
            floor: binomial_floor(keys, n),
        }
    }

    /// `stddev / floor`: 1.0 is as even as chance allows (0 when undefined).
    pub fn stddev_over_floor(&self) -> f64 {
        if self.floor > 0.0 {
            self.stddev / self.floor
        } else {
            0.0
        }
    }
}

/// The binomial floor `sqrt(M p (1 - p))` with `p = 1/N`.
///
/// ```
/// // 10,000,000 keys over 50 fragments: about 443.
/// let f = fraghash::stats::binomial_floor(10_000_000, 50);
/// assert_eq!(f.round(), 443.0);
/// ```
pub fn binomial_floor(keys: u64, fragments: usize) -> f64 {
    if fragments == 0 {
        return 0.0;
    }
    let p = 1.0 / fragments as f64;
    (keys as f64 * p * (1.0 - p)).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn population_variance() {
        let s = Stats::from_counts(&[2, 4, 4, 4, 5, 5, 7, 9]);
        assert_eq!(s.mean, 5.0);
        assert_eq!(s.variance, 4.0);
        assert_eq!(s.stddev, 2.0);
        assert_eq!(s.min, 2);
        assert_eq!(s.max, 9);
    }

    #[test]
    fn empty_and_zero() {
        assert_eq!(Stats::from_counts(&[]).fragments, 0);
        let z = Stats::from_counts(&[0, 0]);
        assert_eq!(z.max_over_mean, 0.0);
        assert_eq!(z.stddev_over_floor(), 0.0);
    }
}
