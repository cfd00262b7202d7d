//! Prints each scheme's lookup memory and serialised state size at 10,
//! 1,000, 10,000 and 100,000 fragments.
//!
//! `cargo run --release -p fraghash --example state_memory`

use fraghash::{AnyScheme, FragmentScheme};

fn main() {
    println!(
        "{:<8} {:>9} {:>14} {:>14}",
        "scheme", "fragments", "memory bytes", "state bytes"
    );
    for n in [10u32, 1_000, 10_000, 100_000] {
        for spec in ["linear", "ring", "jump", "slots"] {
            let s = AnyScheme::new(spec, n).expect("within every scheme's limit");
            println!(
                "{:<8} {:>9} {:>14} {:>14}",
                spec,
                n,
                s.memory_bytes(),
                s.to_state_bytes().len()
            );
        }
    }
}
