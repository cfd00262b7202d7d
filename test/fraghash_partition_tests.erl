%% @doc The durability line across a partition (`fraghash_durable'): two
%% `peer' nodes with one disc schema, A cut from B with
%% `erlang:disconnect_node/1'. The connection comes back at the next
%% message, but Mnesia stays split; a sync that B asks of A then syncs A's
%% own log, which lacks B's commits, so it must not count as durable.
-module(fraghash_partition_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, start_peer/3, wait_down/1]).

partition_test_() ->
    fraghash_test_support:slow_tier(
      {timeout, 120, {"fraghash_durable across a partition", fun durable_apart/0}}).

durable_apart() ->
    Id = os:getpid(),
    Dir = filename:join(scratch(), "partition_" ++ Id),
    Args = fraghash_torture2_partition:peer_args(),
    {_, A} = start_peer(list_to_atom("fhpa_" ++ Id), filename:join(Dir, "a"), Args),
    {_, B} = start_peer(list_to_atom("fhpb_" ++ Id), filename:join(Dir, "b"), Args),
    try
        ok = rpc:call(A, mnesia, create_schema, [[A, B]]),
        [ok = rpc:call(N, mnesia, start, []) || N <- [A, B]],
        {atomic, ok} = rpc:call(A, mnesia, create_table, [on_a, [{disc_copies, [A]}]]),
        {atomic, ok} = rpc:call(A, mnesia, create_table, [on_both, [{disc_copies, [A, B]}]]),
        ok = rpc:call(B, mnesia, wait_for_tables, [[on_a, on_both], 30000]),
        ?assertEqual([ok, ok], [rpc:call(B, fraghash_durable, tables, [[T]]) || T <- [on_a, on_both]]),
        true = rpc:call(A, erlang, disconnect_node, [B]),
        ok = wait_apart(A, B, 200),
        %% The connection is back (rpc reaches A from B), Mnesia is not.
        pong = rpc:call(B, net_adm, ping, [A]),
        [?assertMatch({badrpc, {'EXIT', {{fraghash, not_durable, #{failed := [{A, partitioned}]}}, _}}},
                      rpc:call(B, fraghash_durable, tables, [[T]]))
         || T <- [on_a, on_both]]
    after
        [begin os:cmd("kill -9 " ++ rpc:call(N, os, getpid, [])), wait_down(N) end || N <- [A, B]]
    end.

wait_apart(_A, _B, 0) ->
    error(never_apart);
wait_apart(A, B, Tries) ->
    case lists:member(A, rpc:call(B, mnesia, system_info, [running_db_nodes])) of
        false -> ok;
        true -> timer:sleep(50), wait_apart(A, B, Tries - 1)
    end.
