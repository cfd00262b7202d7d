//! Prints how 1,000,000 random short keys spread over 50 fragments under
//! every scheme, and what adding the 51st fragment moves and scans.
//!
//! `cargo run --release -p fraghash --example distribution [KEYS] [FRAGMENTS]`

use fraghash::keys::ShortKeys;
use fraghash::{key_hash, AnyScheme, FragmentScheme, Stats};

fn main() {
    let mut args = std::env::args().skip(1);
    let keys: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let fragments: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let mut g = ShortKeys::new(1);
    let mut buf = Vec::new();
    let hashes: Vec<u64> = (0..keys)
        .map(|_| {
            g.next_into(&mut buf);
            key_hash(&buf)
        })
        .collect();
    println!("{keys} random short keys over {fragments} fragments, then one more fragment\n");
    println!(
        "{:<10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9}",
        "scheme", "mean", "stddev", "floor", "max", "max/mean", "sd/floor", "moved %", "scanned %"
    );
    for spec in ["linear", "ring", "ring:1000", "jump", "slots"] {
        let mut s = match AnyScheme::new(spec, fragments) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        };
        let before: Vec<u32> = hashes.iter().map(|&h| s.locate(h)).collect();
        let mut counts = vec![0u64; fragments as usize];
        for &f in &before {
            counts[f as usize] += 1;
        }
        let st = Stats::from_counts(&counts);
        let plan = s
            .add_fragment()
            .expect("one more fragment fits every scheme");
        let moved = hashes
            .iter()
            .zip(&before)
            .filter(|(&h, &b)| s.locate(h) != b)
            .count();
        let scanned = plan.keys_scanned(
            |f| counts[f as usize],
            |r| hashes.iter().filter(|&&h| r.contains(h)).count() as u64,
        );
        let pct = |x: usize| 100.0 * x as f64 / keys as f64;
        println!(
            "{:<10} {:>9.0} {:>9.1} {:>9.1} {:>9} {:>8.3} {:>8.2} {:>9.2} {:>9.2}",
            spec,
            st.mean,
            st.stddev,
            st.floor,
            st.max,
            st.max_over_mean,
            st.stddev_over_floor(),
            pct(moved),
            pct(scanned as usize),
        );
    }
    println!(
        "\nideal share moved: {:.2} %",
        100.0 / f64::from(fragments + 1)
    );
}
