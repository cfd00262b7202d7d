//! The database's log: where a [`Durability::Logged`] batch lives until a
//! synced redb commit holds it.
//!
//! A logged batch goes to the memtable, which the process's death takes
//! with it. So it is first appended to the log beside the database, in
//! one positioned write. Once [`super::Db::write`] returns, the batch is in
//! the operating system's page cache and survives the death of the process
//! (a kill -9 included); a crash of the operating system or a power cut
//! can lose the batches logged since the last synced commit, which the log
//! does not sync.
//!
//! ## Two files
//! The log is two files, `<database>.log` and `<database>.log2`. Appends
//! go to one of them. A flush turns them to the other (which the last
//! flush emptied) as it freezes the memtable, so that the frozen layer's
//! records are all in the first file and every later one in the second;
//! once its synced commit holds them, it empties the first.
//!
//! ## Sequence numbers
//! Each record carries a number one above the last, across both files. A
//! synced commit (a flush, an [`Durability::Immediate`] batch, a table
//! created or deleted, [`super::Db::sync`]) stores, in the same
//! transaction, the number of the last record it holds in the meta table
//! (`log_seq`). So after a crash the durable `log_seq` is the number of the
//! last record the last synced commit holds, and opening replays, in one
//! synced commit, exactly the records numbered above it, from both files
//! in their order. A crash between a synced commit and the emptying of a
//! file leaves records that the number tells to skip. (Were a replayed
//! record's changes in redb already, the replay would still be right: it
//! applies, in their order, whole batches of puts, deletes and clears,
//! which give every key the value its last op gives it, from any state
//! that holds a prefix of them.)
//!
//! ## A torn end, and damage
//! A record that ends early, whose checksum fails or whose number is not
//! the next one ends its file: a write the death of the machine tore, or
//! bytes left past the end by an append that failed. The file is cut
//! there. Records after a gap in the numbers (the first file's end lost to
//! a crash of the machine, the second's kept) are not replayed.
//!
//! A torn end has nothing good after it: neither a torn write nor a failed
//! append (which the next append overwrites) leaves a whole record with a
//! later number behind a bad one. So when a whole record numbered above
//! the last good one (and above the durable number) follows the bad
//! bytes, the file was damaged in the middle, and opening fails with
//! [`DbError::LogDamaged`] (file, offset, records after it) instead of
//! cutting it; likewise a log file missing beside a database that had it
//! ([`DbError::LogMissing`]). Opening with `repair` cuts and goes on, and
//! says what it dropped ([`LogRepair`]).
//!
//! ## Room kept ahead
//! A full disc must not make an append fail after its caller was told the
//! write would be taken. So each file keeps `reserve` bytes allocated past
//! its end (Linux `fallocate` with `FALLOC_FL_KEEP_SIZE`: the file's length
//! does not change, so reading is unaffected). When the file system cannot
//! give that room, appends go on into what is reserved and
//! [`Log::low_room`] says so, for the caller to stop taking writes until
//! room comes back ([`Log::reserve_room`] tries again). Elsewhere than on
//! Linux no room is reserved.
//!
//! ## Format
//! An 8-byte header `fhrlog\0\x01`, then records `[body length: u32 LE]
//! [crc32 of the body: u32 LE][body]`, the body `[seq: u64 LE]` then its
//! ops: a put `[0][table length: u16 LE][table][key length: u32 LE][key]
//! [value length: u32 LE][value]`, a delete `[1][table][key]` (lengths as
//! for a put), a clear `[2][table]`.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::op::Op;
use super::DbError;

const HEADER: &[u8; 8] = b"fhrlog\0\x01";
const HEADER_LEN: u64 = HEADER.len() as u64;
/// The length and checksum before each body.
const FRAME_LEN: usize = 8;

/// An op read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum OwnedOp {
    Put {
        table: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        table: String,
        key: Vec<u8>,
    },
    Clear {
        table: String,
    },
}

impl OwnedOp {
    pub(super) fn as_op(&self) -> Op<'_> {
        match self {
            OwnedOp::Put { table, key, value } => Op::Put { table, key, value },
            OwnedOp::Delete { table, key } => Op::Delete { table, key },
            OwnedOp::Clear { table } => Op::Clear { table },
        }
    }
}

/// A record read back from the log.
#[derive(Debug)]
pub(super) struct Record {
    pub(super) seq: u64,
    pub(super) ops: Vec<OwnedOp>,
}

/// The two files of the log, `<database>.log` and `<database>.log2`:
/// appends go to the current one; a flush ([`Log::rotate`]) turns to the
/// other (empty) file, so that the records of the layer being flushed are
/// in one file and the later ones in the other, and empties the old one
/// once the flush has committed ([`Log::drop_old`]). Every method is
/// called with the database's writer lock held, so appends never
/// interleave.
#[derive(Debug)]
pub(super) struct Log {
    files: [File; 2],
    paths: [PathBuf; 2],
    /// Where the next record of each file goes: the end of its last good
    /// record.
    lens: [u64; 2],
    /// The file appends go to.
    cur: usize,
    /// The number the next record takes.
    next_seq: u64,
    /// The bytes each file keeps allocated past its end.
    reserve: u64,
    /// Where each file's allocated room ends, as far as known.
    reserved: [u64; 2],
    /// The last reservation failed for want of room.
    low: bool,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> DbError + '_ {
    move |e| DbError::io(path, e)
}

/// The second file of the log in `path`.
fn second(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("2");
    PathBuf::from(p)
}

/// What opening with [`OpenOptions::repair_log`](super::OpenOptions::repair_log) dropped from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRepair {
    /// The file was damaged at `offset`: the `bytes` from there to its
    /// end were cut, `records` whole records among them.
    Cut {
        /// The log file.
        file: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// The bytes cut.
        bytes: u64,
        /// The whole records, numbered above the last good one, cut with
        /// them.
        records: usize,
    },
    /// The file was missing, and was made anew: whatever it held is gone.
    Missing {
        /// The log file.
        file: PathBuf,
    },
}

impl std::fmt::Display for LogRepair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogRepair::Cut {
                file,
                offset,
                bytes,
                records,
            } => write!(
                f,
                "{}: cut at offset {offset}: {bytes} bytes dropped, {records} whole \
                 logged batches among them",
                file.display()
            ),
            LogRepair::Missing { file } => write!(
                f,
                "{}: missing, made anew (the batches it held are lost)",
                file.display()
            ),
        }
    }
}

/// One log file opened (created if missing, with its header) and read:
/// the file, its good length and its good records, its torn end cut.
/// Damage in the middle (see the module's documentation) is an error,
/// or with `repair` cut and reported.
fn open_file(
    path: &Path,
    durable_seq: u64,
    repair: bool,
) -> Result<(File, u64, Vec<Record>, Option<LogRepair>), DbError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io(path))?;
    if bytes.is_empty() {
        file.write_all_at(HEADER, 0).map_err(io(path))?;
        return Ok((file, HEADER_LEN, Vec::new(), None));
    }
    if bytes.len() < HEADER.len() || &bytes[..HEADER.len()] != HEADER {
        return Err(DbError::Foreign {
            path: path.to_path_buf(),
            reason: "not a log of this crate (its header is wrong)".to_owned(),
        });
    }
    let mut records: Vec<Record> = Vec::new();
    let mut at = HEADER.len();
    while let Some((record, next)) = read_record(&bytes, at) {
        if records.last().is_some_and(|r| record.seq != r.seq + 1) {
            break;
        }
        at = next;
        records.push(record);
    }
    let mut repaired = None;
    if at < bytes.len() {
        let floor = records
            .last()
            .map_or(durable_seq, |r| r.seq.max(durable_seq));
        let later = later_records(&bytes, at, floor);
        if later > 0 {
            if !repair {
                return Err(DbError::LogDamaged {
                    path: path.to_path_buf(),
                    offset: at as u64,
                    records_after: later,
                });
            }
            repaired = Some(LogRepair::Cut {
                file: path.to_path_buf(),
                offset: at as u64,
                bytes: (bytes.len() - at) as u64,
                records: later,
            });
        }
        file.set_len(at as u64).map_err(io(path))?;
    }
    Ok((file, at as u64, records, repaired))
}

/// The whole records after the bad bytes at `from` numbered above `floor`:
/// evidence that the bytes at `from` are damage, not a torn end.
fn later_records(bytes: &[u8], from: usize, floor: u64) -> usize {
    let mut found = 0;
    let mut at = from + 1;
    while at + FRAME_LEN <= bytes.len() {
        match read_record(bytes, at) {
            Some((record, next)) if record.seq > floor => {
                found += 1;
                at = next;
            }
            _ => at += 1,
        }
    }
    found
}

impl Log {
    /// Opens (or creates) the log of `path` (`path` and its second file)
    /// and reads its records, cutting a torn end. `durable_seq` is the
    /// database's durable `log_seq`: the records numbered from
    /// `durable_seq + 1` on without a gap are returned, for the caller to
    /// replay; a gap (the records before it lost to a crash of the
    /// machine) ends them.
    ///
    /// `must_exist`: the database had both files, so a missing one is
    /// [`DbError::LogMissing`] (checked before either is created). With
    /// `repair`, a missing file is made anew and damage cut; what that
    /// dropped is returned.
    pub(super) fn open(
        path: &Path,
        durable_seq: u64,
        must_exist: bool,
        repair: bool,
    ) -> Result<(Log, Vec<Record>, Vec<LogRepair>), DbError> {
        let paths = [path.to_path_buf(), second(path)];
        let mut repairs = Vec::new();
        for p in &paths {
            if must_exist && !p.exists() {
                if !repair {
                    return Err(DbError::LogMissing { path: p.clone() });
                }
                repairs.push(LogRepair::Missing { file: p.clone() });
            }
        }
        let (f0, l0, r0, c0) = open_file(&paths[0], durable_seq, repair)?;
        let (f1, l1, r1, c1) = open_file(&paths[1], durable_seq, repair)?;
        repairs.extend(c0.into_iter().chain(c1));
        let last_seen = r0.iter().chain(&r1).map(|r| r.seq).max().unwrap_or(0);
        // The file whose records come later is the current one.
        let cur = usize::from(r1.first().map(|r| r.seq) > r0.first().map(|r| r.seq));
        let mut all: Vec<Record> = r0.into_iter().chain(r1).collect();
        all.sort_by_key(|r| r.seq);
        let mut records = Vec::new();
        for r in all {
            if r.seq <= durable_seq {
                continue;
            }
            if r.seq != durable_seq + 1 + records.len() as u64 {
                break;
            }
            records.push(r);
        }
        let log = Log {
            files: [f0, f1],
            paths,
            lens: [l0, l1],
            cur,
            next_seq: durable_seq.max(last_seen) + 1,
            reserve: 0,
            reserved: [0, 0],
            low: false,
        };
        Ok((log, records, repairs))
    }

    /// Keeps `bytes` allocated past the end of each file from now on (and
    /// tries to at once).
    pub(super) fn set_reserve(&mut self, bytes: u64) {
        self.reserve = bytes;
        self.reserved = [0, 0];
        self.reserve_room();
    }

    /// Gives back the room reserved past each file's end and reserves no
    /// more: for a database being closed, whose next open reserves again.
    /// A failure to cut a file only leaves its room allocated.
    pub(super) fn release_room(&mut self) {
        self.reserve = 0;
        for c in 0..2 {
            if self.reserved[c] > self.lens[c] {
                let _ = self.files[c].set_len(self.lens[c]);
            }
            self.reserved[c] = 0;
        }
    }

    /// Whether the last reservation failed for want of room: the appends
    /// taken since live on what was reserved before.
    pub(super) fn low_room(&self) -> bool {
        self.low
    }

    /// Tries to have `reserve` bytes allocated past the end of each file;
    /// returns whether there is. Only a full disc counts as no room: any
    /// other failure (a file system without `fallocate`) leaves appends to
    /// report their own errors.
    pub(super) fn reserve_room(&mut self) -> bool {
        self.low = false;
        for c in 0..2 {
            let want = self.lens[c] + self.reserve;
            if self.reserve == 0 || self.reserved[c] >= want {
                continue;
            }
            match allocate(&self.files[c], want) {
                Ok(()) => self.reserved[c] = want,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => self.low = true,
                Err(_) => self.reserved[c] = want,
            }
        }
        !self.low
    }

    /// The number of the last record appended (the durable number the log
    /// was opened with when none was).
    pub(super) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// The bytes the log's records take, in both files.
    pub(super) fn len(&self) -> u64 {
        self.lens.iter().map(|l| l - HEADER_LEN).sum()
    }

    /// Whether the log holds no record.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes `ops` take as a record.
    pub(super) fn record_len(ops: &[Op]) -> u64 {
        (FRAME_LEN + 8 + ops.iter().map(op_len).sum::<usize>()) as u64
    }

    /// Appends `ops` as the next record and returns its number. On an
    /// error nothing counts as appended (the next record overwrites what
    /// was written, and opening ignores it).
    pub(super) fn append(&mut self, ops: &[Op]) -> Result<u64, DbError> {
        let seq = self.next_seq;
        let mut body = Vec::with_capacity(Self::record_len(ops) as usize);
        body.extend_from_slice(&[0; FRAME_LEN]);
        body.extend_from_slice(&seq.to_le_bytes());
        for op in ops {
            encode_op(&mut body, op);
        }
        let body_len = (body.len() - FRAME_LEN) as u32;
        let crc = crc32fast::hash(&body[FRAME_LEN..]);
        body[..4].copy_from_slice(&body_len.to_le_bytes());
        body[4..8].copy_from_slice(&crc.to_le_bytes());
        let c = self.cur;
        self.files[c]
            .write_all_at(&body, self.lens[c])
            .map_err(io(&self.paths[c]))?;
        self.lens[c] += body.len() as u64;
        self.next_seq += 1;
        // Half the reserve used: ask for more ahead of need.
        if self.lens[c] + self.reserve / 2 > self.reserved[c] {
            self.reserve_room();
        }
        Ok(seq)
    }

    /// Turns appends to the other file, which must hold no record
    /// ([`Log::drop_old`] emptied it): the records so far stay in the file
    /// appended to until now until [`Log::drop_old`].
    pub(super) fn rotate(&mut self) {
        debug_assert_eq!(self.lens[1 - self.cur], HEADER_LEN);
        self.cur = 1 - self.cur;
    }

    /// Empties the file that [`Log::rotate`] turned away from: every
    /// record in it is in redb's durable state. A failure to cut it is
    /// harmless (opening skips records at or below the durable number, and
    /// an append after the next rotation overwrites them), so it is not
    /// reported.
    pub(super) fn drop_old(&mut self) {
        let old = 1 - self.cur;
        if self.lens[old] != HEADER_LEN {
            let _ = self.files[old].set_len(HEADER_LEN);
            self.lens[old] = HEADER_LEN;
            // Cutting the file freed its room: the next rotation appends
            // to it.
            self.reserved[old] = 0;
            self.reserve_room();
        }
    }

    /// Empties the log: every record in it is in redb's durable state
    /// (harmless failures, as for [`Log::drop_old`]).
    pub(super) fn clear(&mut self) {
        self.drop_old();
        let c = self.cur;
        if self.lens[c] != HEADER_LEN {
            let _ = self.files[c].set_len(HEADER_LEN);
            self.lens[c] = HEADER_LEN;
            self.reserved[c] = 0;
            self.reserve_room();
        }
    }
}

/// Allocates the first `len` bytes of `file` without changing its length.
#[cfg(target_os = "linux")]
fn allocate(file: &File, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    // SAFETY: fallocate on a file descriptor this `File` owns, with no
    // pointers passed.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn allocate(_file: &File, _len: u64) -> std::io::Result<()> {
    Ok(())
}

fn op_len(op: &Op) -> usize {
    match op {
        Op::Put { table, key, value } => 1 + 2 + table.len() + 4 + key.len() + 4 + value.len(),
        Op::Delete { table, key } => 1 + 2 + table.len() + 4 + key.len(),
        Op::Clear { table } => 1 + 2 + table.len(),
    }
}

fn encode_op(out: &mut Vec<u8>, op: &Op) {
    let table = |out: &mut Vec<u8>, t: &str| {
        // Table names are at most MAX_TABLE_NAME (1024) bytes, checked by
        // Db::write before anything is logged.
        out.extend_from_slice(&(t.len() as u16).to_le_bytes());
        out.extend_from_slice(t.as_bytes());
    };
    let bytes = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    };
    match op {
        Op::Put {
            table: t,
            key,
            value,
        } => {
            out.push(0);
            table(out, t);
            bytes(out, key);
            bytes(out, value);
        }
        Op::Delete { table: t, key } => {
            out.push(1);
            table(out, t);
            bytes(out, key);
        }
        Op::Clear { table: t } => {
            out.push(2);
            table(out, t);
        }
    }
}

/// The record at `at` and where the next one starts; `None` at the end or
/// at a torn or damaged record.
fn read_record(bytes: &[u8], at: usize) -> Option<(Record, usize)> {
    let frame = bytes.get(at..at + FRAME_LEN)?;
    let body_len = u32::from_le_bytes(frame[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(frame[4..].try_into().ok()?);
    let start = at + FRAME_LEN;
    let body = bytes.get(start..start.checked_add(body_len)?)?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    let mut r = Reader { bytes: body, at: 0 };
    let seq = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
    let mut ops = Vec::new();
    while r.at < body.len() {
        ops.push(r.op()?);
    }
    Some((Record { seq, ops }, start + body_len))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let out = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(out)
    }

    fn table(&mut self) -> Option<String> {
        let n = u16::from_le_bytes(self.take(2)?.try_into().ok()?) as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize;
        Some(self.take(n)?.to_vec())
    }

    fn op(&mut self) -> Option<OwnedOp> {
        let tag = self.take(1)?[0];
        let table = self.table()?;
        match tag {
            0 => Some(OwnedOp::Put {
                table,
                key: self.bytes()?,
                value: self.bytes()?,
            }),
            1 => Some(OwnedOp::Delete {
                table,
                key: self.bytes()?,
            }),
            2 => Some(OwnedOp::Clear { table }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
