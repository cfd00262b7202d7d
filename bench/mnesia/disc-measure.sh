#!/bin/sh
# Measurements of the crash-safe path for disc tables (figures in
# docs/mnesia-disc-safety.md), each in a fresh Mnesia in a temporary
# directory that is removed afterwards:
#   bench/mnesia/disc-measure.sh torture [KILLS]     kill -9 torture test (default 300 kills)
#   bench/mnesia/disc-measure.sh relieve             adds needed to halve the largest
#                                       disc_only_copies fragment, per module
#   bench/mnesia/disc-measure.sh cost [RECORDS] [REPS] [STORAGE]
#                                       one add on a 50-fragment table:
#                                       plain change_table_frag against
#                                       fraghash_frag:add_frag (default
#                                       1000000 records, 2 repetitions,
#                                       disc_copies; or disc_only_copies)
# Environment: scripts/build-nif.sh's variables.
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
    cost)
        erl -noshell -pa "$lib/ebin" "$lib/bench/mnesia" \
            -eval "fraghash_disc_cost:run(\"$tmp/mnesia\", ${2:-1000000}, ${3:-2}, ${4:-disc_copies}), halt()." 2>&1 \
            | grep -v -e 'WARNING' -e 'overloaded' -e 'INFO REPORT' -e 'application: mnesia' \
                      -e 'exited: stopped' -e 'type: temporary' -e '^ *$'
        ;;
    *)
        echo "usage: $0 torture [KILLS] | relieve | cost [RECORDS] [REPS]" >&2
        exit 2
        ;;
esac
