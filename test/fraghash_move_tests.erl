%% @doc Moving fragment replicas (`fraghash_frag:move_replica/3',
%% `drain/2', `rebalance/1,2') in real Mnesia on three `peer' nodes (one
%% disc schema), on `disc_copies' and `redb_copies' (a move under writers
%% on `disc_only_copies' and `ram_copies' too):
%% <ul>
%% <li>a move under writers on two nodes: every acknowledged write is read
%% back afterwards from every replica of its fragment, and the replicas
%% agree;</li>
%% <li>a drain of a node (a table with a foreign-key table): the node holds
%% nothing of either, every fragment keeps its copies;</li>
%% <li>a rebalance from two nodes to three: the dry run plans without
%% moving, the rebalance brings every node within 10% of the mean;</li>
%% <li>the refusals, each with its reason;</li>
%% <li>the move's process killed at each of its steps, then
%% `fraghash_frag:recover/0': the move undone or finished, nothing lost,
%% two copies per fragment, and the move runs again;</li>
%% <li>kill -9 of the node running a move (its OS process), at a step in
%% each phase, under writers; restart, recover: the same;</li>
%% <li>kill -9 of the move's `From' or `To' node while the copy loads (or
%% just after the move ends), under writers; restart, recover: one copy or
%% the other kept, the replicas equal (a node killed before its disc kept
%% the move's delete of the old copy lists it again at its restart, which
%% recovery deletes);</li>
%% <li>the old copy listed again before the move ends (as that restart
%% does): deleted again.</li>
%% </ul>
%% In the slow tier (`FRAGHASH_SLOW_TESTS=1').
-module(fraghash_move_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, wait_down/1]).

-export([die_at/5, kill_self_at/5, add_back_at/6]).

-define(T, 600).
-define(RECORDS, 2000).

move_test_() ->
    fraghash_test_support:slow_tier(only(
      [{timeout, ?T, {lists:concat([Storage, ": a move under writers on two nodes"]),
                      fun() -> under_writers(Storage) end}}
       || Storage <- [disc_copies, redb_copies, disc_only_copies, ram_copies]]
      ++ [{timeout, ?T, {"a drain of a node, with a foreign-key table", fun drain/0}},
          {timeout, ?T, {"redb_copies: a rebalance from two nodes to three, dry run first",
                         fun rebalance/0}},
          {timeout, ?T, {"the refusals", fun refusals/0}}]
      ++ [{timeout, ?T, {lists:concat([Storage, ": the old copy listed again before the "
                                       "move ends is deleted again"]),
                         fun() -> listed_again(Storage) end}}
          || Storage <- [disc_copies, redb_copies]]
      ++ [{timeout, ?T, {lists:concat([Storage, ": the move's process killed at each step, "
                                       "then recover/0"]),
                         fun() -> interrupted(Storage) end}}
          || Storage <- [disc_copies, redb_copies]]
      ++ [{timeout, ?T, {lists:concat([Storage, ": kill -9 of the node running a move at ",
                                       Step, " under writers, restart, recover/0"]),
                         fun() -> node_killed(Storage, Step) end}}
          || {Storage, Step} <- [{disc_copies, move_copied}, {redb_copies, move_drop},
                                 {redb_copies, move_copied}, {disc_copies, move_dropped},
                                 {redb_copies, move_dropped}]]
      ++ [{timeout, ?T, {lists:concat([Storage, ": kill -9 of the move's ", Victim,
                                       " node while the copy loads, under writers, restart, "
                                       "recover/0"]),
                         fun() -> killed_while_loading(Storage, Victim) end}}
          || {Storage, Victim} <- [{redb_copies, to}, {disc_copies, to}, {disc_copies, from},
                                   {redb_copies, from}]])).

%% The cases whose title holds `FRAGHASH_MOVE_CASE', when it is set.
only(Cases) ->
    case os:getenv("FRAGHASH_MOVE_CASE") of
        V when V =:= false; V =:= "" -> Cases;
        Part -> [C || {timeout, _, {Title, _}} = C <- Cases, string:find(Title, Part) =/= nomatch]
    end.

%%% The cases

%% Four fragments, two copies each on A and B, pool A, B, C; writers on A
%% and B while fragment 2's copy on A moves to C.
under_writers(Storage) ->
    #{nodes := [A, B, C] = Nodes} = trio("writers_" ++ atom_to_list(Storage)),
    Tab = list_to_atom("mv_writers_" ++ atom_to_list(Storage)),
    ok = table(A, Tab, Storage, 4, [A, B], Nodes),
    Frag = fraghash_frag:frag_name(Tab, 2),
    Writers = [writer(N, Tab, W) || {W, N} <- [{0, A}, {1, B}]],
    timer:sleep(500),
    Records = rpc:call(A, mnesia, table_info, [Frag, size]),
    Test = self(),
    ok = rpc:call(A, fraghash_frag, set_step_hook,
                  [fun(T, move_copied) when T =:= Tab -> Test ! {ops, fraghash_frag:operations()};
                      (_, _) -> ok
                   end]),
    T0 = erlang:monotonic_time(millisecond),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, move_replica, [Frag, A, C], 120000)),
    Ms = erlang:monotonic_time(millisecond) - T0,
    ok = rpc:call(A, fraghash_frag, set_step_hook, [undefined]),
    %% Once the copy is loaded, the operation's progress counts what it
    %% holds against what the fragment held (writers only add keys).
    Ops = receive {ops, O} -> O after 0 -> [] end,
    ?assertMatch([#{op := move, phase := copying}], [Op || #{table := T} = Op <- Ops, T =:= Tab]),
    [#{to_scan := ToCopy, written := Copied}] = [Op || #{table := T} = Op <- Ops, T =:= Tab],
    ?assert(ToCopy >= Records andalso Copied >= ToCopy),
    timer:sleep(500),
    Acked = stop_writers(Writers),
    fraghash_test_support:report("~s: ~s (~b records) moved in ~b ms under two writers "
                                 "(~b keys written)~n", [Storage, Frag, Records, Ms,
                                                         map_size(Acked)]),
    ?assert(map_size(Acked) > 50),
    ?assertEqual([{B, Storage}, {C, Storage}], holders(A, Frag)),
    check(Nodes, Tab, Acked),
    fraghash_test_support:kill_nodes(Nodes).

%% A table of six fragments, two copies each over A, B, C, and a
%% foreign-key table on it; C drained: nothing of either left on C, every
%% fragment on two nodes, every record read back.
drain() ->
    #{nodes := [A, B, C] = Nodes} = trio("drain"),
    Tab = mv_drain,
    Fk = mv_drain_fk,
    ok = table(A, Tab, disc_copies, 6, Nodes, Nodes),
    {atomic, ok} = rpc:call(A, mnesia, create_table,
                            [Fk, [{attributes, [key, owner]},
                                  {frag_properties, [{foreign_key, {Tab, owner}},
                                                     {n_disc_copies, 2}]}]]),
    ok = rpc:call(A, fraghash_test_support, fill, [Fk, lists:seq(1, 300), fun(K) -> K end]),
    {atomic, Moves} = rpc:call(A, fraghash_frag, drain, [Tab, C], 120000),
    ?assert(length(Moves) > 0),
    [begin
         ?assertEqual({F, 2}, {F, length(holders(A, F))}),
         ?assertNot(lists:keymember(C, 1, holders(A, F)))
     end || T <- [Tab, Fk], I <- lists:seq(1, 6), F <- [fraghash_frag:frag_name(T, I)]],
    %% A foreign-key fragment sits with its master's fragment still.
    [?assertEqual(holders(A, fraghash_frag:frag_name(Tab, I)),
                  holders(A, fraghash_frag:frag_name(Fk, I))) || I <- lists:seq(1, 6)],
    check(Nodes, Tab, #{}),
    ?assertEqual(300, length(rpc:call(B, mnesia, activity,
                                      [async_dirty, fun() -> mnesia:all_keys(Fk) end, [],
                                       mnesia_frag]))),
    %% Nothing left to drain.
    ?assertEqual({atomic, []}, rpc:call(B, fraghash_frag, drain, [Tab, C], 120000)),
    fraghash_test_support:kill_nodes(Nodes).

%% Six fragments, two redb_copies copies each, on A and B; C joins the
%% pool; the dry run plans moves to C and moves nothing; the rebalance
%% leaves every node within 10% of the mean, every fragment on two nodes.
rebalance() ->
    #{nodes := [A, B, C] = Nodes} = trio("rebalance"),
    Tab = mv_rebalance,
    ok = table(A, Tab, redb_copies, 6, [A, B], [A, B]),
    ?assertMatch({atomic, #{moves := [], within := true}},
                 rpc:call(A, fraghash_frag, rebalance, [Tab, [dry_run]], 60000)),
    {atomic, ok} = rpc:call(A, mnesia, change_table_frag, [Tab, {add_node, C}]),
    Before = layout(A, Tab),
    {atomic, #{moves := Planned, within := true, done := false}} =
        rpc:call(A, fraghash_frag, rebalance, [Tab, [dry_run]], 60000),
    ?assert(length(Planned) >= 3),
    ?assert(lists:all(fun({_, _, To}) -> To =:= C end, Planned)),
    ?assertEqual(Before, layout(A, Tab)),
    {atomic, #{moves := Planned, done := true, loads_after := Planned2}} =
        rpc:call(B, fraghash_frag, rebalance, [Tab], 120000),
    Loads = loads(A, Tab, Nodes),
    fraghash_test_support:report("rebalance: ~0p (planned ~0p)~n", [Loads, Planned2]),
    Mean = lists:sum([L || {_, L} <- Loads]) / 3,
    [?assert(abs(L - Mean) =< 0.1 * Mean) || {_, L} <- Loads],
    [?assertEqual({F, 2}, {F, length(holders(A, F))}) || {F, _} <- layout(A, Tab)],
    check(Nodes, Tab, #{}),
    ?assertMatch({atomic, #{moves := []}}, rpc:call(C, fraghash_frag, rebalance, [Tab], 60000)),
    %% relieve(largest) from a node that holds no copy of the largest
    %% fragment (Mnesia counts 0 records for a table not held there) still
    %% halves that one.
    Sizes = [{rpc:call(H, mnesia, table_info, [F, size]), F} || {F, [{H, _} | _]} <- layout(A, Tab)],
    {Size, Largest} = lists:max(Sizes),
    [Caller | _] = [N || N <- Nodes, not lists:keymember(N, 1, holders(A, Largest))],
    ?assertEqual({atomic, ok}, rpc:call(Caller, fraghash_frag, relieve, [Tab, Nodes, largest],
                                        120000)),
    [{Holder, _} | _] = holders(A, Largest),
    ?assert(rpc:call(Holder, mnesia, table_info, [Largest, size]) < Size * 3 / 4),
    fraghash_test_support:kill_nodes(Nodes).

refusals() ->
    #{nodes := [A, B, C] = Nodes} = trio("refusals"),
    Tab = mv_refusals,
    ok = table(A, Tab, disc_copies, 3, [A, B], [A, B]),
    F2 = fraghash_frag:frag_name(Tab, 2),
    Refused = fun(Reason, Args) ->
                      {aborted, {fraghash, Reason, Text}} =
                          rpc:call(A, fraghash_frag, move_replica, Args, 60000),
                      fraghash_test_support:report("~s: ~ts~n", [Reason, Text]),
                      ?assert(is_list(Text) andalso length(Text) > 20)
              end,
    Refused(node_not_in_pool, [F2, A, C]),
    Refused(already_held, [F2, A, B]),
    Refused(not_held, [F2, C, A]),
    Refused(same_node, [F2, A, A]),
    ?assertMatch({aborted, {no_exists, _}},
                 rpc:call(A, fraghash_frag, move_replica, [mv_nope, A, B])),
    ?assertMatch({aborted, {fraghash, no_room, _}},
                 rpc:call(A, fraghash_frag, drain, [Tab, A], 60000)),
    {atomic, ok} = rpc:call(A, mnesia, change_table_frag, [Tab, {add_node, C}]),
    %% A redb_copies table on A and B alone, one copy per fragment.
    Rdb = mv_refusals_rdb,
    {atomic, ok} = rpc:call(A, fraghash_frag_create, create_table,
                            [Rdb, [{attributes, [key, val]},
                                   {frag_properties, [{n_fragments, 2}, {node_pool, [A, B]},
                                                      {n_redb_copies, 1},
                                                      {hash_module, mnesia_frag_slots}]}]]),
    [{RdbFrom, redb_copies}] = holders(A, Rdb),
    [RdbTo] = [A, B] -- [RdbFrom],
    %% And a disc_copies one.
    Dsc = mv_refusals_disc,
    {atomic, ok} = rpc:call(A, mnesia, create_table,
                            [Dsc, [{frag_properties, [{n_fragments, 1}, {node_pool, [A, B]},
                                                      {n_disc_copies, 1},
                                                      {hash_module, mnesia_frag_slots}]}]]),
    [{DscFrom, disc_copies}] = holders(A, Dsc),
    [DscTo] = [A, B] -- [DscFrom],
    stopped = rpc:call(C, mnesia, stop, []),
    %% C holds nothing of them, but would miss the changes of their copies:
    %% Mnesia could not merge the external ones at C's next start, and would
    %% list the deleted disc_copies copy again.
    ?assertMatch({aborted, {fraghash, nodes_not_running, _}},
                 rpc:call(A, fraghash_frag, move_replica, [Rdb, RdbFrom, RdbTo], 60000)),
    ?assertMatch({aborted, {fraghash, nodes_not_running, _}},
                 rpc:call(A, fraghash_frag, move_replica, [Dsc, DscFrom, DscTo], 60000)),
    ?assertMatch({aborted, {fraghash, holders_not_running, _}},
                 rpc:call(A, fraghash_frag, move_replica, [F2, A, C], 60000)),
    ?assertMatch({aborted, {fraghash, node_not_running, _}},
                 rpc:call(A, fraghash_frag, drain, [Tab, C], 60000)),
    ?assertEqual([], rpc:call(A, fraghash_journal, pending, [])),
    ?assertEqual([{A, disc_copies}, {B, disc_copies}], holders(A, F2)),
    fraghash_test_support:kill_nodes(Nodes).

%% For each step of a move: a table of its own, fragment 2 moved from A to
%% C by a process of A that dies at that step; recover/0 on B undoes the
%% move (before `dropping') or finishes it; then the move (or its way
%% back) runs again.
interrupted(Storage) ->
    #{nodes := [A, B, C] = Nodes} = trio("interrupted_" ++ atom_to_list(Storage)),
    [begin
         Tab = list_to_atom(lists:concat(["mv_", Storage, "_", Step])),
         ok = table(A, Tab, Storage, 3, [A, B], Nodes),
         Frag = fraghash_frag:frag_name(Tab, 2),
         ok = rpc:call(A, ?MODULE, die_at, [Tab, Step, Frag, A, C], 120000),
         ?assertEqual({Step, [Tab]}, {Step, rpc:call(B, fraghash_journal, pending, [])}),
         ?assertEqual({Step, ok}, {Step, rpc:call(B, fraghash_frag, recover, [], 120000)}),
         ?assertEqual({Step, []}, {Step, rpc:call(C, fraghash_journal, pending, [])}),
         Moved = lists:member(Step, [move_drop, move_dropped, move_done]),
         Expected = case Moved of
                        true -> [{B, Storage}, {C, Storage}];
                        false -> [{A, Storage}, {B, Storage}]
                    end,
         ?assertEqual({Step, Expected}, {Step, holders(C, Frag)}),
         check(Nodes, Tab, #{}),
         {From, To} = case Moved of true -> {C, A}; false -> {A, C} end,
         ?assertEqual({Step, {atomic, ok}},
                      {Step, rpc:call(B, fraghash_frag, move_replica, [Frag, From, To], 120000)}),
         check(Nodes, Tab, #{})
     end || Step <- fraghash_grow_machine:steps(move)],
    fraghash_test_support:kill_nodes(Nodes).

%% Fragment 2 (on A and B) moves from A to C. At `move_dropped' (A's
%% copy deleted, the entry not yet) A's copy is listed again, as when A,
%% killed before its disc kept the delete, restarts and Mnesia's schema
%% merge brings it back (here: added again): the move deletes it again
%% before its entry goes, and ends with fragment 2 on B and C.
listed_again(Storage) ->
    #{nodes := [A, B, C] = Nodes} = trio("again_" ++ atom_to_list(Storage)),
    Tab = list_to_atom("mv_again_" ++ atom_to_list(Storage)),
    ok = table(A, Tab, Storage, 3, [A, B], Nodes),
    Frag = fraghash_frag:frag_name(Tab, 2),
    ?assertEqual({atomic, ok},
                 rpc:call(A, ?MODULE, add_back_at, [Tab, move_dropped, Frag, A, C, Storage],
                          120000)),
    ?assertEqual([{B, Storage}, {C, Storage}], holders(A, Frag)),
    ?assertEqual([{B, Storage}, {C, Storage}], holders(C, Frag)),
    ?assertEqual([], rpc:call(B, fraghash_journal, pending, [])),
    check(Nodes, Tab, #{}),
    %% A copy listed again is deleted from the schema without waiting for
    %% it to load, as recovery does when its node does not load it.
    {atomic, ok} = rpc:call(A, mnesia, add_table_copy, [Frag, A, Storage]),
    ?assertEqual({atomic, ok},
                 rpc:call(B, fraghash_grow_schema, drop_unloaded_copy, [Frag, A])),
    [?assertEqual([{B, Storage}, {C, Storage}], holders(N, Frag)) || N <- Nodes],
    check(Nodes, Tab, #{}),
    fraghash_test_support:kill_nodes(Nodes).

%% Writers on B and C; A runs a move of fragment 2 from B to C and kills
%% its own OS process at `Step'; A restarted, recover/0 on A: fragment 2 on
%% two nodes, moved or not as the step says, every acknowledged write
%% read back from every replica.
node_killed(Storage, Step) ->
    Id = lists:concat(["killed_", Storage, "_", Step]),
    #{nodes := [A, B, C] = Nodes, name := Name, dir := Dir} = trio(Id),
    Tab = list_to_atom("mv_" ++ Id),
    ok = table(A, Tab, Storage, 4, [A, B], Nodes),
    Frag = fraghash_frag:frag_name(Tab, 2),
    Writers = [writer(N, Tab, W) || {W, N} <- [{0, B}, {1, C}]],
    timer:sleep(300),
    _ = rpc:call(A, ?MODULE, kill_self_at, [Tab, Step, Frag, B, C], 120000),
    ok = wait_down(A),
    timer:sleep(300),
    {_, A} = restart(Name(a), filename:join(Dir, "a")),
    ok = start_again(A),
    ok = rpc:call(A, mnesia, wait_for_tables,
                  [rpc:call(A, fraghash_frag, loadable_tables, []), 120000]),
    ?assertEqual(ok, rpc:call(A, fraghash_frag, recover, [], 120000)),
    Acked = stop_writers(Writers),
    ?assert(map_size(Acked) > 10),
    [?assertEqual({N, ok}, {N, rpc:call(N, fraghash_frag, recover, [], 120000)}) || N <- Nodes],
    Expected = case lists:member(Step, [move_drop, move_dropped, move_done]) of
                   true -> [{A, Storage}, {C, Storage}];
                   false -> [{A, Storage}, {B, Storage}]
               end,
    ?assertEqual(Expected, holders(C, Frag)),
    check(Nodes, Tab, Acked),
    fraghash_test_support:kill_nodes(Nodes).

%% Fragment 2 of 40,000 records on A and B, writers on A and on the
%% node that stays up; A moves it from B to C, and the test kills `Victim'
%% (C, `to', or B, `from') 30 ms after the move's copying began (Mnesia's
%% loader is then copying the fragment to C). The move answers (refused,
%% or it waits for a copy that never becomes active); the victim restarts;
%% recover/0 on every node: fragment 2 on two nodes, moved or not, every
%% acknowledged write read back from every replica.
killed_while_loading(Storage, Victim) ->
    Id = lists:concat(["loading_", Storage, "_", Victim]),
    #{nodes := [A, B, C] = Nodes, name := Name, dir := Dir} = trio(Id),
    Tab = list_to_atom("mv_" ++ Id),
    ok = table(A, Tab, Storage, 2, [A, B], Nodes, 40000),
    Frag = fraghash_frag:frag_name(Tab, 2),
    {V, Letter, Up} = case Victim of
                          to -> {C, c, B};
                          from -> {B, b, C}
                      end,
    Writers = [writer(N, Tab, W) || {W, N} <- [{0, A}, {1, Up}]],
    Test = self(),
    ok = rpc:call(A, fraghash_frag, set_step_hook,
                  [fun(T, move_copy) when T =:= Tab -> Test ! copying;
                      (_, _) -> ok
                   end]),
    _ = spawn_link(fun() ->
                           Test ! {moved, rpc:call(A, fraghash_frag, move_replica,
                                                   [Frag, B, C], 180000)}
                   end),
    receive copying -> ok end,
    timer:sleep(30),
    os:cmd("kill -9 " ++ rpc:call(V, os, getpid, [])),
    ok = wait_down(V),
    Moved = receive {moved, R} -> R end,
    fraghash_test_support:report("~s killed while loading: the move answered ~0tP~n",
                                 [Victim, Moved, 12]),
    ok = rpc:call(A, fraghash_frag, set_step_hook, [undefined]),
    {_, V} = restart(Name(Letter), filename:join(Dir, atom_to_list(Letter))),
    ok = start_again(V),
    ok = rpc:call(V, mnesia, wait_for_tables,
                  [rpc:call(V, fraghash_frag, loadable_tables, []), 120000]),
    [?assertEqual({N, ok}, {N, rpc:call(N, fraghash_frag, recover, [], 180000)}) || N <- Nodes],
    Acked = stop_writers(Writers),
    ?assert(map_size(Acked) > 10),
    Holders = holders(A, Frag),
    fraghash_test_support:report("~s killed while loading: ~s on ~0p after recovery~n",
                                 [Victim, Frag, Holders]),
    ?assert(lists:member(Holders, [[{A, Storage}, {B, Storage}], [{A, Storage}, {C, Storage}]])),
    check(Nodes, Tab, Acked, 40000),
    fraghash_test_support:kill_nodes(Nodes).

%% Starts Mnesia on `Node', restarted after a kill. On `redb_copies' it
%% may have missed a change of the fragment's copies, which Mnesia 4.21.3
%% alone cannot merge: the node takes the running nodes' definition
%% (fraghash_redb_align) and starts.
start_again(Node) ->
    ?assertEqual({Node, ok}, {Node, rpc:call(Node, mnesia, start, [])}),
    ok.

%%% On a node

%% @private Runs the move of `Frag' from `From' to `To' in a process that
%% dies at step `Step' of `Tab'.
die_at(Tab, Step, Frag, From, To) ->
    ok = fraghash_frag:set_step_hook(fun(T, S) when T =:= Tab, S =:= Step -> exit(interrupted);
                                        (_, _) -> ok
                                     end),
    {Pid, Ref} = spawn_monitor(fun() -> fraghash_frag:move_replica(Frag, From, To) end),
    receive {'DOWN', Ref, process, Pid, Why} -> interrupted = Why end,
    fraghash_frag:set_step_hook(undefined).

%% @private Runs the move of `Frag' from `From' to `To'; at step `Step'
%% of `Tab', the first time, `From' gets a copy of `Frag' of `Storage'
%% again. The move's answer.
add_back_at(Tab, Step, Frag, From, To, Storage) ->
    ok = fraghash_frag:set_step_hook(
           fun(T, S) when T =:= Tab, S =:= Step ->
                   case get(added_back) of
                       undefined ->
                           put(added_back, true),
                           {atomic, ok} = mnesia:add_table_copy(Frag, From, Storage);
                       true ->
                           ok
                   end;
              (_, _) ->
                   ok
           end),
    try
        fraghash_frag:move_replica(Frag, From, To)
    after
        fraghash_frag:set_step_hook(undefined)
    end.

%% @private Runs the move of `Frag' from `From' to `To'; at step `Step'
%% of `Tab' this node's OS process is killed (kill -9).
kill_self_at(Tab, Step, Frag, From, To) ->
    ok = fraghash_frag:set_step_hook(
           fun(T, S) when T =:= Tab, S =:= Step -> os:cmd("kill -9 " ++ os:getpid());
              (_, _) -> ok
           end),
    fraghash_frag:move_replica(Frag, From, To).

%%% Writers

%% A writer through `Node': keys K of 1..2 * RECORDS with K rem 2 = W,
%% each written `{Tab, K, Seq}' by a `sync_transaction' through
%% `mnesia_frag'. Returns its pid; see stop_writers/1.
writer(Node, Tab, W) ->
    spawn_link(fun() -> write_loop(Node, Tab, W, 1, #{}) end).

%% `Done': per key, `{Acked, Since}' (the last acknowledged value, or the
%% value it held before; the values attempted since, unacknowledged).
write_loop(Node, Tab, W, Seq, Done) ->
    receive
        {stop, From} -> From ! {written, self(), Done}
    after 0 ->
            K = 2 * (rand:uniform(?RECORDS) - 1) + 1 + W,
            V = {W, Seq},
            {Acked, Since} = maps:get(K, Done, {initial, []}),
            Write = fun() -> mnesia:write({Tab, K, V}) end,
            Done2 = case rpc:call(Node, mnesia, activity, [sync_transaction, Write, [], mnesia_frag],
                                  30000) of
                        ok -> Done#{K => {V, []}};
                        _ -> timer:sleep(50), Done#{K => {Acked, [V | Since]}}
                    end,
            write_loop(Node, Tab, W, Seq + 1, Done2)
    end.

%% Every writer's keys: `#{K => {Acked, Since}}'.
stop_writers(Writers) ->
    [W ! {stop, self()} || W <- Writers],
    lists:foldl(fun(W, Acc) -> receive {written, W, Done} -> maps:merge(Acc, Done) end end,
                #{}, Writers).

%%% Checks

%% Every fragment of `Tab' read on every node holding it, each copy holding
%% exactly what the table should: keys 1..RECORDS with their initial value
%% `K', or the last acknowledged one (or one attempted since); the
%% replicas agree; the journal is empty.
check(Nodes, Tab, Acked) ->
    check(Nodes, Tab, Acked, ?RECORDS).

check(Nodes, Tab, Acked, Records) ->
    [A | _] = Nodes,
    ?assertEqual(ok, rpc:call(A, fraghash_frag_info, replicas, [Tab], 60000)),
    ?assertEqual([], rpc:call(A, fraghash_journal, pending, [])),
    {Mod, State, N} = rpc:call(A, fraghash_frag, hash, [Tab]),
    Copies = [{F, H, lists:sort(rpc:call(H, mnesia, dirty_select, [F, [{'_', [], ['$_']}]]))}
              || I <- lists:seq(1, N), F <- [fraghash_frag:frag_name(Tab, I)],
                 {H, _} <- holders(A, F)],
    %% Every copy holds only what routes to it.
    [?assertEqual({F, H, []}, {F, H, [K || {_, K, _} <- Rs,
                                            fraghash_frag:frag_name(Tab, Mod:key_to_frag_number(State, K)) =/= F]})
     || {F, H, Rs} <- Copies],
    Keys = lists:usort(lists:seq(1, Records) ++ maps:keys(Acked)),
    Bad = [{K, F, H, Got}
           || K <- Keys, F <- [fraghash_frag:frag_name(Tab, Mod:key_to_frag_number(State, K))],
              {F2, H, Rs} <- Copies, F2 =:= F,
              Got <- [[V || {_, K2, V} <- Rs, K2 =:= K]],
              not fits(K =< Records, K, Got, maps:get(K, Acked, {initial, []}))],
    ?assertEqual([], lists:sublist(Bad, 10)).

%% Whether key `K' (initially held when `Filled') holding `Got' (its
%% values in one copy) is right: its last acknowledged value, or one
%% attempted since.
fits(true, K, Got, {initial, Since}) -> lists:member(Got, [[K] | [[V] || V <- Since]]);
fits(false, _K, Got, {initial, Since}) -> lists:member(Got, [[] | [[V] || V <- Since]]);
fits(_Filled, _K, Got, {Acked, Since}) -> lists:member(Got, [[Acked] | [[V] || V <- Since]]).

%% `Frag''s copies, `[{Node, Type}]' sorted, as `Node' sees them.
holders(Node, Frag) ->
    lists:sort(rpc:call(Node, fraghash_move, copies, [Frag])).

%% Each fragment of `Tab' with its holders.
layout(Node, Tab) ->
    {_, _, N} = rpc:call(Node, fraghash_frag, hash, [Tab]),
    [{F, holders(Node, F)} || I <- lists:seq(1, N), F <- [fraghash_frag:frag_name(Tab, I)]].

%% The records each node holds of `Tab'.
loads(Node, Tab, Nodes) ->
    Layout = layout(Node, Tab),
    [{N, lists:sum([rpc:call(N, mnesia, table_info, [F, size])
                    || {F, Hs} <- Layout, lists:keymember(N, 1, Hs)])} || N <- Nodes].

%%% Nodes and tables

%% Three peer nodes `a', `b', `c' for the case `Id', one disc schema,
%% Mnesia running on all three, the redb_copies backend registered.
trio(Id) ->
    Dir = filename:join(scratch(), "move_" ++ Id ++ "_" ++ os:getpid()),
    Name = fun(L) -> list_to_atom(lists:concat(["fhm", L, "_", erlang:phash2(Id)])) end,
    Nodes = [begin {_, N} = restart(Name(L), filename:join(Dir, atom_to_list(L))), N end
             || L <- [a, b, c]],
    ok = rpc:call(hd(Nodes), mnesia, create_schema, [Nodes]),
    [ok = rpc:call(N, mnesia, start, []) || N <- Nodes],
    {atomic, ok} = rpc:call(hd(Nodes), fraghash_redb_copies, register, []),
    #{dir => Dir, name => Name, nodes => Nodes}.

%% A peer node, again after a kill (its name stays with epmd a moment).
restart(Name, Dir) ->
    fraghash_test_rejoin:restart_peer(Name, Dir, fraghash_torture2_partition:peer_args()).

%% `Tab' of `mnesia_frag_slots', `N' fragments of two copies of `Storage'
%% (any of the four)
%% each over `Nodes', pool `Pool', holding `{Tab, K, K}' for K in
%% 1..RECORDS; made on `On'; then recover/0 on every node (the journal).
table(On, Tab, Storage, N, Nodes, Pool) ->
    table(On, Tab, Storage, N, Nodes, Pool, ?RECORDS).

table(On, Tab, Storage, N, Nodes, Pool, Records) ->
    Props = [{n_fragments, N}, {hash_module, mnesia_frag_slots}, {node_pool, Nodes}],
    Copies = fun(disc_copies) -> n_disc_copies;
                (disc_only_copies) -> n_disc_only_copies;
                (ram_copies) -> n_ram_copies
             end,
    {atomic, ok} = case Storage of
                       redb_copies ->
                           rpc:call(On, fraghash_frag_create, create_table,
                                    [Tab, [{attributes, [key, val]},
                                           {frag_properties, [{n_redb_copies, 2} | Props]}]],
                                    120000);
                       _ ->
                           rpc:call(On, mnesia, create_table,
                                    [Tab, [{attributes, [key, val]},
                                           {frag_properties, [{Copies(Storage), 2} | Props]}]])
                   end,
    [{atomic, ok} = rpc:call(On, mnesia, change_table_frag, [Tab, {add_node, P}])
     || P <- Pool, not lists:member(P, Nodes)],
    [ok = rpc:call(On, fraghash_test_support, fill, [Tab, Keys, fun(K) -> K end], 120000)
     || Keys <- fraghash_tab:chunks(lists:seq(1, Records), 5000)],
    [ok = rpc:call(X, fraghash_frag, recover, [], 60000)
     || X <- rpc:call(On, mnesia, system_info, [running_db_nodes])],
    ok.
