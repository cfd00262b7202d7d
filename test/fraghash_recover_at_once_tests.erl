%% @doc `fraghash_frag:recover()' on two nodes at once (as both run it
%% after a restart of both) over an add stopped while it copied: one
%% node's recovery is held just after it decided to roll the add back
%% (`grow_rollback') until the other's has run; then it goes on. The
%% table must keep every record and its fragment count. Slow tier.
-module(fraghash_recover_at_once_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0]).

recover_at_once_test_() ->
    fraghash_test_support:slow_tier(
      {timeout, 300, {"recover/0 on both nodes at once", fun recover_at_once/0}}).

recover_at_once() ->
    Id = os:getpid(),
    Dir = filename:join(scratch(), "at_once_" ++ Id),
    Start = fun(Name, Sub) ->
                    {_, Node} = fraghash_test_support:start_peer(list_to_atom(Name ++ Id),
                                                                 filename:join(Dir, Sub)),
                    Node
            end,
    A = Start("fhroa_", "a"),
    B = Start("fhrob_", "b"),
    ok = rpc:call(A, mnesia, create_schema, [[A, B]]),
    [ok = rpc:call(N, mnesia, start, []) || N <- [A, B]],
    Tab = t2_at_once,
    {atomic, ok} = rpc:call(A, mnesia, create_table,
                            [Tab, [{attributes, [key, val]},
                                   {frag_properties, [{n_fragments, 4},
                                                      {hash_module, mnesia_frag_hash},
                                                      {node_pool, [A, B]},
                                                      {n_disc_copies, 2}]}]]),
    ok = rpc:call(A, mnesia, activity,
                  [sync_dirty, fun() -> [mnesia:write({Tab, I, I * 5}) || I <- lists:seq(1, 2000)],
                                        ok end, [], mnesia_frag]),
    [ok = rpc:call(N, fraghash_frag, recover, []) || N <- [A, B]],
    %% The add's process dies while it copies: its journal entry stays.
    ok = rpc:call(A, fraghash_frag, set_step_hook,
                  [fun(_, grow_copy) -> exit(self(), kill); (_, _) -> ok end]),
    {badrpc, _} = rpc:call(A, fraghash_frag, add_frag, [Tab, [A, B]]),
    ?assertEqual([Tab], rpc:call(A, fraghash_journal, pending, [])),
    Self = self(),
    ok = rpc:call(A, fraghash_frag, set_step_hook,
                  [fun(_, grow_rollback) -> Self ! {held, self()}, receive go -> ok end;
                      (_, _) -> ok
                   end]),
    spawn(fun() -> Self ! {a_recovered, rpc:call(A, fraghash_frag, recover, [])} end),
    Held = receive {held, P} -> P after 30000 -> error(a_never_rolled_back) end,
    %% B's recovery starts while A's is held, and is given time to run
    %% ahead (without the table's lock it would roll the add back, and A's
    %% would then drop a fragment that holds records).
    spawn(fun() -> Self ! {b_recovered, rpc:call(B, fraghash_frag, recover, [])} end),
    timer:sleep(1000),
    Held ! go,
    RA = receive {a_recovered, R} -> R after 60000 -> error(a_recovery_hung) end,
    ?assertEqual(ok, receive {b_recovered, RB} -> RB after 60000 -> error(b_recovery_hung) end),
    Layout = [{N, rpc:call(N, fraghash_frag, hash, [Tab])} || N <- [A, B]],
    Readable = [{N, catch rpc:call(N, fraghash_two_node_tests, read_all, [Tab, 2000])}
                || N <- [A, B]],
    Counts = [{N, length(lists:append([Ks || {_, Ks} <- rpc:call(N, fraghash_two_node_tests,
                                                               frag_keys, [Tab])]))}
              || N <- [A, B]],
    fraghash_test_support:report("recover at once: A's recovery returned ~0p; layout ~0p; "
                                 "readable ~0p; records ~0p~n", [RA, Layout, Readable, Counts]),
    fraghash_test_support:kill_nodes([A, B]),
    ?assertEqual([{A, 4}, {B, 4}], [{N, element(3, H)} || {N, H} <- Layout]),
    ?assertEqual([{A, 2000}, {B, 2000}], Counts),
    ?assertEqual([{A, 2000}, {B, 2000}], Readable),
    ?assertEqual(ok, RA).
