#!/usr/bin/env bash
# Runs the whole test suite: every Rust crate (release mode, so the
# statistical and crash tests run at full size quickly), then the Mnesia
# adapter's EUnit tests against real Mnesia (needs erlang-nox and erlang-dev).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --release --workspace

if ! command -v erl >/dev/null 2>&1; then
    echo "error: Erlang is not installed; the Mnesia tests need it: apt-get install -y erlang-nox erlang-dev" >&2
    exit 1
fi
erlang/run-tests.sh
