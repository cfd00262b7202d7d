//! The plots' x axes: fragment ids under bars, fragment counts on a log
//! scale, each labelled at ticks chosen here (plotters picks its own
//! otherwise, and may leave the last fragment without a label).

use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// An f64 axis whose labelled ticks are exactly `ticks` (plotters picks
/// its own otherwise, and may skip the last fragment).
pub struct Ticked<R: Ranged<ValueType = f64>> {
    inner: R,
    ticks: Vec<f64>,
}

impl<R: Ranged<ValueType = f64>> Ranged for Ticked<R> {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> std::ops::Range<i32> {
        self.inner.axis_pixel_range(limit)
    }
}

impl<R: Ranged<ValueType = f64>> ValueFormatter<f64> for Ticked<R> {
    fn format(value: &f64) -> String {
        format!("{}", value.round() as i64)
    }
}

/// Fragment ids `0..n` as bar centres, ticked by [`fragment_ticks`].
pub fn fragment_axis(n: u32) -> Ticked<RangedCoordf64> {
    Ticked {
        inner: (-0.5f64..f64::from(n) - 0.5).into(),
        ticks: fragment_ticks(n),
    }
}

/// Fragment counts `1..=max` on a log scale, ticked by [`count_ticks`].
pub fn count_axis(max: u32) -> Ticked<LogCoord<f64>> {
    Ticked {
        inner: (1f64..f64::from(max)).log_scale().into(),
        ticks: count_ticks(max),
    }
}

/// x-axis ticks over fragment ids `0..n`: round steps, and always the last
/// fragment (a round step too close to it gives way, so labels never touch).
fn fragment_ticks(n: u32) -> Vec<f64> {
    let last = n.saturating_sub(1);
    let step = [
        1u32, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000,
    ]
    .into_iter()
    .find(|&s| last / s <= 8)
    .unwrap_or(100_000);
    let mut t: Vec<f64> = (0..=last)
        .step_by(step as usize)
        .filter(|&x| x == last || last - x >= step.div_ceil(2))
        .map(f64::from)
        .collect();
    if t.last() != Some(&f64::from(last)) {
        t.push(f64::from(last));
    }
    t
}

/// Fragment-count ticks on the log axis: powers of two up to `max`, and `max`.
fn count_ticks(max: u32) -> Vec<f64> {
    let mut t: Vec<f64> = std::iter::successors(Some(1u32), |&x| x.checked_mul(2))
        .take_while(|&x| x < max && f64::from(max) / f64::from(x) >= 1.3)
        .map(f64::from)
        .collect();
    t.push(f64::from(max));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragment_ticks_end_on_the_last_fragment() {
        assert_eq!(fragment_ticks(50), vec![0.0, 10.0, 20.0, 30.0, 40.0, 49.0]);
        assert_eq!(fragment_ticks(6), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        // 40 is dropped: too close to 41 for two labels.
        assert_eq!(
            fragment_ticks(42),
            vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 41.0]
        );
        assert_eq!(fragment_ticks(2), vec![0.0, 1.0]);
        let big = fragment_ticks(262_143);
        assert_eq!(big.last(), Some(&262_142.0));
        assert!(big.len() <= 11);
    }

    #[test]
    fn count_ticks_are_powers_of_two_and_max() {
        assert_eq!(
            count_ticks(400),
            vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 400.0]
        );
        // 8 is dropped: too close to 9 on a log axis.
        assert_eq!(count_ticks(9), vec![1.0, 2.0, 4.0, 9.0]);
        assert_eq!(count_ticks(2), vec![1.0, 2.0]);
    }
}
