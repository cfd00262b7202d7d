//! `fraghash table ...`: durable fragmented tables (see `docs/store.md`).
//!
//! Exit codes ([`EXIT_CODES`], also in `--help`): 0 success; 1 a key not
//! found (`get`) or problems found (`verify`, a damaged file among them);
//! 2 an error (printed as one line on stderr), a damaged file for every
//! command but `verify`. A closed standard output (`fraghash table scan
//! DIR | head -1`) is a normal end: exit 0, nothing printed.
//!
//! `load` reads and `scan` prints one record a line, `key<TAB>value`, with
//! backslash escapes for the bytes that would break a line (`\\`, `\t`,
//! `\n`, `\r`: [`escape`]), so that `scan | load` copies any table.
//!
//! A command that opens a table whose migration a crash interrupted
//! finishes it first (the store does so on open) and says so in one line on
//! stderr.

mod cmd;
mod escape;

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// The exit codes, as `fraghash table --help` ends.
const EXIT_CODES: &str = "Exit codes: 0 done; 1 a key not found (get) or a problem found \
(verify: one `problem:` line each; a damaged fragment file or manifest is one, naming the \
file); 2 an error, one line on stderr (for every command but verify, a damaged file is an \
error, naming it).";

/// Arguments of `fraghash table`.
#[derive(Args)]
#[command(after_help = EXIT_CODES)]
pub struct TableArgs {
    #[command(subcommand)]
    command: TableCommand,
    /// No progress bar and no summary line (values, scans, stats, JSON,
    /// problems, errors and notices on stderr are still printed).
    #[arg(long, short, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum TableCommand {
    /// Create a table in DIR (a new or empty directory).
    Create {
        /// Table directory: created if missing; an existing one must be empty.
        dir: PathBuf,
        /// Scheme: slots, ring, ring:POINTS (points per fragment), jump, linear.
        #[arg(long, default_value = "slots")]
        scheme: String,
        /// Fragments to start with.
        #[arg(long, default_value_t = 4)]
        fragments: u32,
        /// Spread fragment files over these directories, in turn (repeat).
        #[arg(long = "place")]
        place: Vec<PathBuf>,
    },
    /// Store VALUE under KEY (both taken as given, without escapes).
    Put {
        /// Table directory.
        dir: PathBuf,
        /// Key (UTF-8).
        key: String,
        /// Value (UTF-8).
        value: String,
    },
    /// Print the value of KEY as stored, then a newline (exit 1 if absent).
    Get {
        /// Table directory.
        dir: PathBuf,
        /// Key.
        key: String,
    },
    /// Delete KEY.
    Delete {
        /// Table directory.
        dir: PathBuf,
        /// Key.
        key: String,
    },
    /// Load `key<TAB>value` lines from FILE (or stdin: `-` or none).
    ///
    /// Lines end in LF; a carriage return (CR) anywhere in a line is refused
    /// with its line number (convert CRLF files first, e.g. with dos2unix).
    /// Empty lines are skipped; the key ends at the first TAB. In keys and
    /// values a backslash starts an escape: \\ for a backslash, \t TAB, \n
    /// LF, \r CR (any other escape is refused), the format `scan` prints.
    Load {
        /// Table directory.
        dir: PathBuf,
        /// Input file; `-` or absent for stdin.
        file: Option<PathBuf>,
        /// Records per batch (at least 1).
        #[arg(long, default_value_t = 10_000, value_parser = at_least_one)]
        batch: usize,
    },
    /// Print every record as a `key<TAB>value` line.
    ///
    /// Backslash, TAB, LF and CR in keys and values are printed as \\, \t,
    /// \n and \r, so that `load` reads the output back as the same records.
    Scan {
        /// Table directory.
        dir: PathBuf,
        /// Stop after this many records.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Add a fragment and move its share of the records into it.
    AddFragment {
        /// Table directory.
        dir: PathBuf,
        #[command(flatten)]
        m: MigrateArgs,
    },
    /// Split fragment ID in two (slots only).
    SplitFragment {
        /// Table directory.
        dir: PathBuf,
        /// Fragment to split.
        id: u32,
        #[command(flatten)]
        m: MigrateArgs,
    },
    /// Remove fragment ID, moving its records to the others.
    RemoveFragment {
        /// Table directory.
        dir: PathBuf,
        /// Fragment to remove.
        id: u32,
        #[command(flatten)]
        m: MigrateArgs,
    },
    /// Move slots until every fragment holds its share of the bytes (slots only).
    Rebalance {
        /// Table directory.
        dir: PathBuf,
        #[command(flatten)]
        m: MigrateArgs,
    },
    /// Records and bytes per fragment.
    Stats {
        /// Table directory.
        dir: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check every record and file (exit 1 if a problem is found, a damaged
    /// file among them: one `problem:` line each, naming the file).
    Verify {
        /// Table directory.
        dir: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Return free pages of the fragment files to the file system.
    Compact {
        /// Table directory.
        dir: PathBuf,
    },
}

/// Options of the migrating commands.
#[derive(Args)]
struct MigrateArgs {
    /// Records moved per batch (at least 1).
    #[arg(long, default_value_t = fraghash_store::DEFAULT_BATCH, value_parser = at_least_one)]
    batch: usize,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `--batch`: a count of records, at least 1.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1 record".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count of records ({e})")),
    }
}

/// Runs `fraghash table`; prints its own errors (one line) and returns the exit code.
pub fn run(args: TableArgs) -> std::process::ExitCode {
    match cmd::dispatch(args.command, args.quiet) {
        Ok(code) => std::process::ExitCode::from(code),
        // The reader of our output went away (`| head`): a normal end.
        Err(e) if cmd::is_broken_pipe(&*e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fraghash table: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests;
