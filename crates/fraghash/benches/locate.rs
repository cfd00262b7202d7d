//! `cargo bench -p fraghash`: lookup speed of every scheme beside its peers.
//!
//! Like is compared with like:
//! - `locate/*`: our `locate(h)` on a precomputed 64-bit hash, beside peers
//!   that take a hash: `fliphash_64`, the `jumphash` crate through an
//!   identity hasher, and the `hashring` crate through an identity hasher
//!   with the same 100 points per fragment as our ring.
//! - `key_locate/*`: our `key_hash(key) + locate(h)`, beside peers that hash
//!   the key themselves: `hashring` (SipHash, 100 points per fragment),
//!   `maglev` (up to 400 fragments: its build needs 8·n·100n bytes), `jumphash`
//!   (SipHash) and `fliphash_xxh3_64`.
//! - `key_hash/*`: xxh3 on 8, 16 and 64 byte keys.
//!
//! Each measurement runs 1,024 lookups of random hashes or keys and reports
//! time per lookup. Defaults are short (0.3 s warm-up, 1 s measurement);
//! set `FRAGHASH_BENCH_FULL=1` for criterion's defaults.

use std::hash::{BuildHasher, Hasher};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fraghash::keys::SplitMix64;
use fraghash::{key_hash, AnyScheme, FragmentScheme};

const COUNTS: [u32; 5] = [2, 50, 400, 10_000, 100_000];
const BATCH: usize = 1024;
const POINTS: u32 = 100;

/// Passes a `u64` through as its own hash, so hash-taking peers see exactly
/// the hashes our `locate` sees.
#[derive(Default, Clone)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

#[derive(Default, Clone)]
struct IdentityBuild;
impl BuildHasher for IdentityBuild {
    type Hasher = Identity;
    fn build_hasher(&self) -> Identity {
        Identity(0)
    }
}

fn hashes() -> Vec<u64> {
    let mut r = SplitMix64::new(42);
    (0..BATCH).map(|_| r.next()).collect()
}

fn keys(len: usize) -> Vec<Vec<u8>> {
    let mut r = SplitMix64::new(7);
    (0..BATCH)
        .map(|_| (0..len).map(|_| b'a' + (r.next() % 26) as u8).collect())
        .collect()
}

fn schemes(n: u32) -> Vec<(&'static str, AnyScheme)> {
    ["linear", "ring", "jump", "slots"]
        .iter()
        .map(|&s| (s, AnyScheme::new(s, n).expect("valid scheme")))
        .collect()
}

fn ring_nodes(n: u32) -> Vec<(u32, u32)> {
    (0..n)
        .flat_map(|f| (0..POINTS).map(move |p| (f, p)))
        .collect()
}

fn bench_locate(c: &mut Criterion) {
    let hs = hashes();
    let mut g = c.benchmark_group("locate");
    g.throughput(Throughput::Elements(BATCH as u64));
    for n in COUNTS {
        for (name, s) in schemes(n) {
            g.bench_with_input(BenchmarkId::new(name, n), &s, |b, s| {
                b.iter(|| hs.iter().fold(0u32, |acc, &h| acc ^ s.locate(black_box(h))))
            });
        }
        g.bench_with_input(BenchmarkId::new("peer-fliphash", n), &n, |b, &n| {
            b.iter(|| {
                hs.iter().fold(0u64, |acc, &h| {
                    acc ^ fliphash::fliphash_64(black_box(h), ..=u64::from(n - 1))
                })
            })
        });
        let jump = jumphash::CustomJumpHasher::new(Identity(0));
        g.bench_with_input(BenchmarkId::new("peer-jumphash", n), &n, |b, &n| {
            b.iter(|| {
                hs.iter()
                    .fold(0u32, |acc, &h| acc ^ jump.slot(&black_box(h), n))
            })
        });
        let mut ring = hashring::HashRing::with_hasher(IdentityBuild);
        ring.batch_add(
            ring_nodes(n)
                .into_iter()
                .map(|(f, p)| {
                    RingNode(
                        fraghash::scheme::ring::Ring::point_position(u64::from(f), p),
                        f,
                    )
                })
                .collect(),
        );
        g.bench_with_input(BenchmarkId::new("peer-hashring", n), &n, |b, _| {
            b.iter(|| {
                hs.iter().fold(0u32, |acc, &h| {
                    acc ^ ring.get(&black_box(h)).map_or(0, |x| x.1)
                })
            })
        });
    }
    g.finish();
}

/// A hashring node whose hash (under the identity hasher) is a given point.
#[derive(Clone, PartialEq, Eq)]
struct RingNode(u64, u32);
impl std::hash::Hash for RingNode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0);
    }
}

fn bench_key_locate(c: &mut Criterion) {
    let ks = keys(16);
    let mut g = c.benchmark_group("key_locate");
    g.throughput(Throughput::Elements(BATCH as u64));
    for n in COUNTS {
        for (name, s) in schemes(n) {
            g.bench_with_input(BenchmarkId::new(name, n), &s, |b, s| {
                b.iter(|| {
                    ks.iter()
                        .fold(0u32, |acc, k| acc ^ s.locate(key_hash(black_box(k))))
                })
            });
        }
        g.bench_with_input(BenchmarkId::new("peer-fliphash", n), &n, |b, &n| {
            b.iter(|| {
                ks.iter().fold(0u64, |acc, k| {
                    acc ^ fliphash::fliphash_xxh3_64(black_box(k), ..=u64::from(n - 1))
                })
            })
        });
        let jump = jumphash::JumpHasher::new();
        g.bench_with_input(BenchmarkId::new("peer-jumphash", n), &n, |b, &n| {
            b.iter(|| {
                ks.iter()
                    .fold(0u32, |acc, k| acc ^ jump.slot(black_box(k), n))
            })
        });
        let mut ring = hashring::HashRing::new();
        ring.batch_add(ring_nodes(n));
        g.bench_with_input(BenchmarkId::new("peer-hashring", n), &n, |b, _| {
            b.iter(|| {
                ks.iter().fold(0u32, |acc, k| {
                    acc ^ ring.get(black_box(k)).map_or(0, |x| x.0)
                })
            })
        });
        // maglev 0.2 materialises every node's full permutation while it
        // builds its table: n · m · 8 bytes with m ≈ 100 n, 80 GB at 10,000
        // nodes. So it runs up to 400 fragments only.
        if n <= 400 {
            use maglev::ConsistentHasher;
            let m = maglev::Maglev::new(0..n);
            g.bench_with_input(BenchmarkId::new("peer-maglev", n), &n, |b, _| {
                b.iter(|| {
                    ks.iter().fold(0u32, |acc, k| {
                        acc ^ m.get(black_box(k)).copied().unwrap_or(0)
                    })
                })
            });
        }
    }
    g.finish();
}

fn bench_key_hash(c: &mut Criterion) {
    let mut g = c.benchmark_group("key_hash");
    g.throughput(Throughput::Elements(BATCH as u64));
    for len in [8usize, 16, 64] {
        let ks = keys(len);
        g.bench_with_input(BenchmarkId::from_parameter(len), &ks, |b, ks| {
            b.iter(|| ks.iter().fold(0u64, |acc, k| acc ^ key_hash(black_box(k))))
        });
    }
    g.finish();
}

fn criterion() -> Criterion {
    let c = Criterion::default();
    if std::env::var_os("FRAGHASH_BENCH_FULL").is_some() {
        c
    } else {
        c.warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(20)
    }
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = bench_key_hash, bench_locate, bench_key_locate
}
criterion_main!(benches);
