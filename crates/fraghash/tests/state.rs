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

#[test]
fn foreign_bytes() {
    assert_eq!(AnyScheme::from_state_bytes(b""), Err(StateError::Foreign));
    assert_eq!(
        AnyScheme::from_state_bytes(b"PK\x03\x04 zip file"),
        Err(StateError::Foreign)
    );
    assert!(matches!(
        AnyScheme::from_state_bytes(b"FHS"),
        Err(StateError::Corrupt(_))
    ));
}

#[test]
fn future_version_and_unknown_tag() {
    let mut b = AnyScheme::new("slots", 3).unwrap().to_state_bytes();
    b[4] = 9;
    assert_eq!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::UnsupportedVersion {
            found: 9,
            supported: 1
        })
    );
    let mut b = AnyScheme::new("slots", 3).unwrap().to_state_bytes();
    b[6] = 77;
    assert_eq!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::UnknownScheme(77))
    );
}

#[test]
fn every_truncation_is_an_error() {
    for spec in SPECS {
        let b = AnyScheme::new(spec, 5).unwrap().to_state_bytes();
        for len in 0..b.len() {
            assert!(
                AnyScheme::from_state_bytes(&b[..len]).is_err(),
                "{spec} truncated to {len}"
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

#[test]
fn invariant_breaking_bodies_are_invalid() {
    // A slot naming a fragment that does not exist.
    let s = AnyScheme::new("slots", 2).unwrap();
    let mut b = s.to_state_bytes();
    // bits (1 byte varint), run count (1 byte), then the first run's owner.
    let first_owner = 7 + 1 + 1;
    assert_eq!(b[first_owner], 0);
    b[first_owner] = 5;
    assert!(matches!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::Invalid(_))
    ));
    // Runs that do not cover the table.
    let mut b = s.to_state_bytes();
    let first_len = 7 + 1 + 1 + 1;
    b[first_len] ^= 1;
    assert!(matches!(
        AnyScheme::from_state_bytes(&b),
        Err(StateError::Invalid(_))
    ));
    // Zero fragments for linear.
    let mut b = AnyScheme::new("linear", 1).unwrap().to_state_bytes();
    b[7] = 0;
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

    #[test]
    fn flipped_bytes_never_panic(spec in prop::sample::select(SPECS.to_vec()), pos in any::<usize>(), val in any::<u8>()) {
        let mut b = AnyScheme::new(spec, 4).unwrap().to_state_bytes();
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
