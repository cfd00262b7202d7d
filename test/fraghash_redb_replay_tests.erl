%% @doc A node whose `redb_copies' copy was deleted and added again, then
%% written and killed with kill -9: it starts again (Mnesia replaying the
%% writes still in its log, which a high threshold keeps there), and its
%% copy holds every record written by `sync_transaction', loaded from its
%% own disc where it is the only copy. (Mnesia dumps its log at each schema
%% change, so the replay holds the writes after the copy was added again,
%% not the deletion.)
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_replay_tests).

-include_lib("eunit/include/eunit.hrl").

-define(T, 180).

replay_test_() ->
    [{timeout, ?T, {"a copy deleted and added again, written, then kill -9: Mnesia starts, "
                    "the copy (the only one) holds its records", fun() -> readded(only) end}},
     {timeout, ?T, {"the same with a second copy on another node", fun() -> readded(two) end}},
     {timeout, ?T, {"a copy written, then deleted, then kill -9: Mnesia starts, the copy "
                    "listed nowhere on the node, its records read from the other",
                    fun deleted/0}}].

%% Table `rp' of `redb_copies' on A and C; C's log dumped only at schema
%% changes (a high threshold otherwise); C's copy deleted and added again,
%% then (`only') A's copy deleted; records written from A by
%% `sync_transaction' (applied on C when it returns); C killed and
%% restarted.
readded(Case) ->
    #{a := A, c := C, restart_c := RestartC} = pair(atom_to_list(Case), rp),
    W = fun(From, To) ->
                {atomic, ok} = rpc:call(A, mnesia, sync_transaction,
                                        [fun() -> [mnesia:write({rp, K, K}) || K <- lists:seq(From, To)],
                                                  ok
                                         end])
        end,
    W(1, 100),
    {atomic, ok} = rpc:call(A, mnesia, del_table_copy, [rp, C]),
    W(101, 200),
    {atomic, ok} = rpc:call(A, mnesia, add_table_copy, [rp, C, redb_copies]),
    Case =:= only andalso ({atomic, ok} = rpc:call(A, mnesia, del_table_copy, [rp, A])),
    W(201, 300),
    ok = rpc:call(C, fraghash_redb_copies, sync, []),
    RestartC(),
    ?assertEqual(ok, rpc:call(C, mnesia, wait_for_tables, [[rp], 30000])),
    Want = [{rp, K, K} || K <- lists:seq(1, 300)],
    Local = fun(N) -> lists:sort(rpc:call(N, fraghash_redb_copies, select,
                                          [redb_copies, rp, [{'_', [], ['$_']}]]))
            end,
    ?assertEqual({c, []}, {c, missing(Want, Local(C))}),
    ?assertEqual(Want, Local(C)),
    Case =:= two andalso ?assertEqual(Want, Local(A)),
    fraghash_test_support:kill_nodes([A, C]).

%% Table `rd' of `redb_copies' on A and C, C's log dumped only at schema
%% changes; records written from A; C's copy deleted (its rows go at once;
%% Mnesia dumps C's log at that change, so no write to `rd' is left to
%% replay); C killed and restarted.
deleted() ->
    #{a := A, c := C, restart_c := RestartC} = pair("deleted", rd),
    {atomic, ok} = rpc:call(A, mnesia, sync_transaction,
                            [fun() -> [mnesia:write({rd, K, K}) || K <- lists:seq(1, 100)], ok end]),
    {atomic, ok} = rpc:call(A, mnesia, del_table_copy, [rd, C]),
    ok = rpc:call(C, fraghash_redb_copies, sync, []),
    RestartC(),
    ?assertEqual([A], rpc:call(C, mnesia, table_info, [rd, redb_copies])),
    ?assertEqual({atomic, [{rd, 7, 7}]},
                 rpc:call(C, mnesia, transaction, [fun() -> mnesia:read(rd, 7) end])),
    fraghash_test_support:kill_nodes([A, C]).

%% Nodes A and C, their logs dumped only at schema changes (a high
%% threshold otherwise), the backend registered, table `Tab' of
%% `redb_copies' on both; `restart_c' kills C with kill -9, starts it
%% again and asserts that Mnesia starts.
pair(Case, Tab) ->
    Id = Case ++ "_" ++ os:getpid(),
    Dir = filename:join(fraghash_test_support:scratch(), "replay_" ++ Id),
    Names = [{L, list_to_atom(lists:concat(["fhrp", L, "_", Id]))} || L <- [a, c]],
    Args = ["-mnesia", "dump_log_write_threshold", "1000000",
            "-mnesia", "dump_log_time_threshold", "3600000"],
    [A, C] = [element(2, fraghash_test_support:start_peer(N, filename:join(Dir, L), Args))
              || {L, N} <- Names],
    ok = rpc:call(A, mnesia, create_schema, [[A, C]]),
    [ok = rpc:call(N, mnesia, start, []) || N <- [A, C]],
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [Tab, [{redb_copies, [A, C]}]]),
    RestartC = fun() ->
                       fraghash_test_support:kill_nodes([C]),
                       {_, C} = fraghash_test_rejoin:restart_peer(proplists:get_value(c, Names),
                                                                  filename:join(Dir, "c"), Args),
                       ?assertEqual(ok, rpc:call(C, mnesia, start, []))
               end,
    #{a => A, c => C, restart_c => RestartC}.

%% The keys of `Want' missing from `Got', as ranges `{First, Last}'.
missing(Want, Got) ->
    Keys = [K || {_, K, _} <- Want -- Got],
    lists:reverse(lists:foldl(fun(K, [{F, L} | Acc]) when K =:= L + 1 -> [{F, K} | Acc];
                                 (K, Acc) -> [{K, K} | Acc]
                              end, [], Keys)).
