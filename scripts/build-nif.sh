#!/bin/sh
# Builds the fraghash NIFs (the Rust crates fraghash-nif and
# fraghash-redb-nif, release mode, in one cargo call) and installs them as
# priv/libfraghash_nif.so and priv/libfraghash_redb_nif.so of this
# application. rebar3 runs it before every compile (see rebar.config); it is
# quick when nothing changed, and says on stderr, before cargo runs, that a
# build is under way and how long it usually takes when something did.
#
# Environment: CARGO (default: cargo), CARGO_TARGET_DIR (default: the
# workspace's target/), FRAGHASH_NIF_SO and FRAGHASH_REDB_NIF_SO (prebuilt
# libraries to install instead of running cargo: with FRAGHASH_NIF_SO set,
# cargo does not run, and the redb library is installed only when
# FRAGHASH_REDB_NIF_SO is set too).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cargo=${CARGO:-cargo}
target=${CARGO_TARGET_DIR:-$root/target}

case "$(uname -s)" in
    Darwin) ext=dylib ;;
    *) ext=so ;;
esac
lib=libfraghash_nif.$ext
redb_lib=libfraghash_redb_nif.$ext

if [ -z "${FRAGHASH_NIF_SO:-}" ]; then
    if ! command -v "$cargo" >/dev/null 2>&1; then
        echo "fraghash: cargo not found; the NIF needs a Rust toolchain (https://rustup.rs) or FRAGHASH_NIF_SO=/path/to/$lib" >&2
        exit 1
    fi
    # A project that depends on fraghash sees nothing else for minutes
    # while cargo builds from scratch, so say what runs and how long it
    # usually takes, on stderr, when cargo has work to do: no build
    # recorded in this target directory yet, or a source of the NIFs'
    # crates or a manifest newer than the last one (cargo decides exactly;
    # this only decides whether to speak).
    stamp=$target/release/.fraghash-nifs-built
    stale=yes
    if [ -f "$stamp" ] && [ -f "$target/release/$lib" ] && [ -f "$target/release/$redb_lib" ]; then
        stale=$(cd "$root" && find Cargo.toml Cargo.lock crates/fraghash/src crates/fraghash-nif \
            crates/fraghash-redb/src crates/fraghash-redb/Cargo.toml crates/fraghash-redb-nif \
            crates/fraghash/Cargo.toml -newer "$stamp" -type f 2>/dev/null | head -n 1)
    fi
    if [ -n "$stale" ]; then
        echo "fraghash: building its NIFs with cargo (release) into $target:" \
            "about 5 minutes on 2 cores from scratch, a minute or less after a change" >&2
    fi
    (cd "$root" && CARGO_TARGET_DIR="$target" "$cargo" build --quiet --release \
        -p fraghash-nif -p fraghash-redb-nif)
    touch "$stamp"
    FRAGHASH_REDB_NIF_SO=${FRAGHASH_REDB_NIF_SO:-$target/release/$redb_lib}
fi

mkdir -p "$root/priv"
# Copy then rename, so a running VM that has the old library mapped is not
# disturbed by an in-place overwrite.
install_lib() {
    cp "$1" "$root/priv/.$2.tmp"
    mv -f "$root/priv/.$2.tmp" "$root/priv/$2"
}
install_lib "${FRAGHASH_NIF_SO:-$target/release/$lib}" libfraghash_nif.so
if [ -n "${FRAGHASH_REDB_NIF_SO:-}" ]; then
    install_lib "$FRAGHASH_REDB_NIF_SO" libfraghash_redb_nif.so
fi
