#!/bin/sh
# Runs the Elixir example's tests (examples/elixir, a Mix project that
# depends on this repository by path with manager: :rebar3): `mix test`
# compiles fraghash with rebar3 (its hook builds the NIF with cargo into
# priv/), then the ExUnit test creates a fragmented disc_copies table,
# grows it, restarts Mnesia and reads every record back. Then the session
# of docs/elixir.md runs as written, in the example project with a fixed
# node name and Mnesia directory: the first-run block, the next-start block
# in a new VM, and the schema block twice in a fresh directory, so the guide
# cannot drift from what the code does.
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

fail() {
    echo "elixir example: FAILED: $*" >&2
    exit 1
}

# The lines of the first ```elixir block after the line of docs/elixir.md
# that contains $1.
doc_block() {
    awk -v marker="$1" '
        !found && index($0, marker) { found = 1; next }
        found && !body && $0 == "```elixir" { body = 1; next }
        body && $0 == "```" { exit }
        body { print }
    ' "$root/docs/elixir.md"
}

# Runs the file $2 with `mix run` in a node named $1 whose Mnesia directory
# is $3, as the guide starts IEx.
run_doc() {
    elixir --sname "$1@localhost" --erl "-mnesia dir \"$3\"" -S mix run --no-deps-check --no-compile "$2"
}

for part in first next schema; do
    case $part in
        first) marker="runs this block (first run)" ;;
        next) marker="runs this block (next start of the node)" ;;
        schema) marker="runs this block (twice, in a fresh directory)" ;;
    esac
    doc_block "$marker" > "$tmp/$part.exs"
    [ -s "$tmp/$part.exs" ] || fail "docs/elixir.md has no elixir block after \"$marker\""
done

cd "$example"
mix test "$@" || fail "mix test (see its output above)"

mkdir -p "$tmp/doc-mnesia" "$tmp/doc-schema"
run_doc "fraghash_doc_$$" "$tmp/first.exs" "$tmp/doc-mnesia" ||
    fail "the first session of docs/elixir.md (see the output above)"
run_doc "fraghash_doc_$$" "$tmp/next.exs" "$tmp/doc-mnesia" ||
    fail "the next-start block of docs/elixir.md (see the output above)"
for run in 1 2; do
    run_doc "fraghash_doc_schema_$$" "$tmp/schema.exs" "$tmp/doc-schema" ||
        fail "the schema block of docs/elixir.md, run $run (see the output above)"
done
echo "elixir example: ok (mix test, and the session of docs/elixir.md as written)"
