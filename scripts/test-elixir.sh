#!/bin/sh
# Runs the Elixir example's tests (examples/elixir, a Mix project that
# depends on this repository by path with manager: :rebar3): `mix test`
# compiles fraghash with rebar3 (its hook builds the NIF with cargo into
# priv/), then the ExUnit test creates a fragmented disc_copies table,
# grows it, restarts Mnesia and reads every record back.
#
# Works offline and leaves the user's Mix and Hex homes alone: Mix gets
# Debian's rebar3 through MIX_REBAR3 (otherwise it offers to download one),
# MIX_HOME is examples/elixir/.mix, HEX_OFFLINE=1, and cargo runs with
# CARGO_NET_OFFLINE=true. The Mnesia directory is a scratch directory,
# removed afterwards; examples/elixir/_build stays (ignored by git) so the
# next run is quicker. Exits non-zero when the build or a test fails.
#
# Usage: scripts/test-elixir.sh [mix test options]
# Environment: MIX_REBAR3 (default: rebar3 on PATH), plus
#              scripts/build-nif.sh's variables.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
example=$root/examples/elixir

for tool in elixir mix rebar3 cargo; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "elixir example: FAILED: $tool is not installed (apt-get install -y elixir rebar3; cargo from https://rustup.rs)" >&2
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-elixir.XXXXXX")
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export MIX_REBAR3="${MIX_REBAR3:-$(command -v rebar3)}"
export MIX_HOME="$example/.mix"
export HEX_OFFLINE=1
export CARGO_NET_OFFLINE=true
export MIX_ENV=test
export FRAGHASH_EXAMPLE_MNESIA_DIR="$tmp/mnesia"

cd "$example"
if mix test "$@"; then
    echo "elixir example: ok"
else
    echo "elixir example: FAILED (see the mix output above)" >&2
    exit 1
fi
