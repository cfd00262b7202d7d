#!/bin/sh
# Checks that fraghash works as a rebar3 git dependency, as a new project
# would use it: in a temporary directory, creates a rebar3 project whose
# rebar.config lists
#   {fraghash, {git, "file://<this repository>", {ref, "<HEAD commit>"}}}
# compiles it (rebar3 clones the committed HEAD, and the dependency's
# pre-hook builds the NIF with cargo into its priv/), then runs the
# project's own EUnit test: fraghash compiled without its own test
# profile's warnings_as_errors, then a fragmented disc_copies table with
# mnesia_frag_slots on a disc schema in a scratch Mnesia directory, records
# written, the table grown by fraghash_frag:add_frag/2, Mnesia restarted and
# every record read back. Only committed work is tested: uncommitted
# changes in this working tree are not part of HEAD.
#
# Works offline: the dependency is a local git repository, the project has
# no Hex dependency, rebar3's cache is a scratch directory, and cargo runs
# with CARGO_NET_OFFLINE=true (the crates Cargo.lock names must already be
# in cargo's registry cache, as they are after any build of this
# workspace). The NIF is built in target/rebar3-dep/ of this repository
# (under $CARGO_TARGET_DIR when that is set), kept between runs so that
# the Rust dependencies are compiled once. Not target/ itself: cargo names
# a workspace crate's artifacts by its path relative to the workspace, so
# the clone's fraghash-nif and this working tree's would share one
# artifact, and after this check a build here could take the clone's (the
# committed HEAD) as up to date. The temporary directory is removed
# afterwards.
#
# Usage: scripts/test-rebar3-dep.sh
# Exits 0 and prints "rebar3 dependency check: ok" when everything passed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

for tool in git rebar3 erl cargo; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "rebar3 dependency check: FAILED: $tool is not installed" >&2
        exit 1
    fi
done

rev=$(git -C "$root" rev-parse HEAD)
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
    echo "rebar3 dependency check: note: testing commit $rev; uncommitted changes are not included" >&2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fraghash-rebar3-dep.XXXXXX")
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

app=$tmp/fraghash_check
mkdir -p "$app/src" "$app/test" "$tmp/mnesia"

cat > "$app/rebar.config" <<EOF
{erl_opts, [debug_info]}.
{deps, [{fraghash, {git, "file://$root", {ref, "$rev"}}}]}.
EOF

cat > "$app/src/fraghash_check.app.src" <<'EOF'
{application, fraghash_check, [
    {description, "A project that uses fraghash as a rebar3 dependency"},
    {vsn, "0.1.0"},
    {registered, []},
    {applications, [kernel, stdlib, mnesia, fraghash]},
    {env, []},
    {modules, []}
]}.
EOF

cat > "$app/test/fraghash_check_tests.erl" <<'EOF'
%% Uses fraghash as a dependency: a fragmented disc_copies table with
%% mnesia_frag_slots, grown by fraghash_frag:add_frag/2, read back after a
%% Mnesia restart.
-module(fraghash_check_tests).
-include_lib("eunit/include/eunit.hrl").

-record(item, {key, value}).
-define(N, 2000).

grow_and_read_back_test_() ->
    {timeout, 120, fun grow_and_read_back/0}.

grow_and_read_back() ->
    %% The NIF comes from the dependency's own priv/, built by its hook.
    Priv = code:priv_dir(fraghash),
    ?assert(filelib:is_regular(filename:join(Priv, "libfraghash_nif.so"))),
    %% The dependency is compiled without fraghash's own test options: a
    %% warning of a newer compiler must not fail this project's build.
    {ok, {_, [{compile_info, Info}]}} =
        beam_lib:chunks(code:which(fraghash_frag), [compile_info]),
    ?assertNot(lists:member(warnings_as_errors, proplists:get_value(options, Info, []))),

    ok = application:set_env(mnesia, dir, os:getenv("FRAGHASH_CHECK_MNESIA_DIR")),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    {atomic, ok} =
        mnesia:create_table(item,
                            [{attributes, record_info(fields, item)},
                             {frag_properties, [{n_fragments, 4},
                                                {node_pool, [node()]},
                                                {n_disc_copies, 1},
                                                {hash_module, mnesia_frag_slots}]}]),
    ?assertEqual(disc_copies, mnesia:table_info(item, storage_type)),
    ok = mnesia:activity(transaction,
                         fun() -> [mnesia:write(#item{key = K, value = K * K})
                                   || K <- lists:seq(1, ?N)],
                                  ok
                         end, [], mnesia_frag),

    [{atomic, ok} = fraghash_frag:add_frag(item, [node()]) || _ <- lists:seq(1, 4)],
    ?assertEqual({mnesia_frag_slots, 8}, mod_and_count(item)),

    stopped = mnesia:stop(),
    ok = mnesia:start(),
    %% Every fragment is a table of its own: wait for all of them.
    ok = mnesia:wait_for_tables(frag_names(item), 30000),

    ?assertEqual({mnesia_frag_slots, 8}, mod_and_count(item)),
    Missing = mnesia:activity(sync_dirty,
                              fun() -> [K || K <- lists:seq(1, ?N),
                                             mnesia:read(item, K) =/= [#item{key = K, value = K * K}]]
                              end, [], mnesia_frag),
    ?assertEqual([], Missing),
    %% Reads route through the hash, so a total of exactly ?N also shows
    %% that no record was left behind as a stale copy in its old fragment.
    Sizes = [mnesia:table_info(F, size) || F <- frag_names(item)],
    ?assertEqual(?N, lists:sum(Sizes)),
    %% Every fragment got records.
    ?assertEqual([], [S || S <- Sizes, S =:= 0]),
    io:format(user, "~nrecords per fragment after growing 4 -> 8: ~w~n", [Sizes]),
    stopped = mnesia:stop().

mod_and_count(Tab) ->
    Props = mnesia:table_info(Tab, frag_properties),
    {proplists:get_value(hash_module, Props), proplists:get_value(n_fragments, Props)}.

frag_names(Tab) ->
    mnesia:activity(async_dirty, fun() -> mnesia:table_info(Tab, frag_names) end,
                    [], mnesia_frag).
EOF

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}/rebar3-dep"
export CARGO_NET_OFFLINE=true
export REBAR_CACHE_DIR="$tmp/rebar3-cache"
export FRAGHASH_CHECK_MNESIA_DIR="$tmp/mnesia"

cd "$app"
# The clone's sources are newer than any earlier build, so the NIF build
# must announce itself before cargo runs (scripts/build-nif.sh): a
# dependent project's compile is otherwise silent for minutes.
compiled=true
rebar3 compile > "$tmp/compile.log" 2>&1 || compiled=false
cat "$tmp/compile.log"
if ! grep -q "fraghash: building its NIFs with cargo" "$tmp/compile.log"; then
    echo "rebar3 dependency check: FAILED: the NIF build did not say it was building" >&2
    exit 1
fi
if $compiled && rebar3 eunit --sname "fraghash_check_$$@localhost"; then
    echo "rebar3 dependency check: ok (fraghash $rev as a git dependency: NIF built, table created, grown, read back)"
else
    echo "rebar3 dependency check: FAILED (see the rebar3 output above)" >&2
    exit 1
fi
