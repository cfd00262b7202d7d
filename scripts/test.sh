#!/usr/bin/env bash
# Runs the whole test suite:
#   1. every Rust crate (release mode, so the statistical and crash tests run
#      at full size quickly);
#   2. the Erlang application's EUnit tests in real Mnesia (rebar3; needs
#      erlang-nox, erlang-dev and rebar3).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --release --workspace

for tool in erl rebar3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "error: $tool is not installed; the Mnesia tests need it: apt-get install -y erlang-nox erlang-dev rebar3" >&2
        exit 1
    fi
done
scripts/test-mnesia.sh
