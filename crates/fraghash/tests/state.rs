//! State bytes: round trips, and typed errors (never a panic) for corrupt,
//! truncated, foreign and future bytes.

use fraghash::{AnyScheme, FragmentScheme, StateError};
use proptest::prelude::*;

const SPECS: [&str; 5] = ["linear", "ring", "ring:3", "jump", "slots"];

#[test]
fn round_trip_every_scheme() {
    for spec in SPECS {
        let mut s = AnyScheme::new(spec, 7).unwrap();
        s.add_fragment().unwrap();
        let back = AnyScheme::from_state_bytes(&s.to_state_bytes()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.spec(), spec);
    }
}

/// Replaces a version-2 state's checksum by the right one for its bytes,
/// so a test can forge a body that passes the checksum.
fn reseal(b: &mut [u8]) {
    let n = b.len() - 8;
    let sum = fraghash::state::checksum(&b[..n]);
    b[n..].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn foreign_bytes() {
    assert_eq!(AnyScheme::from_state_bytes(b""), Err(StateError::Foreign));
    assert_eq!(
        AnyScheme::from_state_bytes(b"PK\x03\x04 zip file"),
        Err(StateError::Foreign)
    );
    assert_eq!(
        AnyScheme::from_state_bytes(b"FHSX\x02\x00\x04"),
        Err(StateError::Foreign)
    );
    for cut in [&b"FHS"[..], b"FHST\x01", b"FHST\x02\x00"] {
        assert!(
            matches!(
                AnyScheme::from_state_bytes(cut),
                Err(StateError::Corrupt(_))
            ),
            "{cut:?}"
        );
    }
}

#[test]
fn future_version_and_unknown_tag() {
    let mut b = AnyScheme::new("slots", 3).unwrap().to_state_bytes();
    assert_eq!(&b[4..6], &[2, 0], "this build writes version 2");
    b[4] = 9;
    assert_eq!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::UnsupportedVersion {
            found: 9,
            supported: 2
        })
    );
    let mut b = AnyScheme::new("slots", 3).unwrap().to_state_bytes();
    b[6] = 77;
    // Under the checksum, a changed tag is damage...
    assert!(matches!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::Corrupt(_))
    ));
    // ...and with a valid checksum, an unknown scheme.
    reseal(&mut b);
    assert_eq!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::UnknownScheme(77))
    );
}

/// A state cut to any length is `Corrupt` (it starts like a state), except
/// the empty cut, which carries nothing that says "state" and is `Foreign`.
/// Checked for every scheme at several sizes, at every length.
#[test]
fn every_truncation_is_corrupt() {
    for spec in SPECS {
        for n in [1, 5, 40] {
            let b = AnyScheme::new(spec, n).unwrap().to_state_bytes();
            assert_eq!(
                AnyScheme::from_state_bytes(&b[..0]),
                Err(StateError::Foreign)
            );
            for len in 1..b.len() {
                assert!(
                    matches!(
                        AnyScheme::from_state_bytes(&b[..len]),
                        Err(StateError::Corrupt(_))
                    ),
                    "{spec} of {n} cut to {len} bytes: {:?}",
                    AnyScheme::from_state_bytes(&b[..len])
                );
            }
            let mut longer = b.clone();
            longer.push(0);
            assert!(matches!(
                AnyScheme::from_state_bytes(&longer),
                Err(StateError::Corrupt(_))
            ));
        }
    }
}

/// Every single-bit flip anywhere in a version-2 state (magic, version,
/// tag, body or checksum) is an error, for every scheme at several sizes
/// and after adds and removals: the CRC detects every single-bit error.
#[test]
fn every_single_bit_flip_is_rejected() {
    for spec in SPECS {
        for n in [1, 4, 50] {
            let mut s = AnyScheme::new(spec, n).unwrap();
            s.add_fragment().unwrap();
            s.remove_fragment(s.fragments() - 1).unwrap();
            s.add_fragment().unwrap();
            let b = s.to_state_bytes();
            assert_eq!(AnyScheme::from_state_bytes(&b).unwrap(), s);
            for bit in 0..b.len() * 8 {
                let mut d = b.clone();
                d[bit / 8] ^= 1 << (bit % 8);
                let r = AnyScheme::from_state_bytes(&d);
                assert!(r.is_err(), "{spec} of {n}: flipping bit {bit} gave {r:?}");
            }
        }
    }
}

/// States written by version 1 (no checksum), as that encoder wrote them,
/// with the fragments their hashes went to. A build that reads version 2
/// must still decode them to the same placement.
const V1_FIXTURES: [(&str, &str, [u32; 24]); 4] = [
    // linear, 5 fragments, one added.
    (
        "linear",
        "4648535401000106",
        [
            3, 5, 2, 2, 1, 3, 2, 5, 4, 2, 5, 0, 0, 5, 1, 1, 1, 3, 3, 1, 4, 0, 4, 2,
        ],
    ),
    // ring:7, 4 fragments, one added, fragment 1 removed.
    (
        "ring:7",
        "4648535401000207040004020305",
        [
            3, 3, 3, 3, 2, 0, 1, 2, 2, 1, 2, 1, 0, 3, 3, 1, 1, 1, 3, 3, 3, 3, 1, 1,
        ],
    ),
    // jump, 9 fragments, one added.
    (
        "jump",
        "464853540100030a",
        [
            6, 2, 7, 2, 2, 8, 0, 1, 1, 8, 2, 7, 2, 7, 2, 9, 7, 9, 7, 1, 8, 3, 8, 3,
        ],
    ),
    // slots, 6 fragments, one added, fragment 2 removed.
    (
        "slots",
        "464853540100040c1000ca04026101c90402620061016203620462056102c30103c9040262\
         04c904026105c904026106010101010101",
        [
            5, 2, 4, 3, 4, 4, 5, 4, 0, 1, 0, 5, 2, 1, 2, 2, 1, 2, 3, 3, 3, 2, 4, 2,
        ],
    ),
];

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn version_1_states_still_decode_to_the_same_placement() {
    let rebuilt = [
        ("linear", 5, None),
        ("ring:7", 4, Some(1)),
        ("jump", 9, None),
        ("slots", 6, Some(2)),
    ];
    for ((spec, hex, want), (spec2, n, removed)) in V1_FIXTURES.iter().zip(rebuilt) {
        assert_eq!(*spec, spec2);
        let v1 = unhex(hex);
        assert_eq!(&v1[4..6], &[1, 0]);
        let s = AnyScheme::from_state_bytes(&v1).unwrap();
        assert_eq!(s.spec(), *spec);
        let mut r = fraghash::keys::SplitMix64::new(2026);
        let got: Vec<u32> = (0..24).map(|_| s.locate(r.next())).collect();
        assert_eq!(&got[..], &want[..], "{spec}");
        // The same history today gives the same scheme, so every key
        // places as before, and writing it back gives version 2.
        let mut today = AnyScheme::new(spec, n).unwrap();
        today.add_fragment().unwrap();
        if let Some(w) = removed {
            today.remove_fragment(w).unwrap();
        }
        assert_eq!(today, s, "{spec}");
        let v2 = s.to_state_bytes();
        assert_eq!(&v2[4..6], &[2, 0]);
        assert_eq!(AnyScheme::from_state_bytes(&v2).unwrap(), s);
        // A version-1 state has no checksum: trailing bytes are corrupt.
        let mut longer = v1.clone();
        longer.extend_from_slice(&[0; 8]);
        assert!(matches!(
            AnyScheme::from_state_bytes(&longer),
            Err(StateError::Corrupt(_))
        ));
    }
}

#[test]
fn invariant_breaking_bodies_are_invalid() {
    // A slot naming a fragment that does not exist.
    let s = AnyScheme::new("slots", 2).unwrap();
    let mut b = s.to_state_bytes();
    // bits (1 byte varint), run count (1 byte), then the first run's owner.
    let first_owner = 7 + 1 + 1;
    assert_eq!(b[first_owner], 0);
    b[first_owner] = 5;
    reseal(&mut b);
    assert!(matches!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::Invalid(_))
    ));
    // Runs that do not cover the table.
    let mut b = s.to_state_bytes();
    let first_len = 7 + 1 + 1 + 1;
    b[first_len] ^= 1;
    reseal(&mut b);
    assert!(matches!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::Invalid(_))
    ));
    // Zero fragments for linear.
    let mut b = AnyScheme::new("linear", 1).unwrap().to_state_bytes();
    b[7] = 0;
    reseal(&mut b);
    assert!(matches!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::Invalid(_))
    ));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..200), tag in 0u8..6) {
        let mut b = b"FHST\x01\x00".to_vec();
        b.push(tag);
        b.extend(body);
        let _ = AnyScheme::from_state_bytes(&b);
    }

    /// Random bodies under a valid version-2 checksum reach the body
    /// decoder and the invariant checks: never a panic.
    #[test]
    fn random_sealed_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..200), tag in 0u8..6) {
        let mut b = b"FHST\x02\x00".to_vec();
        b.push(tag);
        b.extend(body);
        b.extend([0; 8]);
        reseal(&mut b);
        if let Ok(s) = AnyScheme::from_state_bytes(&b) {
            prop_assert!(s.fragments() >= 1);
            prop_assert!(s.locate(12345) < s.fragments());
        }
    }

    /// Any one changed byte of a version-2 state is an error (a CRC
    /// detects every burst of up to 64 bits).
    #[test]
    fn changed_byte_is_rejected(spec in prop::sample::select(SPECS.to_vec()), n in 1u32..30, pos in any::<usize>(), val in any::<u8>()) {
        let mut b = AnyScheme::new(spec, n).unwrap().to_state_bytes();
        let i = pos % b.len();
        prop_assume!(b[i] != val);
        b[i] = val;
        prop_assert!(AnyScheme::from_state_bytes(&b).is_err());
    }

    /// Version-1 bodies (no checksum) with one changed byte may decode
    /// (that is why version 2 has a checksum), but never panic.
    #[test]
    fn flipped_version_1_bytes_never_panic(spec in prop::sample::select(SPECS.to_vec()), pos in any::<usize>(), val in any::<u8>()) {
        let v2 = AnyScheme::new(spec, 4).unwrap().to_state_bytes();
        let mut b = v2[..v2.len() - 8].to_vec();
        b[4] = 1;
        let i = pos % b.len();
        b[i] = val;
        if let Ok(s) = AnyScheme::from_state_bytes(&b) {
            // Whatever decodes is a usable scheme.
            let f = s.fragments();
            prop_assert!(f >= 1);
            prop_assert!(s.locate(12345) < f);
        }
    }
}
