//! Order keys against the reference comparator, on random terms.

mod common;

use fraghash_redb::term::{decode, encode_key, order_key, reference_cmp, Term};
use proptest::prelude::*;

fn key(t: &Term) -> Vec<u8> {
    encode_key(t).expect("generated terms are keys")
}

fn agree(a: &Term, b: &Term) -> Result<(), TestCaseError> {
    let (ka, kb) = (key(a), key(b));
    let want = reference_cmp(a, b).unwrap();
    prop_assert_eq!(
        ka.cmp(&kb),
        want,
        "{:?} vs {:?}: keys {:02x?} {:02x?}",
        a,
        b,
        ka,
        kb
    );
    // Prefix-free: only equal keys share a start of the shorter one's length.
    if ka != kb {
        prop_assert!(!kb.starts_with(&ka) && !ka.starts_with(&kb));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn keys_order_as_the_reference(a in common::term(), b in common::term()) {
        agree(&a, &b)?;
    }

    #[test]
    fn keys_order_as_the_reference_on_near_terms(
        a in common::small_world(),
        b in common::small_world(),
    ) {
        agree(&a, &b)?;
    }

    #[test]
    fn numbers_order_as_the_reference(
        a in prop_oneof![common::int(), common::float()],
        b in prop_oneof![common::int(), common::float()],
    ) {
        agree(&a, &b)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Sorting by key and by the reference give the same sequence, with
    /// equal neighbours exactly where the reference says so.
    #[test]
    fn sorting_by_key_is_sorting_by_term(mut v in prop::collection::vec(common::leaf(), 2..40)) {
        v.sort_by_key(key);
        for w in v.windows(2) {
            let want = reference_cmp(&w[0], &w[1]).unwrap();
            prop_assert!(want.is_le(), "{:?} then {:?}", w[0], w[1]);
            prop_assert_eq!(key(&w[0]) == key(&w[1]), want.is_eq());
        }
    }

    /// The external format round-trips, and the key of the bytes is the
    /// key of the term.
    #[test]
    fn etf_round_trip(t in common::term()) {
        let etf = t.to_etf();
        let back = decode(&etf).unwrap();
        prop_assert_eq!(back.to_etf(), etf.clone());
        prop_assert_eq!(order_key(&etf).unwrap(), key(&t));
    }

    /// Damaged bytes give an error or some term, never a panic.
    #[test]
    fn damaged_etf_never_panics(
        t in common::term(),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let etf = t.to_etf();
        let _ = order_key(&etf[..cut.index(etf.len())]);
        let mut bad = etf.clone();
        let i = flip.index(bad.len());
        bad[i] = byte;
        let _ = order_key(&bad);
    }

    #[test]
    fn random_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = order_key(&bytes);
        bytes.insert(0, 131);
        let _ = order_key(&bytes);
    }
}
