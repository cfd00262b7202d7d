//! What the disc-full tests share: a real small file system for a child.

use std::process::Command;

/// Runs this test binary's ignored test `child` in a mount namespace of
/// its own (`unshare -rm`; nothing outside it sees the mount) with a tmpfs
/// of `size` mounted on a fresh directory, whose path the child reads from
/// the environment variable `dir_var`; returns the child's standard
/// output. Where no such file system can be had the calling test fails,
/// unless `FRAGHASH_SKIP_ENOSPC=1` says to leave it out (then `None`).
pub fn run_in_small_tmpfs(size: &str, dir_var: &str, child: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "mount -t tmpfs -o size={size} tmpfs \"$0\" && \
         {dir_var}=\"$0\" exec \"$1\" --exact --ignored {child} --nocapture --test-threads=1"
    );
    let out = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .arg(dir.path())
        .arg(std::env::current_exe().unwrap())
        .output();
    match out {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        other => {
            if std::env::var("FRAGHASH_SKIP_ENOSPC").as_deref() == Ok("1") {
                eprintln!("left out (FRAGHASH_SKIP_ENOSPC=1): no private tmpfs: {other:?}");
                return None;
            }
            panic!(
                "a full disc needs a private tmpfs (unshare -rm, as root): {other:?}; \
                 set FRAGHASH_SKIP_ENOSPC=1 to leave this test out"
            );
        }
    }
}
