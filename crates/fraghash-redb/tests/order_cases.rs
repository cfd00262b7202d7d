//! Order keys on fixed cases: a list of terms in Erlang's order, every pair
//! checked, and the decoder's handling of each encoding and each error.

use fraghash_redb::term::{
    decode, encode_key, order_key, reference_cmp, BitString, Int, OpaqueKind, Term, TermError,
    MAX_DEPTH, MAX_KEY_LEN,
};
use std::cmp::Ordering;

fn int(v: i128) -> Term {
    Term::Int(Int::from_le_bytes(
        v < 0,
        v.unsigned_abs().to_le_bytes().to_vec(),
    ))
}

fn pow2(p: usize, negative: bool) -> Term {
    let mut m = vec![0u8; p / 8 + 1];
    m[p / 8] = 1 << (p % 8);
    Term::Int(Int::from_le_bytes(negative, m))
}

fn f(v: f64) -> Term {
    Term::Float(v)
}

fn a(s: &str) -> Term {
    Term::atom(s)
}

fn bin(b: &[u8]) -> Term {
    Term::binary(b)
}

fn bits(b: &[u8], len: u64) -> Term {
    Term::Bits(BitString::new(b.to_vec(), len).unwrap())
}

fn tup(v: Vec<Term>) -> Term {
    Term::Tuple(v)
}

fn map(v: Vec<(Term, Term)>) -> Term {
    Term::Map(v)
}

/// Groups of equal terms, the groups in ascending Erlang order.
fn ascending() -> Vec<Vec<Term>> {
    let two53 = 9007199254740992i128;
    vec![
        vec![pow2(1100, true)],
        vec![f(-f64::MAX)],
        vec![int(-two53 - 1)],
        vec![int(-two53), f(-9007199254740992.0)],
        vec![int(-300)],
        vec![f(-1.5)],
        vec![int(-1), f(-1.0)],
        vec![f(-0.5)],
        vec![f(-5e-324)],
        vec![int(0), f(0.0), f(-0.0)],
        vec![f(5e-324)],
        vec![f(0.25)],
        vec![f(0.5)],
        vec![int(1), f(1.0)],
        vec![f(1.0000000000000002)],
        vec![f(1.5)],
        vec![int(2), f(2.0)],
        vec![int(255)],
        vec![int(256), f(256.0)],
        vec![int(i32::MAX as i128 + 1)],
        vec![int(two53 - 1), f(9007199254740991.0)],
        vec![int(two53), f(9007199254740992.0)],
        vec![int(two53 + 1)],
        vec![int(two53 + 2), f(9007199254740994.0)],
        vec![int(i64::MAX as i128)],
        vec![pow2(63, false), f(9223372036854775808.0)],
        vec![pow2(64, false), f(18446744073709551616.0)],
        vec![f(f64::MAX)],
        vec![pow2(1024, false)],
        vec![pow2(1100, false)],
        vec![a("")],
        vec![a("\u{0}")],
        vec![a("A")],
        vec![a("a")],
        vec![a("a\u{0}")],
        vec![a("aa")],
        vec![a("b")],
        vec![a("z")],
        vec![a("é")],
        vec![a("ÿ")],
        vec![a("Ā")],
        vec![a("日")],
        vec![a("😀")],
        vec![tup(vec![])],
        vec![tup(vec![int(9)])],
        vec![tup(vec![a("a")])],
        vec![tup(vec![int(1), a("b")]), tup(vec![f(1.0), a("b")])],
        vec![tup(vec![int(1), a("c")])],
        vec![tup(vec![int(2), a("a")])],
        vec![tup(vec![int(0), int(0), int(0)])],
        vec![map(vec![])],
        vec![map(vec![(int(1), a("z"))])],
        vec![map(vec![(int(2), a("a"))])],
        vec![map(vec![(f(1.0), a("a"))])],
        vec![map(vec![(a("a"), int(1))]), map(vec![(a("a"), f(1.0))])],
        vec![map(vec![(a("a"), int(2))])],
        vec![map(vec![(a("b"), int(0))])],
        vec![
            map(vec![(int(1), int(0)), (a("a"), int(0))]),
            map(vec![(a("a"), int(0)), (int(1), int(0))]),
        ],
        vec![Term::Nil],
        vec![Term::improper_list(vec![int(1)], int(2))],
        vec![Term::improper_list(vec![int(1)], a("b"))],
        vec![Term::improper_list(vec![int(1)], tup(vec![]))],
        vec![Term::list(vec![int(1)]), Term::list(vec![f(1.0)])],
        vec![Term::list(vec![int(1), int(0)])],
        vec![Term::list(vec![int(1), int(2)])],
        vec![Term::improper_list(vec![int(1)], bin(b""))],
        vec![Term::list(vec![int(2)])],
        vec![Term::list(vec![a("a")])],
        vec![Term::list(vec![Term::Nil])],
        vec![Term::list(vec![bin(b"")])],
        vec![bin(b"")],
        vec![bits(&[0x00], 1)],
        vec![bin(b"\0")],
        vec![bin(b"\0\0")],
        vec![bin(b"\0\x01")],
        vec![bin(b"\x01")],
        vec![bits(&[0x01, 0x80], 9)],
        vec![bin(b"a")],
        vec![bin(b"ab")],
        vec![bits(&[0x80], 1)],
        vec![bin(b"\x80")],
        vec![bits(&[0xC0], 2)],
        vec![bin(b"\xff")],
        vec![bin(b"\xff\xff\xff\xff\xff\xff\xff\xff")],
    ]
}

#[test]
fn every_pair_of_the_ascending_list() {
    let groups = ascending();
    let all: Vec<(usize, &Term)> = groups
        .iter()
        .enumerate()
        .flat_map(|(i, g)| g.iter().map(move |t| (i, t)))
        .collect();
    for &(i, x) in &all {
        for &(j, y) in &all {
            let want = i.cmp(&j);
            assert_eq!(
                reference_cmp(x, y).unwrap(),
                want,
                "reference: {x:?} vs {y:?}"
            );
            let (kx, ky) = (encode_key(x).unwrap(), encode_key(y).unwrap());
            assert_eq!(
                kx.cmp(&ky),
                want,
                "keys: {x:?} {kx:02x?} vs {y:?} {ky:02x?}"
            );
        }
    }
}

fn etf(body: &[u8]) -> Vec<u8> {
    let mut v = vec![131];
    v.extend_from_slice(body);
    v
}

#[test]
fn each_encoding_decodes_to_the_same_key_as_its_canonical_twin() {
    let same = |x: Vec<u8>, y: Term| {
        assert_eq!(
            order_key(&x).unwrap(),
            encode_key(&y).unwrap(),
            "{x:?} vs {y:?}"
        );
    };
    same(etf(&[97, 200]), int(200));
    same(etf(&[98, 0xFF, 0xFF, 0xFF, 0xFE]), int(-2));
    // SMALL_BIG_EXT with high zero digits, and LARGE_BIG_EXT.
    same(etf(&[110, 3, 1, 5, 0, 0]), int(-5));
    same(etf(&[111, 0, 0, 0, 1, 0, 7]), int(7));
    // Old FLOAT_EXT: 31 bytes of text.
    let mut old = b"1.50000000000000000000e+00".to_vec();
    old.resize(31, 0);
    let mut body = vec![99];
    body.extend_from_slice(&old);
    same(etf(&body), f(1.5));
    // Latin-1 atoms are the same atoms as in UTF-8.
    same(etf(&[100, 0, 1, 0xE9]), a("é"));
    same(etf(&[115, 1, 0xE9]), a("é"));
    same(etf(&[118, 0, 2, 0xC3, 0xA9]), a("é"));
    // STRING_EXT is a list of small integers.
    same(
        etf(&[107, 0, 2, b'a', b'b']),
        Term::list(vec![int(97), int(98)]),
    );
    // A list tail that is itself a list continues it.
    same(
        etf(&[108, 0, 0, 0, 1, 97, 1, 108, 0, 0, 0, 1, 97, 2, 106]),
        Term::list(vec![int(1), int(2)]),
    );
    // BIT_BINARY_EXT: unused bits are ignored.
    same(etf(&[77, 0, 0, 0, 1, 3, 0xBF]), bits(&[0xA0], 3));
}

#[test]
fn opaque_terms_decode_but_are_not_keys() {
    let node = [119, 1, b'n'];
    let mut pid = vec![88];
    pid.extend_from_slice(&node);
    pid.extend_from_slice(&[0; 12]);
    let mut reference = vec![90, 0, 3];
    reference.extend_from_slice(&node);
    reference.extend_from_slice(&[0; 16]);
    let mut port = vec![120];
    port.extend_from_slice(&node);
    port.extend_from_slice(&[0; 12]);
    let export = [113, 119, 1, b'm', 119, 1, b'f', 97, 2];
    for (body, kind) in [
        (pid, OpaqueKind::Pid),
        (reference, OpaqueKind::Reference),
        (port, OpaqueKind::Port),
        (export.to_vec(), OpaqueKind::Fun),
    ] {
        let bytes = etf(&body);
        let t = decode(&bytes).unwrap();
        assert!(matches!(&t, Term::Opaque(o) if o.kind == kind && o.etf == body));
        assert_eq!(t.to_etf(), bytes);
        assert_eq!(order_key(&bytes), Err(TermError::UnsupportedKey { kind }));
        // Also inside a tuple, and against other types they still order.
        let inner = tup(vec![t.clone()]);
        assert_eq!(encode_key(&inner), Err(TermError::UnsupportedKey { kind }));
        assert_eq!(reference_cmp(&t, &int(1)).unwrap(), Ordering::Greater);
        assert_eq!(reference_cmp(&t, &Term::Nil).unwrap(), Ordering::Less);
    }
}

#[test]
fn bad_bytes_give_typed_errors() {
    assert_eq!(decode(&[]), Err(TermError::BadVersion { found: None }));
    assert_eq!(
        decode(&[130, 106]),
        Err(TermError::BadVersion { found: Some(130) })
    );
    assert_eq!(
        decode(&etf(&[80, 0, 0, 0, 1, 0])),
        Err(TermError::Compressed { offset: 1 })
    );
    assert_eq!(
        decode(&etf(&[82, 0])),
        Err(TermError::UnknownTag { tag: 82, offset: 1 })
    );
    assert_eq!(
        decode(&etf(&[109, 0, 0, 0, 5, 1])),
        Err(TermError::Truncated { offset: 6 })
    );
    assert_eq!(
        decode(&etf(&[106, 106])),
        Err(TermError::TrailingBytes { extra: 1 })
    );
    assert!(matches!(
        decode(&etf(&[70, 0x7F, 0xF0, 0, 0, 0, 0, 0, 0])),
        Err(TermError::Invalid { .. })
    ));
    assert!(matches!(
        decode(&etf(&[119, 1, 0xFF])),
        Err(TermError::Invalid { .. })
    ));
    // A length that claims more than the bytes hold allocates nothing.
    assert_eq!(
        decode(&etf(&[108, 0xFF, 0xFF, 0xFF, 0xFF])),
        Err(TermError::Truncated { offset: 6 })
    );
    let mut deep = vec![131];
    deep.extend(std::iter::repeat_n([104, 1], MAX_DEPTH + 1).flatten());
    deep.push(106);
    assert_eq!(decode(&deep), Err(TermError::TooDeep { limit: MAX_DEPTH }));
}

#[test]
fn long_lists_are_not_deep_and_large_keys_are_refused() {
    let long = Term::list((0..10_000).map(|i| int(i % 7)).collect());
    assert!(order_key(&long.to_etf()).is_ok());
    let big = bin(&vec![7u8; MAX_KEY_LEN]);
    assert_eq!(
        encode_key(&big),
        Err(TermError::KeyTooLarge { limit: MAX_KEY_LEN })
    );
    let many = Term::list((0..MAX_KEY_LEN as i128).map(int).collect());
    assert_eq!(
        encode_key(&many),
        Err(TermError::KeyTooLarge { limit: MAX_KEY_LEN })
    );
    let under = bin(&vec![7u8; MAX_KEY_LEN / 2]);
    assert!(encode_key(&under).unwrap().len() <= MAX_KEY_LEN);
}

#[test]
fn a_map_with_one_key_twice_is_refused() {
    let m = map(vec![(int(1), a("x")), (int(1), a("y"))]);
    assert!(matches!(encode_key(&m), Err(TermError::Invalid { .. })));
    // 1 and 1.0 are different map keys.
    assert!(encode_key(&map(vec![(int(1), a("x")), (f(1.0), a("y"))])).is_ok());
}
