//! `--out DIR` written all or nothing: every file goes first into a staging
//! directory `.DIR.tmp-PID` beside DIR (same parent, so same file system),
//! then moves in by rename. A failed run leaves DIR as it was and removes the
//! staging dir.
//!
//! A run stopped by SIGINT (Ctrl-C), SIGTERM or SIGHUP removes its staging
//! dir before it exits (a thread waits for those signals with `sigwait`, so
//! the removal runs as ordinary code, not in a signal handler). A run that
//! cannot clean up (SIGKILL, a power cut) leaves it; the next run into the
//! same DIR removes every `.DIR.tmp-PID` whose process no longer exists.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
        remove_stale(&parent, &name);
        let dir = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        // Before the directory exists and before any other thread starts, so
        // that every thread inherits the blocked signals.
        watch_signals();
        let mut watched = lock_watched();
        std::fs::create_dir(&dir).map_err(|e| {
            format!(
                "--out {shown}: cannot write in {}: {}",
                parent.display(),
                io_reason(&e)
            )
        })?;
        *watched = Some(dir.clone());
        drop(watched);
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
        // Held to the end: a signal meanwhile waits for the moves to finish.
        let mut watched = lock_watched();
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
        *watched = None;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let mut watched = lock_watched();
            let _ = std::fs::remove_dir_all(&self.dir);
            *watched = None;
        }
    }
}

/// The staging directory a signal must remove, if any.
static WATCHED: Mutex<Option<PathBuf>> = Mutex::new(None);

fn lock_watched() -> std::sync::MutexGuard<'static, Option<PathBuf>> {
    WATCHED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The signals that stop a run and let it clean up.
const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Blocks [`STOP_SIGNALS`] in the calling thread (and so in every thread it
/// starts later) and starts one thread that takes them with `sigwait`,
/// removes the watched staging dir and exits with 128 + the signal number,
/// as a shell reports a run killed by that signal. Once per process.
fn watch_signals() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: sigset_t is plain data, initialised by sigemptyset before
        // use; pthread_sigmask and sigwait get valid pointers.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in STOP_SIGNALS {
                libc::sigaddset(&mut set, s);
            }
            if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return;
            }
            let spawned = std::thread::Builder::new()
                .name("out-signals".into())
                .spawn(move || loop {
                    let mut sig: libc::c_int = 0;
                    if libc::sigwait(&set, &mut sig) != 0 {
                        continue;
                    }
                    let watched = lock_watched();
                    if let Some(dir) = watched.as_ref() {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                    eprintln!("fraghash experiment: stopped by signal {sig}; --out left as it was");
                    std::process::exit(128 + sig);
                });
            if spawned.is_err() {
                // No watcher: let the signals act as before.
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            }
        }
    });
}

/// Removes the staging dirs of earlier runs into the same DIR whose process
/// is gone (killed before it could clean up). A dir whose PID is alive is
/// left alone: it may be a run in progress.
fn remove_stale(parent: &Path, name: &str) {
    let prefix = format!(".{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        // Our own id: a run that had it before us (ours is not made yet).
        if pid == std::process::id() || !process_exists(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Whether a process with this id exists (`kill(pid, 0)`: no signal is
/// sent; ESRCH means there is none; EPERM means one that is not ours).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}
