#!/bin/sh
# dets alone, no Mnesia. See README.md.
# Usage: repro/dets-kill/run.sh [Kills [Batch [Keys]]]   kill -9 runs (default 100 2000 3000)
#        repro/dets-kill/run.sh order                     the write order of one change
#        repro/dets-kill/run.sh scan File.DAT Key         the blocks holding Key
set -e
here=$(cd "$(dirname "$0")" && pwd)
ebin=${TMPDIR:-/tmp}/dets_kill_ebin
mkdir -p "$ebin"
erlc -o "$ebin" "$here/dets_kill.erl" "$here/dets_order.erl" "$here/dets_scan.erl"
if [ "${1:-}" = order ]; then
    exec erl -noshell -pa "$ebin" -run dets_order main
fi
if [ "${1:-}" = scan ]; then
    exec erl -noshell -pa "$ebin" -run dets_scan main "$2" "$3"
fi
dir=${TMPDIR:-/tmp}/dets_kill_run_$$
erl -noshell -pa "$ebin" -run dets_kill parent "$dir" "${1:-100}" "${2:-2000}" "${3:-3000}"
rm -rf "$dir"
