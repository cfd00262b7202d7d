//! `fraghash table ...`: durable fragmented tables (owned by the store work).

/// Arguments of `fraghash table`.
#[derive(clap::Args)]
pub struct TableArgs {}

/// Runs `fraghash table`; prints its own errors (one line) and returns the exit code.
pub fn run(_args: TableArgs) -> std::process::ExitCode {
    eprintln!("fraghash table: not built yet");
    std::process::ExitCode::from(2)
}
