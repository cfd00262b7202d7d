//! `slots`: a balanced table of hash-range slots (the default scheme).
//!
//! The hash space is cut into `S = 2^k` equal slots, `slot = h >> (64 - k)`,
//! and a table maps each slot to its fragment. Lookup is one shift and one
//! table load, O(1) at any fragment count.
//!
//! - **Add**: the new fragment takes its share of slots from the fragments
//!   most above their target, the tail of each donor's longest run first, so
//!   a plan has about one range per donor. Keys move only into the new
//!   fragment, and only the slots taken are read (a range plan).
//! - **Remove any fragment**: its slots go to the fragments most below
//!   their target, in contiguous chunks. The last fragment then takes the
//!   removed one's id so ids stay `0..N`.
//! - **Weights**: a fragment of weight 2 gets twice the slots
//!   ([`Slots::set_weight`]).
//! - **Rebalance** by measured sizes ([`Slots::rebalance`]): whole slots move
//!   until every fragment is within one slot of its target share.
//! - **Split** ([`Slots::split`]): a new fragment takes half of one named
//!   fragment's slots and nothing else.
//!
//! # How many slots
//!
//! A fragment owns a whole number of slots, so with `S/N` slots per fragment
//! the shares differ by up to one slot: a relative quantization of about
//! `0.5·N/S`. Chance alone spreads fragments by `sqrt(N/M)` relative (the
//! binomial floor over the mean, `M` keys). `k` doubles whenever slots per
//! fragment run low (each slot splits into two with the same owner, so
//! nothing moves):
//!
//! - while the table is at most 2^20 slots, at least 512 slots per fragment:
//!   quantization ≤ 0.1%, below the noise for up to 25 million keys per
//!   fragment (10M keys over 50 fragments: noise 0.22%, quantization 0.07%);
//! - beyond that, at least 64 per fragment, up to 2^24 slots: quantization
//!   ≤ 0.8%, below the noise for up to 16,000 keys per fragment.
//!
//! | fragments | slots (`k`) | per fragment | table memory |
//! |---|---|---|---|
//! | 10 | 8,192 (13) | 819 | 32 KiB |
//! | 1,000 | 524,288 (19) | 524 | 2 MiB |
//! | 10,000 | 1,048,576 (20) | 105 | 4 MiB |
//! | 100,000 | 8,388,608 (23) | 84 | 32 MiB |
//!
//! At most [`Slots::MAX_FRAGMENTS`] (262,144) fragments. The table never
//! shrinks when fragments are removed.

mod balance;
mod share;

use serde::{Deserialize, Serialize};

use super::{
    add_plan, check_fragment_count, check_removable, removal_plan, removal_renumber, FragmentScheme,
};
use crate::error::{SchemeError, StateError};
use crate::plan::{diff_ownership, HashRange, MigrationPlan, Ownership, PlanKind};
use crate::state::{self, tag};
pub(crate) use share::targets;
use share::{greedy_take, run_len, take_from_runs};

/// The slot-table scheme.
///
/// ```
/// use fraghash::scheme::slots::Slots;
/// use fraghash::{key_hash, FragmentScheme};
///
/// let mut slots = Slots::new(10)?;
/// assert_eq!(slots.slot_count(), 8192); // 2^13: 819 or 820 per fragment
/// let h = key_hash(b"user:42");
/// assert_eq!(slots.locate(h), slots.table()[slots.slot_of(h)]);
///
/// // An add takes the new fragment's share from the fullest fragments.
/// let plan = slots.add_fragment()?;
/// assert_eq!(slots.slots_per_fragment(), slots.target_slots());
/// assert!(plan.moves.iter().all(|m| m.from() < 10));
///
/// // Split fragment 2 in two, give fragment 0 twice the share, then
/// // remove fragment 4: each a range plan naming exactly what moves.
/// let old = slots.locate(h);
/// let plan = slots.split(2)?;
/// assert_eq!(plan.sources(), vec![2]);
/// assert_eq!(plan.destination(h, old), Some(slots.locate(h)));
/// slots.set_weight(0, 2)?;
/// let c = slots.slots_per_fragment();
/// assert!(c[0].abs_diff(2 * c[1]) <= 2);
/// let old = slots.locate(h);
/// let plan = slots.remove_fragment(4)?;
/// assert_eq!(plan.destination(h, old), Some(slots.locate(h)));
/// # Ok::<(), fraghash::SchemeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slots {
    bits: u32,
    /// Owner of each slot; `1 << bits` entries.
    table: Vec<u32>,
    /// Weight of each fragment (at least 1).
    weights: Vec<u32>,
}

/// Serialised form: the table run-length encoded as `(owner, length)`
/// pairs, since slots of one fragment are mostly contiguous (a fresh table
/// of `N` fragments is `N` runs, and each add adds about one run per donor).
#[derive(Serialize, Deserialize)]
struct SlotsState {
    bits: u32,
    runs: Vec<(u32, u32)>,
    weights: Vec<u32>,
}

impl Slots {
    /// Fewest slot bits (256 slots).
    pub const MIN_BITS: u32 = 8;
    /// Most slot bits (16,777,216 slots, 64 MiB of table).
    pub const MAX_BITS: u32 = 24;
    /// Most fragments: 64 slots each at the largest table.
    pub const MAX_FRAGMENTS: u32 = 1 << (Self::MAX_BITS - 6);
    const DENSE_BITS: u32 = 20;

    /// `fragments` fragments of weight 1, each owning one contiguous block.
    pub fn new(fragments: u32) -> Result<Slots, SchemeError> {
        Slots::with_weights(&vec![1; fragments as usize])
    }

    /// One fragment per weight, each owning one contiguous block of slots in
    /// proportion to its weight.
    ///
    /// Every fragment owns at least one slot, whatever the weights: a
    /// fragment whose share is below one slot (weights 1 and 1,000,000 over
    /// 512 slots) gets one, taken from the largest share, so each fragment
    /// holds some keys. A weight of 0 is refused.
    ///
    /// ```
    /// use fraghash::scheme::slots::Slots;
    ///
    /// let s = Slots::with_weights(&[1, 2, 1])?;
    /// let c = s.slots_per_fragment();
    /// assert_eq!(c[1], c[0] + c[2]);
    /// let extreme = Slots::with_weights(&[1, 1_000_000])?;
    /// assert_eq!(extreme.slots_per_fragment()[0], 1);
    /// assert!(Slots::with_weights(&[1, 0]).is_err());
    /// # Ok::<(), fraghash::SchemeError>(())
    /// ```
    pub fn with_weights(weights: &[u32]) -> Result<Slots, SchemeError> {
        let (bits, targets) = Self::new_targets(weights)?;
        let mut table = Vec::with_capacity(1 << bits);
        for (id, &t) in targets.iter().enumerate() {
            table.extend(std::iter::repeat_n(id as u32, t as usize));
        }
        Ok(Slots {
            bits,
            table,
            weights: weights.to_vec(),
        })
    }

    /// The runs of the table [`Slots::with_weights`] builds, without
    /// building it: its slot bits `k`, and each run of consecutive slots as
    /// `(first slot, fragment)`, in slot order. A new table gives each
    /// fragment one run, in fragment order. O(fragments), where building
    /// the table is O(2^k): a caller that needs only where owners change
    /// (a lookup layout of a new table) need not fill a million slots.
    ///
    /// ```
    /// use fraghash::scheme::slots::Slots;
    /// let (bits, runs) = Slots::new_runs(&[1, 1, 2]).unwrap();
    /// let t = Slots::with_weights(&[1, 1, 2]).unwrap();
    /// assert_eq!(bits, t.slot_bits());
    /// assert_eq!(runs.len(), 3);
    /// assert_eq!(runs[0], (0, 0));
    /// assert_eq!(t.table()[runs[2].0 as usize], 2);
    /// assert_eq!(t.table()[runs[2].0 as usize - 1], 1);
    /// ```
    pub fn new_runs(weights: &[u32]) -> Result<(u32, Vec<(u64, u32)>), SchemeError> {
        let (bits, targets) = Self::new_targets(weights)?;
        let mut runs = Vec::with_capacity(targets.len());
        let mut start = 0u64;
        for (id, &t) in targets.iter().enumerate() {
            if t > 0 {
                runs.push((start, id as u32));
                start += t;
            }
        }
        Ok((bits, runs))
    }

    /// The slot bits of a new table and each fragment's slot count.
    fn new_targets(weights: &[u32]) -> Result<(u32, Vec<u64>), SchemeError> {
        let n = u32::try_from(weights.len()).unwrap_or(u32::MAX);
        Self::check_count(n)?;
        check_weights(weights)?;
        let bits = Self::wanted_bits(n);
        Ok((bits, targets(weights, 1u64 << bits)))
    }

    fn check_count(n: u32) -> Result<(), SchemeError> {
        check_fragment_count("slots", n, Self::MAX_FRAGMENTS)
    }

    /// The slot bits `k` a table of `n` fragments wants (see the module docs).
    pub fn wanted_bits(n: u32) -> u32 {
        let ceil_log2 = |x: u64| 64 - (x.max(1) - 1).leading_zeros();
        let dense = ceil_log2(u64::from(n) * 512);
        let bits = if dense <= Self::DENSE_BITS {
            dense
        } else {
            ceil_log2(u64::from(n) * 64).max(Self::DENSE_BITS)
        };
        bits.clamp(Self::MIN_BITS, Self::MAX_BITS)
    }

    /// Slot bits `k`.
    pub fn slot_bits(&self) -> u32 {
        self.bits
    }

    /// Number of slots `S = 2^k`.
    pub fn slot_count(&self) -> usize {
        self.table.len()
    }

    /// The slot of a key hash.
    #[inline]
    pub fn slot_of(&self, h: u64) -> usize {
        (h >> (64 - self.bits)) as usize
    }

    /// The hash range of a slot.
    pub fn slot_range(&self, slot: usize) -> HashRange {
        let shift = 64 - self.bits;
        let start = (slot as u64) << shift;
        HashRange::new(start, start | ((1u64 << shift) - 1))
    }

    /// The slot table: owner of each slot.
    pub fn table(&self) -> &[u32] {
        &self.table
    }

    /// Weight of each fragment.
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }

    /// Bytes of memory the table and weights take.
    pub fn memory_bytes(&self) -> usize {
        self.table.len() * 4 + self.weights.len() * 4
    }

    /// Slots owned by each fragment.
    pub fn slots_per_fragment(&self) -> Vec<u64> {
        let mut c = vec![0u64; self.weights.len()];
        self.for_each_run(|_, len, o| c[o as usize] += len as u64);
        c
    }

    /// Calls `f(start, len, owner)` for each run of consecutive slots with
    /// one owner, in slot order. Every walk over the table goes through
    /// here: slots come in long runs, and finding a run's end is a tight
    /// compare loop, where per-slot bookkeeping (a counter or a vector's
    /// last element updated at every slot) chains each slot to the previous
    /// one and ran several times slower.
    fn for_each_run(&self, mut f: impl FnMut(usize, usize, u32)) {
        let t = &self.table[..];
        let mut s = 0;
        while s < t.len() {
            let o = t[s];
            let len = run_len(&t[s..], o);
            f(s, len, o);
            s += len;
        }
    }

    /// Each fragment's target number of slots, from the weights.
    pub fn target_slots(&self) -> Vec<u64> {
        targets(&self.weights, self.table.len() as u64)
    }

    /// Doubles the table until `n` fragments have enough slots each.
    /// Every slot splits in two with the same owner: nothing moves.
    fn grow_for(&mut self, n: u32) {
        let want = Self::wanted_bits(n);
        if want > self.bits {
            self.grow_to(want);
        }
    }

    fn ownership(&self) -> Ownership {
        let shift = 64 - self.bits;
        let mut out: Ownership = Vec::new();
        self.for_each_run(|s, _, o| out.push(((s as u64) << shift, o)));
        out
    }

    /// The table as `(owner, length)` runs, in slot order.
    fn table_runs(&self) -> Vec<(u32, u32)> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        self.for_each_run(|_, len, o| runs.push((o, len as u32)));
        runs
    }

    /// Runs of consecutive slots per fragment: `(start, len)`.
    fn runs(&self) -> Vec<Vec<(usize, usize)>> {
        let mut runs = vec![Vec::new(); self.weights.len()];
        self.for_each_run(|s, len, o| runs[o as usize].push((s, len)));
        runs
    }

    /// Adds a fragment of weight `weight` and returns what moves into it.
    pub fn add_weighted(&mut self, weight: u32) -> Result<MigrationPlan, SchemeError> {
        self.add_limited(weight, u32::MAX)
    }

    /// Adds a fragment of weight `weight` that takes its share of slots from
    /// at most `max_donors` fragments: those most above their target (ties
    /// to the lower id).
    ///
    /// This is the trade-off for stores that cannot read a hash range and
    /// must scan every donor in full (Mnesia): fewer donors, fewer fragments
    /// scanned, but the donors end up below their share until later adds
    /// take from the others. `max_donors = 1` behaves like splitting the
    /// most loaded fragment; `u32::MAX` is [`Slots::add_weighted`].
    ///
    /// The plan never has more than `max_donors` sources. Every donor keeps
    /// at least one slot, so when the donors allowed cannot give the whole
    /// share (a heavy new fragment, or one donor for a share the size of a
    /// fragment's), the new fragment takes what they can give and stays
    /// below its target until a [`Slots::set_weight`] or
    /// [`Slots::rebalance`] evens it out. `max_donors = 0` is refused.
    ///
    /// ```
    /// use fraghash::scheme::slots::Slots;
    /// use fraghash::FragmentScheme;
    ///
    /// let mut s = Slots::new(20)?;
    /// let plan = s.add_limited(1, 2)?;
    /// assert!(plan.sources().len() <= 2);
    /// assert_eq!(s.slots_per_fragment()[20], s.target_slots()[20]);
    /// # Ok::<(), fraghash::SchemeError>(())
    /// ```
    pub fn add_limited(
        &mut self,
        weight: u32,
        max_donors: u32,
    ) -> Result<MigrationPlan, SchemeError> {
        check_weights(&[weight])?;
        if max_donors == 0 {
            return Err(SchemeError::InvalidArgument(
                "max_donors must be at least 1".into(),
            ));
        }
        let before = self.fragments();
        Self::check_count(before + 1)?;
        let old = self.ownership();
        self.grow_for(before + 1);
        self.weights.push(weight);
        let targets = self.target_slots();
        let counts = self.slots_per_fragment();
        let surplus: Vec<i64> = (0..before as usize)
            .map(|i| counts[i] as i64 - targets[i] as i64)
            .collect();
        // A donor keeps at least one slot, so no fragment is left empty;
        // fragments outside the `max_donors` chosen give nothing.
        let mut caps: Vec<u64> = counts[..before as usize]
            .iter()
            .map(|c| c.saturating_sub(1))
            .collect();
        if (max_donors as usize) < surplus.len() {
            let mut order: Vec<usize> = (0..surplus.len()).collect();
            order.sort_by(|&a, &b| surplus[b].cmp(&surplus[a]).then(a.cmp(&b)));
            for &i in &order[max_donors as usize..] {
                caps[i] = 0;
            }
        }
        let gives = greedy_take(&surplus, &caps, targets[before as usize]);
        let runs = self.runs();
        for (donor, &g) in gives.iter().enumerate() {
            for (start, len) in take_from_runs(&runs[donor], g) {
                self.table[start..start + len].fill(before);
            }
        }
        Ok(add_plan(
            before,
            diff_ownership(&old, &self.ownership(), |x| x),
        ))
    }

    /// Splits `fragment`: a new fragment (same weight) takes the second half
    /// of its slots, in slot order, and nothing else moves.
    pub fn split(&mut self, fragment: u32) -> Result<MigrationPlan, SchemeError> {
        let before = self.fragments();
        if fragment >= before {
            return Err(SchemeError::NoSuchFragment {
                fragment,
                fragments: before,
            });
        }
        Self::check_count(before + 1)?;
        // Refuse before changing anything: a split needs two slots, after
        // at most one extra doubling.
        let grown_bits = Self::wanted_bits(before + 1).max(self.bits);
        let owned =
            self.table.iter().filter(|&&o| o == fragment).count() << (grown_bits - self.bits);
        if owned == 0 || (owned == 1 && grown_bits == Self::MAX_BITS) {
            return Err(SchemeError::InvalidArgument(format!(
                "fragment {fragment} owns {owned} slot(s) and cannot be split"
            )));
        }
        let old = self.ownership();
        self.grow_for(before + 1);
        if self.slots_per_fragment()[fragment as usize] < 2 {
            self.grow_to(self.bits + 1);
        }
        let mine: Vec<usize> = (0..self.table.len())
            .filter(|&s| self.table[s] == fragment)
            .collect();
        for &s in &mine[mine.len() - mine.len() / 2..] {
            self.table[s] = before;
        }
        self.weights.push(self.weights[fragment as usize]);
        Ok(MigrationPlan {
            kind: PlanKind::Split {
                source: fragment,
                fragment: before,
            },
            fragments_before: before,
            fragments_after: before + 1,
            moves: diff_ownership(&old, &self.ownership(), |x| x),
            renumber: None,
        })
    }

    fn grow_to(&mut self, bits: u32) {
        let factor = 1usize << (bits - self.bits);
        let mut t = Vec::with_capacity(1 << bits);
        for &o in &self.table {
            t.extend(std::iter::repeat_n(o, factor));
        }
        self.table = t;
        self.bits = bits;
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Slots, StateError> {
        let s: SlotsState = state::decode_body(body)?;
        let invalid = |m: String| Err(StateError::Invalid(m));
        if !(Self::MIN_BITS..=Self::MAX_BITS).contains(&s.bits) {
            return invalid(format!(
                "slot bits {} outside {}..={}",
                s.bits,
                Self::MIN_BITS,
                Self::MAX_BITS
            ));
        }
        let total: u64 = s.runs.iter().map(|r| u64::from(r.1)).sum();
        if total != 1u64 << s.bits || s.runs.iter().any(|r| r.1 == 0) {
            return invalid(format!(
                "runs cover {total} slots, expected {}",
                1u64 << s.bits
            ));
        }
        let n = s.weights.len();
        if n == 0 || n > Self::MAX_FRAGMENTS as usize {
            return invalid(format!(
                "{n} fragments is outside 1..={}",
                Self::MAX_FRAGMENTS
            ));
        }
        if s.weights.contains(&0) {
            return invalid("a fragment has weight 0".into());
        }
        if let Some(bad) = s.runs.iter().find(|r| r.0 as usize >= n) {
            return invalid(format!("a slot names fragment {} of {n}", bad.0));
        }
        let mut table = Vec::with_capacity(1 << s.bits);
        for &(owner, len) in &s.runs {
            table.extend(std::iter::repeat_n(owner, len as usize));
        }
        Ok(Slots {
            bits: s.bits,
            table,
            weights: s.weights,
        })
    }
}

impl FragmentScheme for Slots {
    fn spec(&self) -> String {
        "slots".into()
    }

    fn fragments(&self) -> u32 {
        self.weights.len() as u32
    }

    #[inline]
    fn locate(&self, h: u64) -> u32 {
        self.table[self.slot_of(h)]
    }

    fn add_fragment(&mut self) -> Result<MigrationPlan, SchemeError> {
        self.add_weighted(1)
    }

    fn remove_fragment(&mut self, which: u32) -> Result<MigrationPlan, SchemeError> {
        let before = self.fragments();
        check_removable(which, before)?;
        let old = self.ownership();
        // Targets of the survivors, in old numbering, with `which` at zero.
        let mut w = self.weights.clone();
        w[which as usize] = 0;
        let targets = targets(&w, self.table.len() as u64);
        let counts = self.slots_per_fragment();
        let deficit: Vec<i64> = (0..before as usize)
            .map(|i| {
                if i == which as usize {
                    i64::MIN / 2
                } else {
                    targets[i] as i64 - counts[i] as i64
                }
            })
            .collect();
        let gets = greedy_take(
            &deficit,
            &vec![u64::MAX; deficit.len()],
            counts[which as usize],
        );
        let mine: Vec<usize> = (0..self.table.len())
            .filter(|&s| self.table[s] == which)
            .collect();
        let mut next = mine.into_iter();
        for (receiver, &g) in gets.iter().enumerate() {
            for s in next.by_ref().take(g as usize) {
                self.table[s] = receiver as u32;
            }
        }
        // The moves are taken in the old numbering, before the last
        // fragment takes the removed id.
        let moves = diff_ownership(&old, &self.ownership(), |x| x);
        if let Some(r) = removal_renumber(which, before) {
            for o in self.table.iter_mut().filter(|o| **o == r.from) {
                *o = r.to;
            }
        }
        self.weights.swap_remove(which as usize);
        Ok(removal_plan(which, before, moves))
    }

    fn to_state_bytes(&self) -> Vec<u8> {
        state::encode(
            tag::SLOTS,
            &SlotsState {
                bits: self.bits,
                runs: self.table_runs(),
                weights: self.weights.clone(),
            },
        )
    }
}

fn check_weights(weights: &[u32]) -> Result<(), SchemeError> {
    if weights.contains(&0) {
        return Err(SchemeError::InvalidArgument(
            "fragment weights must be at least 1".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
