# Sourced by the benchmark scripts beside it: bench_lib prints the
# directory of the fraghash library and benchmark modules to run,
# FRAGHASH_BENCH_LIB when set (a copy of _build/bench/lib/fraghash, to
# measure one commit while the tree changes), else rebar3's bench profile
# compiled from the checkout at $1.
bench_lib() {
    if [ -n "${FRAGHASH_BENCH_LIB:-}" ]; then
        echo "$FRAGHASH_BENCH_LIB"
    else
        (cd "$1" && rebar3 as bench compile >&2)
        echo "$1/_build/bench/lib/fraghash"
    fi
}
