#!/bin/sh
# Builds the fraghash NIF (the Rust crate fraghash-nif, release mode) and
# installs it as priv/libfraghash_nif.so of this application. rebar3 runs it
# before every compile (see rebar.config); it is quick when nothing changed.
#
# Environment: CARGO (default: cargo), CARGO_TARGET_DIR (default: the
# workspace's target/), FRAGHASH_NIF_SO (a prebuilt library to install
# instead of running cargo).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cargo=${CARGO:-cargo}
target=${CARGO_TARGET_DIR:-$root/target}

case "$(uname -s)" in
    Darwin) lib=libfraghash_nif.dylib ;;
    *) lib=libfraghash_nif.so ;;
esac

if [ -z "${FRAGHASH_NIF_SO:-}" ]; then
    if ! command -v "$cargo" >/dev/null 2>&1; then
        echo "fraghash: cargo not found; the NIF needs a Rust toolchain (https://rustup.rs) or FRAGHASH_NIF_SO=/path/to/$lib" >&2
        exit 1
    fi
    (cd "$root" && CARGO_TARGET_DIR="$target" "$cargo" build --quiet --release -p fraghash-nif)
fi

mkdir -p "$root/priv"
# Copy then rename, so a running VM that has the old library mapped is not
# disturbed by an in-place overwrite.
cp "${FRAGHASH_NIF_SO:-$target/release/$lib}" "$root/priv/.libfraghash_nif.so.tmp"
mv -f "$root/priv/.libfraghash_nif.so.tmp" "$root/priv/libfraghash_nif.so"
