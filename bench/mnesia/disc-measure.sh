#!/bin/sh
# Measurements of the crash-safe path for disc tables (figures in
# docs/mnesia-disc-safety.md), each in a fresh Mnesia in a temporary
# directory that is removed afterwards:
#   bench/mnesia/disc-measure.sh torture [KILLS]     kill -9 torture test (default 300 kills)
#   bench/mnesia/disc-measure.sh relieve             adds needed to halve the largest
#                                       disc_only_copies fragment, per module
#   bench/mnesia/disc-measure.sh growth [RECORDS] [MODULES] [REPS] [STORAGE]
#                                       one add on a 50-fragment table under
#                                       load: plain change_table_frag,
#                                       fraghash_frag:add_frag and a batched
#                                       copy of the same records (defaults:
#                                       200000 records, mnesia_frag_hash and
#                                       mnesia_frag_slots, 1 repetition,
#                                       disc_copies; MODULES comma-separated
#                                       or all; a few minutes at the
#                                       defaults, an hour or more at
#                                       3000000 records and all modules)
#   bench/mnesia/disc-measure.sh bag [RECORDS]     a redb_copies bag of 10 records a
#                                       key against a set, per record: load,
#                                       reads, writes (fraghash_bench_bag;
#                                       default 100000 records, a minute)
#   bench/mnesia/disc-measure.sh redb [--peer rocksdb] [--full | --big | RECORDS...]
#                                       the redb_copies backend against
#                                       disc_only_copies and disc_copies on a
#                                       set table of records of ~100 bytes:
#                                       load, reads, writes (1 and 16
#                                       writers), full select scan, memory,
#                                       reopen; one VM per storage type
#                                       (fraghash_bench_redb; default 100000
#                                       records, a few minutes; --full:
#                                       100000 and 1000000, about 10 minutes;
#                                       --big: one table of about 3 GB
#                                       (FRAGHASH_REDB_BENCH_BIG_RECORDS,
#                                       default 15000000), redb_copies only
#                                       unless FRAGHASH_REDB_BENCH_STORAGE
#                                       says otherwise (dets files stop at
#                                       2 GB), then grown to two fragments
#                                       with fraghash_frag:add_frag/2; an hour
#                                       or more, several GB of disc: not for
#                                       CI); --peer rocksdb (or
#                                       FRAGHASH_BENCH_ROCKSDB=DIR) adds
#                                       aeternity's mnesia_rocksdb
#                                       (rocksdb_copies) as a fourth type,
#                                       built beforehand by
#                                       bench/peer/build-mnesia-rocksdb.sh
#                                       into DIR (default _build/peer), with
#                                       the ratios redb ÷ rocksdb and a phase
#                                       of 1,000,000 overwrites
#                                       (fraghash_bench_peer); --floor (after
#                                       --peer) adds floor_copies, Mnesia's
#                                       external-table path with records in
#                                       ets (fraghash_bench_floor): the most
#                                       any backend could write
# Environment: scripts/build-nif.sh's variables; for redb,
# FRAGHASH_REDB_BENCH_STORAGE (comma-separated storage types, default all
# three) and FRAGHASH_REDB_CACHE_BYTES (redb's page cache, default an
# eighth of the machine's memory, 64 MiB to 1 GiB; RocksDB's block cache
# gets the same), FRAGHASH_REDB_BENCH_OVERWRITES (records overwritten
# after the reopen before the disc is measured again; default 1000000 with
# the peer, else none) and FRAGHASH_BENCH_ROCKSDB_OPTS (further
# mnesia_rocksdb rocksdb_opts, an Erlang list); for growth, FRAGHASH_BENCH_DUMP_THRESHOLD (Mnesia's
# dump_log_write_threshold, default 1000) and FRAGHASH_BENCH_WRITE_RATE
# (the writers' pace, writes/s in all; back to back by default). The tables live in TMPDIR
# (default /tmp): the figures are that file system's.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
what=${1:-}
if [ "$what" = torture ]; then
    # The torture test is an EUnit module: run it alone, at full size.
    FRAGHASH_SLOW_TESTS=1 FRAGHASH_TORTURE_KILLS=${2:-300} exec "$root/scripts/test-mnesia.sh" \
        --module=fraghash_torture_tests
fi
# The library and the measurement modules (rebar3's bench profile).
(cd "$root" && rebar3 as bench compile >&2)
lib="$root/_build/bench/lib/fraghash"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-disc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cd "$tmp"
case "$what" in
    relieve)
        erl -noshell -pa "$lib/ebin" "$lib/bench/mnesia" \
            -eval "fraghash_relieve_measure:run(\"$tmp/mnesia\"), halt()." 2>&1 \
            | grep -v -e 'WARNING' -e 'overloaded' -e 'INFO REPORT' -e 'application: mnesia' \
                      -e 'exited: stopped' -e 'type: temporary' -e '^ *$'
        ;;
    growth)
        case "${3:-mnesia_frag_hash,mnesia_frag_slots}" in
            all) mods="mnesia_frag_hash,mnesia_frag_slots,mnesia_frag_chash,mnesia_frag_jump,mnesia_frag_linear" ;;
            *) mods=${3:-mnesia_frag_hash,mnesia_frag_slots} ;;
        esac
        erl -noshell -pa "$lib/ebin" "$lib/bench/mnesia" \
            -eval "fraghash_bench_growth:run(\"$tmp/mnesia\", ${2:-200000}, [$mods], ${4:-1}, ${5:-disc_copies}), halt()." 2>&1 \
            | grep -v -e 'WARNING' -e 'overloaded' -e 'INFO REPORT' -e 'application: mnesia' \
                      -e 'exited: stopped' -e 'type: temporary' -e '^ *$'
        ;;
    bag)
        erl -noshell -pa "$lib/ebin" "$lib/bench/mnesia" \
            -eval "fraghash_bench_bag:run(\"$tmp/mnesia\", ${2:-100000}), halt()." 2>&1 \
            | grep -a -v -e 'WARNING' -e 'overloaded' -e 'INFO REPORT' -e 'application: mnesia' \
                      -e 'exited: stopped' -e 'type: temporary' -e '^ *$'
        ;;
    redb)
        shift
        storage=redb_copies,disc_only_copies,disc_copies
        opts=
        overwrites=0
        if [ "${1:-}" = --peer ]; then
            [ "${2:-}" = rocksdb ] || { echo "$0: --peer takes rocksdb" >&2; exit 2; }
            FRAGHASH_BENCH_ROCKSDB=${FRAGHASH_BENCH_ROCKSDB:-$root/_build/peer}
            shift 2
        fi
        if [ "${1:-}" = --floor ]; then
            floor=,floor_copies
            shift
        fi
        if [ -n "${FRAGHASH_BENCH_ROCKSDB:-}" ]; then
            [ -d "$FRAGHASH_BENCH_ROCKSDB/mnesia_rocksdb/ebin" ] || {
                echo "$0: no mnesia_rocksdb build in $FRAGHASH_BENCH_ROCKSDB:" \
                     "run bench/peer/build-mnesia-rocksdb.sh first" >&2; exit 1; }
            export FRAGHASH_BENCH_ROCKSDB
            storage=$storage,rocksdb_copies
            overwrites=1000000
        fi
        overwrites=${FRAGHASH_REDB_BENCH_OVERWRITES:-$overwrites}
        [ "$overwrites" -gt 0 ] && opts="{overwrites,$overwrites}"
        case "${1:-}" in
            --full) sizes="100000,1000000" ;;
            --big) sizes=${FRAGHASH_REDB_BENCH_BIG_RECORDS:-15000000}; storage=redb_copies; opts="${opts:+$opts,}grow" ;;
            "") sizes=100000 ;;
            *) sizes=$(echo "$@" | tr ' ' ',') ;;
        esac
        storage=${FRAGHASH_REDB_BENCH_STORAGE:-$storage}${floor:-}
        erl -noshell -pa "$lib/ebin" "$lib/bench/mnesia" \
            -eval "fraghash_bench_redb:run(\"$tmp\", [$sizes], [$storage], [$opts]), halt()."
        ;;
    *)
        echo "usage: $0 torture [KILLS] | relieve | growth [RECORDS] [MODULES] [REPS] [STORAGE]" \
             "| bag [RECORDS] | redb [--peer rocksdb] [--floor] [--full | --big | RECORDS...]" >&2
        exit 2
        ;;
esac
