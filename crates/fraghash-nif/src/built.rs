//! Node-local files of built schemes, so that a restart does not replay a
//! long recipe again.
//!
//! Building a recipe replays its history at O(table) per operation: a
//! `slots` table created with 8 fragments and grown one `add_frag` at a time
//! to 4,000 takes about 17 s to rebuild (`recipe_replay` example). That
//! happens on a node's first lookup after each restart, blocking the caller.
//! So when a miss replays a history, the built state is also written to a
//! file named by the recipe's digest, in a directory the Erlang side sets
//! (`fraghash` under Mnesia's directory); the next miss on this node reads
//! it back (a decode: O(table), milliseconds) instead of replaying.
//!
//! The files are only a cache: a missing, unreadable or damaged file is
//! ignored (and rewritten), and writing is best effort, so a full disk or a
//! read-only directory costs a replay, never an error. A file is
//! `b"FHBUILT1"`, the recipe digest (16 bytes), xxh3-128 of the state bytes
//! (16 bytes), then the core crate's state bytes; it is used only when all
//! three check. It is written to a temporary name and renamed, so a crash
//! leaves no partial file under a real name. At most [`MAX_FILES`] files
//! are kept: the oldest go first.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use fraghash::{AnyScheme, FragmentScheme};

use crate::recipe::{digest, Digest};

/// Magic of a built-state file.
pub const MAGIC: &[u8; 8] = b"FHBUILT1";

/// Most built-state files kept in the directory.
pub const MAX_FILES: usize = 64;

const SUFFIX: &str = ".fhbuilt";

static DIR: RwLock<Option<PathBuf>> = RwLock::new(None);

/// Sets the directory for built-state files (created when first written);
/// `None` turns the files off.
pub fn set_dir(dir: Option<PathBuf>) {
    *DIR.write().unwrap_or_else(|p| p.into_inner()) = dir;
}

/// The directory set with [`set_dir`].
pub fn dir() -> Option<PathBuf> {
    DIR.read().unwrap_or_else(|p| p.into_inner()).clone()
}

fn path(dir: &Path, recipe: &Digest) -> PathBuf {
    let hex: String = recipe.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(hex + SUFFIX)
}

/// The scheme built from the recipe with digest `recipe`, if `dir` holds a
/// sound file of it.
pub fn load(dir: &Path, recipe: &Digest) -> Option<AnyScheme> {
    let bytes = std::fs::read(path(dir, recipe)).ok()?;
    let rest = bytes.strip_prefix(MAGIC)?;
    let (named, rest) = rest.split_at_checked(16)?;
    let (sum, state) = rest.split_at_checked(16)?;
    if named != recipe || sum != digest(state) {
        return None;
    }
    AnyScheme::from_state_bytes(state).ok()
}

/// Writes `scheme` as the build of the recipe with digest `recipe`; best
/// effort (errors are ignored: the file is only a cache).
pub fn save(dir: &Path, recipe: &Digest, scheme: &AnyScheme) {
    let _ = try_save(dir, recipe, scheme);
}

fn try_save(dir: &Path, recipe: &Digest, scheme: &AnyScheme) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let state = scheme.to_state_bytes();
    let mut out = Vec::with_capacity(40 + state.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(recipe);
    out.extend_from_slice(&digest(&state));
    out.extend_from_slice(&state);
    let target = path(dir, recipe);
    let tmp = target.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, &out)?;
    if let Err(e) = std::fs::rename(&tmp, &target) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    prune(dir)
}

/// Removes the oldest files beyond [`MAX_FILES`].
fn prune(dir: &Path) -> std::io::Result<()> {
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(SUFFIX))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() > MAX_FILES {
        files.sort();
        for (_, p) in &files[..files.len() - MAX_FILES] {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::{Op, Recipe};

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fraghash-built-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn grown() -> (Digest, AnyScheme) {
        let mut r = Recipe::new("slots", 8, &[]).unwrap();
        for _ in 0..5 {
            r.push(Op::Add {
                weight: 1,
                donors: 8,
            });
        }
        (digest(&r.encode()), r.build().unwrap())
    }

    #[test]
    fn round_trip() {
        let dir = scratch("rt");
        let (d, s) = grown();
        assert!(load(&dir, &d).is_none(), "nothing written yet");
        save(&dir, &d, &s);
        let back = load(&dir, &d).expect("written");
        assert_eq!(back.to_state_bytes(), s.to_state_bytes());
        let other = [7u8; 16];
        assert!(load(&dir, &other).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A damaged, truncated or misnamed file is never used.
    #[test]
    fn damaged_files_are_ignored() {
        let dir = scratch("bad");
        let (d, s) = grown();
        save(&dir, &d, &s);
        let p = path(&dir, &d);
        let good = std::fs::read(&p).unwrap();
        for cut in [0, 8, 24, 40, good.len() - 1] {
            std::fs::write(&p, &good[..cut]).unwrap();
            assert!(load(&dir, &d).is_none(), "cut at {cut}");
        }
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        std::fs::write(&p, &flipped).unwrap();
        assert!(load(&dir, &d).is_none(), "flipped state byte");
        // The right file under another recipe's name.
        let other = [9u8; 16];
        std::fs::write(path(&dir, &other), &good).unwrap();
        assert!(load(&dir, &other).is_none(), "misnamed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Writing into a path that cannot be a directory fails quietly.
    #[test]
    fn unwritable_dir_is_not_an_error() {
        let file = scratch("file");
        std::fs::write(&file, b"a file, not a directory").unwrap();
        let (d, s) = grown();
        save(&file, &d, &s);
        assert!(load(&file, &d).is_none());
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn keeps_at_most_max_files() {
        let dir = scratch("prune");
        let (_, s) = grown();
        for i in 0..(MAX_FILES + 5) {
            let mut d = [0u8; 16];
            d[..8].copy_from_slice(&(i as u64).to_le_bytes());
            save(&dir, &d, &s);
        }
        let n = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(n, MAX_FILES);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
