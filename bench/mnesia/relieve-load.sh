#!/bin/sh
# The posts' case as a benchmark: a mnesia_frag_slots table of 8 fragments
# whose fragment 1 holds about 93% of the records is relieved
# (fraghash_frag:relieve(Tab, [node()], largest)) while 4 writers
# overwrite random keys in transactions at 2,000 writes/s in all (90% of
# them on fragment 1's keys) and a reader reads 500 random keys a second;
# a batched copy of the same records (transactions of 500, into a scratch
# table of the same storage) runs first on the same table, under the same
# load, as the reference, then the same load with no operation for as long
# as the copy took ("idle": what the writers meet from the table alone).
# Each case (storage type x value size) in a fresh VM and a fresh Mnesia
# directory under TMPDIR (default /tmp), removed afterwards. Prints a Markdown table (and a JSON object per operation
# with --json), with the load averages before each case. The figures'
# meanings: bench/mnesia/fraghash_bench_relieve.erl.
#
# Usage: bench/mnesia/relieve-load.sh [--quick | --1g | --2g | --mb MB]
#            [--storage disc_only_copies,redb_copies] [--values 1000,100] [--json]
#            [--rehash]
#   default   fragment 1 with the records of about 270 MB of dets file
#             (1,000-byte values: about 132,000 records; 100-byte values:
#             about 1,050,000; the same records on redb_copies), every
#             storage type and value size: minutes per case
#   --quick   5 MB in fragment 1, for a smoke test (seconds per case)
#   --1g, --2g  about 1 GB, 2 GB (dets stops at 2 GB: --2g is the posts'
#             limit itself; an hour or more, several GB of disc and memory)
#   --mb MB   any size
# Environment: scripts/build-nif.sh's variables; FRAGHASH_BENCH_LIB, a copy
# of _build/bench/lib/fraghash (ebin, bench/mnesia, priv) to run instead of
# compiling this tree (to measure one commit while the tree changes);
# FRAGHASH_BENCH_NO_IDLE=1 skips the idle span; FRAGHASH_BENCH_KEEP_CACHED=1
# keeps the table files in the page cache (fraghash_bench_cache);
# FRAGHASH_BENCH_NO_LISTING=1 skips timing the listing of fragment 1's keys
# (two full reads of it, minutes at 2 GB); FRAGHASH_BENCH_STALLS=MS prints,
# for each write of MS ms or more during an operation, where the writer
# waited and which processes were busy meanwhile (fraghash_bench_stalls).
# The 50-fragment growth benchmark stays beside it: disc-measure.sh growth.
#
# --rehash measures a change of hash module instead: 8 fragments on
# mnesia_frag_hash holding about MB megabytes of records in all, changed
# online to mnesia_frag_slots (fraghash_frag:change_hash_module/2) under
# the same load (on all keys), against a batched copy of the records that
# move; the size columns are then the whole table's.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
mb=270
storage=disc_only_copies,redb_copies
values=1000,100
format=table
kind=relieve
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) mb=5 ;;
        --1g) mb=1000 ;;
        --2g) mb=2000 ;;
        --mb) mb=$2; shift ;;
        --storage) storage=$2; shift ;;
        --values) values=$2; shift ;;
        --json) format=json ;;
        --rehash) kind=rehash ;;
        *) sed -n '2,/^set -eu/p' "$0" | sed -e 's/^# \{0,1\}//' -e '$d' >&2; exit 2 ;;
    esac
    shift
done
. "$root/bench/mnesia/bench-lib.sh"
lib=$(bench_lib "$root")
case $kind in
    relieve) read="fragment 1 records | fragment 1 MB" ;;
    rehash) read="records | MB" ;;
esac
echo "| storage | value bytes | $read | operation | wall s |" \
     "records moved | records/s | ÷ copy | peak RSS + MB | largest journal record MB |" \
     "largest Mnesia log MB | longest write ms | p99 write ms | write rate vs before |" \
     "reads | misses | failures |"
echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for s in $(echo "$storage" | tr ',' ' '); do
    for v in $(echo "$values" | tr ',' ' '); do
        tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-relieve.XXXXXX")
        echo "<!-- $s, $v-byte values, $mb MB: load before: $(cut -d' ' -f1-3 /proc/loadavg) -->"
        (cd "$tmp" && erl -noshell -pa "$lib/ebin" "$lib/bench/mnesia" \
            -eval "fraghash_bench_relieve:run(\"$tmp/mnesia\", $kind, $s, $v, $mb, $format), halt()." 2>&1 \
            | grep -v -e 'WARNING' -e 'overloaded' -e 'INFO REPORT' -e 'application: mnesia' \
                      -e 'exited: stopped' -e 'type: temporary' -e '^ *$') || true
        echo "<!-- load after: $(cut -d' ' -f1-3 /proc/loadavg) -->"
        rm -rf "$tmp"
    done
done
