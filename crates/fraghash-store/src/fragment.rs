//! One fragment: one redb file.
//!
//! Tables inside the file:
//! - `records`: key = 8-byte big-endian key hash `h` followed by the key,
//!   value = the value. Records are therefore sorted by `(h, key)` and a hash
//!   range is one contiguous range scan.
//! - `buckets`: per 1/65,536 of the hash space (`h >> 48`), the record count
//!   and bytes (key + value) this fragment holds there, updated in the same
//!   transaction as the records. Gives per-fragment statistics at open and
//!   per-slot sizes for `rebalance`.
//! - `meta`: the file's identity (table id, file number, format version).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use fraghash::HashRange;
use redb::{
    Builder, ReadOnlyTable, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction,
};

use crate::error::{Ctx, Error, IoCtx, Result};
use crate::guard::{guarded, QuietClose};
use crate::manifest::{sync_dir, FORMAT_VERSION};

pub(crate) const RECORDS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("records");
const BUCKETS: TableDefinition<u32, (u64, u64)> = TableDefinition::new("buckets");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// Bits of the hash that name a statistics bucket.
pub(crate) const BUCKET_BITS: u32 = 16;

/// The bucket of a key hash.
#[inline]
pub(crate) fn bucket_of(h: u64) -> u32 {
    (h >> (64 - BUCKET_BITS)) as u32
}

/// The stored key of `(h, key)`.
pub(crate) fn record_key(h: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + key.len());
    k.extend_from_slice(&h.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The hash of a stored key (`None` if it is shorter than 8 bytes).
#[inline]
pub(crate) fn hash_of(rkey: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(rkey.get(..8)?.try_into().ok()?))
}

/// One write of a batch: a put (`value: Some`) or a delete.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteOp<'a> {
    pub h: u64,
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

/// A record read for a move.
#[derive(Debug)]
pub(crate) struct Record {
    pub rkey: Vec<u8>,
    pub value: Vec<u8>,
}

/// What one batch read for a move found.
pub(crate) struct MoveBatch {
    /// Records that move, with their destination.
    pub records: Vec<(u32, Record)>,
    /// Records read.
    pub examined: u64,
    /// Where the next batch starts; `None` when the move is complete.
    pub next: Option<u64>,
}

/// What a verification of one fragment found.
#[derive(Debug, Default)]
pub(crate) struct FragmentCheck {
    pub records: u64,
    pub problems: Vec<String>,
}

#[derive(Default)]
struct Deltas(BTreeMap<u32, (i64, i64)>);

impl Deltas {
    fn add(&mut self, h: u64, count: i64, bytes: i64) {
        let e = self.0.entry(bucket_of(h)).or_default();
        e.0 += count;
        e.1 += bytes;
    }

    /// Applies the deltas to the bucket table; returns the total deltas.
    fn apply(&self, txn: &WriteTransaction, path: &Path) -> Result<(i64, i64)> {
        let mut t = txn.open_table(BUCKETS).at(path)?;
        let (mut dc, mut db) = (0, 0);
        for (&b, &(c, by)) in &self.0 {
            if c == 0 && by == 0 {
                continue;
            }
            dc += c;
            db += by;
            let (oc, ob) = t.get(b).at(path)?.map_or((0, 0), |g| g.value());
            let nc = (oc as i64 + c).max(0) as u64;
            let nb = (ob as i64 + by).max(0) as u64;
            if nc == 0 {
                t.remove(b).at(path)?;
            } else {
                t.insert(b, (nc, nb)).at(path)?;
            }
        }
        Ok((dc, db))
    }
}

/// The records table of a write transaction, and the statistics deltas of
/// what was written through it.
struct RecordWrites<'t> {
    table: redb::Table<'t, &'static [u8], &'static [u8]>,
    deltas: Deltas,
    path: &'t Path,
}

impl RecordWrites<'_> {
    /// Puts (`value: Some`) or deletes the record stored under `rkey` (whose
    /// hash is `h`), counting the change for the bucket statistics; returns
    /// whether a record was there before.
    fn write(&mut self, rkey: &[u8], h: u64, value: Option<&[u8]>) -> Result<bool> {
        let p = self.path;
        let old = match value {
            Some(v) => self.table.insert(rkey, v).at(p)?.map(|g| g.value().len()),
            None => self.table.remove(rkey).at(p)?.map(|g| g.value().len()),
        };
        // Statistics count the user's key, not the 8-byte hash prefix.
        let klen = rkey.len() - 8;
        if let Some(n) = old {
            self.deltas.add(h, -1, -((klen + n) as i64));
        }
        if let Some(v) = value {
            self.deltas.add(h, 1, (klen + v.len()) as i64);
        }
        Ok(old.is_some())
    }
}

/// An open fragment file.
pub(crate) struct Fragment {
    /// The file.
    pub path: PathBuf,
    /// Its number in the manifest.
    pub file_no: u64,
    db: QuietClose,
    records: AtomicU64,
    bytes: AtomicU64,
}

impl std::fmt::Debug for Fragment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fragment")
            .field("path", &self.path)
            .field("file_no", &self.file_no)
            .finish()
    }
}

fn identity(table_id: u64, file_no: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(20);
    v.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    v.extend_from_slice(&table_id.to_le_bytes());
    v.extend_from_slice(&file_no.to_le_bytes());
    v
}

impl Fragment {
    /// Creates a new, empty fragment file (it must not exist).
    pub fn create(path: &Path, table_id: u64, file_no: u64) -> Result<Fragment> {
        guarded(path, || Self::create_unguarded(path, table_id, file_no))
    }

    fn create_unguarded(path: &Path, table_id: u64, file_no: u64) -> Result<Fragment> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .io_at(path)?;
        let backend = redb::backends::FileBackend::new(file).at(path)?;
        let db = Builder::new().create_with_backend(backend).at(path)?;
        let txn = db.begin_write().at(path)?;
        {
            txn.open_table(RECORDS).at(path)?;
            txn.open_table(BUCKETS).at(path)?;
            let mut meta = txn.open_table(META).at(path)?;
            meta.insert("identity", identity(table_id, file_no).as_slice())
                .at(path)?;
        }
        txn.commit().at(path)?;
        if let Some(parent) = path.parent() {
            sync_dir(parent)?;
        }
        Ok(Fragment {
            path: path.to_path_buf(),
            file_no,
            db: QuietClose::new(db),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        })
    }

    /// Opens fragment `fragment`'s file, checking that it belongs here.
    pub fn open(path: &Path, table_id: u64, file_no: u64, fragment: u32) -> Result<Fragment> {
        guarded(path, || {
            Self::open_unguarded(path, table_id, file_no, fragment)
        })
    }

    fn open_unguarded(path: &Path, table_id: u64, file_no: u64, fragment: u32) -> Result<Fragment> {
        let foreign = |reason: String| Error::ForeignFragment {
            fragment,
            path: path.to_path_buf(),
            reason,
        };
        if !path.exists() {
            return Err(Error::MissingFragment {
                fragment,
                path: path.to_path_buf(),
            });
        }
        let db = match Builder::new().open(path) {
            Ok(db) => db,
            Err(redb::DatabaseError::Storage(redb::StorageError::Corrupted(m))) => {
                return Err(foreign(format!("not a readable redb file ({m})")))
            }
            Err(redb::DatabaseError::Storage(redb::StorageError::Io(e)))
                if e.kind() == std::io::ErrorKind::InvalidData =>
            {
                return Err(foreign(format!("not a redb file ({e})")))
            }
            Err(e) => return Err(Error::storage(path, e)),
        };
        let txn = db.begin_read().at(path)?;
        let meta = txn
            .open_table(META)
            .map_err(|e| foreign(format!("no identity table ({e})")))?;
        let id = meta.get("identity").at(path)?.map(|g| g.value().to_vec());
        match id {
            Some(v) if v == identity(table_id, file_no) => {}
            Some(_) => return Err(foreign("its identity names another table or file".into())),
            None => return Err(foreign("it has no identity".into())),
        }
        let (mut records, mut bytes) = (0, 0);
        let buckets = txn.open_table(BUCKETS).at(path)?;
        for item in buckets.iter().at(path)? {
            let (_, v) = item.at(path)?;
            let (c, b) = v.value();
            records += c;
            bytes += b;
        }
        drop(buckets);
        drop(meta);
        drop(txn);
        Ok(Fragment {
            path: path.to_path_buf(),
            file_no,
            db: QuietClose::new(db),
            records: AtomicU64::new(records),
            bytes: AtomicU64::new(bytes),
        })
    }

    /// Records held.
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Bytes of keys and values held.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn account(&self, (dc, db): (i64, i64)) {
        add_signed(&self.records, dc);
        add_signed(&self.bytes, db);
    }

    /// The value of `key` (hash `h`).
    pub fn get(&self, h: u64, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let p = &self.path;
        guarded(p, || {
            let txn = self.db.begin_read().at(p)?;
            let t = txn.open_table(RECORDS).at(p)?;
            // Short keys (the common case) are built on the stack.
            let mut buf = [0u8; 128];
            let heap;
            let k: &[u8] = if key.len() <= 120 {
                buf[..8].copy_from_slice(&h.to_be_bytes());
                buf[8..8 + key.len()].copy_from_slice(key);
                &buf[..8 + key.len()]
            } else {
                heap = record_key(h, key);
                &heap
            };
            Ok(t.get(k).at(p)?.map(|g| g.value().to_vec()))
        })
    }

    /// Runs `f` on the records table in one write transaction, then writes
    /// the bucket statistics of what it wrote in the same transaction,
    /// commits, and updates the in-memory counts. If `f` fails nothing is
    /// committed.
    fn write_records<T>(&self, f: impl FnOnce(&mut RecordWrites<'_>) -> Result<T>) -> Result<T> {
        let p = &self.path;
        guarded(p, || {
            let txn = self.db.begin_write().at(p)?;
            let (out, deltas) = {
                let mut w = RecordWrites {
                    table: txn.open_table(RECORDS).at(p)?,
                    deltas: Deltas::default(),
                    path: p,
                };
                let out = f(&mut w)?;
                (out, w.deltas)
            };
            let totals = deltas.apply(&txn, p)?;
            txn.commit().at(p)?;
            self.account(totals);
            Ok(out)
        })
    }

    /// Applies writes in one transaction; returns, per op, whether the key
    /// was present before.
    pub fn apply(&self, ops: &[WriteOp<'_>]) -> Result<Vec<bool>> {
        self.write_records(|w| {
            ops.iter()
                .map(|op| w.write(&record_key(op.h, op.key), op.h, op.value))
                .collect()
        })
    }

    /// Reads the next batch of a move: records of `ranges` from hash `from`
    /// on, `dest(h)` naming where each goes (`None`: it stays). Stops after
    /// `limit` moving records (or `8 × limit` examined), always at a hash
    /// boundary so that keys with equal hashes travel together.
    pub fn read_move_batch(
        &self,
        ranges: &[HashRange],
        from: u64,
        limit: usize,
        dest: impl Fn(u64) -> Option<u32>,
    ) -> Result<MoveBatch> {
        let p = &self.path;
        guarded(p, || {
            let txn = self.db.begin_read().at(p)?;
            let t = txn.open_table(RECORDS).at(p)?;
            let mut out = MoveBatch {
                records: Vec::new(),
                examined: 0,
                next: None,
            };
            let mut boundary: Option<u64> = None;
            'ranges: for r in ranges.iter().filter(|r| r.end >= from) {
                let start = r.start.max(from).to_be_bytes();
                for item in t.range::<&[u8]>(&start[..]..).at(p)? {
                    let (k, v) = item.at(p)?;
                    let kb = k.value();
                    let Some(h) = hash_of(kb) else { continue };
                    if h > r.end {
                        break;
                    }
                    // redb reads a damaged page's keys as they are: one
                    // behind the start would set the next batch behind
                    // this one, and the move would never end.
                    if h < r.start.max(from) {
                        return Err(Error::Corrupt {
                            path: p.clone(),
                            reason: "a record's key is out of hash order".into(),
                        });
                    }
                    if let Some(b) = boundary {
                        if h != b {
                            break 'ranges;
                        }
                    }
                    out.examined += 1;
                    if let Some(to) = dest(h) {
                        out.records.push((
                            to,
                            Record {
                                rkey: kb.to_vec(),
                                value: v.value().to_vec(),
                            },
                        ));
                    }
                    if boundary.is_none()
                        && (out.records.len() >= limit || out.examined >= 8 * limit as u64)
                    {
                        boundary = Some(h);
                    }
                }
            }
            out.next = boundary.and_then(|b| b.checked_add(1));
            Ok(out)
        })
    }

    /// Writes moved records (overwriting: a re-run after a crash copies the
    /// same records again).
    pub fn put_moved<'a>(&self, recs: impl Iterator<Item = &'a Record>) -> Result<()> {
        self.write_records(|w| {
            for r in recs {
                w.write(&r.rkey, hash_of(&r.rkey).unwrap_or(0), Some(&r.value))?;
            }
            Ok(())
        })
    }

    /// Deletes moved records from their source.
    pub fn delete_moved<'a>(&self, recs: impl Iterator<Item = &'a Record>) -> Result<()> {
        self.write_records(|w| {
            for r in recs {
                w.write(&r.rkey, hash_of(&r.rkey).unwrap_or(0), None)?;
            }
            Ok(())
        })
    }

    /// Bytes per statistics bucket: `(bucket, records, bytes)`.
    pub fn buckets(&self) -> Result<Vec<(u32, u64, u64)>> {
        let p = &self.path;
        guarded(p, || {
            let txn = self.db.begin_read().at(p)?;
            let t = txn.open_table(BUCKETS).at(p)?;
            let mut out = Vec::new();
            for item in t.iter().at(p)? {
                let (k, v) = item.at(p)?;
                let (c, b) = v.value();
                out.push((k.value(), c, b));
            }
            Ok(out)
        })
    }

    /// A read snapshot of the records table, for scans.
    pub fn snapshot(&self) -> Result<ReadOnlyTable<&'static [u8], &'static [u8]>> {
        let p = &self.path;
        guarded(p, || {
            let txn = self.db.begin_read().at(p)?;
            txn.open_table(RECORDS).at(p)
        })
    }

    /// Compacts the file; returns whether anything was reclaimed.
    pub fn compact(&mut self) -> Result<bool> {
        let p = self.path.clone();
        guarded(&p, || self.db.compact().at(&p))
    }

    /// Checks every record: its hash, its place (`belongs(h)`), and that the
    /// bucket table matches the records.
    pub fn verify(&self, belongs: impl Fn(u64) -> bool) -> Result<FragmentCheck> {
        let p = &self.path;
        guarded(p, || {
            let txn = self.db.begin_read().at(p)?;
            let t = txn.open_table(RECORDS).at(p)?;
            let mut check = FragmentCheck::default();
            let mut tally: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
            let (mut misplaced, mut bad) = (0u64, 0u64);
            for item in t.iter().at(p)? {
                let (k, v) = item.at(p)?;
                let kb = k.value();
                check.records += 1;
                let Some(h) = hash_of(kb) else {
                    bad += 1;
                    continue;
                };
                if fraghash::key_hash(&kb[8..]) != h {
                    bad += 1;
                    continue;
                }
                if !belongs(h) {
                    misplaced += 1;
                }
                let e = tally.entry(bucket_of(h)).or_default();
                e.0 += 1;
                e.1 += (kb.len() - 8 + v.value().len()) as u64;
            }
            if bad > 0 {
                check
                    .problems
                    .push(format!("{bad} records whose stored hash is wrong"));
            }
            if misplaced > 0 {
                check.problems.push(format!(
                    "{misplaced} records that the scheme places in another fragment"
                ));
            }
            let b = txn.open_table(BUCKETS).at(p)?;
            let mut stored: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
            for item in b.iter().at(p)? {
                let (k, v) = item.at(p)?;
                stored.insert(k.value(), v.value());
            }
            if stored != tally {
                check
                    .problems
                    .push("the bucket statistics do not match the records".into());
            }
            Ok(check)
        })
    }
}

fn add_signed(a: &AtomicU64, d: i64) {
    if d >= 0 {
        a.fetch_add(d as u64, Ordering::Relaxed);
    } else {
        a.fetch_sub(d.unsigned_abs(), Ordering::Relaxed);
    }
}
