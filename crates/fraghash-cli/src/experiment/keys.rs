//! Where the experiment's keys come from, hashed once into a sorted `Vec<u64>`.
//!
//! Every scheme places a key by `h = key_hash(key)` alone, so the experiment
//! keeps only the hashes (8 bytes a key), never the keys. The hashes are
//! sorted once: range plans and the growth curves then count the keys of a
//! hash range with two binary searches.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use fraghash::key_hash;
use fraghash::keys::{seq_key, ShortKeys};
use serde::Serialize;

use super::progress::Progress;
use crate::text::carriage_return;

/// The most keys one run takes (8 bytes of memory each).
pub const MAX_KEYS: u64 = 1_000_000_000;

/// Where keys come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KeySource {
    /// Random short strings as in the posts' experiment (5 to 15 of `a`–`z`, `0`–`9`).
    Short {
        /// Generator seed.
        seed: u64,
    },
    /// `key-0`, `key-1`, ...
    Seq,
    /// One key per line of a file (`-`: standard input).
    File {
        /// The path as given.
        path: String,
    },
}

impl KeySource {
    /// A short description for the terminal.
    pub fn describe(&self) -> String {
        match self {
            KeySource::Short { seed } => format!("random short strings, seed {seed}"),
            KeySource::Seq => "counting keys key-0, key-1, ...".into(),
            KeySource::File { path } if path == "-" => "keys from standard input".into(),
            KeySource::File { path } => format!("keys from {path}"),
        }
    }
}

/// Hashes `count` generated keys, or every key of the file, and sorts them.
pub fn load_hashes(
    source: &KeySource,
    count: u64,
    progress: &Progress,
) -> Result<Vec<u64>, String> {
    let mut hashes = match source {
        KeySource::Short { seed } => {
            let bar = progress.bar("generating keys", count);
            let mut g = ShortKeys::new(*seed);
            let mut buf = Vec::with_capacity(16);
            let mut v = Vec::with_capacity(count as usize);
            for i in 0..count {
                g.next_into(&mut buf);
                v.push(key_hash(&buf));
                if i % 1_000_000 == 999_999 {
                    bar.inc(1_000_000);
                }
            }
            bar.finish_and_clear();
            v
        }
        KeySource::Seq => {
            let bar = progress.bar("generating keys", count);
            let mut buf = Vec::with_capacity(24);
            let mut v = Vec::with_capacity(count as usize);
            for i in 0..count {
                seq_key(i, &mut buf);
                v.push(key_hash(&buf));
                if i % 1_000_000 == 999_999 {
                    bar.inc(1_000_000);
                }
            }
            bar.finish_and_clear();
            v
        }
        KeySource::File { path } => read_key_file(path, progress)?,
    };
    let bar = progress.spinner("sorting hashes");
    sort_hashes(&mut hashes);
    bar.finish_and_clear();
    Ok(hashes)
}

fn read_key_file(path: &str, progress: &Progress) -> Result<Vec<u64>, String> {
    let bar = progress.spinner("reading keys");
    let hashes = if path == "-" {
        hash_lines(std::io::stdin().lock(), "standard input")
    } else {
        let file = std::fs::File::open(Path::new(path))
            .map_err(|e| format!("cannot read key file {path}: {}", io_reason(&e)))?;
        hash_lines(file, path)
    }?;
    bar.finish_and_clear();
    Ok(hashes)
}

/// The OS message without Rust's " (os error N)" suffix.
pub fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Hashes one key per line. Rules (documented in docs/experiment.md):
/// lines end in `\n`, the last may end without one; a key is the bytes of its
/// line, any bytes but `\r` (refused as in `table load`: see
/// [`crate::text::carriage_return`]) and NUL; an empty line is refused; a file with no keys is refused.
pub fn hash_lines(input: impl Read, name: &str) -> Result<Vec<u64>, String> {
    let mut reader = BufReader::with_capacity(1 << 20, input);
    let mut hashes = Vec::new();
    let mut line = Vec::with_capacity(256);
    let mut number: u64 = 0;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("cannot read key file {name}: {}", io_reason(&e)))?;
        if n == 0 {
            break;
        }
        number += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if let Some(e) = carriage_return(&line, &format!("key file {name}"), number) {
            return Err(e);
        }
        if line.contains(&0) {
            return Err(format!(
                "key file {name}, line {number}: NUL byte in a key; keys may not contain NUL"
            ));
        }
        if line.is_empty() {
            return Err(format!(
                "key file {name}, line {number}: empty line; every line must hold one key"
            ));
        }
        if number > MAX_KEYS {
            return Err(format!(
                "key file {name}: more than {MAX_KEYS} keys, the most one run takes"
            ));
        }
        hashes.push(key_hash(&line));
    }
    if hashes.is_empty() {
        return Err(format!("key file {name} has no keys: it is empty"));
    }
    Ok(hashes)
}

/// Sorts on both cores: hashes are uniform, so splitting at the top bit
/// gives two halves of about equal size, each sorted on its own thread.
pub fn sort_hashes(h: &mut [u64]) {
    let mut lo = 0usize;
    let mut hi = h.len();
    // In-place partition: values with the top bit clear first.
    while lo < hi {
        if h[lo] >> 63 == 0 {
            lo += 1;
        } else {
            hi -= 1;
            h.swap(lo, hi);
        }
    }
    let (a, b) = h.split_at_mut(lo);
    std::thread::scope(|s| {
        s.spawn(|| a.sort_unstable());
        b.sort_unstable();
    });
}

/// Number of sorted hashes in `start..=end`.
#[inline]
pub fn count_in(sorted: &[u64], start: u64, end: u64) -> u64 {
    let a = sorted.partition_point(|&x| x < start);
    let b = sorted.partition_point(|&x| x <= end);
    (b - a) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_rules() {
        assert_eq!(hash_lines(&b"a\nb"[..], "t").unwrap().len(), 2);
        assert_eq!(hash_lines(&b"a\nb\n"[..], "t").unwrap().len(), 2);
        assert!(hash_lines(&b"a\r\nb\n"[..], "t")
            .unwrap_err()
            .contains("line 1"));
        assert!(hash_lines(&b"a\nb\0\n"[..], "t")
            .unwrap_err()
            .contains("NUL"));
        assert!(hash_lines(&b"a\n\nb"[..], "t")
            .unwrap_err()
            .contains("line 2: empty"));
        assert!(hash_lines(&b""[..], "t").unwrap_err().contains("no keys"));
        assert_eq!(
            hash_lines(&b"abc"[..], "t").unwrap(),
            vec![key_hash(b"abc")]
        );
    }

    #[test]
    fn sorting_and_counting() {
        let mut g = fraghash::keys::SplitMix64::new(3);
        let mut v: Vec<u64> = (0..10_000).map(|_| g.next()).collect();
        let mut w = v.clone();
        w.sort_unstable();
        sort_hashes(&mut v);
        assert_eq!(v, w);
        let (s, e) = (v[100], v[200]);
        assert_eq!(count_in(&v, s, e), 101);
        assert_eq!(count_in(&v, 0, u64::MAX), 10_000);
        let mut empty: Vec<u64> = vec![];
        sort_hashes(&mut empty);
    }
}
