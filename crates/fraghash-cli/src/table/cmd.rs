//! The `fraghash table` subcommands.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use fraghash_store::{MigrationReport, PlanKind, Table, TableOptions, WriteBatch};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use super::escape::{escape_into, unescape};
use super::{MigrateArgs, TableCommand};
use crate::text::{carriage_return, count};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

pub(super) fn dispatch(c: TableCommand, quiet: bool) -> Res<u8> {
    let mut out = std::io::stdout().lock();
    match c {
        TableCommand::Create {
            dir,
            scheme,
            fragments,
            place,
        } => {
            let t = Table::create(
                &dir,
                &TableOptions {
                    scheme,
                    fragments,
                    dirs: place,
                },
            )?;
            if !quiet {
                writeln!(
                    out,
                    "created {} with {} ({})",
                    t.dir().display(),
                    count(t.fragments().into(), "fragment", "fragments"),
                    t.scheme()
                )?;
            }
        }
        TableCommand::Put { dir, key, value } => {
            open(&dir)?.put(key.as_bytes(), value.as_bytes())?;
        }
        TableCommand::Get { dir, key } => match open(&dir)?.get(key.as_bytes())? {
            Some(v) => {
                out.write_all(&v)?;
                out.write_all(b"\n")?;
            }
            None => {
                eprintln!("fraghash table: key {key:?} not found");
                return Ok(1);
            }
        },
        TableCommand::Delete { dir, key } => {
            if !open(&dir)?.delete(key.as_bytes())? {
                eprintln!("fraghash table: key {key:?} was not present");
            }
        }
        TableCommand::Load { dir, file, batch } => {
            let (loaded, total) = load(&dir, file.as_deref(), batch, quiet)?;
            if !quiet {
                writeln!(
                    out,
                    "loaded {}; the table holds {}",
                    count(loaded, "record", "records"),
                    count(total, "record", "records")
                )?;
            }
        }
        TableCommand::Scan { dir, limit } => {
            let t = open(&dir)?;
            let mut out = std::io::BufWriter::new(&mut out);
            let mut line = Vec::new();
            for (i, r) in t.scan()?.enumerate() {
                if limit.is_some_and(|l| i as u64 >= l) {
                    break;
                }
                let (k, v) = r?;
                line.clear();
                escape_into(&k, &mut line);
                line.push(b'\t');
                escape_into(&v, &mut line);
                line.push(b'\n');
                out.write_all(&line)?;
            }
            out.flush()?;
        }
        TableCommand::AddFragment { dir, m } => {
            migrate(&dir, &m, quiet, &mut out, |t| t.add_fragment())?
        }
        TableCommand::SplitFragment { dir, id, m } => {
            migrate(&dir, &m, quiet, &mut out, |t| t.split_fragment(id))?
        }
        TableCommand::RemoveFragment { dir, id, m } => {
            migrate(&dir, &m, quiet, &mut out, |t| t.remove_fragment(id))?
        }
        TableCommand::Rebalance { dir, m } => {
            migrate(&dir, &m, quiet, &mut out, |t| t.rebalance())?
        }
        TableCommand::Stats { dir, json } => stats(&dir, json, &mut out)?,
        TableCommand::Verify { dir, json } => return verify(&dir, json, quiet, &mut out),
        TableCommand::Compact { dir } => {
            let r = open(&dir)?.compact()?;
            if !quiet {
                writeln!(
                    out,
                    "compacted: {} -> {}",
                    count(r.bytes_before, "byte", "bytes"),
                    count(r.bytes_after, "byte", "bytes")
                )?;
            }
        }
    }
    out.flush()?;
    Ok(0)
}

/// Opens the table in `dir`. An open finishes a migration that a crash
/// interrupted, which changes the table; the user is told on stderr (stdout
/// is the command's output), even with `--quiet`.
fn open(dir: &Path) -> fraghash_store::Result<Table> {
    let t = Table::open(dir)?;
    if let Some(r) = t.recovered_migration() {
        eprintln!("fraghash table: {}", recovery_notice(r));
    }
    Ok(t)
}

/// What an open finished: "finished an interrupted migration: added
/// fragment 8 (8 -> 9 fragments), moved 1234 records".
pub(super) fn recovery_notice(r: &MigrationReport) -> String {
    let fragments = if r.fragments_before == r.fragments_after {
        count(r.fragments_after.into(), "fragment", "fragments")
    } else {
        format!(
            "{} -> {}",
            r.fragments_before,
            count(r.fragments_after.into(), "fragment", "fragments")
        )
    };
    format!(
        "finished an interrupted migration: {} ({fragments}), moved {}",
        r.kind,
        count(r.keys_moved, "record", "records")
    )
}

/// Whether `e` is a write to a closed pipe: the reader went away, which
/// ends the command normally.
pub(super) fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let b = ProgressBar::new(len);
    let style = ProgressStyle::with_template(&format!(
        "{what} [{{bar:40}}] {{pos}}/{{len}} {{per_sec}} eta {{eta}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    b.set_style(style);
    b
}

/// Loads `key<TAB>value` lines, each field in the escaped format of
/// [`super::escape`]; returns (records loaded, records in the table).
fn load(dir: &Path, file: Option<&Path>, batch: usize, quiet: bool) -> Res<(u64, u64)> {
    let t = open(dir)?;
    let (input, len, name): (Box<dyn Read>, u64, String) = match file {
        Some(p) if p != Path::new("-") => {
            let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let len = f.metadata().map_or(0, |m| m.len());
            (Box::new(f), len, p.display().to_string())
        }
        _ => (Box::new(std::io::stdin()), 0, "standard input".into()),
    };
    let pb = if quiet {
        ProgressBar::hidden()
    } else {
        bar(len, "load (bytes)")
    };
    let mut r = BufReader::new(input);
    let mut b = WriteBatch::new();
    let mut line = Vec::new();
    let (mut n, mut lineno) = (0u64, 0u64);
    let before = |n: u64| count(n, "record", "records");
    loop {
        line.clear();
        let got = r.read_until(b'\n', &mut line)?;
        if got == 0 {
            break;
        }
        lineno += 1;
        pb.inc(got as u64);
        let l = line.strip_suffix(b"\n").unwrap_or(&line);
        if let Some(e) = carriage_return(l, &name, lineno) {
            return Err(format!("{e} ({} loaded before it)", before(n)).into());
        }
        if l.is_empty() {
            continue;
        }
        let Some(tab) = l.iter().position(|&c| c == b'\t') else {
            return Err(format!(
                "line {lineno}: no TAB between key and value ({} loaded before it)",
                before(n)
            )
            .into());
        };
        let field = |f: &[u8], what: &str| {
            unescape(f).map_err(|e| {
                format!(
                    "line {lineno}: {what}: {e} ({} loaded before it)",
                    before(n)
                )
            })
        };
        b.put(field(&l[..tab], "key")?, field(&l[tab + 1..], "value")?);
        if b.len() >= batch {
            t.write_batch(&b)
                .map_err(|e| format!("line {lineno}: {e} ({} loaded before)", before(n)))?;
            n += b.len() as u64;
            b.clear();
        }
    }
    if !b.is_empty() {
        t.write_batch(&b)
            .map_err(|e| format!("line {lineno}: {e} ({} loaded before)", before(n)))?;
        n += b.len() as u64;
    }
    pb.finish_and_clear();
    Ok((n, t.len()))
}

fn migrate(
    dir: &Path,
    m: &MigrateArgs,
    quiet: bool,
    out: &mut impl Write,
    op: impl FnOnce(&Table) -> fraghash_store::Result<MigrationReport>,
) -> Res<()> {
    let t = open(dir)?;
    t.set_batch_size(m.batch);
    let pb = if quiet {
        ProgressBar::hidden()
    } else {
        bar(0, "move (records read)")
    };
    let p = pb.clone();
    t.set_progress(Some(Box::new(move |g| {
        p.set_length(g.estimated.max(g.examined));
        p.set_position(g.examined);
    })));
    let r = op(&t)?;
    pb.finish_and_clear();
    if m.json {
        writeln!(out, "{}", migration_json(&r))?;
    } else if !quiet {
        writeln!(out, "{}", migration_summary(&r))?;
    }
    Ok(())
}

/// The plan's kind as JSON fields: `{"kind": "add", "fragment": 4}`,
/// `{"kind": "remove", "fragment": 1}`, `{"kind": "split", "source": 0,
/// "fragment": 4}` or `{"kind": "rebalance"}`.
fn kind_json(kind: PlanKind) -> serde_json::Map<String, Value> {
    let v = match kind {
        PlanKind::Add { fragment } => json!({"kind": "add", "fragment": fragment}),
        PlanKind::Remove { fragment } => json!({"kind": "remove", "fragment": fragment}),
        PlanKind::Split { source, fragment } => {
            json!({"kind": "split", "source": source, "fragment": fragment})
        }
        PlanKind::Rebalance => json!({"kind": "rebalance"}),
    };
    match v {
        Value::Object(map) => map,
        _ => unreachable!("json! of an object literal is an object"),
    }
}

/// `--json` of a migration: the kind's fields, then the figures.
pub(super) fn migration_json(r: &MigrationReport) -> Value {
    let mut doc = kind_json(r.kind);
    let figures = json!({
        "fragments_before": r.fragments_before,
        "fragments_after": r.fragments_after,
        "moves": r.moves,
        "ranges": r.ranges,
        "range_plan": r.range_plan,
        "keys_examined": r.keys_examined,
        "keys_moved": r.keys_moved,
        "seconds": r.seconds,
    });
    if let Value::Object(f) = figures {
        doc.extend(f);
    }
    Value::Object(doc)
}

/// The one-line summary of a migration.
pub(super) fn migration_summary(r: &MigrationReport) -> String {
    let examined = if r.keys_moved == 0 {
        format!("examined {}", r.keys_examined)
    } else {
        format!(
            "examined {} ({:.3} examined per moved)",
            r.keys_examined,
            r.examined_per_moved()
        )
    };
    let plan = if r.range_plan {
        count(r.ranges as u64, "hash range", "hash ranges")
    } else {
        "whole fragments scanned".to_string()
    };
    format!(
        "{}: {} -> {}; moved {}, {examined}, {plan}, {:.2} s",
        r.kind,
        r.fragments_before,
        count(r.fragments_after.into(), "fragment", "fragments"),
        count(r.keys_moved, "record", "records"),
        r.seconds
    )
}

fn stats(dir: &Path, as_json: bool, out: &mut impl Write) -> Res<()> {
    let s = open(dir)?.stats();
    if as_json {
        let frags: Vec<_> = s
            .fragments
            .iter()
            .map(|f| {
                json!({"id": f.id, "path": f.path, "records": f.records,
                       "bytes": f.bytes, "file_bytes": f.file_bytes})
            })
            .collect();
        let b = &s.balance;
        writeln!(
            out,
            "{}",
            json!({
                "scheme": s.scheme, "records": s.records, "bytes": s.bytes,
                "migrating": s.migrating, "fragments": frags,
                "balance": {"mean": b.mean, "stddev": b.stddev, "min": b.min, "max": b.max,
                            "max_over_mean": b.max_over_mean, "binomial_floor": b.floor},
            })
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "scheme {}, {}, {}, {}",
        s.scheme,
        count(s.fragments.len() as u64, "fragment", "fragments"),
        count(s.records, "record", "records"),
        count(s.bytes, "byte", "bytes")
    )?;
    writeln!(
        out,
        "{:>8} {:>12} {:>14} {:>14}  file",
        "fragment", "records", "bytes", "file bytes"
    )?;
    for f in &s.fragments {
        writeln!(
            out,
            "{:>8} {:>12} {:>14} {:>14}  {}",
            f.id,
            f.records,
            f.bytes,
            f.file_bytes,
            f.path.display()
        )?;
    }
    let b = &s.balance;
    writeln!(
        out,
        "mean {:.1}, stddev {:.1} (binomial floor {:.1}), max/mean {:.3}",
        b.mean, b.stddev, b.floor, b.max_over_mean
    )?;
    Ok(())
}

fn verify(dir: &Path, as_json: bool, quiet: bool, out: &mut impl Write) -> Res<u8> {
    let r = match open(dir) {
        Ok(t) => t.verify()?,
        // A damaged file that stops the open is a problem found, not an
        // error of the command: its one line names the file.
        Err(e) if e.is_damage() => {
            let problem = e.to_string();
            if as_json {
                writeln!(
                    out,
                    "{}",
                    json!({"ok": false, "fragments": null, "records": null,
                           "problems": [problem]})
                )?;
            } else {
                writeln!(out, "problem: {problem}")?;
            }
            return Ok(1);
        }
        Err(e) => return Err(e.into()),
    };
    if as_json {
        writeln!(
            out,
            "{}",
            json!({"ok": r.is_ok(), "fragments": r.fragments, "records": r.records,
                   "problems": r.problems})
        )?;
    } else if r.is_ok() {
        if !quiet {
            writeln!(
                out,
                "ok: {} in {}, each where the scheme places it",
                count(r.records, "record", "records"),
                count(r.fragments.into(), "fragment", "fragments")
            )?;
        }
    } else {
        for p in &r.problems {
            writeln!(out, "problem: {p}")?;
        }
    }
    Ok(if r.is_ok() { 0 } else { 1 })
}
