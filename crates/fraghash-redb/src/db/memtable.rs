//! Changes not yet committed to redb: the memtable.
//!
//! A [`Durability::Logged`](super::Durability) batch is appended to the log
//! and applied here, not to redb: its cost is one write to the log and a
//! few map inserts. A flush ([`Db::flush`](super::Db::flush)) later commits
//! a whole layer of such changes to redb in one synced transaction, in the
//! background, while new batches go on into a fresh layer.
//!
//! A [`Layer`] maps each table to its changed keys: a value, or a
//! tombstone for a deleted key. Reads see, in this order, the active layer
//! (the newest changes), the frozen layer (being flushed, or left by a
//! flush that failed) and redb's state from before the frozen layer's
//! commit. [`merge`] walks a range of keys through all three.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

/// Which way a [`Db::chunk`](super::Db::chunk) (and a merge of layers)
/// goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Backward,
}

/// What a key holds in a layer: a value, or `None` (deleted).
pub(super) type Change = Option<Vec<u8>>;

/// The bytes a change counts for besides its key and value: the map's
/// own overhead, so that a layer of many small changes is flushed too.
const ENTRY_OVERHEAD: usize = 64;

/// The changes of one table in a [`Layer`].
#[derive(Debug, Default)]
pub(super) struct TableChanges {
    pub(super) entries: BTreeMap<Vec<u8>, Change>,
    /// Records this layer adds to the table (negative: removes), against
    /// the state below it.
    pub(super) delta: i64,
}

/// One layer of changes, by table.
#[derive(Debug, Default)]
pub(super) struct Layer {
    pub(super) tables: HashMap<String, TableChanges>,
    bytes: usize,
}

impl Layer {
    /// Whether the layer holds no change.
    pub(super) fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// About the memory the layer takes, in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// What `key` holds in table `table` here: `None` when this layer
    /// does not change it.
    pub(super) fn get(&self, table: &str, key: &[u8]) -> Option<&Change> {
        self.tables.get(table)?.entries.get(key)
    }

    /// Records this layer adds to table `table` against the state below.
    pub(super) fn delta(&self, table: &str) -> i64 {
        self.tables.get(table).map_or(0, |t| t.delta)
    }

    /// Sets `key` of `table` to `change`; `existed` says whether the key
    /// held a record just before (in this layer or below).
    pub(super) fn set(&mut self, table: &str, key: &[u8], change: Change, existed: bool) {
        let t = match self.tables.get_mut(table) {
            Some(t) => t,
            None => self.tables.entry(table.to_owned()).or_default(),
        };
        t.delta += i64::from(change.is_some()) - i64::from(existed);
        let size = |c: &Change| c.as_ref().map_or(0, Vec::len);
        let added = size(&change);
        match t.entries.get_mut(key) {
            Some(old) => {
                self.bytes = self.bytes + added - size(old);
                *old = change;
            }
            None => {
                self.bytes += ENTRY_OVERHEAD + key.len() + added;
                t.entries.insert(key.to_vec(), change);
            }
        }
    }

    /// This layer's changes to table `table` in `range`, in `direction`.
    pub(super) fn range<'a>(
        &'a self,
        table: &str,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        direction: Direction,
    ) -> Stream<'a> {
        let Some(t) = self.tables.get(table) else {
            return Box::new(std::iter::empty());
        };
        let it = t
            .entries
            .range::<[u8], _>(range)
            .map(|(k, v)| (k.clone(), v.clone()));
        match direction {
            Direction::Forward => Box::new(it),
            Direction::Backward => Box::new(it.rev()),
        }
    }
}

/// A sorted stream of `(key, change)`, as [`merge`] takes them.
pub(super) type Stream<'a> = Box<dyn Iterator<Item = (Vec<u8>, Change)> + 'a>;

/// Merges sorted streams of `(key, change)` by key in `direction`, the
/// earlier stream of `streams` winning for a key that several hold, and
/// drops the keys whose winning change is a tombstone. Each stream must be
/// sorted in `direction` with no key twice.
pub(super) fn merge(streams: Vec<Stream<'_>>, direction: Direction) -> Merged<'_> {
    let mut streams = streams;
    let heads = streams.iter_mut().map(Iterator::next).collect();
    Merged {
        streams,
        heads,
        direction,
    }
}

/// The iterator of [`merge`].
pub(super) struct Merged<'a> {
    streams: Vec<Stream<'a>>,
    /// The next item of each stream (`None`: the stream has ended).
    heads: Vec<Option<(Vec<u8>, Change)>>,
    direction: Direction,
}

impl Iterator for Merged<'_> {
    type Item = (Vec<u8>, Vec<u8>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            // The stream whose head comes first (the earliest on a tie).
            let mut best: Option<(usize, &[u8])> = None;
            for (i, head) in self.heads.iter().enumerate() {
                let Some((k, _)) = head else { continue };
                let first = best.is_none_or(|(_, b)| match self.direction {
                    Direction::Forward => k.as_slice() < b,
                    Direction::Backward => k.as_slice() > b,
                });
                if first {
                    best = Some((i, k));
                }
            }
            let i = best?.0;
            let (key, change) = self.heads[i].take()?;
            self.heads[i] = self.streams[i].next();
            // The later streams' changes to the same key are older.
            for j in i + 1..self.heads.len() {
                if self.heads[j].as_ref().is_some_and(|(k, _)| *k == key) {
                    self.heads[j] = self.streams[j].next();
                }
            }
            if let Some(value) = change {
                return Some((key, value));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(items: &[(&[u8], Option<&[u8]>)]) -> Vec<(Vec<u8>, Change)> {
        items
            .iter()
            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect()
    }

    fn boxed(s: Vec<(Vec<u8>, Change)>) -> Stream<'static> {
        Box::new(s.into_iter())
    }

    #[test]
    fn the_newest_change_wins_and_tombstones_hide_older_values() {
        let active = stream(&[(b"a", Some(b"1")), (b"c", None)]);
        let frozen = stream(&[(b"a", Some(b"0")), (b"b", None), (b"d", Some(b"4"))]);
        let base = stream(&[(b"b", Some(b"2")), (b"c", Some(b"3")), (b"e", Some(b"5"))]);
        let got: Vec<_> = merge(
            vec![
                boxed(active.clone()),
                boxed(frozen.clone()),
                boxed(base.clone()),
            ],
            Direction::Forward,
        )
        .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = [("a", "1"), ("d", "4"), ("e", "5")]
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(got, want);
        let rev = |s: Vec<(Vec<u8>, Change)>| boxed(s.into_iter().rev().collect());
        let back: Vec<_> = merge(
            vec![rev(active), rev(frozen), rev(base)],
            Direction::Backward,
        )
        .collect();
        assert_eq!(back, want.into_iter().rev().collect::<Vec<_>>());
    }

    #[test]
    fn a_layer_counts_records_and_bytes() {
        let mut l = Layer::default();
        l.set("t", b"k", Some(b"vv".to_vec()), false);
        l.set("t", b"k", Some(b"v".to_vec()), true);
        l.set("t", b"j", None, true);
        assert_eq!(l.delta("t"), 0);
        assert_eq!(l.bytes(), 2 * ENTRY_OVERHEAD + 2 + 1);
        assert_eq!(l.get("t", b"j"), Some(&None));
        assert_eq!(l.get("t", b"x"), None);
        assert!(!l.is_empty());
    }
}
