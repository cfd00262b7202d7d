#!/bin/sh
# Benchmarks the fraghash Mnesia hash modules beside mnesia_frag_hash.
# Usage: bench/mnesia/bench.sh [KEYS [FRAGMENT_COUNTS [DIST_KEYS]]]
#        (defaults: 20000 "50,400" 1000000, a few minutes). Prints Markdown tables.
# Environment: FRAGHASH_BENCH_REPS (repetitions, default 3),
#   FRAGHASH_BENCH_ROUNDS (passes of overwrites and reads per repetition,
#   default 1), FRAGHASH_BENCH_FRESH_MAX (largest fragment count whose
#   tables are created afresh every repetition, default 400),
#   FRAGHASH_BENCH_PUBLISH_FRAGS (fragments of the add_frag table, 400),
#   FRAGHASH_BENCH_PROCESSES (shared: the benchmark's process runs every
#   table's batches, the default; per_table: a process per table).
# The full run (an hour or more: Mnesia creates a 4,000-fragment table in
# 30 to 40 s on a node holding many tables):
#   ERL_FLAGS="+S 1:1" FRAGHASH_BENCH_REPS=10 bench/mnesia/bench.sh 50000 50,400,4000
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
# The library and the benchmark modules (rebar3's bench profile).
(cd "$root" && rebar3 as bench compile >&2)
lib="$root/_build/bench/lib/fraghash"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cd "$tmp"
erl -noshell -pa "$lib/ebin" "$lib/bench/mnesia" -mnesia dir "\"$tmp/mnesia\"" \
    -eval "fraghash_bench:main([\"${1:-20000}\", \"${2:-50,400}\", \"${3:-1000000}\"]), halt()."
