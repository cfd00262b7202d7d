//! What a cache miss costs: building a scheme from its recipe (the state a
//! Mnesia node rebuilds on first use after a restart, or on a node that has
//! not seen the table yet).
//!
//! For each scheme, a table created with `FROM` fragments and then grown one
//! `add_frag` at a time to `TO` (the longest history a table of `TO`
//! fragments can have, short of shrinking and regrowing), with the default
//! donor bound of 8. Prints the recipe's size and the median of 3 builds.
//! An optional third argument picks one scheme.
//!
//! ```text
//! cargo run --release -p fraghash-nif --no-default-features --features tools --example recipe_replay -- 8 1000
//! cargo run --release -p fraghash-nif --no-default-features --features tools --example recipe_replay -- 8 4000 slots
//! ```

use std::time::Instant;

use fraghash::FragmentScheme;
use fraghash_nif::recipe::{apply, Op, Recipe};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let specs: Vec<&str> = match args.get(2) {
        Some(s) => vec![s.as_str()],
        None => vec!["slots", "ring", "jump", "linear"],
    };
    let counts: Vec<u32> = args
        .iter()
        .take(2)
        .map(|a| a.parse().expect("fragment counts FROM TO"))
        .collect();
    let (from, to) = match counts[..] {
        [a, b] if a >= 1 && b >= a => (a, b),
        _ => (8, 1000),
    };
    println!("a table created with {from} fragments, then grown one add_frag at a time to {to}\n");
    println!(
        "| scheme | recipe bytes | build from the recipe (median of 3) | per replayed add_frag |"
    );
    println!("|---|---:|---:|---:|");
    let op = Op::Add {
        weight: 1,
        donors: 8,
    };
    for spec in specs {
        let mut recipe = Recipe::new(spec, from, &[]).expect("recipe");
        let mut live = recipe.build().expect("base");
        for _ in from..to {
            apply(&mut live, op).expect("add");
            recipe.push(op);
        }
        let mut times: Vec<f64> = (0..3)
            .map(|_| {
                let t = Instant::now();
                let built = recipe.build().expect("build");
                let secs = t.elapsed().as_secs_f64();
                assert_eq!(built.to_state_bytes(), live.to_state_bytes());
                secs
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let adds = f64::from((to - from).max(1));
        println!(
            "| {spec} | {} | {:.3} s | {:.1} µs |",
            recipe.encode().len(),
            times[1],
            times[1] / adds * 1e6
        );
    }
}
