#!/bin/sh
# Moving fragment replicas between nodes, under load, as a benchmark: the
# bench VM starts peer nodes on this host (OTP's peer), one disc schema,
# and measures, while 4 writers overwrite random keys of the table in
# transactions at 2,000 writes/s in all and a reader reads 500 random keys
# a second (from the bench node, which holds no copy):
#   move       fraghash_frag:move_replica/3 of a disc_copies fragment of
#              1,000,000 records (100-byte values; 2 fragments of that size,
#              one on each of two nodes) from one node to the other, against
#              Mnesia's own mnesia:add_table_copy (and del_table_copy) of it
#              on the idle table, in the same run just before; the move
#              of the copy written record by record, and back
#   rebalance  fraghash_frag:rebalance/1 of a disc_copies table of
#              3,000,000 records in 32 fragments of one copy each, from two
#              nodes to three (the third added to the node pool), with the
#              fewest records any plan moves to bring every node within 10%
#              of the mean
# Each case in a fresh VM and fresh Mnesia directories under TMPDIR
# (default /tmp), removed afterwards. Prints a Markdown table per case
# (and a JSON object per row with --json), with the load averages before
# and after each case. The columns' meanings:
# bench/mnesia/fraghash_bench_move.erl; comment lines time the steps and
# Mnesia's calls (fraghash_bench_trace.erl).
#
# Usage: bench/mnesia/move-load.sh [--quick] [--case move,rebalance] [--json]
#                                   [--storage disc_copies|redb_copies]
#   default   the sizes above: minutes per case, about 2 GB of memory
#   --quick   1/20 of them (50,000 and 150,000 records), for a smoke test
#   --case    the cases to run, comma-separated (default: both)
#   --json    a JSON object per row as well
#   --storage the move case's copies (default disc_copies)
# Environment: scripts/build-nif.sh's variables; FRAGHASH_BENCH_LIB, a copy
# of _build/bench/lib/fraghash (ebin, bench/mnesia, priv) to run instead of
# compiling this tree (to measure one commit while the tree changes).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -e 's/^# \{0,1\}//' -e '$d' >&2
    exit 2
}
move_records=1000000
rebalance_records=3000000
cases=move,rebalance
format=table
storage=disc_copies
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) move_records=50000; rebalance_records=150000 ;;
        --case) [ $# -ge 2 ] || usage; cases=$2; shift ;;
        --json) format=json ;;
        --storage) [ $# -ge 2 ] || usage; storage=$2; shift
                   case "$storage" in disc_copies|redb_copies) ;; *) usage ;; esac ;;
        *) usage ;;
    esac
    shift
done
for c in $(echo "$cases" | tr ',' ' '); do
    case "$c" in
        move|rebalance) ;;
        *) echo "unknown case: $c" >&2; usage ;;
    esac
done
. "$root/bench/mnesia/bench-lib.sh"
lib=$(bench_lib "$root")
for c in $(echo "$cases" | tr ',' ' '); do
    case "$c" in
        move) records=$move_records ;;
        rebalance) records=$rebalance_records ;;
    esac
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-move.XXXXXX")
    echo "<!-- $c, $records records: load before: $(cut -d' ' -f1-3 /proc/loadavg) -->"
    (cd "$tmp" && erl -noshell -sname "fhmove_a_$$@localhost" -pa "$lib/ebin" "$lib/bench/mnesia" \
        -eval "fraghash_bench_move:run(\"$tmp\", $c, $records, $format, $storage), halt()." 2>&1 \
        | grep -a -v -e 'WARNING' -e 'overloaded' -e 'INFO REPORT' -e 'application: mnesia' \
                  -e 'exited: stopped' -e 'type: temporary' -e 'overlapping partitions' -e '^ *$') || true
    echo "<!-- load after: $(cut -d' ' -f1-3 /proc/loadavg) -->"
    rm -rf "$tmp"
done
