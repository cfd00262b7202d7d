//! `--out DIR` written all or nothing: every file goes first into a staging
//! directory beside DIR (same parent, so same file system), then moves in by
//! rename. A failed run leaves DIR as it was and removes the staging dir.

use std::path::{Path, PathBuf};

use super::keys::io_reason;

/// Every file `--out` can write.
pub const ALL_FILES: [&str; 6] = [
    "report.json",
    "report.md",
    "distribution.png",
    "distribution.svg",
    "growth.png",
    "growth.svg",
];

/// A staging directory for `--out`.
#[derive(Debug)]
pub struct Staging {
    target: PathBuf,
    dir: PathBuf,
    files: Vec<String>,
    done: bool,
}

impl Staging {
    /// Checks `target` and creates the staging directory beside it.
    pub fn new(target: &Path) -> Result<Staging, String> {
        let shown = target.display();
        if target.exists() && !target.is_dir() {
            return Err(format!("--out {shown}: exists and is not a directory"));
        }
        let name = target
            .file_name()
            .ok_or_else(|| format!("--out {shown}: not a directory name"))?
            .to_string_lossy()
            .into_owned();
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() {
            return Err(format!(
                "--out {shown}: parent directory {} does not exist",
                parent.display()
            ));
        }
        let dir = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| {
            format!(
                "--out {shown}: cannot write in {}: {}",
                parent.display(),
                io_reason(&e)
            )
        })?;
        Ok(Staging {
            target: target.to_path_buf(),
            dir,
            files: Vec::new(),
            done: false,
        })
    }

    /// Writes one file into the staging directory.
    pub fn write(&mut self, name: &str, bytes: &[u8]) -> Result<(), String> {
        std::fs::write(self.dir.join(name), bytes).map_err(|e| {
            format!(
                "--out {}: cannot write {name}: {}",
                self.target.display(),
                io_reason(&e)
            )
        })?;
        self.files.push(name.to_string());
        Ok(())
    }

    /// The staging directory, for writers that take a path.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Notes files written into [`Staging::dir`] directly.
    pub fn record(&mut self, names: &[&str]) {
        self.files.extend(names.iter().map(|s| s.to_string()));
    }

    /// Moves the files into place: the whole directory by one rename when
    /// DIR does not exist, else file by file (each replaced atomically).
    pub fn commit(mut self) -> Result<(), String> {
        let shown = self.target.display().to_string();
        let err = |e: std::io::Error| format!("--out {shown}: {}", io_reason(&e));
        if !self.target.exists() {
            std::fs::rename(&self.dir, &self.target).map_err(err)?;
        } else {
            for f in &self.files {
                std::fs::rename(self.dir.join(f), self.target.join(f)).map_err(err)?;
            }
            // A file of an earlier run that this run did not write (growth
            // plots without --growth) would describe other data: remove it.
            for f in ALL_FILES {
                if !self.files.iter().any(|x| x == f) {
                    let _ = std::fs::remove_file(self.target.join(f));
                }
            }
            std::fs::remove_dir(&self.dir).map_err(err)?;
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
