//! What a cache miss costs: building a scheme from its recipe (the state a
//! Mnesia node rebuilds on first use after a restart, or on a node that has
//! not seen the table yet), and reading back the node-local built-state
//! file that a replay leaves behind (what the next miss on the node costs).
//!
//! For each scheme, a table created with `FROM` fragments and then grown one
//! `add_frag` at a time to `TO` (the longest history a table of `TO`
//! fragments can have, short of shrinking and regrowing), with the default
//! donor bound of 8. Prints the recipe's size, the median of 3 builds by
//! replay and the median of 3 loads of the file. An optional third argument
//! picks one scheme.
//!
//! ```text
//! cargo run --release -p fraghash-nif --no-default-features --features tools --example recipe_replay -- 8 1000
//! cargo run --release -p fraghash-nif --no-default-features --features tools --example recipe_replay -- 8 4000 slots
//! ```

use std::time::Instant;

use fraghash::FragmentScheme;
use fraghash_nif::built;
use fraghash_nif::recipe::digest;
use fraghash_nif::recipe::{apply, Op, Recipe};

fn median_secs<T>(mut f: impl FnMut() -> T, check: impl Fn(&T)) -> f64 {
    let mut times: Vec<f64> = (0..3)
        .map(|_| {
            let t = Instant::now();
            let out = f();
            let secs = t.elapsed().as_secs_f64();
            check(&out);
            secs
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[1]
}

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
    let dir = std::env::temp_dir().join(format!("fraghash-replay-{}", std::process::id()));
    println!("a table created with {from} fragments, then grown one add_frag at a time to {to}\n");
    println!("| scheme | recipe bytes | build by replay | per replayed add_frag | load of the built-state file |");
    println!("|---|---:|---:|---:|---:|");
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
        let want = live.to_state_bytes();
        let replay = median_secs(
            || recipe.build().expect("build"),
            |s| assert_eq!(s.to_state_bytes(), want),
        );
        let d = digest(&recipe.encode());
        built::save(&dir, &d, &live);
        let load = median_secs(
            || built::load(&dir, &d).expect("built-state file"),
            |s| assert_eq!(s.to_state_bytes(), want),
        );
        println!(
            "| {spec} | {} | {replay:.3} s | {:.1} µs | {:.1} ms |",
            recipe.encode().len(),
            replay / f64::from((to - from).max(1)) * 1e6,
            load * 1e3
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
