//! `fraghash experiment`: the experiment of Igor Ribeiro Sucupira's posts
//! "Consistent hashing for Mnesia fragments" (2009), random short strings
//! into N fragments, for every scheme, then one fragment more and one less,
//! with tables, JSON and plots. See docs/experiment.md.

mod axes;
mod growth;
mod keys;
mod out;
mod plot;
mod progress;
mod report;
mod run;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use fraghash::error::VALID_SPECS;
use fraghash::SchemeSpec;

use self::keys::KeySource;
use self::progress::Progress;
use self::report::Report;

/// The schemes the experiment runs when `--schemes` is not given.
pub const DEFAULT_SCHEMES: &str = "linear,ring,ring:1000,jump,slots";

/// Key patterns for generated keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyPattern {
    /// Random short strings as in the posts' experiment: length 5 to 15 over a-z and 0-9.
    Short,
    /// Counting keys `key-0`, `key-1`, ...
    Seq,
}

/// Arguments of `fraghash experiment`.
#[derive(Debug, clap::Args)]
pub struct ExperimentArgs {
    /// Number of keys M (generated keys only).
    #[arg(long = "keys", value_name = "M", default_value_t = 10_000_000)]
    pub keys: u64,
    /// Number of fragments N before the add and the remove.
    #[arg(long = "fragments", value_name = "N", default_value_t = 50)]
    pub fragments: u32,
    /// Seed of the random short strings.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Generated keys: random short strings, or key-0, key-1, ...
    #[arg(long, value_enum, default_value_t = KeyPattern::Short, conflicts_with = "keys_from")]
    pub key_pattern: KeyPattern,
    /// Read keys from FILE instead, one per line (`-`: standard input).
    /// Lines end in LF; a carriage return (CR), a NUL byte or an empty line
    /// is refused with its line number.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["keys", "seed"])]
    pub keys_from: Option<String>,
    /// Comma-separated scheme specs: linear, ring, ring:POINTS (points per fragment), jump, slots.
    #[arg(long, value_name = "SPECS", default_value = DEFAULT_SCHEMES)]
    pub schemes: String,
    /// Also grow each scheme from 1 to MAX fragments (max/mean and stddev at
    /// every step). Without a value: 400. `--out` implies `--growth 400`.
    #[arg(long, value_name = "MAX", num_args = 0..=1, default_missing_value = "400")]
    pub growth: Option<u32>,
    /// Print one JSON document on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write distribution.png/.svg, growth.png/.svg, report.json and report.md
    /// into DIR, all or nothing: a failed run, or one stopped by Ctrl-C,
    /// SIGTERM or SIGHUP, leaves DIR as it was and removes its staging
    /// directory .DIR.tmp-PID; the next run removes those of killed runs.
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
    /// No progress bars.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs the experiment; prints its own errors (one line) and returns the exit code.
pub fn run(args: ExperimentArgs) -> ExitCode {
    match execute(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fraghash experiment: {e}");
            ExitCode::from(2)
        }
    }
}

/// Parses and checks `--schemes` against `n` fragments (and one more).
pub fn parse_schemes(list: &str, n: u32) -> Result<Vec<SchemeSpec>, String> {
    let mut specs: Vec<SchemeSpec> = Vec::new();
    for part in list.split(',') {
        if part.trim().is_empty() {
            return Err(format!(
                "--schemes {list:?}: empty scheme spec; valid forms are {VALID_SPECS}"
            ));
        }
        let spec: SchemeSpec = part.parse().map_err(|e| format!("--schemes: {e}"))?;
        if specs.contains(&spec) {
            return Err(format!("--schemes: scheme {spec} is given twice"));
        }
        // The experiment adds one fragment to N.
        let max = spec.max_fragments();
        if u64::from(n) + 1 > u64::from(max) {
            return Err(format!(
                "--fragments {n}: scheme {spec} supports at most {max} fragments, \
                 and the experiment adds one to N (so N <= {})",
                max - 1
            ));
        }
        specs.push(spec);
    }
    Ok(specs)
}

fn execute(args: &ExperimentArgs) -> Result<(), String> {
    let start = Instant::now();
    let n = args.fragments;
    if n < 2 {
        return Err(format!(
            "--fragments {n}: the experiment needs at least 2 fragments (it removes one)"
        ));
    }
    let specs = parse_schemes(&args.schemes, n)?;
    // --out writes growth.png: grow to 400 unless told otherwise.
    let growth_max = args.growth.or(args.out.as_ref().map(|_| 400));
    if let Some(g) = growth_max {
        if !(2..=growth::MAX_GROWTH).contains(&g) {
            return Err(format!(
                "--growth {g}: must be 2 to {} fragments",
                growth::MAX_GROWTH
            ));
        }
        if let Some(s) = specs.iter().find(|s| s.max_fragments() < g) {
            return Err(format!(
                "--growth {g}: scheme {s} supports at most {} fragments",
                s.max_fragments()
            ));
        }
    }
    let source = match &args.keys_from {
        Some(path) => KeySource::File { path: path.clone() },
        None => {
            if args.keys == 0 || args.keys > keys::MAX_KEYS {
                return Err(format!(
                    "--keys {}: must be 1 to {} keys",
                    args.keys,
                    keys::MAX_KEYS
                ));
            }
            match args.key_pattern {
                KeyPattern::Short => KeySource::Short { seed: args.seed },
                KeyPattern::Seq => KeySource::Seq,
            }
        }
    };
    // Fail before the work if the output directory cannot be written.
    let staging = match &args.out {
        Some(dir) => Some(out::Staging::new(dir)?),
        None => None,
    };

    let progress = Progress::new(args.quiet);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    let hashes = keys::load_hashes(&source, args.keys, &progress)?;
    let mut schemes = Vec::with_capacity(specs.len());
    for &spec in &specs {
        schemes.push(run::evaluate(spec, n, &hashes, threads, &progress)?);
    }
    let growth = match growth_max {
        Some(max) => Some(report::Growth {
            max,
            curves: growth::curves(&specs, max, &hashes, threads, &progress)?,
        }),
        None => None,
    };
    let report = Report::new(source, hashes.len() as u64, n, schemes, growth);
    drop(hashes);

    if let Some(mut staging) = staging {
        let bar = progress.spinner("writing plots");
        staging.write("report.json", report.to_json().as_bytes())?;
        staging.write("report.md", report.markdown().as_bytes())?;
        plot::distribution(&report, staging.dir())?;
        staging.record(&["distribution.png", "distribution.svg"]);
        if let Some(g) = &report.growth {
            plot::growth(&report, g, staging.dir())?;
            staging.record(&["growth.png", "growth.svg"]);
        }
        staging.commit()?;
        bar.finish_and_clear();
    }
    let text = if args.json {
        report.to_json() + "\n"
    } else {
        report.terminal(start.elapsed())
    };
    // A closed pipe (`| head`) is not an error worth a panic.
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(format!("cannot write to stdout: {}", keys::io_reason(&e)));
        }
    }
    Ok(())
}
