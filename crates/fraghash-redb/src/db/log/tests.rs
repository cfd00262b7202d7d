use super::*;

fn ops() -> Vec<Op<'static>> {
    vec![
        Op::Put {
            table: "t",
            key: b"k",
            value: b"v",
        },
        Op::Delete {
            table: "u",
            key: b"",
        },
        Op::Clear { table: "t" },
    ]
}

#[test]
fn records_read_back_in_order_above_the_durable_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.log");
    let (mut log, none, _) = Log::open(&path, 4, false, false).unwrap();
    assert!(none.is_empty() && log.is_empty());
    let before = log.len();
    assert_eq!(log.append(&ops()).unwrap(), 5);
    assert_eq!(log.len() - before, Log::record_len(&ops()));
    assert_eq!(log.append(&ops()[..1]).unwrap(), 6);
    drop(log);
    let (_, recs, _) = Log::open(&path, 4, false, false).unwrap();
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [5, 6]);
    let back: Vec<Op> = recs[0].ops.iter().map(OwnedOp::as_op).collect();
    assert_eq!(back, ops());
    let (mut log, recs, _) = Log::open(&path, 5, false, false).unwrap();
    assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [6]);
    // Numbering goes on after the last record read.
    assert_eq!(log.append(&ops()).unwrap(), 7);
}

#[test]
fn a_torn_or_damaged_end_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.log");
    let (mut log, _, _) = Log::open(&path, 0, false, false).unwrap();
    log.append(&ops()).unwrap();
    // File offsets: the header, then the records.
    let good = HEADER_LEN + log.len();
    log.append(&ops()).unwrap();
    let full = HEADER_LEN + log.len();
    drop(log);
    // Every cut inside the second record leaves only the first.
    for cut in good..full {
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(cut).unwrap();
        let (log, recs, _) = Log::open(&path, 0, false, false).unwrap();
        assert_eq!(recs.len(), 1, "cut at {cut}");
        assert_eq!(HEADER_LEN + log.len(), good);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
        let mut log = log;
        log.append(&ops()).unwrap();
    }
    // A flipped byte in the last record's body is a torn end: cut.
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (log, recs, repairs) = Log::open(&path, 0, false, false).unwrap();
    assert_eq!((recs.len(), HEADER_LEN + log.len()), (1, good));
    assert!(repairs.is_empty());
}

#[test]
fn damage_with_good_records_after_it_is_refused_or_cut_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.log");
    let (mut log, _, _) = Log::open(&path, 0, false, false).unwrap();
    for _ in 0..3 {
        log.append(&ops()).unwrap();
    }
    let full = HEADER_LEN + log.len();
    drop(log);
    // A flipped byte in the first record's body, two good records after.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[HEADER.len() + FRAME_LEN + 9] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    match Log::open(&path, 0, false, false) {
        Err(DbError::LogDamaged {
            offset,
            records_after,
            ..
        }) => assert_eq!((offset, records_after), (HEADER_LEN, 2)),
        other => panic!("expected LogDamaged, got {other:?}"),
    }
    // Refused: nothing was cut.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), full);
    // Records at or below the durable number are not evidence.
    assert!(Log::open(&path, 3, false, false).is_ok());
    std::fs::write(&path, &bytes).unwrap();
    let (log, recs, repairs) = Log::open(&path, 0, false, true).unwrap();
    assert!(recs.is_empty() && log.is_empty());
    assert_eq!(
        repairs,
        [LogRepair::Cut {
            file: path.clone(),
            offset: HEADER_LEN,
            bytes: full - HEADER_LEN,
            records: 2
        }]
    );
}

#[test]
fn a_missing_file_is_refused_when_it_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.log");
    drop(Log::open(&path, 0, false, false).unwrap());
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(
        Log::open(&path, 0, true, false),
        Err(DbError::LogMissing { .. })
    ));
    assert!(!path.exists(), "a refused open creates nothing");
    let (_, _, repairs) = Log::open(&path, 0, true, true).unwrap();
    assert_eq!(repairs, [LogRepair::Missing { file: path.clone() }]);
    assert!(Log::open(&path, 0, true, false).is_ok());
}

#[test]
fn a_foreign_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.log");
    std::fs::write(&path, b"something else entirely").unwrap();
    assert!(matches!(
        Log::open(&path, 0, false, false),
        Err(DbError::Foreign { .. })
    ));
}

#[test]
fn a_rotated_log_reads_back_from_both_files_without_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.log");
    let (mut log, _, _) = Log::open(&path, 0, false, false).unwrap();
    log.append(&ops()).unwrap();
    log.append(&ops()).unwrap();
    log.rotate();
    assert_eq!(log.append(&ops()).unwrap(), 3);
    let seqs = |durable| {
        let (log, recs, _) = Log::open(&path, durable, false, false).unwrap();
        (log, recs.iter().map(|r| r.seq).collect::<Vec<_>>())
    };
    assert_eq!(seqs(0).1, [1, 2, 3]);
    assert_eq!(seqs(2).1, [3]);
    log.drop_old();
    assert_eq!(seqs(2).1, [3]);
    // Records 1 and 2 lost (a crash of the machine) while 3 was kept:
    // nothing after the gap is replayed.
    assert_eq!(seqs(0).1, Vec::<u64>::new());
    // The file written last is the current one, and numbering goes on.
    let (mut again, _) = seqs(2);
    assert_eq!(again.append(&ops()).unwrap(), 4);
    again.rotate();
    again.append(&ops()).unwrap();
    assert_eq!(seqs(2).1, [3, 4, 5]);
    again.clear();
    assert!(again.is_empty());
    assert_eq!(seqs(0).1, Vec::<u64>::new());
}
