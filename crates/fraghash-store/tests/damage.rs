//! Damaged fragment files: whatever bytes of a fragment are damaged, every
//! entry point (open, get, scan, verify, add-fragment) never panics, and
//! every error it returns names the damaged file. Answers that are wrong
//! without an error (damage redb cannot see: it checks no page checksum
//! when it reads) are counted and printed, not failed.
//!
//! Each case damages a fresh copy of one table: single bytes at 200
//! positions spread over the file with a fixed seed (the header and its two
//! commit slots included), and every whole 4 KiB page. Every call runs
//! under `catch_unwind`, so a panic escaping the library is counted, not
//! fatal, and the test reports every case that went wrong at once.

mod common;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use fraghash_store::{Error, Table};

const RECORDS: usize = 4_000;
const PAGE: u64 = 4096;

/// How one damaged file is damaged.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// Every bit of the byte at this offset flipped.
    Byte(u64),
    /// Every bit of the 4 KiB page with this number flipped.
    Page(u64),
}

/// What went wrong in one case, as lines for the failure message.
#[derive(Default)]
struct Findings {
    panics: Vec<String>,
    unnamed: Vec<String>,
    wrong: Vec<String>,
    /// Errors returned (each naming the file, or listed in `unnamed`).
    errors: usize,
}

/// splitmix64: a fixed sequence of positions, the same on every run.
fn positions(seed: u64, n: usize, len: u64) -> Vec<u64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % len
        })
        .collect()
}

fn damage(file: &Path, d: Damage) {
    let mut bytes = std::fs::read(file).unwrap();
    let len = bytes.len() as u64;
    let (from, to) = match d {
        Damage::Byte(at) => (at, at + 1),
        Damage::Page(n) => (n * PAGE, ((n + 1) * PAGE).min(len)),
    };
    for b in &mut bytes[from as usize..to as usize] {
        *b ^= 0xFF;
    }
    std::fs::write(file, bytes).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Runs `f`; a panic is recorded as a finding of `what`.
fn run<T>(f: &mut Findings, what: &str, call: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(v) => Some(v),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            f.panics.push(format!("{what} panicked: {msg}"));
            None
        }
    }
}

/// Records an error that does not name `file`.
fn check_named(f: &mut Findings, what: &str, e: &Error, file: &Path) {
    f.errors += 1;
    let text = e.to_string();
    if !text.contains(&file.display().to_string()) {
        f.unnamed.push(format!("{what}: {text}"));
    }
}

/// Every entry point on the damaged copy in `dir`, whose damaged fragment
/// file is `file`.
fn exercise(dir: &Path, file: &Path, expected: &BTreeMap<Vec<u8>, Vec<u8>>) -> Findings {
    let mut f = Findings::default();
    let t = match run(&mut f, "open", || Table::open(dir)) {
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            check_named(&mut f, "open", &e, file);
            return f;
        }
        None => return f,
    };
    if let Some(local) = run(&mut f, "get", || check_gets(&t, file, expected)) {
        merge(&mut f, local);
    }
    if let Some(local) = run(&mut f, "scan", || check_scan(&t, file, expected)) {
        merge(&mut f, local);
    }
    if let Some(Err(e)) = run(&mut f, "verify", || t.verify()) {
        check_named(&mut f, "verify", &e, file);
    }
    if let Some(Err(e)) = run(&mut f, "add_fragment", || t.add_fragment()) {
        check_named(&mut f, "add_fragment", &e, file);
    }
    run(&mut f, "drop", move || drop(t));
    f
}

/// Open, gets, drop: a table closed after a failed read with nothing in
/// between (redb commits when it closes a file), as `fraghash table get`
/// does.
fn gets_then_drop(dir: &Path, file: &Path, expected: &BTreeMap<Vec<u8>, Vec<u8>>) -> Findings {
    let mut f = Findings::default();
    if let Some(Ok(t)) = run(&mut f, "open", || Table::open(dir)) {
        if let Some(local) = run(&mut f, "get", || check_gets(&t, file, expected)) {
            merge(&mut f, local);
        }
        run(&mut f, "drop after gets", move || drop(t));
    }
    f
}

/// A get of every key: the stored value, or an error naming `file`.
fn check_gets(t: &Table, file: &Path, expected: &BTreeMap<Vec<u8>, Vec<u8>>) -> Findings {
    let mut f = Findings::default();
    for (k, v) in expected {
        match t.get(k) {
            Ok(Some(got)) if &got == v => {}
            Ok(got) => f.wrong.push(format!("get {k:?}: {got:?}, stored {v:?}")),
            Err(e) => check_named(&mut f, "get", &e, file),
        }
    }
    f
}

/// A full scan: every stored record once, or an error naming `file`.
fn check_scan(t: &Table, file: &Path, expected: &BTreeMap<Vec<u8>, Vec<u8>>) -> Findings {
    let mut f = Findings::default();
    let scan = match t.scan() {
        Ok(scan) => scan,
        Err(e) => {
            check_named(&mut f, "scan", &e, file);
            return f;
        }
    };
    let mut seen = 0usize;
    for r in scan {
        match r {
            Ok((k, v)) if expected.get(&k) == Some(&v) => seen += 1,
            Ok((k, v)) => f.wrong.push(format!("scan: {k:?} -> {v:?}")),
            Err(e) => {
                check_named(&mut f, "scan", &e, file);
                return f;
            }
        }
    }
    if seen != expected.len() {
        f.wrong
            .push(format!("scan: {seen} of {} records", expected.len()));
    }
    f
}

fn merge(into: &mut Findings, from: Findings) {
    into.panics.extend(from.panics);
    into.unnamed.extend(from.unnamed);
    into.wrong.extend(from.wrong);
    into.errors += from.errors;
}

#[test]
fn damaged_fragments_are_refused_with_their_file_named_and_never_panic() {
    let root = tempfile::tempdir().unwrap();
    let pristine = root.path().join("pristine");
    let t = common::filled(&pristine, "slots", 3, RECORDS);
    let expected = common::contents(&t);
    let victim: PathBuf = t.stats().fragments[1].path.clone();
    drop(t);
    let name = victim.file_name().unwrap().to_owned();
    let len = std::fs::metadata(&victim).unwrap().len();
    assert!(
        len > 8 * PAGE,
        "a fragment of {len} bytes is too small to damage"
    );

    // The header's magic, page size and region fields, both commit slots,
    // then positions anywhere in the file, and whole pages.
    let mut cases: Vec<Damage> = [0, 9, 12, 16, 28, 64, 80, 100, 160, 192, 208, 250]
        .into_iter()
        .map(Damage::Byte)
        .collect();
    cases.extend(positions(39, 200, len).into_iter().map(Damage::Byte));
    let pages = len.div_ceil(PAGE);
    cases.extend((0..pages).map(Damage::Page));

    let mut report = Vec::new();
    let (mut panics, mut refused) = (0, 0);
    for (i, &d) in cases.iter().enumerate() {
        let dir = root.path().join(format!("case{i}"));
        copy_dir(&pristine, &dir);
        let file = dir.join(&name);
        damage(&file, d);
        let mut f = exercise(&dir, &file, &expected);
        std::fs::remove_dir_all(&dir).unwrap();
        copy_dir(&pristine, &dir);
        damage(&file, d);
        merge(&mut f, gets_then_drop(&dir, &file, &expected));
        panics += f.panics.len();
        if f.errors > 0 {
            refused += 1;
        }
        for line in f.panics.iter().chain(&f.unnamed) {
            report.push(format!("{d:?}: {line}"));
        }
        if let Some(first) = f.wrong.first() {
            eprintln!(
                "{d:?}: {} wrong answers without an error (redb does not check page \
                 checksums on reads), the first: {first}",
                f.wrong.len()
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!(
        "{} cases: {refused} refused with an error, {panics} panics",
        cases.len()
    );
    assert!(report.is_empty(), "{}", report.join("\n"));
    // Not a vacuous pass: much of the damage must have been seen.
    assert!(refused >= 5, "only {refused} cases were refused");
}
