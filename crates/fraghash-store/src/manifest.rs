//! The manifest: the table's scheme state, fragment files and migration
//! journal, replaced atomically (write a temporary file, fsync, rename over
//! the old one, fsync the directory).
//!
//! File layout (`MANIFEST` in the table directory):
//!
//! | bytes | what |
//! |---|---|
//! | 18 | magic `FRAGHASH-MANIFEST\n` |
//! | 4 | format version, little-endian u32 ([`FORMAT_VERSION`]) |
//! | 8 | body length, little-endian u64 |
//! | n | body: [`Manifest`] in postcard |
//! | 8 | xxh3-64 of the body, little-endian |

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fraghash::MigrationPlan;
use serde::{Deserialize, Serialize};

use crate::error::{Error, IoCtx, LockHolder, Result};
use crate::failpoint;

/// The on-disk format version of the manifest (and of the fragment files).
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 18] = b"FRAGHASH-MANIFEST\n";
/// The manifest's file name inside the table directory.
pub const MANIFEST_FILE: &str = "MANIFEST";
const MANIFEST_TMP: &str = "MANIFEST.tmp";

/// One fragment file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileEntry {
    /// Unique number of the file within the table (never reused).
    pub file_no: u64,
    /// Path: relative to the table directory, or absolute.
    pub path: String,
}

/// A migration in progress: written before any record moves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Journal {
    /// The scheme state once the migration is done.
    pub new_state: Vec<u8>,
    /// What moves, in the old numbering.
    pub plan: MigrationPlan,
}

/// The whole manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// Random id of the table; fragment files carry it.
    pub table_id: u64,
    /// The current scheme state (the old one while a journal is present).
    pub scheme_state: Vec<u8>,
    /// Fragment files by fragment id. While a journal adds a fragment, its
    /// file is already the last entry.
    pub files: Vec<FileEntry>,
    /// Directories new fragment files go to, in turn (absolute; empty means
    /// the table directory).
    pub dirs: Vec<String>,
    /// The next file number.
    pub next_file_no: u64,
    /// The migration in progress, if any.
    pub journal: Option<Journal>,
}

impl Manifest {
    /// The absolute path of a file entry.
    pub fn file_path(dir: &Path, e: &FileEntry) -> PathBuf {
        let p = Path::new(&e.path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            dir.join(p)
        }
    }

    /// The file name of fragment file `file_no`.
    pub fn file_name(table_id: u64, file_no: u64) -> String {
        format!("{table_id:016x}-{file_no:06}.redb")
    }

    /// Where file `file_no` goes: the next placement directory in turn.
    pub fn place(&self, file_no: u64) -> FileEntry {
        let name = Self::file_name(self.table_id, file_no);
        let path = if self.dirs.is_empty() {
            name
        } else {
            let d = &self.dirs[(file_no % self.dirs.len() as u64) as usize];
            Path::new(d).join(name).to_string_lossy().into_owned()
        };
        FileEntry { file_no, path }
    }

    /// Encodes the manifest with its header and checksum.
    pub fn encode(&self) -> Vec<u8> {
        let body = postcard::to_allocvec(self).expect("manifest serialises");
        let mut out = Vec::with_capacity(body.len() + 38);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(&fraghash::key_hash(&body).to_le_bytes());
        out
    }

    /// Decodes manifest bytes read from `path`.
    pub fn decode(path: &Path, bytes: &[u8]) -> Result<Manifest> {
        let corrupt = |reason: String| Error::CorruptManifest {
            path: path.to_path_buf(),
            reason,
        };
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(Error::ForeignManifest {
                path: path.to_path_buf(),
            });
        }
        let rest = &bytes[MAGIC.len()..];
        if rest.len() < 12 {
            return Err(corrupt(format!("truncated header ({} bytes)", bytes.len())));
        }
        let version = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(Error::UnsupportedFormat {
                path: path.to_path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let len = u64::from_le_bytes(rest[4..12].try_into().expect("8 bytes"));
        let rest = &rest[12..];
        if (rest.len() as u64) != len.saturating_add(8) {
            return Err(corrupt(format!(
                "body length {len} does not match the file ({} bytes after the header)",
                rest.len()
            )));
        }
        let (body, sum) = rest.split_at(len as usize);
        let sum = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
        if fraghash::key_hash(body) != sum {
            return Err(corrupt("checksum mismatch".into()));
        }
        let m: Manifest =
            postcard::from_bytes(body).map_err(|e| corrupt(format!("undecodable body: {e}")))?;
        m.check().map_err(corrupt)?;
        Ok(m)
    }

    /// Structural checks beyond decoding.
    fn check(&self) -> std::result::Result<(), String> {
        let scheme = fraghash::AnyScheme::from_state_bytes(&self.scheme_state)
            .map_err(|e| format!("scheme state: {e}"))?;
        use fraghash::FragmentScheme;
        let mut want = scheme.fragments() as usize;
        if let Some(j) = &self.journal {
            fraghash::AnyScheme::from_state_bytes(&j.new_state)
                .map_err(|e| format!("journal scheme state: {e}"))?;
            if j.plan.fragments_before as usize != want {
                return Err("journal plan does not start from the current scheme".into());
            }
            if matches!(
                j.plan.kind,
                fraghash::PlanKind::Add { .. } | fraghash::PlanKind::Split { .. }
            ) {
                want += 1;
            }
        }
        if self.files.len() != want {
            return Err(format!(
                "{} fragment files listed for {want} fragments",
                self.files.len()
            ));
        }
        if self.files.iter().any(|f| f.file_no >= self.next_file_no) {
            return Err("a file number is not below next_file_no".into());
        }
        Ok(())
    }

    /// Reads the manifest of the table in `dir`.
    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotATable {
                    dir: dir.to_path_buf(),
                    manifest: path,
                })
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        Manifest::decode(&path, &bytes)
    }

    /// Replaces the manifest of the table in `dir` atomically and durably.
    pub fn store(&self, dir: &Path) -> Result<()> {
        let tmp = dir.join(MANIFEST_TMP);
        let path = dir.join(MANIFEST_FILE);
        {
            let mut f = File::create(&tmp).io_at(&tmp)?;
            f.write_all(&self.encode()).io_at(&tmp)?;
            f.sync_all().io_at(&tmp)?;
        }
        failpoint::hit("manifest.after-tmp-write")?;
        fs::rename(&tmp, &path).io_at(&path)?;
        failpoint::hit("manifest.after-rename")?;
        sync_dir(dir)
    }
}

/// fsyncs a directory so that renames and new files in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).io_at(dir)
}

/// The exclusive lock on a table directory (`LOCK`, held with `flock` for as
/// long as the table is open; the kernel drops it when the process dies).
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
    /// The directory as entered in [`LOCKED_HERE`], removed on drop.
    dir: PathBuf,
}

/// The table directories this process holds locked. `flock` refuses a second
/// lock from this process as from any other, so the set is what tells the
/// two apart in [`Error::TableLocked`].
static LOCKED_HERE: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

fn locked_here() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    // The set stays consistent even if a holder panicked: recover it.
    LOCKED_HERE.lock().unwrap_or_else(|e| e.into_inner())
}

impl DirLock {
    /// Takes the lock or fails with [`Error::TableLocked`], naming this
    /// process as the holder when a `Table` of this process has it.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        use std::os::unix::io::AsRawFd;
        let path = dir.join("LOCK");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .io_at(&path)?;
        let key = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let mut here = locked_here();
        if here.contains(&key) {
            return Err(Error::TableLocked {
                dir: dir.to_path_buf(),
                holder: LockHolder::ThisProcess,
            });
        }
        // SAFETY: flock on a valid, open file descriptor.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::TableLocked {
                    dir: dir.to_path_buf(),
                    holder: LockHolder::OtherProcess,
                });
            }
            return Err(Error::io(&path, e));
        }
        here.insert(key.clone());
        Ok(DirLock {
            _file: file,
            dir: key,
        })
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        locked_here().remove(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        let s = fraghash::AnyScheme::new("slots", 2).unwrap();
        use fraghash::FragmentScheme;
        Manifest {
            table_id: 7,
            scheme_state: s.to_state_bytes(),
            files: vec![
                FileEntry {
                    file_no: 0,
                    path: "a".into(),
                },
                FileEntry {
                    file_no: 1,
                    path: "b".into(),
                },
            ],
            dirs: vec![],
            next_file_no: 2,
            journal: None,
        }
    }

    #[test]
    fn round_trip_and_damage() {
        let m = sample();
        let p = Path::new("M");
        let b = m.encode();
        assert_eq!(Manifest::decode(p, &b).unwrap(), m);
        for cut in [0, 5, 20, 30, b.len() - 1] {
            assert!(Manifest::decode(p, &b[..cut]).is_err(), "cut {cut}");
        }
        let mut flipped = b.clone();
        let mid = b.len() / 2;
        flipped[mid] ^= 1;
        assert!(matches!(
            Manifest::decode(p, &flipped),
            Err(Error::CorruptManifest { .. })
        ));
        assert!(matches!(
            Manifest::decode(p, b"hello world, not a manifest"),
            Err(Error::ForeignManifest { .. })
        ));
        let mut v2 = b.clone();
        v2[18] = 2;
        assert!(matches!(
            Manifest::decode(p, &v2),
            Err(Error::UnsupportedFormat { found: 2, .. })
        ));
    }
}
