#!/bin/sh
# Runs the Mnesia adapter's EUnit tests (test/) in real Mnesia with rebar3:
# one distributed node (-sname, on localhost) plus the peer nodes some tests
# start. Mnesia directories live in a scratch directory that is removed
# afterwards; any peer node still alive at the end is killed. Exits non-zero
# when a test fails. Needs erlang-nox, erlang-dev, rebar3 and cargo.
#
# Usage: scripts/test-mnesia.sh [rebar3 eunit options, e.g. --module=M]
# Environment: FRAGHASH_SLOW_TESTS=1 (the slow tier too: kill -9 torture,
#              two-node kills; off by default),
#              FRAGHASH_TEST_RECORDS (default 20000),
#              FRAGHASH_TEST_VERBOSE=1 (figures and warnings printed),
#              FRAGHASH_TEST_MAX_FRAGS (default 64),
#              FRAGHASH_TEST_KEEP=1 (the scratch directory is kept, for
#              the torture tests' logs),
#              plus scripts/build-nif.sh's variables.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-eunit.XXXXXX")
cleanup() {
    if [ -f "$tmp/peer.pids" ]; then
        while read -r pid; do
            kill -9 "$pid" 2>/dev/null || true
        done < "$tmp/peer.pids"
    fi
    if [ "${FRAGHASH_TEST_KEEP:-}" = 1 ]; then
        echo "scratch directory kept: $tmp" >&2
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT INT TERM

cd "$root"
# Warnings (Mnesia overloaded by the bulk writes, global's reaction to nodes
# killed on purpose) say nothing about the result: below error level, the
# test VM and every node it starts stay quiet unless FRAGHASH_TEST_VERBOSE=1.
if [ "${FRAGHASH_TEST_VERBOSE:-}" != 1 ]; then
    ERL_FLAGS="${ERL_FLAGS:-} -kernel logger_level error"
    export ERL_FLAGS
fi
FRAGHASH_TEST_DIR="$tmp" rebar3 eunit --sname "fraghash_eunit_$$@localhost" "$@"
