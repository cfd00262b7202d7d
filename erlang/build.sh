#!/bin/sh
# Builds the fraghash Mnesia adapter: the Rust NIF (cargo, release) into
# erlang/priv/libfraghash_nif.so and the Erlang modules (erlc) into
# erlang/ebin. Needs cargo, erlc (erlang-nox + erlang-dev).
#
# Environment: CARGO_TARGET_DIR (default: the workspace's target/),
#              CARGO (default: cargo),
#              FRAGHASH_NIF_SO (a prebuilt NIF library to use instead of
#              running cargo).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cargo=${CARGO:-cargo}
target=${CARGO_TARGET_DIR:-$root/target}

if [ -z "${FRAGHASH_NIF_SO:-}" ]; then
    (cd "$root" && CARGO_TARGET_DIR="$target" "$cargo" build --release -p fraghash-nif)
fi

mkdir -p "$here/priv" "$here/ebin"
case "$(uname -s)" in
    Darwin) lib=libfraghash_nif.dylib ;;
    *) lib=libfraghash_nif.so ;;
esac
# Copy then rename, so a running VM that has the old library mapped is not
# disturbed by an in-place overwrite.
cp "${FRAGHASH_NIF_SO:-$target/release/$lib}" "$here/priv/.libfraghash_nif.so.tmp"
mv -f "$here/priv/.libfraghash_nif.so.tmp" "$here/priv/libfraghash_nif.so"

erlc -Wall -Werror +debug_info -I "$here/include" -o "$here/ebin" "$here"/src/*.erl
for d in test bench; do
    set -- "$here/$d"/*.erl
    if [ -e "$1" ]; then
        erlc -Wall +debug_info -I "$here/include" -o "$here/ebin" "$@"
    fi
done
echo "built: $here/priv/libfraghash_nif.so and $here/ebin/*.beam"
