//! The `fraghash` command.

mod table;

use clap::{Parser, Subcommand};

/// Split a table into fragments and grow it: experiments, benchmarks and
/// durable fragmented tables.
#[derive(Parser)]
#[command(name = "fraghash", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Durable fragmented tables on redb.
    Table(table::TableArgs),
}

fn main() -> std::process::ExitCode {
    match Cli::parse().command {
        Command::Table(args) => table::run(args),
    }
}
