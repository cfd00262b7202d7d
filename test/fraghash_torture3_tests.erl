%% @doc Kill -9 torture of `fraghash_frag' on three Mnesia nodes
%% (`fraghash_torture2_tests:torture/1' with 3): every fragment on two of
%% the three nodes, one table on `disc_copies' and three on `redb_copies'
%% (`mnesia_frag_slots'; `mnesia_frag_hash' with an index on its values;
%% a `mnesia_frag_slots' bag), each beside a
%% never-migrated control; writers on every node; kill -9 of one node or
%% two at a step of an add, a del, a relieve or a move of a copy (of
%% every table; of the `disc_copies' one only with
%% `FRAGHASH_TORTURE3_REDB_MOVES=0'), right after one returned, or during
%% recovery; with `FRAGHASH_TORTURE3_PARTITIONS' percent of the
%% faults (default 20), partitions of one node from the other two, healed
%% by keeping the two (see fraghash_torture2_partition:share/0), copies
%% left differing repaired. Every acknowledged write and delete on every
%% replica, no key twice or misplaced, every fragment with its copies, the
%% three nodes agreeing.
%%
%% In the slow tier (`FRAGHASH_SLOW_TESTS=1'); `FRAGHASH_TORTURE3_KILLS'
%% faults (default 12); `FRAGHASH_TORTURE2_STRICT=1' fails on the
%% controls' losses too.
-module(fraghash_torture3_tests).

-include_lib("eunit/include/eunit.hrl").

torture3_test_() ->
    fraghash_test_support:slow_tier(
      {timeout, 7200, {"kill -9 of one or two of three nodes, or a partition, during growth",
                       fun() -> fraghash_torture2_tests:torture(3) end}}).
