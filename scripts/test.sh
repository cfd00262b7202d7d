#!/usr/bin/env bash
# Runs the whole test suite, both tiers (FRAGHASH_SLOW_TESTS=1; the fast
# tier alone is scripts/test-fast.sh):
#   1. every Rust crate (release mode, so the statistical and crash tests run
#      at full size quickly; the store's crash test at 100 kills, the
#      redb log's at 100);
#   2. the Erlang application's EUnit tests in real Mnesia, the kill -9
#      torture and the two-node kill tests included (rebar3; needs
#      erlang-nox, erlang-dev and rebar3);
#   3. a throwaway rebar3 project that depends on this repository by git
#      (the committed HEAD) and grows a table with it;
#   4. the Elixir example's ExUnit tests and docs/elixir.md's session (elixir).
set -euo pipefail
cd "$(dirname "$0")/.."
export FRAGHASH_SLOW_TESTS=1

cargo test --release --workspace

for tool in erl rebar3 mix git; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "error: $tool is not installed; the Erlang and Elixir tests need it: apt-get install -y erlang-nox erlang-dev rebar3 elixir git" >&2
        exit 1
    fi
done
scripts/test-mnesia.sh
scripts/test-rebar3-dep.sh
scripts/test-elixir.sh
