#!/bin/sh
# Runs the Mnesia adapter's EUnit tests (test/) in real Mnesia with rebar3:
# one distributed node (-sname, on localhost) plus the peer nodes some tests
# start. Mnesia directories live in a scratch directory that is removed
# afterwards; any peer node still alive at the end is killed. Exits non-zero
# when a test fails. Needs erlang-nox, erlang-dev, rebar3 and cargo.
#
# Usage: scripts/test-mnesia.sh [rebar3 eunit options, e.g. --module=M]
# Environment: FRAGHASH_TEST_RECORDS (default 20000),
#              FRAGHASH_TEST_MAX_FRAGS (default 64),
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
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

cd "$root"
FRAGHASH_TEST_DIR="$tmp" rebar3 eunit --sname "fraghash_eunit_$$@localhost" "$@"
