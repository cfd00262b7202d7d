#!/bin/sh
# Measurements of the crash-safe path for disc tables (figures in
# docs/mnesia-disc-safety.md), each in a fresh Mnesia in a temporary
# directory that is removed afterwards:
#   disc-measure.sh torture [KILLS]     kill -9 torture test (default 300 kills)
#   disc-measure.sh relieve             adds needed to halve the largest
#                                       disc_only_copies fragment, per module
#   disc-measure.sh cost [RECORDS] [REPS]
#                                       one add on a 50-fragment disc_copies
#                                       table: plain change_table_frag against
#                                       fraghash_frag:add_frag (default
#                                       1000000 records, 2 repetitions)
# Environment: FRAGHASH_SKIP_BUILD=1 to use what is already built, plus
# build.sh's variables.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
what=${1:-}
if [ -z "${FRAGHASH_SKIP_BUILD:-}" ]; then
    "$here/build.sh"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-disc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cd "$tmp"
case "$what" in
    torture)
        FRAGHASH_TORTURE_KILLS=${2:-300} FRAGHASH_TEST_DIR="$tmp" \
            erl -noshell -pa "$here/ebin" -eval '
                R = eunit:test([fraghash_torture_tests], [verbose]),
                halt(case R of ok -> 0; _ -> 1 end).'
        ;;
    relieve)
        erl -noshell -pa "$here/ebin" \
            -eval "fraghash_relieve_measure:run(\"$tmp/mnesia\"), halt()." 2>&1 \
            | grep -v -e 'WARNING' -e 'overloaded' -e 'INFO REPORT' -e 'application: mnesia' \
                      -e 'exited: stopped' -e 'type: temporary' -e '^ *$'
        ;;
    cost)
        erl -noshell -pa "$here/ebin" \
            -eval "fraghash_disc_cost:run(\"$tmp/mnesia\", ${2:-1000000}, ${3:-2}), halt()." 2>&1 \
            | grep -v -e 'WARNING' -e 'overloaded' -e 'INFO REPORT' -e 'application: mnesia' \
                      -e 'exited: stopped' -e 'type: temporary' -e '^ *$'
        ;;
    *)
        echo "usage: $0 torture [KILLS] | relieve | cost [RECORDS] [REPS]" >&2
        exit 2
        ;;
esac
