#!/bin/sh
# Benchmarks the fraghash Mnesia hash modules beside mnesia_frag_hash.
# Usage: bench/mnesia/bench.sh [KEYS [FRAGMENT_COUNTS [DIST_KEYS]]]
#        (defaults: 100000 "50,400,4000" 1000000). Prints Markdown tables.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
# The library and the benchmark modules (rebar3's bench profile).
(cd "$root" && rebar3 as bench compile >&2)
lib="$root/_build/bench/lib/fraghash"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cd "$tmp"
erl -noshell -pa "$lib/ebin" "$lib/bench/mnesia" -mnesia dir "\"$tmp/mnesia\"" \
    -eval "fraghash_bench:main([\"${1:-100000}\", \"${2:-50,400,4000}\", \"${3:-1000000}\"]), halt()."
