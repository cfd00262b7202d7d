//! A compact lookup index for `slots`: the slot table as sorted runs.
//!
//! The core's slot table has one `u32` per slot: 4 MiB at 4,000 fragments,
//! so a lookup for a random key is a cache miss. Slots are owned in long
//! contiguous runs (a fresh table has one run per fragment, each `add_frag`
//! adds about one run per donor), so the same mapping fits in a few
//! kilobytes as the start slot and owner of each run. A lookup reads one
//! entry of a bucket array over the top bits of the slot number (at least
//! twice as many buckets as runs): most buckets lie inside one run and hold
//! its owner; the others hold the first run they touch, and the lookup steps
//! forward from there (about one step). A binary search over the runs took
//! a chain of dependent loads instead, most of the NIF's own time per call.
//! The index is derived from the core's table when a state is built and
//! answers exactly as [`fraghash::FragmentScheme::locate`] (tested slot by slot); it
//! is used only when it is at least 8 times smaller than the table.

use fraghash::scheme::slots::Slots;

/// Runs of a slot table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIndex {
    shift: u32,
    starts: Vec<u32>,
    owners: Vec<u32>,
    /// Shift from a slot number to its bucket.
    bucket_shift: u32,
    /// Per bucket: `PURE | owner` when the whole bucket is one run, else
    /// the index of the run holding the bucket's first slot.
    buckets: Vec<u32>,
}

/// Marks a bucket entry that is an owner, not a run index.
const PURE: u32 = 1 << 31;

impl RunIndex {
    /// The index of a slot table, or `None` when it would not be at least
    /// 8 times smaller than the table.
    pub fn build(slots: &Slots) -> Option<RunIndex> {
        let table = slots.table();
        let mut starts = Vec::new();
        let mut owners = Vec::new();
        for (s, &o) in table.iter().enumerate() {
            if owners.last() != Some(&o) {
                if (starts.len() + 1) * 8 > table.len() / 2 {
                    return None;
                }
                starts.push(s as u32);
                owners.push(o);
            }
        }
        let slot_bits = slots.slot_bits();
        // At least twice as many buckets as runs, at most one per slot.
        let bucket_bits = (usize::BITS - (2 * starts.len()).leading_zeros()).min(slot_bits);
        let bucket_shift = slot_bits - bucket_bits;
        let mut buckets = Vec::with_capacity(1 << bucket_bits);
        let mut run = 0usize;
        for b in 0..(1u32 << bucket_bits) {
            let first = b << bucket_shift;
            let last = first + ((1u32 << bucket_shift) - 1);
            while run + 1 < starts.len() && starts[run + 1] <= first {
                run += 1;
            }
            let pure = run + 1 == starts.len() || starts[run + 1] > last;
            buckets.push(if pure { PURE | owners[run] } else { run as u32 });
        }
        Some(RunIndex {
            shift: 64 - slot_bits,
            starts,
            owners,
            bucket_shift,
            buckets,
        })
    }

    /// The fragment of a key hash, as the slot table says.
    #[inline]
    pub fn locate(&self, h: u64) -> u32 {
        let slot = (h >> self.shift) as u32;
        let e = self.buckets[(slot >> self.bucket_shift) as usize];
        if e & PURE != 0 {
            return e & !PURE;
        }
        // The bucket's first slot is in run `e`; the slot is in that run or
        // a later one that starts inside the bucket.
        let mut i = e as usize;
        while i + 1 < self.starts.len() && self.starts[i + 1] <= slot {
            i += 1;
        }
        self.owners[i]
    }

    /// Number of runs.
    pub fn runs(&self) -> usize {
        self.starts.len()
    }

    /// Bytes of memory the index takes.
    pub fn memory_bytes(&self) -> usize {
        8 * self.starts.len() + 4 * self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fraghash::{AnyScheme, FragmentScheme};

    fn check(s: &AnyScheme) {
        let sl = s.as_slots().unwrap();
        let Some(ix) = RunIndex::build(sl) else {
            return;
        };
        for slot in 0..sl.slot_count() {
            let r = sl.slot_range(slot);
            for h in [r.start, r.end, r.start / 2 + r.end / 2, r.start | 0xffff] {
                assert_eq!(ix.locate(h), s.locate(h), "slot {slot}");
            }
        }
    }

    #[test]
    fn index_answers_as_the_table() {
        let mut s = AnyScheme::new("slots", 8).unwrap();
        check(&s);
        for i in 0..120u32 {
            s.add_limited(1 + i % 3, 1 + i % 9).unwrap();
            check(&s);
            if i % 7 == 0 {
                let n = s.fragments();
                s.remove_fragment(i % n).unwrap();
                check(&s);
            }
        }
        let big = AnyScheme::new("slots", 4000).unwrap();
        let ix = RunIndex::build(big.as_slots().unwrap()).unwrap();
        assert_eq!(ix.runs(), 4000);
        check(&big);
    }
}
