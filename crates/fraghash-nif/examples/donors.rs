//! The `slots` donors trade-off as Mnesia sees it: an `add_frag` must scan
//! every donor fragment in full, so fewer donors scan less of the table but
//! leave the fragments less even.
//!
//! Grows a table one fragment at a time, starting from a balanced table, and
//! prints for each donor bound: fragments scanned per add, the share of the
//! table scanned per add (in units of one fragment's ideal share), and the
//! worst max/mean and min/mean of the fragments' shares seen after any add.
//! Shares are exact (slot counts), so there is no sampling noise.
//!
//! ```text
//! cargo run --release -p fraghash-nif --example donors -- 8 64
//! ```

use fraghash::{AnyScheme, FragmentScheme};

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("fragment counts"))
        .collect();
    let (from, to) = match args[..] {
        [a, b] => (a, b),
        _ => (50, 100),
    };
    println!("growing a slots table from {from} to {to} fragments, one add_frag at a time\n");
    println!("| donors | fragments scanned per add (mean / max) | table scanned per add, in fragments | worst max/mean | worst min/mean | min/mean at {to} |");
    println!("|---|---|---|---|---|---|");
    for donors in [1u32, 2, 3, 4, 8, 16, u32::MAX] {
        let mut s = AnyScheme::new("slots", from).expect("scheme");
        let (mut scans, mut scan_max, mut scanned) = (0u64, 0usize, 0f64);
        let (mut worst_max, mut worst_min, mut last_min) = (0f64, f64::MAX, 0f64);
        for _ in from..to {
            let shares = shares(&s);
            let n = s.fragments() as f64;
            let plan = s.add_limited(1, donors).expect("add");
            let src = plan.sources();
            scans += src.len() as u64;
            scan_max = scan_max.max(src.len());
            // Each scanned fragment is read in full.
            scanned += src.iter().map(|&f| shares[f as usize] * n).sum::<f64>();
            let after = shares_of(&s);
            let mean = 1.0 / s.fragments() as f64;
            let max = after.iter().cloned().fold(0.0, f64::max) / mean;
            let min = after.iter().cloned().fold(f64::MAX, f64::min) / mean;
            worst_max = worst_max.max(max);
            worst_min = worst_min.min(min);
            last_min = min;
        }
        let adds = f64::from(to - from);
        let label = if donors == u32::MAX {
            "all".to_string()
        } else {
            donors.to_string()
        };
        println!(
            "| {label} | {:.1} / {scan_max} | {:.2} | {worst_max:.3} | {worst_min:.3} | {last_min:.3} |",
            scans as f64 / adds,
            scanned / adds,
        );
    }
}

fn shares(s: &AnyScheme) -> Vec<f64> {
    shares_of(s)
}

fn shares_of(s: &AnyScheme) -> Vec<f64> {
    let sl = s.as_slots().expect("slots");
    let total = sl.slot_count() as f64;
    sl.slots_per_fragment()
        .iter()
        .map(|&c| c as f64 / total)
        .collect()
}
