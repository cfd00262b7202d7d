#!/bin/sh
# Benchmarks the fraghash Mnesia hash modules beside mnesia_frag_hash.
# Usage: erlang/bench/bench.sh [KEYS [FRAGMENT_COUNTS [DIST_KEYS]]]
#        (defaults: 100000 "50,400,4000" 1000000). Prints Markdown tables.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${FRAGHASH_SKIP_BUILD:-}" ]; then
    "$here/build.sh" >&2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cd "$tmp"
erl -noshell -pa "$here/ebin" -mnesia dir "\"$tmp/mnesia\"" \
    -eval "fraghash_bench:main([\"${1:-100000}\", \"${2:-50,400,4000}\", \"${3:-1000000}\"]), halt()."
