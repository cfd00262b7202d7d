//! Erlang NIF of module `fraghash_redb_nif`: order keys of terms, and a
//! redb database of many tables ([`fraghash_redb`]).
//!
//! | function | scheduler | returns |
//! |---|---|---|
//! | `order_key_etf(Etf)` | normal (callers pass at most a few KiB) | the order key, a binary |
//! | `order_key_etf_dirty(Etf)` | dirty CPU | the same, for any size |
//! | `key_prefix_etf(Etf)` | normal (callers pass at most a few KiB) | the bytes every order key of a term matching the match pattern starts with, a binary |
//! | `key_prefix_etf_dirty(Etf)` | dirty CPU | the same, for any size |
//! | `open(Path, Opts)` | dirty I/O | `{ok, Db}` |
//! | `close(Db)` | dirty I/O | `ok` (again after the first: `ok`) |
//! | `reopen(Db)` | dirty I/O | `ok`: closed without a sync and opened again (`poisoned`) |
//! | `create_table(Db, Name, Props)` | dirty I/O | `ok` |
//! | `delete_table(Db, Name)` | dirty I/O | `ok` |
//! | `replace_table(Db, Name, From)` | dirty I/O | `ok`: `Name` holds `From`'s records, `From` gone (`Db::replace_table`) |
//! | `tables(Db)` | dirty I/O | `{ok, [{Name, Props}]}` |
//! | `write(Db, Ops, Durability)` | dirty I/O | `ok` |
//! | `write_bulk(Db, Ops)` | dirty I/O | `ok`: logged, once the memtable is below twice its size (`Db::write_bulk`) |
//! | `sync(Db)` | dirty I/O | `ok`: every write that returned before it durable (`Db::sync_written`) |
//! | `flush(Db)` | dirty I/O | `true` or `false` |
//! | `wants_flush(Db)` | normal (reads one figure) | `true` or `false` |
//! | `has_room(Db)` | normal (reads one flag) | `true`, or `false` while the disc is full |
//! | `get(Db, Tab, Key)` | dirty I/O | `{ok, Value}` or `not_found` |
//! | `get_now(Db, Tab, Key)` | normal (a read from memory; see `get_now`) | the same, or `dirty`: call `get` |
//! | `first(Db, Tab)`, `last(Db, Tab)` | dirty I/O | `{ok, Key, Value}` or `'$end_of_table'` |
//! | `next(Db, Tab, Key)`, `prev(Db, Tab, Key)` | dirty I/O | the same |
//! | `chunk(Db, Tab, Start, Dir, Max)` | dirty I/O | `{ok, [{Key, Value}], more \| done}` |
//! | `records(Db, Tab, Prefix, Start, Max)` | dirty I/O | `{ok, [Term], LastKey \| none, more \| done, Undecoded}` |
//! | `size(Db, Tab)` | dirty I/O | `{ok, Count}` |
//! | `log_repairs(Db)` | normal (reads a short list) | `[Text]`: what opening with `repair_log` dropped |
//!
//! `Path`, `Name`, `Tab`, `Key`, `Value` and `Props` are binaries (keys are
//! order keys, values any bytes). `Opts` is a map with optional `create`
//! (boolean), `cache_bytes` (integer), `verify` (boolean),
//! `memtable_bytes` (integer), `log_reserve_bytes` (integer),
//! `repair_log` (boolean) and `normal_reads` (boolean, default `true`:
//! `get_now` reads; `false`: it always answers `dirty`). `Ops` is a
//! list of `{put, Tab, Key, Value}`, `{delete, Tab, Key}` and `{clear,
//! Tab}`, applied in one transaction; `Durability` is `immediate`,
//! `logged` or `deferred` (`fraghash_redb::db::Durability`). `Start` is `edge`, `{after, Key}` or `{at, Key}`; `Dir` is
//! `forward` or `backward`.
//!
//! Database calls return `{error, {Kind, Message}}` on failure, `Kind` one
//! of `locked`, `foreign`, `corrupt`, `disk_full`, `not_found`, `io`,
//! `storage`, `no_such_table`, `table_exists`, `bad_table_name`,
//! `log_damaged`, `log_missing`, `poisoned`, `closed`
//! and `Message` a binary. Order keys raise `{fraghash_redb, Reason,
//! Message}` (so do key prefixes), `Reason` one of `unsupported_key`, `key_too_large`,
//! `too_deep`, `bad_term`. Arguments of the wrong type raise `badarg`.
//! Nothing here panics on bad input. redb panics on some damaged pages:
//! the database calls turn any panic, redb's or this library's, into
//! `{error, {corrupt, Message}}`, `Message` naming the file. rustler turns
//! a panic anywhere else into an Erlang exception, so no call can bring
//! the VM down; and the panic hook this library installs when it loads
//! prints nothing (the library has its own copy of Rust's standard
//! library, so the hook is its own), so no panic message or backtrace
//! reaches the node's terminal.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use fraghash_redb::db::{guarded, Db, DbError, OpenOptions};
use rustler::{
    Binary, Encoder, Env, Error, LocalPid, Monitor, NewBinary, NifResult, ResourceArc, Term,
};

mod keys;
mod reads;
mod writes;

mod atoms {
    rustler::atoms! {
        ok,
        error,
        fraghash_redb,
        unsupported_key,
        key_too_large,
        too_deep,
        bad_term,
        locked,
        foreign,
        corrupt,
        disk_full,
        not_found,
        io,
        storage,
        no_such_table,
        table_exists,
        bad_table_name,
        log_damaged,
        log_missing,
        poisoned,
        repair_log,
        normal_reads,
        dirty,
        log_reserve_bytes,
        closed,
        create,
        cache_bytes,
        verify,
        memtable_bytes,
        put,
        delete,
        clear,
        immediate,
        deferred,
        logged,
        edge,
        after,
        at,
        forward,
        backward,
        more,
        done,
        none,
        busy,
        notify,
        end_of_table = "$end_of_table",
    }
}

/// An open database (`None` once closed), and whether reads may run on a
/// normal scheduler now (`get_now`).
struct DbResource {
    db: RwLock<Option<Db>>,
    normal_reads: AtomicBool,
    /// Writes from their callers (`writes::write_logged`) are held off
    /// (answered `busy`) while set.
    direct_held: AtomicBool,
    /// Writes from their callers under way.
    direct_under_way: AtomicUsize,
    /// When `get_now` sends reads to a dirty scheduler.
    dirty_reads: DirtySpell,
    /// When `writes::write_logged` sends batches to a dirty scheduler.
    dirty_writes: DirtySpell,
}

impl DbResource {
    fn new(db: Db, normal_reads: bool) -> Self {
        DbResource {
            db: RwLock::new(Some(db)),
            normal_reads: AtomicBool::new(normal_reads),
            direct_held: AtomicBool::new(false),
            direct_under_way: AtomicUsize::new(0),
            dirty_reads: DirtySpell::default(),
            dirty_writes: DirtySpell::default(),
        }
    }
}

/// A read on a normal scheduler that takes longer than this most likely
/// read the disc: later reads go to dirty schedulers for [`DIRTY_SPELL`].
const SLOW_READ: Duration = Duration::from_micros(200);
/// How long reads stay on dirty schedulers after a slow one.
const DIRTY_SPELL: Duration = Duration::from_secs(1);

/// Until when (nanoseconds on [`clock`]) calls of one kind go to dirty
/// schedulers, after one made on a normal scheduler took too long.
#[derive(Default)]
struct DirtySpell(AtomicU64);

impl DirtySpell {
    /// Whether a call begun at `now` is to go to a dirty scheduler.
    fn on(&self, now: u64) -> bool {
        now < self.0.load(Ordering::Relaxed)
    }

    /// Notes a call begun at `start` that has just ended on a normal
    /// scheduler: if it took longer than `slow`, the calls of the next
    /// `spell` go to dirty schedulers.
    fn note(&self, start: u64, slow: Duration, spell: Duration) {
        let end = clock();
        if end - start > slow.as_nanos() as u64 {
            self.0
                .store(end + spell.as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// Nanoseconds since the first call, on a monotonic clock.
fn clock() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[rustler::resource_impl]
impl rustler::Resource for DbResource {
    /// The process that opened the database ended without closing it (a
    /// kill, a crash): it is dropped unsynced, as a kill -9 of the node
    /// would leave it, so that no caller writes into it while nobody
    /// flushes it, and its file is free for the next open, which replays
    /// the log. Later calls on it return `{error, {closed, _}}`.
    fn down<'a>(&'a self, _env: Env<'a>, _pid: LocalPid, _monitor: Monitor) {
        drop(self.db.write().unwrap_or_else(|p| p.into_inner()).take());
    }
}

fn binary<'a>(env: Env<'a>, data: &[u8]) -> Term<'a> {
    NewBinary::from_slice(env, data).into()
}

fn text<'a>(env: Env<'a>, s: &str) -> Term<'a> {
    binary(env, s.as_bytes())
}

fn db_error<'a>(env: Env<'a>, e: &DbError) -> Term<'a> {
    let kind = match e {
        DbError::Locked { .. } => atoms::locked(),
        DbError::Foreign { .. } => atoms::foreign(),
        DbError::Corrupt { .. } => atoms::corrupt(),
        DbError::DiskFull { .. } => atoms::disk_full(),
        DbError::NotFound { .. } => atoms::not_found(),
        DbError::Io { .. } => atoms::io(),
        DbError::Storage { .. } => atoms::storage(),
        DbError::NoSuchTable { .. } => atoms::no_such_table(),
        DbError::TableExists { .. } => atoms::table_exists(),
        DbError::BadTableName { .. } => atoms::bad_table_name(),
        DbError::LogDamaged { .. } => atoms::log_damaged(),
        DbError::LogMissing { .. } => atoms::log_missing(),
        DbError::Poisoned { .. } => atoms::poisoned(),
    };
    (atoms::error(), (kind, text(env, &e.to_string()))).encode(env)
}

fn closed(env: Env<'_>) -> Term<'_> {
    let msg = text(env, "the database is closed");
    (atoms::error(), (atoms::closed(), msg)).encode(env)
}

/// Runs `f` on the open database, turning its error into `{error, ...}`.
fn with_db<'a>(
    env: Env<'a>,
    res: &DbResource,
    f: impl FnOnce(&Db) -> Result<Term<'a>, DbError>,
) -> Term<'a> {
    // A panic while the lock was held cannot leave the `Db` half-changed
    // (redb's own state is its concern), so a poisoned lock is used as is.
    let guard = res.db.read().unwrap_or_else(|p| p.into_inner());
    match guard.as_ref() {
        None => closed(env),
        // A panic (redb's on a damaged page) is `{error, {corrupt, _}}`.
        Some(db) => guarded(db.path(), || f(db)).unwrap_or_else(|e| db_error(env, &e)),
    }
}

fn utf8<'a>(b: Binary<'a>) -> NifResult<&'a str> {
    std::str::from_utf8(b.as_slice()).map_err(|_| Error::BadArg)
}

/// The `normal_reads` option (default `true`).
fn normal_reads(opts: Term) -> NifResult<bool> {
    match opts.map_get(atoms::normal_reads()) {
        Ok(v) => v.decode(),
        Err(_) => Ok(true),
    }
}

fn open_options(opts: Term) -> NifResult<OpenOptions> {
    let mut o = OpenOptions::default();
    if let Ok(v) = opts.map_get(atoms::create()) {
        o.create = v.decode()?;
    }
    if let Ok(v) = opts.map_get(atoms::cache_bytes()) {
        o.cache_bytes = v.decode()?;
    }
    if let Ok(v) = opts.map_get(atoms::verify()) {
        o.verify = v.decode()?;
    }
    if let Ok(v) = opts.map_get(atoms::memtable_bytes()) {
        o.memtable_bytes = v.decode()?;
    }
    if let Ok(v) = opts.map_get(atoms::log_reserve_bytes()) {
        o.log_reserve_bytes = v.decode()?;
    }
    if let Ok(v) = opts.map_get(atoms::repair_log()) {
        o.repair_log = v.decode()?;
    }
    Ok(o)
}

/// Opens (or creates) the database in file `path`.
#[rustler::nif(schedule = "DirtyIo")]
fn open<'a>(env: Env<'a>, path: Binary<'a>, opts: Term<'a>) -> NifResult<Term<'a>> {
    if !opts.is_map() {
        return Err(Error::BadArg);
    }
    let options = open_options(opts)?;
    let normal = normal_reads(opts)?;
    Ok(match Db::open(utf8(path)?, &options) {
        Ok(db) => {
            let res = ResourceArc::new(DbResource::new(db, normal));
            // Owned by the opener: see `DbResource::down`.
            let _ = env.monitor(&res, &env.pid());
            (atoms::ok(), res).encode(env)
        }
        Err(e) => db_error(env, &e),
    })
}

/// Whether the disc has room for more writes (`Db::has_room`). Runs on a
/// normal scheduler beside every write, so it never waits: a database
/// being closed (or closed) answers `true`, and the write itself reports
/// what is wrong.
#[rustler::nif]
fn has_room(db: ResourceArc<DbResource>) -> bool {
    match db.db.try_read() {
        Ok(guard) => guard.as_ref().is_none_or(Db::has_room),
        Err(_) => true,
    }
}

/// What opening with `repair_log` dropped from the log, one sentence each.
#[rustler::nif]
fn log_repairs(env: Env, db: ResourceArc<DbResource>) -> Term {
    with_db(env, &db, |d| {
        let texts: Vec<Term> = d
            .log_repairs()
            .iter()
            .map(|r| text(env, &r.to_string()))
            .collect();
        Ok(texts.encode(env))
    })
}

/// Closes the database without a sync and opens its file again
/// (`Db::reopen`), for a database an I/O error left refusing everything
/// (`poisoned`). Every call waits meanwhile; if the open fails the
/// database is closed, and later calls return `{error, {closed, _}}`.
#[rustler::nif(schedule = "DirtyIo")]
fn reopen(env: Env, db: ResourceArc<DbResource>) -> Term {
    let mut guard = db.db.write().unwrap_or_else(|p| p.into_inner());
    match guard.take().map(Db::reopen) {
        None => closed(env),
        Some(Ok(again)) => {
            *guard = Some(again);
            atoms::ok().encode(env)
        }
        Some(Err(e)) => db_error(env, &e),
    }
}

/// Closes the database; later calls on it return `{error, {closed, _}}`.
#[rustler::nif(schedule = "DirtyIo")]
fn close(env: Env, db: ResourceArc<DbResource>) -> Term {
    let taken = db.db.write().unwrap_or_else(|p| p.into_inner()).take();
    match taken.map(Db::close) {
        Some(Err(e)) => db_error(env, &e),
        _ => atoms::ok().encode(env),
    }
}

#[rustler::nif(schedule = "DirtyIo")]
fn create_table<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    name: Binary<'a>,
    props: Binary<'a>,
) -> NifResult<Term<'a>> {
    let name = utf8(name)?;
    Ok(with_db(env, &db, |d| {
        d.create_table(name, props.as_slice())?;
        Ok(atoms::ok().encode(env))
    }))
}

#[rustler::nif(schedule = "DirtyIo")]
fn delete_table<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    name: Binary<'a>,
) -> NifResult<Term<'a>> {
    let name = utf8(name)?;
    Ok(with_db(env, &db, |d| {
        d.delete_table(name)?;
        Ok(atoms::ok().encode(env))
    }))
}

/// Table `name` takes the records of table `from`, which goes: one synced
/// commit (a copy loaded aside replaces the old one).
#[rustler::nif(schedule = "DirtyIo")]
fn replace_table<'a>(
    env: Env<'a>,
    db: ResourceArc<DbResource>,
    name: Binary<'a>,
    from: Binary<'a>,
) -> NifResult<Term<'a>> {
    let (name, from) = (utf8(name)?, utf8(from)?);
    Ok(with_db(env, &db, |d| {
        d.replace_table(name, from)?;
        Ok(atoms::ok().encode(env))
    }))
}

#[rustler::nif(schedule = "DirtyIo")]
fn tables(env: Env, db: ResourceArc<DbResource>) -> Term {
    with_db(env, &db, |d| {
        let list: Vec<Term> = d
            .tables()?
            .iter()
            .map(|(n, p)| (text(env, n), binary(env, p)).encode(env))
            .collect();
        Ok((atoms::ok(), list).encode(env))
    })
}

/// At load: a panic hook that prints nothing. Every panic here is caught
/// (by [`with_db`], or by rustler, which raises it in Erlang), and Rust's
/// default hook would print its message, and with `RUST_BACKTRACE` a
/// backtrace, on the node's terminal first.
fn load(_env: Env, _info: Term) -> bool {
    std::panic::set_hook(Box::new(|_| {}));
    true
}

rustler::init!("fraghash_redb_nif", load = load);
