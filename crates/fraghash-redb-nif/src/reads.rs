//! Reads: one key, the first, last, next or previous one, a chunk of a
//! table or of a key prefix's range, a table's figures.

use std::sync::atomic::Ordering;

use fraghash_redb::db::{Chunk, Db, DbError, Direction, Start};
use rustler::{Atom, Binary, Encoder, Env, Error, NifResult, ResourceArc, Term};

use crate::{
    atoms, binary, clock, closed, db_error, utf8, with_db, DbResource, DIRTY_SPELL, SLOW_READ,
};

#[rustler::nif(schedule = "DirtyIo")]
fn get<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    tab: Binary<'a>,
    key: Binary<'a>,
) -> NifResult<Term<'a>> {
    let tab = utf8(tab)?;
    Ok(with_db(env, &db, |d| {
        Ok(value(env, d.get(tab, key.as_slice())?))
    }))
}

/// `{ok, Value}` or `not_found`.
fn value(env: Env<'_>, v: Option<Vec<u8>>) -> Term<'_> {
    match v {
        Some(v) => (atoms::ok(), binary(env, &v)).encode(env),
        None => atoms::not_found().encode(env),
    }
}

/// As `get`, on the calling (normal) scheduler, for the reads the
/// memtable or redb's page cache answer in microseconds. A normal
/// scheduler must not wait for a disc, so it answers `dirty` without
/// reading (the caller then calls `get`, on a dirty I/O scheduler): when
/// the database was opened with `normal_reads` false, while it is being
/// opened again or closed, and for [`DIRTY_SPELL`] after a read here took
/// longer than [`SLOW_READ`] (it read the disc, or waited for a lock).
/// Reads racing that first slow one can be slow too: at most one per
/// scheduler.
#[rustler::nif]
fn get_now<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    tab: Binary<'a>,
    key: Binary<'a>,
) -> NifResult<Term<'a>> {
    let tab = utf8(tab)?;
    let start = clock();
    if !db.normal_reads.load(Ordering::Relaxed) || db.dirty_reads.on(start) {
        return Ok(atoms::dirty().encode(env));
    }
    let Ok(guard) = db.db.try_read() else {
        return Ok(atoms::dirty().encode(env));
    };
    let answer = match guard.as_ref() {
        None => closed(env),
        Some(d) => match d.get(tab, key.as_slice()) {
            Ok(v) => value(env, v),
            Err(e) => db_error(env, &e),
        },
    };
    db.dirty_reads.note(start, SLOW_READ, DIRTY_SPELL);
    Ok(answer)
}

fn one<'a>(env: Env<'a>, r: Option<(Vec<u8>, Vec<u8>)>) -> Term<'a> {
    match r {
        Some((k, v)) => (atoms::ok(), binary(env, &k), binary(env, &v)).encode(env),
        None => atoms::end_of_table().encode(env),
    }
}

#[rustler::nif(schedule = "DirtyIo")]
fn first<'a>(env: Env<'a>, db: ResourceArc<DbResource>, tab: Binary<'a>) -> NifResult<Term<'a>> {
    let tab = utf8(tab)?;
    Ok(with_db(env, &db, |d| Ok(one(env, d.first(tab)?))))
}

#[rustler::nif(schedule = "DirtyIo")]
fn last<'a>(env: Env<'a>, db: ResourceArc<DbResource>, tab: Binary<'a>) -> NifResult<Term<'a>> {
    let tab = utf8(tab)?;
    Ok(with_db(env, &db, |d| Ok(one(env, d.last(tab)?))))
}

#[rustler::nif(schedule = "DirtyIo")]
fn next<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    tab: Binary<'a>,
    key: Binary<'a>,
) -> NifResult<Term<'a>> {
    neighbour(env, &db, tab, key, Db::next)
}

#[rustler::nif(schedule = "DirtyIo")]
fn prev<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    tab: Binary<'a>,
    key: Binary<'a>,
) -> NifResult<Term<'a>> {
    neighbour(env, &db, tab, key, Db::prev)
}

/// A search for the record beside a key: [`Db::next`] or [`Db::prev`].
type Step = fn(&Db, &str, &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>, DbError>;

/// The record of table `tab` that `step` finds beside `key`, as [`one`].
fn neighbour<'a>(
    env: Env<'a>,
    db: &DbResource,
    tab: Binary<'a>,
    key: Binary<'a>,
    step: Step,
) -> NifResult<Term<'a>> {
    let tab = utf8(tab)?;
    Ok(with_db(env, db, |d| {
        Ok(one(env, step(d, tab, key.as_slice())?))
    }))
}

fn decode_start<'a>(t: Term<'a>) -> NifResult<Start<'a>> {
    if let Ok(a) = t.decode::<Atom>() {
        return if a == atoms::edge() {
            Ok(Start::Edge)
        } else {
            Err(Error::BadArg)
        };
    }
    let (tag, key): (Atom, Binary<'a>) = t.decode()?;
    if tag == atoms::after() {
        Ok(Start::After(key.as_slice()))
    } else if tag == atoms::at() {
        Ok(Start::At(key.as_slice()))
    } else {
        Err(Error::BadArg)
    }
}

/// Up to `max` records from `start` in `dir`: `{ok, Items, more | done}`.
#[rustler::nif(schedule = "DirtyIo")]
fn chunk<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    tab: Binary<'a>,
    start: Term<'a>,
    dir: Atom,
    max: usize,
) -> NifResult<Term<'a>> {
    let tab = utf8(tab)?;
    let start = decode_start(start)?;
    let dir = if dir == atoms::forward() {
        Direction::Forward
    } else if dir == atoms::backward() {
        Direction::Backward
    } else {
        return Err(Error::BadArg);
    };
    Ok(with_db(env, &db, |d| {
        let Chunk { items, more } = d.chunk(tab, start, dir, max)?;
        let list: Vec<Term> = items
            .iter()
            .map(|(k, v)| (binary(env, k), binary(env, v)).encode(env))
            .collect();
        let more = if more { atoms::more() } else { atoms::done() };
        Ok((atoms::ok(), list, more).encode(env))
    }))
}

/// Up to `max` records forward from `start` among the keys that start
/// with `prefix` (`<<>>`: all), their values decoded from the external
/// term format: `{ok, Terms, LastKey, more | done, Undecoded}`, `LastKey`
/// the key of the last record read (`none` when none was), `done` once the
/// prefix's range is read. A value the VM's decoder does not take whole
/// comes as its binary, for the caller's `binary_to_term/1` to decode or to
/// raise on: the terms a caller stores are records (tuples), so a binary
/// here is never a record. `Undecoded` counts those binaries, so that a
/// caller walks the list for them only when there are any (nearly never).
/// Saves a scan a key binary, a value binary and a tuple per record, and
/// an Erlang call to decode it.
#[rustler::nif(schedule = "DirtyIo")]
fn records<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    tab: Binary<'a>,
    prefix: Binary<'a>,
    start: Term<'a>,
    max: usize,
) -> NifResult<Term<'a>> {
    let tab = utf8(tab)?;
    let start = decode_start(start)?;
    Ok(with_db(env, &db, |d| {
        let Chunk { items, more } = d.prefix_chunk(tab, prefix.as_slice(), start, max)?;
        let last = match items.last() {
            Some((k, _)) => binary(env, k),
            None => atoms::none().encode(env),
        };
        let mut undecoded = 0usize;
        let terms: Vec<Term> = items
            .iter()
            .map(|(_, v)| match env.binary_to_term(v) {
                Some((term, used)) if used == v.len() => term,
                _ => {
                    undecoded += 1;
                    binary(env, v)
                }
            })
            .collect();
        let more = if more { atoms::more() } else { atoms::done() };
        Ok((atoms::ok(), terms, last, more, undecoded).encode(env))
    }))
}

/// `{ok, N}`: a figure of table `tab` that `figure` reads.
fn table_figure<'a>(
    env: Env<'a>,
    db: &DbResource,
    tab: Binary<'a>,
    figure: fn(&Db, &str) -> Result<u64, DbError>,
) -> NifResult<Term<'a>> {
    let tab = utf8(tab)?;
    Ok(with_db(env, db, |d| {
        Ok((atoms::ok(), figure(d, tab)?).encode(env))
    }))
}

#[rustler::nif(schedule = "DirtyIo")]
fn size<'a>(env: Env<'a>, db: ResourceArc<DbResource>, tab: Binary<'a>) -> NifResult<Term<'a>> {
    table_figure(env, &db, tab, Db::len)
}

#[rustler::nif(schedule = "DirtyIo")]
fn stored_bytes<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    tab: Binary<'a>,
) -> NifResult<Term<'a>> {
    table_figure(env, &db, tab, Db::stored_bytes)
}
