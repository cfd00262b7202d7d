//! The key hash is part of the on-disk format: these vectors pin it. They
//! come from the reference xxHash implementation (XXH3_64bits, seed 0), as
//! computed by Python's `xxhash` package, independent of the Rust crate.

use fraghash::key_hash;

#[test]
fn xxh3_64_seed_0_vectors() {
    let pattern: Vec<u8> = (0..64u8).collect();
    let long = vec![b'x'; 300];
    let cases: [(&[u8], u64); 8] = [
        (b"", 0x2d06_8005_38d3_94c2),
        (b"a", 0xe6c6_32b6_1e96_4e1f),
        (b"abc", 0x78af_5f94_892f_3950),
        (b"hello", 0x9555_e855_5c62_dcfd),
        (b"key-0", 0x819f_6b51_706f_0178),
        (b"0123456789abcdef", 0x6443_9946_d8fa_212d),
        (&pattern, 0x6187_eb90_89b0_ed55),
        (&long, 0xa5d1_b460_7dc8_3554),
    ];
    for (key, want) in cases {
        assert_eq!(
            key_hash(key),
            want,
            "key {:?}",
            String::from_utf8_lossy(key)
        );
    }
}

#[test]
fn widen_puts_phash2_in_both_halves() {
    let h = fraghash::widen_phash2(0x1234_5678);
    assert_eq!(h as u32, 0x1234_5678);
    assert_eq!((h >> 32) as u32, 0x1234_5678);
}
