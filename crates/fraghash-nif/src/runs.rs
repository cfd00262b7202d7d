//! A compact lookup index for `slots`: the slot table as sorted runs.
//!
//! The core's slot table has one `u32` per slot: 4 MiB at 4,000 fragments,
//! so a lookup for a random key is a cache miss. Slots are owned in long
//! contiguous runs (a fresh table has one run per fragment, each `add_frag`
//! adds about one run per donor), so the same mapping fits in a few
//! kilobytes as the start slot and owner of each run, searched by binary
//! search in cache. The index is derived from the core's table when a state
//! is decoded and answers exactly as [`FragmentScheme::locate`] (tested
//! slot by slot); it is used only when it is at least 8 times smaller.

use fraghash::scheme::slots::Slots;

/// Runs of a slot table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIndex {
    shift: u32,
    starts: Vec<u32>,
    owners: Vec<u32>,
}

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
        Some(RunIndex {
            shift: 64 - slots.slot_bits(),
            starts,
            owners,
        })
    }

    /// The fragment of a key hash, as the slot table says.
    #[inline]
    pub fn locate(&self, h: u64) -> u32 {
        let slot = (h >> self.shift) as u32;
        // starts[0] == 0 <= slot, so the partition point is at least 1.
        let i = self.starts.partition_point(|&s| s <= slot);
        self.owners[i - 1]
    }

    /// Number of runs.
    pub fn runs(&self) -> usize {
        self.starts.len()
    }

    /// Bytes of memory the index takes.
    pub fn memory_bytes(&self) -> usize {
        8 * self.starts.len()
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
            for h in [r.start, r.end, r.start / 2 + r.end / 2] {
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
