%% @doc `fraghash_frag_recovery:remove_local_leftovers/1', which recovery
%% and moves call on a node that, as the caller sees the schema, holds no
%% copy of a table: it deletes the table's files and `redb_copies' rows
%% there, except where the node's own schema lists a copy (the caller's
%% view can lag: an `add_table_copy' whose coordinator was killed commits
%% on the node when it learns the outcome). A node whose Mnesia stopped on
%% a write to a `redb_copies' copy its database no longer had was the
%% result.
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_leftovers_tests).

-include_lib("eunit/include/eunit.hrl").

-define(T, 120).

leftovers_test_() ->
    [{timeout, ?T, {"a copy the node's own schema lists stays; a leftover goes",
                    fun held_and_left/0}}].

held_and_left() ->
    Id = os:getpid(),
    Dir = filename:join(fraghash_test_support:scratch(), "leftovers_" ++ Id),
    [A, B] = Nodes = [element(2, fraghash_test_support:start_peer(
                                   list_to_atom(lists:concat(["fhlo", L, "_", Id])),
                                   filename:join(Dir, L)))
                      || L <- ["a", "b"]],
    ok = rpc:call(A, mnesia, create_schema, [Nodes]),
    [ok = rpc:call(N, mnesia, start, []) || N <- Nodes],
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [lo_redb, [{redb_copies, Nodes}]]),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [lo_disc, [{disc_copies, Nodes}]]),
    [{atomic, ok} = rpc:call(A, mnesia, transaction,
                             [fun() -> [mnesia:write({T, K, K}) || K <- lists:seq(1, 100)], ok end])
     || T <- [lo_redb, lo_disc]],
    dumped = rpc:call(B, mnesia, dump_log, []),
    BDir = rpc:call(B, mnesia, system_info, [directory]),
    %% B holds both: nothing of them goes.
    [ok = rpc:call(B, fraghash_frag_recovery, remove_local_leftovers, [T])
     || T <- [lo_redb, lo_disc]],
    ?assertEqual([100, 100], [length(rpc:call(B, fraghash_redb_copies, select,
                                              [redb_copies, lo_redb, [{'_', [], ['$_']}]])),
                              rpc:call(B, mnesia, table_info, [lo_disc, size])]),
    ?assert(lists:any(fun(E) -> filelib:is_regular(filename:join(BDir, "lo_disc" ++ E)) end,
                      [".DCD", ".DCL"])),
    %% After a restart, B loads them from its own disc, whole.
    stopped = rpc:call(A, mnesia, stop, []),
    stopped = rpc:call(B, mnesia, stop, []),
    ok = rpc:call(B, mnesia, start, []),
    [yes = rpc:call(B, mnesia, force_load_table, [T]) || T <- [lo_redb, lo_disc]],
    ?assertEqual([100, 100], [rpc:call(B, mnesia, table_info, [T, size])
                              || T <- [lo_redb, lo_disc]]),
    %% Files of a table B does not hold go.
    Left = filename:join(BDir, "lo_gone.DCD"),
    ok = file:write_file(Left, <<"left">>),
    ok = rpc:call(B, fraghash_frag_recovery, remove_local_leftovers, [lo_gone]),
    ?assertNot(filelib:is_regular(Left)),
    fraghash_test_support:kill_nodes(Nodes).
