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
      [{timeout, 120, {"fraghash_durable across a partition", fun durable_apart/0}},
       {timeout, 600, {"an add cut apart from the other node, either side kept",
                       fun cut_during_add/0}}]).

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
        fraghash_test_support:kill_nodes([A, B])
    end.

%% An add run on X, the node holding fragment 1 (one disc copy per
%% fragment, spread over X and Y), with its new fragment on `NewOn', is cut
%% from Y at step `Step'; X goes on alone, as an operator's script would
%% (its recovery undoes the add on its side, a del starts; each fails at
%% the durability line, which its side cannot reach). Then the operator
%% keeps side `Keep': the other node is killed and restarted with the kept
%% one as Mnesia's master node, and the kept one recovers. Healing keeps a
%% fragment table that one side had dropped and the other still held
%% (Mnesia merges the two schemas table by table), beyond the table's
%% count: one recovery, on one node, must drop it. Both nodes must then
%% agree, with every record (no write was made during the cut), no
%% fragment table beyond the count and no journal entry, and the table
%% must grow again.
cut_during_add() ->
    [cut_during_add(Step, NewOn, Keep)
     || Step <- [grow_copy, grow_switch_locked, grow_clean], NewOn <- [x, y], Keep <- [x, y]],
    ok.

cut_during_add(Step, NewOn, Keep) ->
    Id = lists:concat([Step, "_", NewOn, "_", Keep, "_", os:getpid()]),
    Args = fraghash_torture2_partition:peer_args(),
    #{dir := Dir, name := Name, a := A, b := B} = fraghash_two_node_tests:pair(Id, Args),
    Tab = cut_add,
    %% The count fraghash_two_node_tests:check_both/4 checks.
    Records = 2000,
    ok = fraghash_two_node_tests:frag_table(A, B, Tab, mnesia_frag_hash, 1, Records),
    [X] = rpc:call(A, mnesia, table_info, [Tab, disc_copies]),
    [Y] = [A, B] -- [X],
    Self = self(),
    ok = rpc:call(X, fraghash_frag, set_step_hook,
                  [fun(T, S) when T =:= Tab, S =:= Step ->
                           fraghash_frag:set_step_hook(undefined),
                           true = erlang:disconnect_node(Y),
                           Self ! cut,
                           timer:sleep(300);
                      (_, _) -> ok
                   end]),
    Nodes = case NewOn of x -> [X, Y]; y -> [Y, X] end,
    Result = rpc:call(X, fraghash_frag, add_frag, [Tab, Nodes], 120000),
    receive cut -> ok after 0 -> error(never_cut) end,
    Alone = [rpc:call(X, fraghash_frag, F, FArgs, 120000)
             || {F, FArgs} <- [{recover, []}, {recover, []}, {del_frag, [Tab]}, {del_frag, [Tab]}]],
    {Kept, Drop} = case Keep of x -> {X, Y}; y -> {Y, X} end,
    DropKey = case Drop of A -> a; B -> b end,
    ok = fraghash_two_node_tests:kill([Drop]),
    {_, Drop} = start_peer(Name(DropKey), filename:join(Dir, atom_to_list(DropKey)), Args),
    ok = rpc:call(Drop, mnesia, set_master_nodes, [[Kept]]),
    ok = rpc:call(Drop, mnesia, start, []),
    [ok = rpc:call(N, mnesia, wait_for_tables,
                   [rpc:call(N, fraghash_frag, loadable_tables, []), 30000]) || N <- [A, B]],
    ok = rpc:call(Drop, mnesia, set_master_nodes, [[]]),
    %% One recovery, on one node, finishes the job.
    Recovered = rpc:call(Kept, fraghash_frag, recover, [], 120000),
    Left = [{N, [T || {_, T} <- rpc:call(N, fraghash_tab, orphans, [])],
             rpc:call(N, fraghash_journal, pending, [])} || N <- [A, B]],
    ?assertEqual(ok, rpc:call(Drop, fraghash_frag, recover, [], 120000)),
    Where = {Step, NewOn, Keep},
    fraghash_test_support:report("cut during an add at ~w, new fragment on ~w, ~w kept: add "
                                 "~0p, then alone ~0p, recover ~0p, left ~0p~n",
                                 [Step, NewOn, Keep, brief(Result), [brief(R) || R <- Alone],
                                  Recovered, Left]),
    ?assertEqual({Where, ok}, {Where, Recovered}),
    ?assertEqual({Where, [{A, [], []}, {B, [], []}]}, {Where, Left}),
    ok = fraghash_two_node_tests:check_both(Tab, A, B, Where),
    ?assertEqual({Where, {atomic, ok}},
                 {Where, rpc:call(X, fraghash_frag, add_frag, [Tab, [X, Y]], 120000)}),
    ok = fraghash_two_node_tests:check_both(Tab, A, B, {again, Where}),
    fraghash_two_node_tests:kill([A, B]).

%% A result without its text.
brief({aborted, {fraghash, Why, _Text}}) -> {aborted, Why};
brief({error, [{_T, {error, {fraghash, Why, _Text}}}]}) -> {error, Why};
brief(Other) -> Other.

wait_apart(_A, _B, 0) ->
    error(never_apart);
wait_apart(A, B, Tries) ->
    case lists:member(A, rpc:call(B, mnesia, system_info, [running_db_nodes])) of
        false -> ok;
        true -> timer:sleep(50), wait_apart(A, B, Tries - 1)
    end.
