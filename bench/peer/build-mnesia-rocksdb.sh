#!/bin/sh
# Builds aeternity's mnesia_rocksdb (Mnesia storage type rocksdb_copies) and
# its dependencies outside the fraghash application, as a comparison peer
# for bench/mnesia/fraghash_bench_redb.erl (run with
# `bench/mnesia/disc-measure.sh redb --peer rocksdb ...` or
# FRAGHASH_BENCH_ROCKSDB=OUT). Nothing here is a dependency of fraghash:
# the peer is compiled with erlc (no Hex, no rebar3) into OUT, one
# directory per application, each with ebin/ (and priv/ for the NIF,
# include/ where the others include it), so that `erl -pa OUT/*/ebin' finds
# them and code:priv_dir(rocksdb) finds the NIF.
#
#   bench/peer/build-mnesia-rocksdb.sh [SRC [OUT]]
#
# SRC (or FRAGHASH_PEER_SRC) holds one source checkout per repository,
# named as `git clone' names them; the commits used for the figures in
# bench/results/ (those mnesia_rocksdb's rebar.lock names, the Hex
# packages' versions taken from their tags):
#   git clone https://github.com/aeternity/mnesia_rocksdb  SRC/mnesia_rocksdb
#       a6567a217f54c40a36b2e4729ba30f1db08713bc (master, Upgrade erlang-rocksdb)
#   git clone https://github.com/emqx/erlang-rocksdb      SRC/erlang-rocksdb
#       4ea43ca3372d26e6a592d74ce9c5caa342afc5c5 (tag 1.8.0-emqx-10, as rebar.lock)
#   git clone https://github.com/uwiger/sext              SRC/sext
#       c1d93beae5a2d9448a520c31adcb0053c76ef4df (tag 1.8.0, Hex sext 1.8.0)
#   git clone https://github.com/tolbrino/hut             SRC/hut
#       9f0beabbfa4458965955d12950959992c1b108f5 (tag v1.4.0, Hex hut 1.4.0)
#   git clone https://github.com/uwiger/parse_trans       SRC/parse_trans
#       d99fb36755c813a5db23e6f93741aa58323ef911 (master after 3.4.1; Hex 3.4.2)
# then `git -C SRC/X checkout COMMIT' in each. erlang-rocksdb's git
# submodules are not needed: the NIF is linked against the system's RocksDB.
#
# OUT (or FRAGHASH_PEER_DIR) defaults to _build/peer (git-ignored).
# Needs: Debian's librocksdb-dev (RocksDB 7.8.3 on bookworm), cmake, g++
# (apt-get install -y librocksdb-dev cmake g++); erl/erlc on PATH. The NIF
# build takes about a minute on two cores, the Erlang parts seconds.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${1:-${FRAGHASH_PEER_SRC:-}}
out=${2:-${FRAGHASH_PEER_DIR:-$root/_build/peer}}
fail() { echo "build-mnesia-rocksdb: $*" >&2; exit 1; }

[ -n "$src" ] || fail "no source directory: give it as the first argument or FRAGHASH_PEER_SRC (see this script's header for the repositories and commits)"
[ -d "$src" ] || fail "source directory $src does not exist"
src=$(cd "$src" && pwd)
# erlang-rocksdb may be checked out as erlang-rocksdb or as rocksdb.
if [ -d "$src/erlang-rocksdb" ]; then rsrc=$src/erlang-rocksdb; else rsrc=$src/rocksdb; fi
for d in "$rsrc/c_src" "$src/mnesia_rocksdb/src" "$src/sext/src" "$src/hut/include" "$src/parse_trans/src"; do
    [ -d "$d" ] || fail "missing source: $d (see this script's header for where to get it)"
done
# The system RocksDB: without it erlang-rocksdb's CMake would fetch and
# build RocksDB itself (network, half an hour).
hdr=
for i in /usr/include /usr/local/include; do
    [ -f "$i/rocksdb/db.h" ] && hdr=$i/rocksdb/version.h
done
[ -n "$hdr" ] || fail "RocksDB headers not found (rocksdb/db.h): apt-get install -y librocksdb-dev"
for tool in cmake g++ make erlc erl; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (apt-get install -y cmake g++; Erlang/OTP)"
done
rver=$(sed -n 's/^#define ROCKSDB_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' "$hdr" | paste -sd. -)
echo "build-mnesia-rocksdb: sources $src, system RocksDB $rver, into $out" >&2

mkdir -p "$out"
out=$(cd "$out" && pwd)

# The NIF. erlang-rocksdb's CMakeLists writes the library to
# c_src/../priv: build from a copy of c_src so the checkout stays clean.
nif=$out/build/erlang-rocksdb
rm -rf "$nif" "$out/rocksdb"
mkdir -p "$nif" "$out/rocksdb/ebin"
cp -R "$rsrc/c_src" "$nif/c_src"
(cd "$nif" && mkdir -p cmake && cd cmake \
     && cmake -DWITH_SYSTEM_ROCKSDB=ON ../c_src >cmake.log 2>&1 \
     && make -j"$(nproc 2>/dev/null || echo 2)" >make.log 2>&1) \
    || fail "the NIF did not build: see $nif/cmake/cmake.log and make.log"
mkdir -p "$out/rocksdb/priv"
cp "$nif/priv/liberocksdb.so" "$out/rocksdb/priv/"

# App App.src Vsn: OUT/App/ebin/App.app from the .app.src, its vsn (`git'
# in some) and module list filled in, for application:ensure_all_started.
app() {
    erl -noshell -eval '
        [App, AppSrc, Vsn, Ebin] = init:get_plain_arguments(),
        {ok, [{application, A, Props}]} = file:consult(AppSrc),
        Mods = [list_to_atom(filename:basename(F, ".beam"))
                || F <- filelib:wildcard(filename:join(Ebin, "*.beam"))],
        P1 = lists:keystore(modules, 1, lists:keystore(vsn, 1, Props, {vsn, Vsn}),
                            {modules, Mods}),
        A = list_to_atom(App),
        ok = file:write_file(filename:join(Ebin, App ++ ".app"),
                             io_lib:format("~p.~n", [{application, A, P1}])),
        halt().' -extra "$1" "$2" "$3" "$out/$1/ebin"
}

# Erlang parts, in dependency order. rocksdb with debug_info: mnesia_rocksdb's
# rdb_type_extractor reads rocksdb's option types from its abstract code at
# compile time (parse_trans's ct_expand).
erlc -o "$out/rocksdb/ebin" +debug_info "$rsrc/src/rocksdb.erl"
app rocksdb "$rsrc/src/rocksdb.app.src" 1.8.0-emqx-10

rm -rf "$out/hut" && mkdir -p "$out/hut/ebin" && cp -R "$src/hut/include" "$out/hut/"
erlc -o "$out/hut/ebin" -I "$src/hut/include" +debug_info "$src/hut/src/"*.erl
app hut "$src/hut/src/hut.app.src" 1.4.0

rm -rf "$out/sext" && mkdir -p "$out/sext/ebin"
erlc -o "$out/sext/ebin" +debug_info "$src/sext/src/sext.erl"
app sext "$src/sext/src/sext.app.src" 1.8.0

rm -rf "$out/parse_trans" && mkdir -p "$out/parse_trans/ebin" && cp -R "$src/parse_trans/include" "$out/parse_trans/"
pt=$out/parse_trans/ebin
# Its own parse transforms first (its rebar.config's erl_first_files).
erlc -o "$pt" -pa "$pt" -I "$src/parse_trans/include" +debug_info \
     "$src/parse_trans/src/parse_trans.erl" "$src/parse_trans/src/parse_trans_pp.erl" \
     "$src/parse_trans/src/parse_trans_codegen.erl"
erlc -o "$pt" -pa "$pt" -I "$src/parse_trans/include" +debug_info "$src/parse_trans/src/"*.erl
app parse_trans "$src/parse_trans/src/parse_trans.app.src" 3.4.2

rm -rf "$out/mnesia_rocksdb" && mkdir -p "$out/mnesia_rocksdb/ebin"
cp -R "$src/mnesia_rocksdb/include" "$out/mnesia_rocksdb/"
erlc -o "$out/mnesia_rocksdb/ebin" +debug_info \
     -pa "$out/rocksdb/ebin" -pa "$out/hut/ebin" -pa "$out/sext/ebin" -pa "$pt" \
     -I "$src/mnesia_rocksdb/include" -I "$src/mnesia_rocksdb/src" \
     "$src/mnesia_rocksdb/src/"*.erl
mver=$(git -C "$src/mnesia_rocksdb" rev-parse --short HEAD 2>/dev/null || echo unknown)
app mnesia_rocksdb "$src/mnesia_rocksdb/src/mnesia_rocksdb.app.src" "git-$mver"

# The NIF loads and mnesia_rocksdb's modules are there.
erl -noshell -pa "$out"/*/ebin -eval '
    {module, rocksdb} = code:ensure_loaded(rocksdb),
    {module, mnesia_rocksdb} = code:ensure_loaded(mnesia_rocksdb),
    halt().' || fail "the built peer does not load (see above)"
echo "build-mnesia-rocksdb: built in $out (use FRAGHASH_BENCH_ROCKSDB=$out)" >&2
