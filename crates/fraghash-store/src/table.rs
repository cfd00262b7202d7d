//! [`Table`]: the public handle, and its record operations (put, get,
//! delete, batches, scans, statistics).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use fraghash::{key_hash, FragmentScheme};
use redb::ReadOnlyTable;

use crate::error::{Ctx, Error, Result};
use crate::fragment::{Fragment, WriteOp};
use crate::guard::guarded;
use crate::manifest::{DirLock, Manifest};
use crate::migration::{read, write, View};
use crate::report::{MigrationProgress, MigrationReport};

/// The longest key, in bytes.
pub const MAX_KEY_LEN: usize = 4096;
/// The longest value, in bytes (64 MiB).
pub const MAX_VALUE_LEN: usize = 64 << 20;

/// Batches with at least this many writes commit their fragments in parallel.
const PARALLEL_BATCH: usize = 256;

/// Writes of one fragment, with their index in the caller's batch.
type Group<'a> = Vec<(usize, WriteOp<'a>)>;

/// A progress callback for migrations.
pub type ProgressFn = Box<dyn Fn(&MigrationProgress) + Send + Sync>;

/// Options of [`Table::create`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOptions {
    /// Scheme spec (`slots`, `ring`, `ring:<points>`, `jump`, `linear`).
    pub scheme: String,
    /// Fragments to start with (at least 1).
    pub fragments: u32,
    /// Directories the fragment files are spread over, in turn (a pool of
    /// disks). Empty: every file in the table directory. They must exist.
    pub dirs: Vec<PathBuf>,
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions {
            scheme: "slots".into(),
            fragments: 4,
            dirs: Vec::new(),
        }
    }
}

/// Records and bytes of one fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragmentStats {
    /// Fragment id.
    pub id: u32,
    /// Its file.
    pub path: PathBuf,
    /// Records it holds.
    pub records: u64,
    /// Bytes of keys and values it holds.
    pub bytes: u64,
    /// Size of its file on disk.
    pub file_bytes: u64,
}

/// Statistics of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableStats {
    /// Scheme spec.
    pub scheme: String,
    /// Per fragment (while a fragment is being added, it is listed too).
    pub fragments: Vec<FragmentStats>,
    /// Records in all.
    pub records: u64,
    /// Bytes of keys and values in all.
    pub bytes: u64,
    /// Whether a migration is in progress.
    pub migrating: bool,
    /// Fragment statistics over the record counts (mean, stddev, max/mean,
    /// binomial floor).
    pub balance: fraghash::Stats,
}

/// A batch of puts and deletes for [`Table::write_batch`].
///
/// Atomicity: the writes that land in one fragment commit in one redb
/// transaction (all or none); a batch spanning several fragments commits
/// fragment by fragment, so a crash or an error may leave some fragments'
/// part applied and others not. Within a batch, a later write of the same
/// key wins.
///
/// ```
/// use fraghash_store::{Table, TableOptions, WriteBatch};
///
/// let dir = tempfile::tempdir()?;
/// let options = TableOptions { scheme: "slots".into(), fragments: 4, dirs: vec![] };
/// let table = Table::create(dir.path().join("t"), &options)?;
/// table.put(b"old", b"gone soon")?;
///
/// let mut batch = WriteBatch::new();
/// for i in 0..100u32 {
///     batch.put(format!("user:{i}"), i.to_string());
/// }
/// batch.put("user:7", "seven").delete("old"); // the later write of a key wins
/// assert_eq!(batch.len(), 102);
/// table.write_batch(&batch)?;
///
/// assert_eq!(table.len(), 100);
/// assert_eq!(table.get(b"user:7")?, Some(b"seven".to_vec()));
/// assert_eq!(table.get(b"old")?, None);
/// batch.clear();
/// assert!(batch.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push((key.into(), Some(value.into())));
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push((key.into(), None));
        self
    }

    /// Writes in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every write.
    pub fn clear(&mut self) {
        self.ops.clear();
    }
}

pub(crate) struct Inner {
    pub dir: PathBuf,
    pub _lock: DirLock,
    pub view: RwLock<View>,
    /// Serialises migrations, compaction and manifest updates; holds the
    /// manifest as last written.
    pub admin: Mutex<Manifest>,
    pub batch: std::sync::atomic::AtomicUsize,
    pub progress: Mutex<Option<ProgressFn>>,
    /// The interrupted migration the open finished, if any.
    pub recovered: OnceLock<MigrationReport>,
}

/// A durable fragmented table. Cheap to clone; `Send + Sync`: share it
/// between threads. See also the [crate docs](crate).
///
/// A migration (adding, splitting, removing or rebalancing fragments) runs
/// in the thread that calls it, while other threads holding a clone keep
/// reading and writing:
///
/// ```
/// use fraghash_store::{Table, TableOptions};
///
/// let dir = tempfile::tempdir()?;
/// let options = TableOptions { scheme: "slots".into(), fragments: 3, dirs: vec![] };
/// let table = Table::create(dir.path().join("t"), &options)?;
/// for i in 0..1000u32 {
///     table.put(format!("key:{i}").as_bytes(), &i.to_le_bytes())?;
/// }
///
/// // A writer thread goes on while fragment 1 of 3 is removed.
/// let writer = {
///     let table = table.clone();
///     std::thread::spawn(move || -> fraghash_store::Result<()> {
///         for i in 1000..1200u32 {
///             table.put(format!("key:{i}").as_bytes(), &i.to_le_bytes())?;
///         }
///         Ok(())
///     })
/// };
/// let report = table.remove_fragment(1)?;
/// writer.join().unwrap()?;
///
/// assert_eq!((report.fragments_before, report.fragments_after), (3, 2));
/// assert_eq!(table.fragments(), 2);
/// assert_eq!(table.len(), 1200);
/// assert_eq!(table.get(b"key:1100")?, Some(1100u32.to_le_bytes().to_vec()));
/// assert!(table.verify()?.is_ok()); // every record sits where the scheme says
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("dir", &self.inner.dir)
            .finish()
    }
}

pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::KeyTooLong {
            len: key.len(),
            max: MAX_KEY_LEN,
        });
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::ValueTooLong {
            len: value.len(),
            max: MAX_VALUE_LEN,
        });
    }
    Ok(())
}

impl Table {
    /// The table directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The scheme spec.
    pub fn scheme(&self) -> String {
        read(&self.inner.view).scheme.spec()
    }

    /// How many fragments there are (the old count while migrating).
    pub fn fragments(&self) -> u32 {
        read(&self.inner.view).scheme.fragments()
    }

    /// The migration that [`Table::open`] found interrupted (by a crash, or
    /// an error in the process that ran it) and finished before returning;
    /// `None` when there was none, and always for [`Table::create`].
    ///
    /// Its kind and fragment counts are the interrupted operation's.
    /// `keys_examined` and `keys_moved` count what the open read and moved:
    /// every move runs again from its start, and records that batches
    /// before the interruption had already deleted from their source are
    /// not counted. `seconds` is the time the open spent finishing it.
    ///
    /// ```
    /// use fraghash_store::{Table, TableOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let table = Table::create(dir.path().join("t"), &TableOptions::default())?;
    /// assert!(table.recovered_migration().is_none());
    /// drop(table);
    /// // A clean reopen has nothing to finish.
    /// let table = Table::open(dir.path().join("t"))?;
    /// assert!(table.recovered_migration().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recovered_migration(&self) -> Option<&MigrationReport> {
        self.inner.recovered.get()
    }

    /// Sets how many records a migration moves per batch (default 4,096).
    /// Smaller batches make writers of moving keys wait less.
    pub fn set_batch_size(&self, records: usize) {
        self.inner
            .batch
            .store(records.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets (or clears) the callback that migrations call after each batch.
    pub fn set_progress(&self, f: Option<ProgressFn>) {
        *self
            .inner
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = f;
    }

    /// Stores `value` under `key`, durably (fsynced) when it returns.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(value)?;
        self.apply(&[(key, Some(value))]).map(|_| ())
    }

    /// Deletes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        check_key(key)?;
        Ok(self.apply(&[(key, None)])?[0])
    }

    /// Applies a batch (see [`WriteBatch`] for what is atomic).
    pub fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        for (k, v) in &batch.ops {
            check_key(k)?;
            if let Some(v) = v {
                check_value(v)?;
            }
        }
        let ops: Vec<(&[u8], Option<&[u8]>)> = batch
            .ops
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        self.apply(&ops).map(|_| ())
    }

    fn apply(&self, ops: &[(&[u8], Option<&[u8]>)]) -> Result<Vec<bool>> {
        let hashes: Vec<u64> = ops.iter().map(|(k, _)| key_hash(k)).collect();
        let v = read(&self.inner.view);
        let motion = v.motion.clone();
        let guard = match &motion {
            Some(m) if v.any_moving(hashes.iter().copied()) => Some(read(&m.cursor)),
            _ => None,
        };
        let mut groups: BTreeMap<u32, Group<'_>> = BTreeMap::new();
        for (i, ((key, value), &h)) in ops.iter().zip(&hashes).enumerate() {
            let f = v.write_route(h, guard.as_deref())?;
            groups.entry(f).or_default().push((
                i,
                WriteOp {
                    h,
                    key,
                    value: *value,
                },
            ));
        }
        let mut existed = vec![false; ops.len()];
        let commit = |f: u32, g: &[(usize, WriteOp<'_>)]| {
            let w: Vec<WriteOp<'_>> = g.iter().map(|x| x.1).collect();
            v.frags[f as usize].apply(&w)
        };
        let results: Vec<(Group<'_>, Result<Vec<bool>>)> =
            if groups.len() > 1 && ops.len() >= PARALLEL_BATCH {
                // Fragments commit (and fsync) in parallel.
                std::thread::scope(|s| {
                    let hs: Vec<_> = groups
                        .into_iter()
                        .map(|(f, g)| {
                            s.spawn(move || {
                                let r = commit(f, &g);
                                (g, r)
                            })
                        })
                        .collect();
                    hs.into_iter()
                        .map(|h| h.join().expect("a fragment commit panicked"))
                        .collect()
                })
            } else {
                groups
                    .into_iter()
                    .map(|(f, g)| {
                        let r = commit(f, &g);
                        (g, r)
                    })
                    .collect()
            };
        let mut first_err = None;
        for (g, r) in results {
            match r {
                Ok(e) => {
                    for ((i, _), x) in g.iter().zip(e) {
                        existed[*i] = x;
                    }
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(existed),
        }
    }

    /// The value of `key`. During a migration, a key that is present is
    /// always found, with its latest acknowledged value.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        let h = key_hash(key);
        let v = read(&self.inner.view);
        let (o, n) = v.read_route(h);
        if let Some(x) = v.frags[o as usize].get(h, key)? {
            return Ok(Some(x));
        }
        match n {
            Some(n) => v.frags[n as usize].get(h, key),
            None => Ok(None),
        }
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// Records in the table.
    pub fn len(&self) -> u64 {
        read(&self.inner.view)
            .frags
            .iter()
            .map(|f| f.records())
            .sum()
    }

    /// Whether the table has no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Per-fragment records and bytes.
    pub fn stats(&self) -> TableStats {
        let v = read(&self.inner.view);
        let fragments: Vec<FragmentStats> = v
            .frags
            .iter()
            .enumerate()
            .map(|(i, f)| FragmentStats {
                id: i as u32,
                path: f.path.clone(),
                records: f.records(),
                bytes: f.bytes(),
                file_bytes: std::fs::metadata(&f.path).map_or(0, |m| m.len()),
            })
            .collect();
        let counts: Vec<u64> = fragments.iter().map(|f| f.records).collect();
        TableStats {
            scheme: v.scheme.spec(),
            records: counts.iter().sum(),
            bytes: fragments.iter().map(|f| f.bytes).sum(),
            migrating: v.motion.is_some(),
            balance: fraghash::Stats::from_counts(&counts),
            fragments,
        }
    }

    /// A streaming scan of every record, fragment by fragment, each in hash
    /// order. It reads a snapshot of each fragment taken when the scan
    /// starts (every record exactly once, even during a migration); writes
    /// made after that are not seen.
    pub fn scan(&self) -> Result<Scan> {
        let v = read(&self.inner.view);
        // Hold the cursor exclusively so no batch is half-done while the
        // snapshots are taken: then every record is in exactly one of them.
        let motion = v.motion.clone();
        let _cur = motion.as_ref().map(|m| write(&m.cursor));
        let mut tables = Vec::with_capacity(v.frags.len());
        for f in &v.frags {
            tables.push((f.clone(), f.snapshot()?));
        }
        tables.reverse();
        Ok(Scan {
            tables,
            current: None,
        })
    }
}

type Snapshot = ReadOnlyTable<&'static [u8], &'static [u8]>;
type Records = redb::Range<'static, &'static [u8], &'static [u8]>;

/// The iterator [`Table::scan`] returns: `(key, value)` pairs. It ends
/// after its first error.
pub struct Scan {
    tables: Vec<(Arc<Fragment>, Snapshot)>,
    current: Option<(PathBuf, Records)>,
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("fragments_left", &self.tables.len())
            .finish()
    }
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((path, range)) = &mut self.current {
                let item = guarded(path, || match range.next() {
                    Some(Ok((k, v))) => {
                        let k = k.value();
                        Ok(Some((
                            k.get(8..).unwrap_or(&[]).to_vec(),
                            v.value().to_vec(),
                        )))
                    }
                    Some(Err(e)) => Err(Error::storage(path, e)),
                    None => Ok(None),
                });
                match item {
                    Ok(Some(record)) => return Some(Ok(record)),
                    Ok(None) => self.current = None,
                    Err(e) => return Some(Err(self.end(e))),
                }
            }
            let (frag, table) = self.tables.pop()?;
            match guarded(&frag.path, || table.range::<&[u8]>(..).at(&frag.path)) {
                Ok(r) => self.current = Some((frag.path.clone(), r)),
                Err(e) => return Some(Err(self.end(e))),
            }
        }
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        // A scan that outlives its `Table` holds the last readers of its
        // files, so its drop closes them (see `guard::QuietClose`).
        let current = self.current.take();
        let tables = std::mem::take(&mut self.tables);
        let _ = guarded(Path::new(""), || {
            drop(current);
            drop(tables);
            Ok(())
        });
    }
}

impl Scan {
    /// Ends the scan at error `e`: a damaged fragment's B-tree cannot be
    /// trusted to go on from where it failed.
    fn end(&mut self, e: Error) -> Error {
        self.current = None;
        self.tables.clear();
        e
    }
}
