//! The `fraghash` command.

mod experiment;
mod table;
mod text;

use clap::{Parser, Subcommand};

/// Split a table into fragments and grow it: the fragment-balance experiment
/// for every scheme, and durable fragmented tables.
#[derive(Parser)]
#[command(name = "fraghash", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Random short strings into N fragments for every scheme: the
    /// distribution, one add, one remove, growth curves; tables, JSON and plots.
    Experiment(experiment::ExperimentArgs),
    /// Durable fragmented tables on redb.
    Table(table::TableArgs),
}

fn main() -> std::process::ExitCode {
    match Cli::parse().command {
        Command::Experiment(args) => experiment::run(args),
        Command::Table(args) => table::run(args),
    }
}
