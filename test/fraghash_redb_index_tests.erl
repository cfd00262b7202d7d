%% @doc EUnit tests of the indexes of `redb_copies' tables
%% (fraghash_redb_index) in real Mnesia: after random writes, overwrites
%% that move a record to another index value, deletes and delete_objects,
%% on `set', `ordered_set' and `bag', the index rows are exactly those of
%% the table's records and index reads agree with a scan; after a restart
%% of Mnesia the indexes are not built again (Mnesia's build calls
%% `index_is_consistent(_, _, false)': none is seen) and still agree; so
%% after a kill -9 of a peer node writing an indexed table; an index added
%% to a filled table, a counter on an indexed position, and a second node
%% loading the table.
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_index_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, start_peer/2, start_redb_peer/3, wait_down/1,
                                report/2]).

-export([traced_start/1, writer/3, check/1]).

-define(T, 300).
-define(ALIAS, redb_copies).
%% Indexed positions of the test tables ({Tab, key, a, b}).
-define(POSITIONS, [3, 4]).

index_test_() ->
    {setup, fun setup/0, fun cleanup/1,
     fun(_Dir) ->
             {inorder,
              [{timeout, ?T, {"random changes on set, ordered_set, bag: index rows are the "
                              "records' and index reads agree", fun random_changes/0}},
               {timeout, ?T, {"clear_table empties the indexes", fun clear/0}},
               {timeout, ?T, {"an index on a counter follows its increments", fun counter/0}},
               {timeout, ?T, {"an index added to a filled table is built, then kept",
                              fun add_index/0}},
               {timeout, ?T, {"an index value that cannot be stored aborts the transaction",
                              fun bad_value/0}},
               {timeout, ?T, {"stop and start Mnesia: no index built again, all agree",
                              fun restart/0}}]}
     end}.

kill_test_() ->
    {timeout, ?T * 2, {"kill -9 of a node writing indexed tables: no index built again at "
                       "restart, all agree; a second node loads them with their indexes",
                       fun kill9/0}}.

setup() ->
    Dir = fraghash_test_support:start_mnesia("redb_index"),
    {atomic, ok} = fraghash_redb_copies:register(),
    Dir.

cleanup(Dir) ->
    fraghash_test_support:stop_mnesia(Dir).

create(Tab, Type) ->
    {atomic, ok} = mnesia:create_table(Tab, [{redb_copies, [node()]}, {type, Type},
                                             {attributes, [key, a, b]}, {index, [a, b]}]),
    ok.

%%% Cases

random_changes() ->
    rand:seed(exsss, {1, 2, 3}),
    [begin
         ok = create(Tab, Type),
         [change(Tab) || _ <- lists:seq(1, 3000)],
         ?assertEqual({Tab, ok}, {Tab, check(Tab)})
     end || {Tab, Type} <- [{ix_set, set}, {ix_ord, ordered_set}, {ix_bag, bag}]],
    ok.

%% One random change to `Tab': a write (over a record, often moving it to
%% other index values), a delete of a key, or a delete_object of a record
%% there (in a bag, one of a key's records); in a transaction or dirty.
change(Tab) ->
    Op = op(Tab),
    case rand:uniform(2) of
        1 -> {atomic, ok} = mnesia:transaction(fun() -> do(Op, write) end);
        2 -> ok = do(Op, dirty)
    end.

op(Tab) ->
    K = rand:uniform(60),
    Rec = {Tab, K, rand:uniform(6), lists:nth(rand:uniform(3), [x, y, {z, K rem 2}])},
    Op = case rand:uniform(10) of
             N when N =< 6 -> {write, Rec};
             7 -> {delete, {Tab, K}};
             _ -> case mnesia:dirty_read(Tab, K) of
                      [] -> {delete_object, Rec};
                      Rs -> {delete_object, lists:nth(rand:uniform(length(Rs)), Rs)}
                  end
         end,
    Op.

do({write, R}, write) -> mnesia:write(R);
do({write, R}, dirty) -> mnesia:dirty_write(R);
do({delete, Oid}, write) -> mnesia:delete(Oid);
do({delete, Oid}, dirty) -> mnesia:dirty_delete(Oid);
do({delete_object, R}, write) -> mnesia:delete_object(R);
do({delete_object, R}, dirty) -> mnesia:dirty_delete_object(R).

%% @doc `ok' when every index of `Tab' holds exactly one row per value and
%% key of its records, and index_read and index_match_object give, for
%% each value, the records a scan gives; else what differs.
check(Tab) ->
    All = mnesia:dirty_select(Tab, [{'_', [], ['$_']}]),
    Bad = [{Pos, What}
           || Pos <- mnesia:table_info(Tab, index),
              What <- rows(Tab, Pos, All) ++ reads(Tab, Pos, All)],
    case Bad of
        [] -> ok;
        _ -> {differs, Bad}
    end.

rows(Tab, Pos, All) ->
    Want = lists:usort([{{element(Pos, R), element(2, R)}} || R <- All]),
    Have = lists:sort(fraghash_redb_copies:select(?ALIAS, {Tab, index, {Pos, ordered}},
                                                  [{'_', [], ['$_']}])),
    case Want =:= Have of
        true -> [];
        false -> [{rows, {missing, Want -- Have}, {stale, Have -- Want}}]
    end.

reads(Tab, Pos, All) ->
    Values = lists:usort([element(Pos, R) || R <- All]) ++ [absent],
    %% A fragment's records are named after its base table.
    Wild = list_to_tuple([mnesia:table_info(Tab, record_name)
                          | lists:duplicate(mnesia:table_info(Tab, arity) - 1, '_')]),
    Pattern = fun(V) -> setelement(Pos, Wild, V) end,
    [{read, V} || V <- Values,
                  Scan <- [lists:sort([R || R <- All, element(Pos, R) =:= V])],
                  lists:sort(mnesia:dirty_index_read(Tab, V, Pos)) =/= Scan orelse
                      lists:sort(mnesia:dirty_index_match_object(Tab, Pattern(V), Pos)) =/= Scan
                      orelse
                      {atomic, Scan} =/= mnesia:transaction(
                                          fun() -> lists:sort(mnesia:index_read(Tab, V, Pos)) end)].

clear() ->
    ok = create(ix_clear, set),
    ok = mnesia:dirty_write({ix_clear, 1, a, b}),
    {atomic, ok} = mnesia:clear_table(ix_clear),
    ?assertEqual([], mnesia:dirty_index_read(ix_clear, a, 3)),
    ?assertEqual(ok, check(ix_clear)).

counter() ->
    {atomic, ok} = mnesia:create_table(ix_ctr, [{redb_copies, [node()]},
                                                {attributes, [key, n]}, {index, [n]}]),
    [mnesia:dirty_update_counter(ix_ctr, K rem 5, 1) || K <- lists:seq(1, 40)],
    _ = mnesia:dirty_update_counter(ix_ctr, 0, -100),
    ?assertEqual([{ix_ctr, 1, 8}, {ix_ctr, 2, 8}, {ix_ctr, 3, 8}, {ix_ctr, 4, 8}],
                 lists:sort(mnesia:dirty_index_read(ix_ctr, 8, n))),
    ?assertEqual(ok, check(ix_ctr)).

add_index() ->
    {atomic, ok} = mnesia:create_table(ix_add, [{redb_copies, [node()]},
                                                {attributes, [key, a, b]}]),
    rand:seed(exsss, {4, 5, 6}),
    [change(ix_add) || _ <- lists:seq(1, 1000)],
    {atomic, ok} = mnesia:add_table_index(ix_add, a),
    ?assertEqual(ok, check(ix_add)),
    [change(ix_add) || _ <- lists:seq(1, 1000)],
    ?assertEqual(ok, check(ix_add)),
    {atomic, ok} = mnesia:add_table_index(ix_add, b),
    {atomic, ok} = mnesia:del_table_index(ix_add, a),
    [change(ix_add) || _ <- lists:seq(1, 500)],
    ?assertEqual(ok, check(ix_add)).

bad_value() ->
    ok = create(ix_bad, set),
    Pid = self(),
    ?assertEqual({aborted, {fraghash_redb, unsupported_key, ix_bad, Pid}},
                 mnesia:transaction(fun() -> mnesia:write({ix_bad, 1, Pid, x}) end)),
    ?assertEqual([], mnesia:dirty_read(ix_bad, 1)).

restart() ->
    Tabs = [ix_set, ix_ord, ix_bag, ix_clear, ix_ctr, ix_add, ix_bad],
    stopped = mnesia:stop(),
    Calls = traced_start(Tabs),
    ?assertEqual([], [C || {index_is_consistent, _, false} = C <- Calls]),
    Asked = [Tag || {is_index_consistent, Tag, true} <- Calls],
    ?assertEqual({12, Asked}, {length(lists:usort(Asked)), Asked}),
    [?assertEqual({Tab, ok}, {Tab, check(Tab)}) || Tab <- Tabs],
    rand:seed(exsss, {7, 8, 9}),
    [change(ix_bag) || _ <- lists:seq(1, 300)],
    ?assertEqual(ok, check(ix_bag)).

%% @doc Starts Mnesia on this node and waits for `Tabs', tracing the calls
%% Mnesia makes to the backend's index states: `{is_index_consistent, Tag,
%% Answer}' and `{index_is_consistent, Tag, Bool}', in order.
traced_start(Tabs) ->
    Self = self(),
    Tracer = spawn_link(fun() -> trace_loop(Self, []) end),
    {module, _} = code:ensure_loaded(fraghash_redb_copies),
    erlang:trace(all, true, [call, {tracer, Tracer}]),
    _ = erlang:trace_pattern({fraghash_redb_copies, is_index_consistent, 2},
                             [{'_', [], [{return_trace}]}], [local]),
    _ = erlang:trace_pattern({fraghash_redb_copies, index_is_consistent, 3}, true, [local]),
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables(Tabs, 120000),
    erlang:trace(all, false, [call]),
    _ = erlang:trace_pattern({fraghash_redb_copies, '_', '_'}, false, [local]),
    Tracer ! {done, Self},
    receive {calls, Calls} -> Calls end.

trace_loop(To, Acc) ->
    trace_loop(To, Acc, #{}).

%% Tables load in processes of their own: a call's answer is paired with
%% the call by the process that made it.
trace_loop(To, Acc, Asking) ->
    receive
        {trace, Pid, return_from, {_, is_index_consistent, 2}, Answer} ->
            {Tag, Asking2} = maps:take(Pid, Asking),
            trace_loop(To, [{is_index_consistent, Tag, Answer} | Acc], Asking2);
        {trace, Pid, call, {_, is_index_consistent, [_, Tag]}} ->
            trace_loop(To, Acc, Asking#{Pid => Tag});
        {trace, _, call, {_, index_is_consistent, [_, Tag, Bool]}} ->
            trace_loop(To, [{index_is_consistent, Tag, Bool} | Acc], Asking);
        {done, To} ->
            To ! {calls, lists:reverse(Acc)}
    end.

%%% kill -9

kill9() ->
    Id = os:getpid(),
    DirA = filename:join(scratch(), "redb_ix_kill_a_" ++ Id),
    NameA = list_to_atom("fhixa_" ++ Id),
    {_, A} = start_redb_peer(NameA, DirA, []),
    Tabs = [kx_set, kx_bag],
    [{atomic, ok} = rpc:call(A, mnesia, create_table,
                             [Tab, [{redb_copies, [A]}, {type, Type}, {attributes, [key, a, b]},
                                    {index, [a, b]}]])
     || {Tab, Type} <- [{kx_set, set}, {kx_bag, bag}]],
    Rounds = case os:getenv("FRAGHASH_SLOW_TESTS") of "1" -> 6; _ -> 2 end,
    [kill_round(NameA, DirA, A, Tabs, Round) || Round <- lists:seq(1, Rounds)],
    %% A second node loads both tables from A, with their indexes.
    DirB = filename:join(scratch(), "redb_ix_kill_b_" ++ Id),
    {PeerB, B} = start_peer(list_to_atom("fhixb_" ++ Id), DirB),
    ok = rpc:call(B, mnesia, start, []),
    {atomic, ok} = rpc:call(B, fraghash_redb_copies, register, []),
    {ok, [A]} = rpc:call(B, mnesia, change_config, [extra_db_nodes, [A]]),
    {atomic, ok} = rpc:call(B, mnesia, change_table_copy_type, [schema, B, disc_copies]),
    [{atomic, ok} = rpc:call(A, mnesia, add_table_copy, [Tab, B, redb_copies]) || Tab <- Tabs],
    ok = rpc:call(B, mnesia, wait_for_tables, [Tabs, 60000]),
    [?assertEqual({B, Tab, ok}, {B, Tab, rpc:call(B, ?MODULE, check, [Tab])}) || Tab <- Tabs],
    %% B's indexes follow A's later commits.
    {atomic, ok} = rpc:call(A, mnesia, sync_transaction,
                            [fun() -> mnesia:write({kx_set, 1, moved, moved}) end]),
    ?assertEqual([{kx_set, 1, moved, moved}],
                 rpc:call(B, mnesia, dirty_index_read, [kx_set, moved, 3])),
    [?assertEqual({B, Tab, ok}, {B, Tab, rpc:call(B, ?MODULE, check, [Tab])}) || Tab <- Tabs],
    peer:stop(PeerB),
    _ = rpc:call(A, mnesia, stop, []),
    _ = os:cmd("kill -9 " ++ rpc:call(A, os, getpid, [])),
    ok.

%% Writers on A change the indexed tables until A is killed (kill -9) after
%% a random number of their transactions; A restarted must hold indexes
%% that agree with its tables, without Mnesia building any.
kill_round(NameA, DirA, A, Tabs, Round) ->
    Self = self(),
    Writers = [spawn(A, ?MODULE, writer, [Self, Tab, {Round, W}]) || Tab <- Tabs, W <- [1, 2]],
    rand:seed(exsss, {Round, 1, 1}),
    wait_done(length(Writers), 300 + rand:uniform(1500)),
    _ = os:cmd("kill -9 " ++ rpc:call(A, os, getpid, [])),
    wait_down(A),
    {_, A} = start_peer(NameA, DirA),
    Calls = rpc:call(A, ?MODULE, traced_start, [Tabs]),
    Built = [C || {index_is_consistent, _, false} = C <- Calls],
    Kept = [Tag || {is_index_consistent, Tag, true} <- Calls],
    report("kill -9, round ~b: indexes kept ~0p, built ~0p~n", [Round, Kept, Built]),
    ?assertEqual({Round, []}, {Round, Built}),
    ?assertEqual(4, length(Kept)),
    [?assertEqual({Round, Tab, ok}, {Round, Tab, rpc:call(A, ?MODULE, check, [Tab])})
     || Tab <- Tabs].

%% Waits until the writers have made `N' transactions between them.
wait_done(_Writers, N) when N =< 0 ->
    ok;
wait_done(Writers, N) ->
    receive {done, _} -> wait_done(Writers, N - 1)
    after 60000 -> error({no_transaction_for_a_minute, N})
    end.

%% @doc On a peer: random changes to `Tab' (see op/1), reporting each
%% to `To', until the node dies.
writer(To, Tab, Seed) ->
    rand:seed(exsss, {erlang:phash2(Seed), 3, 4}),
    writer_loop(To, Tab).

%% Transactions only: two dirty writers of one key can leave a stale index
%% row (see fraghash_redb_index).
writer_loop(To, Tab) ->
    Op = op(Tab),
    {atomic, ok} = mnesia:transaction(fun() -> do(Op, write) end),
    To ! {done, Tab},
    writer_loop(To, Tab).
