//! The `fraghash table` subcommands.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use fraghash_store::{MigrationReport, Table, TableOptions, WriteBatch};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::{MigrateArgs, TableCommand};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

pub(super) fn dispatch(c: TableCommand) -> Res<u8> {
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
            println!(
                "created {} with {} fragments ({})",
                t.dir().display(),
                t.fragments(),
                t.scheme()
            );
        }
        TableCommand::Put { dir, key, value } => {
            Table::open(&dir)?.put(key.as_bytes(), value.as_bytes())?;
        }
        TableCommand::Get { dir, key } => match Table::open(&dir)?.get(key.as_bytes())? {
            Some(v) => {
                let mut out = std::io::stdout().lock();
                out.write_all(&v)?;
                out.write_all(b"\n")?;
            }
            None => {
                eprintln!("fraghash table: key {key:?} not found");
                return Ok(1);
            }
        },
        TableCommand::Delete { dir, key } => {
            if !Table::open(&dir)?.delete(key.as_bytes())? {
                eprintln!("fraghash table: key {key:?} was not present");
            }
        }
        TableCommand::Load { dir, file, batch } => load(&dir, file.as_deref(), batch)?,
        TableCommand::Scan { dir, limit } => {
            let t = Table::open(&dir)?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for (i, r) in t.scan()?.enumerate() {
                if limit.is_some_and(|l| i as u64 >= l) {
                    break;
                }
                let (k, v) = r?;
                out.write_all(&k)?;
                out.write_all(b"\t")?;
                out.write_all(&v)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
        }
        TableCommand::AddFragment { dir, m } => migrate(&dir, &m, |t| t.add_fragment())?,
        TableCommand::SplitFragment { dir, id, m } => migrate(&dir, &m, |t| t.split_fragment(id))?,
        TableCommand::RemoveFragment { dir, id, m } => {
            migrate(&dir, &m, |t| t.remove_fragment(id))?
        }
        TableCommand::Rebalance { dir, m } => migrate(&dir, &m, |t| t.rebalance())?,
        TableCommand::Stats { dir, json } => stats(&dir, json)?,
        TableCommand::Verify { dir, json } => return verify(&dir, json),
        TableCommand::Compact { dir } => {
            let r = Table::open(&dir)?.compact()?;
            println!(
                "compacted: {} bytes -> {} bytes",
                r.bytes_before, r.bytes_after
            );
        }
    }
    Ok(0)
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

fn load(dir: &Path, file: Option<&Path>, batch: usize) -> Res<()> {
    let t = Table::open(dir)?;
    let (input, len): (Box<dyn Read>, u64) = match file {
        Some(p) if p != Path::new("-") => {
            let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let len = f.metadata().map_or(0, |m| m.len());
            (Box::new(f), len)
        }
        _ => (Box::new(std::io::stdin()), 0),
    };
    let pb = bar(len, "load (bytes)");
    let mut r = BufReader::new(input);
    let mut b = WriteBatch::new();
    let mut line = Vec::new();
    let (mut n, mut lineno) = (0u64, 0u64);
    loop {
        line.clear();
        let got = r.read_until(b'\n', &mut line)?;
        if got == 0 {
            break;
        }
        lineno += 1;
        pb.inc(got as u64);
        let l = line.strip_suffix(b"\n").unwrap_or(&line);
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if l.is_empty() {
            continue;
        }
        let Some(tab) = l.iter().position(|&c| c == b'\t') else {
            return Err(format!(
                "line {lineno}: no TAB between key and value ({n} records loaded before it)"
            )
            .into());
        };
        b.put(&l[..tab], &l[tab + 1..]);
        if b.len() >= batch.max(1) {
            t.write_batch(&b)
                .map_err(|e| format!("line {lineno}: {e} ({n} records loaded before)"))?;
            n += b.len() as u64;
            b.clear();
        }
    }
    if !b.is_empty() {
        t.write_batch(&b)
            .map_err(|e| format!("line {lineno}: {e} ({n} records loaded before)"))?;
        n += b.len() as u64;
    }
    pb.finish_and_clear();
    println!("loaded {n} records; the table holds {}", t.len());
    Ok(())
}

fn migrate(
    dir: &Path,
    m: &MigrateArgs,
    op: impl FnOnce(&Table) -> fraghash_store::Result<MigrationReport>,
) -> Res<()> {
    let t = Table::open(dir)?;
    t.set_batch_size(m.batch);
    let pb = if m.quiet {
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
        println!(
            "{}",
            json!({
                "kind": format!("{:?}", r.kind),
                "fragments_before": r.fragments_before,
                "fragments_after": r.fragments_after,
                "moves": r.moves,
                "ranges": r.ranges,
                "range_plan": r.range_plan,
                "keys_examined": r.keys_examined,
                "keys_moved": r.keys_moved,
                "seconds": r.seconds,
            })
        );
    } else {
        println!(
            "{}: {} -> {} fragments; moved {} records, examined {} ({:.3} examined per moved), {} ranges, {:.2} s",
            r.kind,
            r.fragments_before,
            r.fragments_after,
            r.keys_moved,
            r.keys_examined,
            r.examined_per_moved(),
            r.ranges,
            r.seconds
        );
    }
    Ok(())
}

fn stats(dir: &Path, as_json: bool) -> Res<()> {
    let s = Table::open(dir)?.stats();
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
        println!(
            "{}",
            json!({
                "scheme": s.scheme, "records": s.records, "bytes": s.bytes,
                "migrating": s.migrating, "fragments": frags,
                "balance": {"mean": b.mean, "stddev": b.stddev, "min": b.min, "max": b.max,
                            "max_over_mean": b.max_over_mean, "binomial_floor": b.floor},
            })
        );
        return Ok(());
    }
    println!(
        "scheme {}, {} fragments, {} records, {} bytes",
        s.scheme,
        s.fragments.len(),
        s.records,
        s.bytes
    );
    println!(
        "{:>8} {:>12} {:>14} {:>14}  file",
        "fragment", "records", "bytes", "file bytes"
    );
    for f in &s.fragments {
        println!(
            "{:>8} {:>12} {:>14} {:>14}  {}",
            f.id,
            f.records,
            f.bytes,
            f.file_bytes,
            f.path.display()
        );
    }
    let b = &s.balance;
    println!(
        "mean {:.1}, stddev {:.1} (binomial floor {:.1}), max/mean {:.3}",
        b.mean, b.stddev, b.floor, b.max_over_mean
    );
    Ok(())
}

fn verify(dir: &Path, as_json: bool) -> Res<u8> {
    let r = Table::open(dir)?.verify()?;
    if as_json {
        println!(
            "{}",
            json!({"ok": r.is_ok(), "fragments": r.fragments, "records": r.records,
                   "problems": r.problems})
        );
    } else if r.is_ok() {
        println!(
            "ok: {} records in {} fragments, each where the scheme places it",
            r.records, r.fragments
        );
    } else {
        for p in &r.problems {
            println!("problem: {p}");
        }
    }
    Ok(if r.is_ok() { 0 } else { 1 })
}
