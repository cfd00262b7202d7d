%% @doc A `redb_copies' node killed with kill -9 while it writes, in real
%% Mnesia: a peer node (an OS process) runs writers that acknowledge each
%% write, delete and counter increment once its transaction returned; it is
%% killed after a random number of acknowledgements and restarted, and must
%% hold everything acknowledged, in that round or before (1 round; 8 in the
%% slow tier). Then a second node joins and loads a copy of the table from
%% it, holds the same records, and follows its later commits. And a node
%% killed at a random moment of Mnesia's stop, which compacts the file,
%% holds every record after its restart (2 rounds; 8 in the slow tier).
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_kill_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, start_peer/2, start_redb_peer/3, wait_down/1,
                                report/2]).

-export([acked_writer/3]).

-define(T, 300).
%% Concurrent writers on the peer.
-define(WRITERS, 4).
-define(ALIAS, redb_copies).

kill9_test_() ->
    [{timeout, ?T, {"kill -9 while writing: every acknowledged write survives; "
                    "a second node loads a copy", fun() -> kill9(1) end}}
     | fraghash_test_support:slow_tier(
         [{timeout, ?T * 2, {"kill -9 while writing, 8 times over", fun() -> kill9(8) end}}])].

%% A stop compacts the file (fraghash_redb's close): a kill -9 at a random
%% moment of the stop, the compaction's included, must lose nothing.
stop_kill_test_() ->
    [{timeout, ?T, {"kill -9 during a stop that compacts the file: every record kept",
                    fun() -> stop_kills(2) end}}
     | fraghash_test_support:slow_tier(
         [{timeout, ?T * 2, {"kill -9 during a compacting stop, 8 times over",
                             fun() -> stop_kills(8) end}}])].

stop_kills(Rounds) ->
    Id = os:getpid() ++ "_" ++ integer_to_list(Rounds),
    Dir = filename:join(scratch(), "redb_stop_kill_" ++ Id),
    Name = list_to_atom("fhredbs_" ++ Id),
    {_, A} = start_redb_peer(Name, Dir, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [s, [{redb_copies, [A]}]]),
    Value = binary:copy(<<7>>, 100),
    [{atomic, ok} = rpc:call(A, mnesia, transaction,
                             [fun() -> [mnesia:write({s, K, Value}) || K <- lists:seq(B, B + 999)],
                                       ok end])
     || B <- lists:seq(1, 50000, 1000)],
    rand:seed(exsss, {41, 17, Rounds}),
    Shrunk = lists:foldl(fun(Round, N) -> N + stop_kill_round(Name, Dir, A, Round) end,
                         0, lists:seq(1, Rounds)),
    report("kill -9 during a stop, ~b rounds: ~b found the file smaller~n", [Rounds, Shrunk]),
    _ = os:cmd("kill -9 " ++ rpc:call(A, os, getpid, [])),
    ok.

%% Overwrites 20,000 records at random (a quarter and more of the file
%% then free), begins Mnesia's stop, kills the node 0 to 80 ms later;
%% after a restart the table must hold exactly what it held before the
%% stop. Returns 1 when the file came back smaller (a compaction done, or
%% cut short).
stop_kill_round(Name, Dir, A, Round) ->
    [{atomic, ok} = rpc:call(A, mnesia, transaction,
                             [fun() -> [mnesia:write({s, rand:uniform(50000), {Round, I, J}})
                                        || J <- lists:seq(1, 100)], ok end])
     || I <- lists:seq(1, 200)],
    All = [{'_', [], ['$_']}],
    Before = lists:sort(rpc:call(A, fraghash_redb_copies, select, [?ALIAS, s, All])),
    ok = rpc:call(A, fraghash_redb_copies, sync, []),
    File = filename:join(Dir, "fraghash.redb"),
    Size = filelib:file_size(File),
    OsPid = rpc:call(A, os, getpid, []),
    rpc:cast(A, mnesia, stop, []),
    timer:sleep(rand:uniform(80) - 1),
    _ = os:cmd("kill -9 " ++ OsPid),
    wait_down(A),
    {_, A} = start_peer(Name, Dir),
    ok = rpc:call(A, mnesia, start, []),
    ok = rpc:call(A, mnesia, wait_for_tables, [[s], 60000]),
    After = lists:sort(rpc:call(A, fraghash_redb_copies, select, [?ALIAS, s, All])),
    ?assertEqual({Round, 50000, true}, {Round, length(After), After =:= Before}),
    case filelib:file_size(File) < Size of
        true -> 1;
        false -> 0
    end.

kill9(Rounds) ->
    Id = os:getpid() ++ "_" ++ integer_to_list(Rounds),
    DirA = filename:join(scratch(), "redb_kill_a_" ++ Id),
    NameA = list_to_atom("fhredba_" ++ Id),
    {_, A} = start_redb_peer(NameA, DirA, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table,
                            [k, [{redb_copies, [A]}, {type, ordered_set}]]),
    rand:seed(exsss, {7, 11, Rounds}),
    Acked = lists:foldl(fun(Round, Acked0) -> kill_round(NameA, DirA, A, Round, Acked0) end,
                        #{}, lists:seq(1, Rounds)),
    Held = maps:from_list([{K, V} || {k, K, V} <- rpc:call(A, fraghash_redb_copies, select,
                                                           [?ALIAS, k, [{'_', [], ['$_']}]])]),

    %% A second node: joins, and loads a copy of k from A.
    DirB = filename:join(scratch(), "redb_kill_b_" ++ Id),
    {PeerB, B} = start_peer(list_to_atom("fhredbb_" ++ Id), DirB),
    ok = rpc:call(B, mnesia, start, []),
    %% Registered before joining: Mnesia merges two schemas only when their
    %% backend types agree.
    {atomic, ok} = rpc:call(B, fraghash_redb_copies, register, []),
    {ok, [A]} = rpc:call(B, mnesia, change_config, [extra_db_nodes, [A]]),
    {atomic, ok} = rpc:call(B, mnesia, change_table_copy_type, [schema, B, disc_copies]),
    {atomic, ok} = rpc:call(A, mnesia, add_table_copy, [k, B, redb_copies]),
    ok = rpc:call(B, mnesia, wait_for_tables, [[k], 60000]),
    All = [{'_', [], ['$_']}],
    LocalA = rpc:call(A, fraghash_redb_copies, select, [?ALIAS, k, All]),
    ?assertEqual(maps:size(Held), length(LocalA)),
    ?assert(maps:size(Acked) > 0),
    ?assert(LocalA =:= rpc:call(B, fraghash_redb_copies, select, [?ALIAS, k, All])),
    %% And follows A's commits.
    {atomic, ok} = rpc:call(A, mnesia, sync_transaction,
                            [fun() -> mnesia:write({k, after_load, 1}) end]),
    ?assertEqual([{k, after_load, 1}],
                 rpc:call(B, fraghash_redb_copies, lookup, [?ALIAS, k, after_load])),
    peer:stop(PeerB),
    _ = rpc:call(A, mnesia, stop, []),
    _ = os:cmd("kill -9 " ++ rpc:call(A, os, getpid, [])),
    ok.

%% One round on the running node A: writers acknowledge, A is killed after
%% a random number of acknowledgements, restarted, and must hold every
%% write and delete acknowledged so far, in this round or before; each
%% writer's counter at least its last acknowledged value and at most one
%% more (an increment applied whose acknowledgement the kill stopped); a
%% key whose delete may have been under way, its value or nothing (see
%% record/2).
kill_round(NameA, DirA, A, Round, Acked0) ->
    OsPid = rpc:call(A, os, getpid, []),
    Collector = fraghash_test_acks:collector(Acked0, 200 + rand:uniform(600), fun record/2),
    _ = [spawn(A, ?MODULE, acked_writer, [Collector, {Round, W}, 1])
         || W <- lists:seq(1, ?WRITERS)],
    ok = fraghash_test_acks:await(Collector),
    _ = os:cmd("kill -9 " ++ OsPid),
    wait_down(A),
    %% Acknowledgements sent before the kill may still be on their way.
    timer:sleep(200),
    Acked = fraghash_test_acks:recorded(Collector),
    Deleted = maps:size(maps:filter(fun(_, V) -> V =:= deleted end, Acked)),
    report("kill -9, round ~b: ~b keys acknowledged (~b of them deleted)~n",
           [Round, maps:size(Acked), Deleted]),
    ?assert(Deleted > 0),
    {_, A} = start_peer(NameA, DirA),
    ok = rpc:call(A, mnesia, start, []),
    ok = rpc:call(A, mnesia, wait_for_tables, [[k], 60000]),
    Held = maps:from_list([{K, V} || {k, K, V} <- rpc:call(A, fraghash_redb_copies, select,
                                                           [?ALIAS, k, [{'_', [], ['$_']}]])]),
    Lost = maps:fold(fun(K, deleted, L) ->
                             case maps:is_key(K, Held) of true -> [{back, K} | L]; false -> L end;
                        (K, {maybe_deleted, V}, L) ->
                             case maps:find(K, Held) of
                                 {ok, V} -> L;
                                 error -> L;
                                 Other -> [{K, {maybe_deleted, V}, Other} | L]
                             end;
                        ({ctr, _} = K, {counter, V}, L) ->
                             case maps:find(K, Held) of
                                 {ok, H} when H >= V, H =< V + 1 -> L;
                                 Other -> [{K, {counter, V}, Other} | L]
                             end;
                        (K, V, L) ->
                             case maps:find(K, Held) of {ok, V} -> L; Other -> [{K, V, Other} | L] end
                     end, [], Acked),
    ?assertEqual({Round, []}, {Round, Lost}),
    Acked.

%% @doc On a peer: transactions of three writes, each acknowledged to `To'
%% once it returned; every fourth, a delete of an earlier key, acknowledged
%% too; and each time an increment of the writer's counter, acknowledged
%% with the value it returned. Runs until the node dies.
%%
%% Each acknowledgement waits for `To' to confirm it
%% ({@link fraghash_test_acks}).
acked_writer(To, W, I) ->
    Keys = [{W, I, J} || J <- lists:seq(1, 3)],
    {atomic, ok} = mnesia:transaction(fun() -> [mnesia:write({k, K, I}) || K <- Keys], ok end),
    fraghash_test_acks:confirmed(To, {written, Keys, I}),
    case I rem 4 of
        0 ->
            Old = {W, I - 2, 1},
            {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete({k, Old}) end),
            fraghash_test_acks:confirmed(To, {deleted, Old});
        _ ->
            ok
    end,
    C = mnesia:dirty_update_counter(k, {ctr, W}, 1),
    fraghash_test_acks:confirmed(To, {counter, {ctr, W}, C}),
    acked_writer(To, W, I + 1).

%% What the node must hold for a key: its value; `deleted'; `{counter, V}'
%% (V or V + 1); `{maybe_deleted, V}' for a written key whose delete the
%% writer may have begun (its next write was acknowledged, the delete not
%% yet): V or nothing.
record({written, [{W, I, 1} | _] = Keys, V}, Acked) ->
    Written = lists:foldl(fun(K, M) -> M#{K => V} end, Acked, Keys),
    Old = {W, I - 2, 1},
    case I rem 4 =:= 0 andalso maps:find(Old, Written) of
        {ok, OldV} when is_integer(OldV) -> Written#{Old => {maybe_deleted, OldV}};
        _ -> Written
    end;
record({deleted, K}, Acked) ->
    Acked#{K => deleted};
record({counter, K, V}, Acked) ->
    Acked#{K => {counter, V}}.
