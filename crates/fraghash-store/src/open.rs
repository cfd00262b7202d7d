//! Creating and opening tables, and recovery: an interrupted migration is
//! finished, files left by a crash are deleted.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use fraghash::{AnyScheme, FragmentScheme};

use crate::error::{Error, IoCtx, Result};
use crate::failpoint;
use crate::fragment::Fragment;
use crate::manifest::{sync_dir, DirLock, Manifest, MANIFEST_FILE};
use crate::migration::{Motion, View};
use crate::report::MigrationReport;
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
    /// Creates a table in `dir`, which must be new or empty (a `LOCK` file
    /// left by an earlier failed create is allowed): a table never mixes
    /// with other files ([`Error::DirNotEmpty`], [`Error::TableExists`]).
    ///
    /// Options are checked before anything is written, and a create that
    /// fails after that removes what it made (fragment files, `LOCK`, and
    /// `dir` itself if it created it), so a failed create leaves nothing
    /// behind.
    pub fn create(dir: impl AsRef<Path>, options: &TableOptions) -> Result<Table> {
        failpoint::init();
        let dir = dir.as_ref();
        let scheme = AnyScheme::new(&options.scheme, options.fragments)?;
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
        // A directory holding a manifest goes on to the lock, so that a table
        // another process has open reports `TableLocked`, else `TableExists`.
        let existed = dir.exists();
        if existed && !dir.join(MANIFEST_FILE).exists() && holds_files(dir)? {
            return Err(Error::DirNotEmpty {
                dir: dir.to_path_buf(),
            });
        }
        std::fs::create_dir_all(dir).io_at(dir)?;
        let dir = absolute(dir)?;
        let lock = DirLock::acquire(&dir)?;
        if dir.join(MANIFEST_FILE).exists() {
            // Another table's LOCK: it stays.
            return Err(Error::TableExists { dir });
        }
        let mut made: Vec<PathBuf> = Vec::new();
        match Self::create_files(&dir, scheme, dirs, &mut made) {
            Ok((m, scheme, frags)) => Ok(Table::assemble(dir, lock, m, scheme, frags, None)),
            Err(e) => {
                // Undo: the fragment files, the manifest if written, the lock
                // file (removed while still held, so no other create can take
                // it meanwhile), and the directory if this call made it.
                for p in made.iter().rev() {
                    let _ = std::fs::remove_file(p);
                }
                let _ = std::fs::remove_file(dir.join("MANIFEST.tmp"));
                let _ = std::fs::remove_file(dir.join(MANIFEST_FILE));
                let _ = std::fs::remove_file(dir.join("LOCK"));
                drop(lock);
                if !existed {
                    let _ = std::fs::remove_dir(&dir);
                }
                Err(e)
            }
        }
    }

    /// The files of a new table: one per fragment, then the manifest. Every
    /// fragment file made is pushed to `made` before the next step can fail.
    fn create_files(
        dir: &Path,
        scheme: AnyScheme,
        dirs: Vec<String>,
        made: &mut Vec<PathBuf>,
    ) -> Result<(Manifest, AnyScheme, Vec<Arc<Fragment>>)> {
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
            let path = Manifest::file_path(dir, &e);
            let was_there = path.exists();
            let f = Fragment::create(&path, m.table_id, e.file_no);
            if !was_there && path.exists() {
                made.push(path);
            }
            frags.push(Arc::new(f?));
            m.files.push(e);
        }
        m.store(dir)?;
        Ok((m, scheme, frags))
    }

    /// Opens the table in `dir`. If a migration was interrupted (a crash),
    /// it is finished first, and [`Table::recovered_migration`] says what
    /// was finished; files a crash left behind are deleted.
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
        let interrupted = motion.as_ref().map(|m| m.plan.clone());
        let t = Table::assemble(dir, lock, m.clone(), scheme, frags, motion);
        if let Some(plan) = interrupted {
            let t0 = Instant::now();
            let mut admin = t.inner.admin.lock().unwrap_or_else(|e| e.into_inner());
            let counts = t.inner.complete(&mut admin)?;
            drop(admin);
            let report = MigrationReport::of(&plan, counts, t0.elapsed().as_secs_f64());
            // Set once, here, before any clone of the table exists.
            let _ = t.inner.recovered.set(report);
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
                recovered: OnceLock::new(),
            }),
        }
    }
}

/// Whether `dir` holds anything but a `LOCK` file.
fn holds_files(dir: &Path) -> Result<bool> {
    for e in std::fs::read_dir(dir).io_at(dir)? {
        if e.io_at(dir)?.file_name() != "LOCK" {
            return Ok(true);
        }
    }
    Ok(false)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A create that fails after its fragment files exist (here: at the
    /// manifest write) removes them, the lock file and the directory it made.
    /// The only test in this binary that arms a failpoint, so no other test
    /// sees it.
    #[test]
    fn a_failed_create_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let options = TableOptions {
            dirs: vec![d.path().join("pool")],
            ..TableOptions::default()
        };
        std::fs::create_dir(d.path().join("pool")).unwrap();
        let new = d.path().join("new");
        let empty = d.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        failpoint::set(Some("manifest.after-tmp-write"));
        let made_dir = Table::create(&new, &options);
        let given_dir = Table::create(&empty, &options);
        failpoint::set(None);
        assert!(matches!(made_dir, Err(Error::Failpoint(_))));
        assert!(matches!(given_dir, Err(Error::Failpoint(_))));
        assert!(!new.exists());
        assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(d.path().join("pool")).unwrap().count(), 0);
        Table::create(&empty, &options).unwrap();
    }
}
