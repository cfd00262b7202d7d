//! Writes: batches of ops, the flushes and syncs that make them durable,
//! and the writes a committing process makes itself
//! (`write_logged`), held off while the node's writer process reads
//! and writes as one (`hold_direct_writes`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use fraghash_redb::db::{Db, DbError, Durability, Op};
use rustler::{Atom, Binary, Encoder, Env, Error, NifResult, ResourceArc, Term};

use crate::{atoms, clock, with_db, DbResource};

/// The most ops a batch written on a normal scheduler holds.
const NOW_OPS: usize = 64;
/// The most bytes (keys and values) a batch written on a normal scheduler
/// holds.
const NOW_BYTES: usize = 64 * 1024;
/// A batch on a normal scheduler that takes longer than this (the most a
/// NIF should hold a scheduler) most likely read the disc or met a slow
/// one: later ones go to dirty schedulers for [`WRITE_SPELL`]. Most take
/// 2 to 10 µs; one in tens of thousands takes a few hundred (a log file
/// growing, a page read).
const SLOW_WRITE: Duration = Duration::from_millis(1);
/// How long batches stay on dirty schedulers after a slow one.
const WRITE_SPELL: Duration = Duration::from_millis(100);

/// Every op of a batch (see [`decode_op`]).
fn decode_ops<'a>(ops: Vec<Term<'a>>) -> NifResult<Vec<Op<'a>>> {
    ops.into_iter().map(decode_op).collect()
}

/// One op of a batch: `{put, Tab, Key, Value}`, `{delete, Tab, Key}` or
/// `{clear, Tab}`.
fn decode_op<'a>(t: Term<'a>) -> NifResult<Op<'a>> {
    let parts = rustler::types::tuple::get_tuple(t)?;
    let tag: Atom = parts.first().ok_or(Error::BadArg)?.decode()?;
    let bin = |i: usize| -> NifResult<&'a [u8]> {
        let b: Binary<'a> = parts.get(i).ok_or(Error::BadArg)?.decode()?;
        Ok(b.as_slice())
    };
    let table =
        || -> NifResult<&'a str> { std::str::from_utf8(bin(1)?).map_err(|_| Error::BadArg) };
    Ok(match parts.len() {
        4 if tag == atoms::put() => Op::Put {
            table: table()?,
            key: bin(2)?,
            value: bin(3)?,
        },
        3 if tag == atoms::delete() => Op::Delete {
            table: table()?,
            key: bin(2)?,
        },
        2 if tag == atoms::clear() => Op::Clear { table: table()? },
        _ => return Err(Error::BadArg),
    })
}

/// Applies `ops` in one transaction with `durability` (`immediate`,
/// `logged` or `deferred`).
#[rustler::nif(schedule = "DirtyIo")]
fn write<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    ops: Vec<Term<'a>>,
    durability: Atom,
) -> NifResult<Term<'a>> {
    let durability = if durability == atoms::immediate() {
        Durability::Immediate
    } else if durability == atoms::logged() {
        Durability::Logged
    } else if durability == atoms::deferred() {
        Durability::Deferred
    } else {
        return Err(Error::BadArg);
    };
    let ops = decode_ops(ops)?;
    Ok(with_db(env, &db, |d| {
        d.write(&ops, durability)?;
        Ok(atoms::ok().encode(env))
    }))
}

/// Applies `ops` as one [`Durability::Logged`] batch from the calling
/// process, on its own (normal) scheduler, instead of through the node's
/// writer process (`Db::try_write_logged`): `ok`; `notify` when the
/// writer process must hear of it (it arms the flush that makes the batch
/// durable within its sync interval, or flushes a full memtable); `busy`,
/// nothing written, while the writer process holds such writes off
/// (`hold_direct_writes`); `dirty`, nothing written, where the batch
/// would wait (for the writer lock, a flush, a disc) or is large (more
/// than [`NOW_OPS`] ops or [`NOW_BYTES`] bytes), and for [`WRITE_SPELL`]
/// after a batch here took longer than [`SLOW_WRITE`]: the caller then
/// calls [`write_logged_dirty`]; or `{error, {Kind, Text}}`.
#[rustler::nif]
fn write_logged<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    ops: Vec<Term<'a>>,
) -> NifResult<Term<'a>> {
    let start = clock();
    if ops.len() > NOW_OPS || db.dirty_writes.on(start) {
        return Ok(atoms::dirty().encode(env));
    }
    let ops = decode_ops(ops)?;
    if ops.iter().map(Op::bytes).sum::<usize>() > NOW_BYTES {
        return Ok(atoms::dirty().encode(env));
    }
    let Ok(guard) = db.db.try_read() else {
        return Ok(atoms::dirty().encode(env));
    };
    let Some(d) = guard.as_ref() else {
        return Ok(crate::closed(env));
    };
    let answer = direct(env, &db, || d.try_write_logged(&ops));
    db.dirty_writes.note(start, SLOW_WRITE, WRITE_SPELL);
    Ok(answer)
}

/// As `write_logged`, on a dirty I/O scheduler, waiting where that one
/// answers `dirty` (`Db::write_logged`).
#[rustler::nif(schedule = "DirtyIo")]
fn write_logged_dirty<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    ops: Vec<Term<'a>>,
) -> NifResult<Term<'a>> {
    let ops = decode_ops(ops)?;
    Ok(with_db(env, &db, |d| {
        Ok(direct(env, &db, || d.write_logged(&ops).map(Some)))
    }))
}

/// Runs a caller's own write unless the writer process holds them off:
/// its answer as `write_logged` gives it.
fn direct<'a>(
    env: Env<'a>,
    db: &DbResource,
    write: impl FnOnce() -> Result<Option<bool>, DbError>,
) -> Term<'a> {
    // Counted under way before the hold is read, and the hold set before
    // the count is read (hold_direct_writes): either the batch sees the
    // hold, or the holder waits for the batch.
    db.direct_under_way.fetch_add(1, Ordering::SeqCst);
    let answer = if db.direct_held.load(Ordering::SeqCst) {
        atoms::busy().encode(env)
    } else {
        match write() {
            Ok(Some(true)) => atoms::notify().encode(env),
            Ok(Some(false)) => atoms::ok().encode(env),
            Ok(None) => atoms::dirty().encode(env),
            Err(e) => crate::db_error(env, &e),
        }
    };
    db.direct_under_way.fetch_sub(1, Ordering::SeqCst);
    answer
}

/// With `true`, holds off `write_logged` (it answers `busy`) and
/// returns once none is under way; with `false`, lets it go on. The
/// writer process holds them off while it reads a record and writes it
/// back changed (a counter), so that no other write falls in between.
#[rustler::nif(schedule = "DirtyIo")]
fn hold_direct_writes(db: ResourceArc<DbResource>, hold: bool) -> Atom {
    db.direct_held.store(hold, Ordering::SeqCst);
    if hold {
        while db.direct_under_way.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    atoms::ok()
}

/// Applies `ops` as a logged batch that gives way to other writers
/// (`Db::write_bulk`).
#[rustler::nif(schedule = "DirtyIo")]
fn write_bulk<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    ops: Vec<Term<'a>>,
) -> NifResult<Term<'a>> {
    let ops = decode_ops(ops)?;
    Ok(with_db(env, &db, |d| {
        d.write_bulk(&ops)?;
        Ok(atoms::ok().encode(env))
    }))
}

#[rustler::nif(schedule = "DirtyIo")]
fn sync(env: Env, db: ResourceArc<DbResource>) -> Term {
    with_db(env, &db, |d| {
        d.sync_written()?;
        Ok(atoms::ok().encode(env))
    })
}

/// Commits the memtable to redb (`Db::flush`): `true` when it did,
/// `false` when there was nothing to flush or another flush was under way.
#[rustler::nif(schedule = "DirtyIo")]
fn flush(env: Env, db: ResourceArc<DbResource>) -> Term {
    with_db(env, &db, |d| Ok(d.flush()?.encode(env)))
}

/// Whether the memtable wants a flush (`Db::wants_flush`). Normal
/// scheduler: it reads one figure under a lock held only for memory
/// operations, and answers `false` rather than wait for a database being
/// closed.
#[rustler::nif]
fn wants_flush(db: ResourceArc<DbResource>) -> bool {
    match db.db.try_read() {
        Ok(guard) => guard.as_ref().is_some_and(Db::wants_flush),
        Err(_) => false,
    }
}
