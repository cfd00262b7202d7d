%% @doc A node that was down while the `redb_copies' copies of tables
%% changed starts again (fraghash_redb_align): Mnesia 4.21.3 alone stops
%% it with `Failed to merge schema'. It takes the running nodes' holders
%% and reads every record. (A copy deleted from a node that is down is
%% refused by Mnesia; a node that kept a deleted copy after a kill is in
%% fraghash_move_tests.)
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_align_tests).

-include_lib("eunit/include/eunit.hrl").

-define(T, 180).

align_test_() ->
    [{timeout, ?T, {"a node down while a redb_copies copy was added and a table's "
                    "type changed: Mnesia starts there, with the running nodes' holders",
                    fun missed_changes/0}},
     {timeout, ?T, {"the node that missed the change started first: the others keep their "
                    "newer definitions, refusing to start, until it stops; then all start",
                    fun stale_first/0}},
     {timeout, ?T, {"conflicts/2: only nodes whose storage differs and involves redb_copies",
                    fun conflicts/0}}].

%% A, B and C. While C's Mnesia is stopped: `al_add' (on A) gets a copy
%% on B; `al_type' (disc_copies on A) becomes `redb_copies'. C starts, and
%% again after a kill -9; then it gets a copy of `al_add'.
missed_changes() ->
    Id = os:getpid(),
    Dir = filename:join(fraghash_test_support:scratch(), "align_" ++ Id),
    Names = [{L, list_to_atom(lists:concat(["fhal", L, "_", Id]))} || L <- [a, b, c]],
    [A, B, C] = Nodes = [element(2, fraghash_test_support:start_peer(N, filename:join(Dir, L)))
                         || {L, N} <- Names],
    ok = rpc:call(A, mnesia, create_schema, [Nodes]),
    [ok = rpc:call(N, mnesia, start, []) || N <- Nodes],
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [al_add, [{redb_copies, [A]}]]),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [al_type, [{disc_copies, [A]}]]),
    Tabs = [al_add, al_type],
    [write(A, T, 1, 200) || T <- Tabs],
    ok = rpc:call(C, fraghash_redb_copies, sync, []),
    stopped = rpc:call(C, mnesia, stop, []),
    {atomic, ok} = rpc:call(A, mnesia, add_table_copy, [al_add, B, redb_copies]),
    {atomic, ok} = rpc:call(A, mnesia, change_table_copy_type, [al_type, A, redb_copies]),
    write(A, al_add, 201, 300),
    Holders = [{T, holders(A, T)} || T <- Tabs],
    ?assertEqual([{al_add, [{A, redb_copies}, {B, redb_copies}]},
                  {al_type, [{A, redb_copies}]}], Holders),
    Check = fun() ->
                    ?assertEqual(ok, rpc:call(C, mnesia, wait_for_tables, [Tabs, 30000])),
                    ?assertEqual(Holders, [{T, holders(C, T)} || T <- Tabs]),
                    ?assertEqual(records(1, 300), read_all(C, al_add)),
                    ?assertEqual(records(1, 200), read_all(C, al_type))
            end,
    ?assertEqual(ok, rpc:call(C, mnesia, start, [])),
    ?assertEqual(Tabs, lists:sort(rpc:call(C, fraghash_redb_align, taken, []))),
    Check(),
    %% C's own schema on disc is the one it had: it is aligned again.
    fraghash_test_support:kill_nodes([C]),
    {_, C} = fraghash_test_rejoin:restart_peer(proplists:get_value(c, Names),
                                               filename:join(Dir, "c"), []),
    ?assertEqual(ok, rpc:call(C, mnesia, start, [])),
    Check(),
    {atomic, ok} = rpc:call(A, mnesia, add_table_copy, [al_add, C, redb_copies]),
    ?assertEqual(records(1, 300),
                 lists:sort([setelement(1, R, x)
                             || R <- rpc:call(C, fraghash_redb_copies, select,
                                              [redb_copies, al_add, [{'_', [], ['$_']}]])])),
    fraghash_test_support:kill_nodes(Nodes).

%% A and C. While C's Mnesia is stopped, `al_stale' (disc_copies on A)
%% becomes `redb_copies'. Then A stops, C starts alone (with its older
%% definition), and A does not start beside it: A keeps its definition
%% (taking C's would load `al_stale' from a disc_copies file A no longer
%% has). With C stopped, A starts, then C, which takes A's definition.
stale_first() ->
    Id = os:getpid(),
    Dir = filename:join(fraghash_test_support:scratch(), "align_stale_" ++ Id),
    Names = [{L, list_to_atom(lists:concat(["fhas", L, "_", Id]))} || L <- [a, c]],
    [A, C] = Nodes = [element(2, fraghash_test_support:start_peer(N, filename:join(Dir, L)))
                      || {L, N} <- Names],
    ok = rpc:call(A, mnesia, create_schema, [Nodes]),
    [ok = rpc:call(N, mnesia, start, []) || N <- Nodes],
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [al_stale, [{disc_copies, [A]}]]),
    write(A, al_stale, 1, 100),
    stopped = rpc:call(C, mnesia, stop, []),
    {atomic, ok} = rpc:call(A, mnesia, change_table_copy_type, [al_stale, A, redb_copies]),
    write(A, al_stale, 101, 200),
    stopped = rpc:call(A, mnesia, stop, []),
    ok = rpc:call(C, mnesia, start, []),
    ?assertMatch({error, _}, rpc:call(A, mnesia, start, [])),
    ?assert(fraghash_test_rejoin:merge_failed(A)),
    ok = fraghash_test_support:wait_mnesia_stopped(A, 300),
    stopped = rpc:call(C, mnesia, stop, []),
    ?assertEqual(ok, rpc:call(A, mnesia, start, [])),
    ?assertEqual(ok, rpc:call(C, mnesia, start, [])),
    ?assertEqual({[], [al_stale]}, {rpc:call(A, fraghash_redb_align, taken, []),
                                    rpc:call(C, fraghash_redb_align, taken, [])}),
    [begin
         ?assertEqual(ok, rpc:call(N, mnesia, wait_for_tables, [[al_stale], 30000])),
         ?assertEqual([{A, redb_copies}], holders(N, al_stale)),
         ?assertEqual(records(1, 200), read_all(N, al_stale))
     end || N <- Nodes],
    fraghash_test_support:kill_nodes(Nodes).

%% Definitions made as Mnesia makes them, with `redb_copies' and another
%% backend's alias.
conflicts() ->
    Ext = [{redb_copies, fraghash_redb_copies}, {other_copies, other_backend}],
    Cs = fun(Copies) ->
                 mnesia_schema:list2cs([{name, t}, {attributes, [k, v]} | Copies], Ext)
         end,
    C = fun(L, R) -> fraghash_redb_align:conflicts(Cs(L), Cs(R)) end,
    ?assertEqual([], C([{redb_copies, [a, b]}], [{redb_copies, [b, a]}])),
    ?assertEqual([b], C([{redb_copies, [a]}], [{redb_copies, [a, b]}])),
    ?assertEqual([a], C([{redb_copies, [a, c]}], [{redb_copies, [c]}])),
    ?assertEqual([a], C([{disc_copies, [a]}], [{redb_copies, [a]}])),
    ?assertEqual([a, b], C([{disc_copies, [a]}, {redb_copies, [b]}],
                           [{redb_copies, [a]}, {disc_copies, [b]}])),
    %% Native types Mnesia merges itself; another backend is not ours.
    ?assertEqual([], C([{disc_copies, [a]}], [{disc_copies, [a, b]}, {ram_copies, [c]}])),
    ?assertEqual([], C([{other_copies, [a]}], [{other_copies, [a, b]}])).

write(Node, Tab, From, To) ->
    {atomic, ok} = rpc:call(Node, mnesia, transaction,
                            [fun() -> [mnesia:write({Tab, K, K}) || K <- lists:seq(From, To)],
                                      ok
                             end]).

records(From, To) ->
    [{x, K, K} || K <- lists:seq(From, To)].

read_all(Node, Tab) ->
    {atomic, Recs} = rpc:call(Node, mnesia, transaction,
                              [fun() -> mnesia:match_object({Tab, '_', '_'}) end]),
    lists:sort([setelement(1, R, x) || R <- Recs]).

holders(Node, Tab) ->
    lists:sort([{N, T} || T <- [ram_copies, disc_copies, disc_only_copies, redb_copies],
                          N <- rpc:call(Node, mnesia, table_info, [Tab, T])]).
