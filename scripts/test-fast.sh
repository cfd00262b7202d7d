#!/usr/bin/env bash
# The fast tier, for every change (about a minute or two once built):
#   1. every Rust crate's unit, property and integration tests (release
#      mode), with the store's crash test at its fast count (12 kills)
#      and the redb log's (20 kills);
#   2. the Erlang application's EUnit tests that are not kill -9 or
#      two-node tests: the state codec and the lookup against the core
#      without Mnesia, and the hash modules, the safe path, co-location,
#      loading and the guide's session in real Mnesia.
# The slow tier (kill -9 torture, two-node kills, the store's crash test
# at 100 kills) runs with FRAGHASH_SLOW_TESTS=1; scripts/test.sh runs both
# tiers and the packaging checks. Needs erlang-nox, erlang-dev, rebar3.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --release --workspace
scripts/test-mnesia.sh
