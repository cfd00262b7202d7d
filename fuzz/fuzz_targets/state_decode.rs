//! Any bytes given to the state decoder give a scheme or a typed error,
//! never a panic, an abort or an out-of-memory. Whatever decodes must be
//! usable: it locates hashes into range, re-encodes to the same bytes, and
//! survives an add.
#![no_main]

use fraghash::{AnyScheme, FragmentScheme};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Half the inputs get a valid header so the fuzzer reaches the bodies.
    let mut owned;
    let bytes = if data.first().is_some_and(|b| b & 1 == 1) {
        owned = b"FHST\x01\x00".to_vec();
        owned.extend_from_slice(&data[1..]);
        &owned[..]
    } else {
        data
    };
    if let Ok(mut s) = AnyScheme::from_state_bytes(bytes) {
        let n = s.fragments();
        assert!(n >= 1);
        for h in [
            0u64,
            1,
            u64::MAX,
            0x8000_0000_0000_0000,
            0x1234_5678_9abc_def0,
        ] {
            assert!(s.locate(h) < n);
        }
        let again =
            AnyScheme::from_state_bytes(&s.to_state_bytes()).expect("re-encoded state decodes");
        assert_eq!(again, s);
        let _ = s.add_fragment();
    }
});
