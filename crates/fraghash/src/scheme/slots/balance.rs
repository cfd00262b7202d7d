//! Rebalancing a slot table by measured sizes, and reweighting.

use std::collections::BTreeSet;

use super::Slots;
use crate::error::SchemeError;
use crate::plan::{diff_ownership, MigrationPlan, PlanKind};
use crate::scheme::FragmentScheme;

impl Slots {
    /// Moves whole slots until every fragment's load is within one slot of
    /// its target share of the total, by the sizes given (records or bytes,
    /// one entry per slot, `slot_count()` entries).
    ///
    /// Greedy: the fragment most above its target gives the slot whose size
    /// is closest to half the gap between it and the fragment most below,
    /// as long as that strictly lowers the sum of squared deviations. When no
    /// such move is left, every fragment is within the largest slot size of
    /// its target (any slot of an overloaded fragment would otherwise fit the
    /// gap). Among slots of equal size the lowest-numbered goes first, so
    /// uniform sizes give contiguous ranges. A fragment's last slot never
    /// moves, so every fragment keeps at least one slot. O(moves · log S).
    pub fn rebalance(&mut self, slot_sizes: &[u64]) -> Result<MigrationPlan, SchemeError> {
        if slot_sizes.len() != self.table.len() {
            return Err(SchemeError::InvalidArgument(format!(
                "rebalance needs one size per slot: {} sizes for {} slots",
                slot_sizes.len(),
                self.table.len()
            )));
        }
        let n = self.weights.len();
        let w_sum: i128 = self.weights.iter().map(|&w| i128::from(w)).sum();
        let total: i128 = slot_sizes.iter().map(|&s| i128::from(s)).sum();
        // dev_i = load_i·W − total·w_i: the gap to target, scaled by W so it
        // stays an exact integer.
        let mut dev: Vec<i128> = self
            .weights
            .iter()
            .map(|&w| -total * i128::from(w))
            .collect();
        let mut owned: Vec<BTreeSet<(u64, usize)>> = vec![BTreeSet::new(); n];
        let mut count = self.slots_per_fragment();
        for (s, (&o, &size)) in self.table.iter().zip(slot_sizes).enumerate() {
            dev[o as usize] += i128::from(size) * w_sum;
            if size > 0 {
                owned[o as usize].insert((size, s));
            }
        }
        let mut order: BTreeSet<(i128, usize)> =
            dev.iter().enumerate().map(|(i, &d)| (d, i)).collect();
        let old = self.ownership();
        let limit = 4 * self.table.len();
        for _ in 0..limit {
            let (Some(&(d_hi, a)), Some(&(d_lo, b))) = (order.last(), order.first()) else {
                break;
            };
            if a == b || d_hi <= 0 || d_lo >= 0 || count[a] <= 1 {
                break;
            }
            let gap = d_hi - d_lo; // (e_a + d_b)·W
            let half = gap / (2 * w_sum);
            let probe = u64::try_from(half).unwrap_or(u64::MAX);
            let above = owned[a].range((probe, 0)..).next().copied();
            let below = owned[a].range(..(probe, 0)).next_back().copied();
            let pick = [below, above]
                .into_iter()
                .flatten()
                .filter(|&(size, _)| i128::from(size) * w_sum < gap)
                .min_by_key(|&(size, s)| ((i128::from(size) * w_sum * 2 - gap).abs(), s));
            let Some((size, slot)) = pick else { break };
            order.remove(&(dev[a], a));
            order.remove(&(dev[b], b));
            dev[a] -= i128::from(size) * w_sum;
            dev[b] += i128::from(size) * w_sum;
            order.insert((dev[a], a));
            order.insert((dev[b], b));
            count[a] -= 1;
            count[b] += 1;
            owned[a].remove(&(size, slot));
            owned[b].insert((size, slot));
            self.table[slot] = b as u32;
        }
        Ok(MigrationPlan {
            kind: PlanKind::Rebalance,
            fragments_before: self.fragments(),
            fragments_after: self.fragments(),
            moves: diff_ownership(&old, &self.ownership(), |x| x),
            renumber: None,
        })
    }

    /// Sets a fragment's weight and moves slots so every fragment is within
    /// one slot of its new target share.
    pub fn set_weight(&mut self, fragment: u32, weight: u32) -> Result<MigrationPlan, SchemeError> {
        if fragment >= self.fragments() {
            return Err(SchemeError::NoSuchFragment {
                fragment,
                fragments: self.fragments(),
            });
        }
        super::check_weights(&[weight])?;
        self.weights[fragment as usize] = weight;
        let ones = vec![1u64; self.table.len()];
        self.rebalance(&ones)
    }
}
