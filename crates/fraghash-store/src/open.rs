//! Creating and opening tables, and recovery: an interrupted migration is
//! finished, files left by a crash are deleted.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};

use fraghash::{AnyScheme, FragmentScheme};

use crate::error::{Error, IoCtx, Result};
use crate::failpoint;
use crate::fragment::Fragment;
use crate::manifest::{sync_dir, DirLock, Manifest, MANIFEST_FILE};
use crate::migration::{Motion, View};
use crate::table::{Inner, Table, TableOptions};

/// Records a migration moves per batch unless [`Table::set_batch_size`] says otherwise.
pub const DEFAULT_BATCH: usize = 4096;

fn absolute(p: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(p).io_at(p)
}

fn random_id() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

impl Table {
    /// Creates a table in `dir` (created if missing; it must not hold a
    /// table already).
    pub fn create(dir: impl AsRef<Path>, options: &TableOptions) -> Result<Table> {
        failpoint::init();
        let dir = dir.as_ref();
        let scheme = AnyScheme::new(&options.scheme, options.fragments)?;
        std::fs::create_dir_all(dir).io_at(dir)?;
        let dir = absolute(dir)?;
        let lock = DirLock::acquire(&dir)?;
        if dir.join(MANIFEST_FILE).exists() {
            return Err(Error::TableExists { dir });
        }
        let mut dirs = Vec::new();
        for d in &options.dirs {
            if !d.is_dir() {
                return Err(Error::InvalidOption(format!(
                    "placement directory {} does not exist",
                    d.display()
                )));
            }
            dirs.push(absolute(d)?.to_string_lossy().into_owned());
        }
        let mut m = Manifest {
            table_id: random_id(),
            scheme_state: scheme.to_state_bytes(),
            files: Vec::new(),
            dirs,
            next_file_no: 0,
            journal: None,
        };
        let mut frags = Vec::new();
        for _ in 0..scheme.fragments() {
            let e = m.place(m.next_file_no);
            m.next_file_no += 1;
            let f = Fragment::create(&Manifest::file_path(&dir, &e), m.table_id, e.file_no)?;
            frags.push(Arc::new(f));
            m.files.push(e);
        }
        m.store(&dir)?;
        Ok(Table::assemble(dir, lock, m, scheme, frags, None))
    }

    /// Opens the table in `dir`. If a migration was interrupted (a crash),
    /// it is finished first; files a crash left behind are deleted.
    pub fn open(dir: impl AsRef<Path>) -> Result<Table> {
        failpoint::init();
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(Error::NotATable {
                dir: dir.to_path_buf(),
                manifest: dir.join(MANIFEST_FILE),
            });
        }
        let dir = absolute(dir)?;
        let lock = DirLock::acquire(&dir)?;
        let m = Manifest::load(&dir)?;
        let scheme =
            AnyScheme::from_state_bytes(&m.scheme_state).map_err(|e| Error::CorruptManifest {
                path: dir.join(MANIFEST_FILE),
                reason: e.to_string(),
            })?;
        let mut frags = Vec::with_capacity(m.files.len());
        for (i, e) in m.files.iter().enumerate() {
            let p = Manifest::file_path(&dir, e);
            frags.push(Arc::new(Fragment::open(
                &p, m.table_id, e.file_no, i as u32,
            )?));
        }
        remove_orphans(&dir, &m)?;
        let motion = match &m.journal {
            Some(j) => {
                let new = AnyScheme::from_state_bytes(&j.new_state).map_err(|e| {
                    Error::CorruptManifest {
                        path: dir.join(MANIFEST_FILE),
                        reason: e.to_string(),
                    }
                })?;
                Some(Arc::new(Motion::new(j.plan.clone(), new)))
            }
            None => None,
        };
        let recovering = motion.is_some();
        let t = Table::assemble(dir, lock, m.clone(), scheme, frags, motion);
        if recovering {
            let mut admin = t.inner.admin.lock().unwrap_or_else(|e| e.into_inner());
            t.inner.complete(&mut admin)?;
        }
        Ok(t)
    }

    fn assemble(
        dir: PathBuf,
        lock: DirLock,
        m: Manifest,
        scheme: AnyScheme,
        frags: Vec<Arc<Fragment>>,
        motion: Option<Arc<Motion>>,
    ) -> Table {
        Table {
            inner: Arc::new(Inner {
                dir,
                _lock: lock,
                view: RwLock::new(View {
                    scheme,
                    frags,
                    motion,
                }),
                admin: Mutex::new(m),
                batch: AtomicUsize::new(DEFAULT_BATCH),
                progress: Mutex::new(None),
            }),
        }
    }
}

/// Deletes fragment files of this table that the manifest does not list
/// (made by an add that crashed before its journal, or a removed fragment
/// whose deletion a crash interrupted) and a stale temporary manifest.
fn remove_orphans(dir: &Path, m: &Manifest) -> Result<()> {
    let listed: HashSet<PathBuf> = m
        .files
        .iter()
        .map(|e| Manifest::file_path(dir, e))
        .collect();
    let prefix = format!("{:016x}-", m.table_id);
    let mut dirs: Vec<PathBuf> = vec![dir.to_path_buf()];
    dirs.extend(m.dirs.iter().map(PathBuf::from));
    let _ = std::fs::remove_file(dir.join("MANIFEST.tmp"));
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut removed = false;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let p = d.join(&name);
            if name.starts_with(&prefix) && name.ends_with(".redb") && !listed.contains(&p) {
                std::fs::remove_file(&p).io_at(&p)?;
                removed = true;
            }
        }
        if removed {
            sync_dir(&d)?;
        }
    }
    Ok(())
}
