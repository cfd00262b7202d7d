%% @doc EUnit tests of the growth path that moves records in ordinary
%% transactions (`fraghash_grow', `fraghash_grow_schema'), in real Mnesia
%% on `disc_copies' tables, with every hash module:
%% <ul>
%% <li>a hidden fragment: created on a loaded table, it moves nothing,
%% reads and scans never see what it holds, and dropping it gives the table
%% back as it was;</li>
%% <li>an add: every record readable with its value afterwards and after a
%% restart of Mnesia, none in a fragment other than the hash module's, the
%% new fragment holding what the state sends there;</li>
%% <li>an add while writers and a reader run: every write that returned is
%% what a read gives afterwards, and no read during it missed a key;</li>
%% <li>an add stopped at each step (the step hook raises), then recovered:
%% before the switch the table is as before, after it as after the add;
%% either way every record is readable and the table grows again;</li>
%% <li>the same for a del (`fraghash_grow'): every record readable
%% after it and after a restart, down to one fragment; under load; stopped
%% at each step.</li>
%% </ul>
%% And an add on `disc_only_copies' with a cleaning pause set wrong: done,
%% the setting named in a warning.
-module(fraghash_grow_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [create_frag/4, fill/3, logged/0]).

-define(MODULES, [mnesia_frag_hash, mnesia_frag_slots, mnesia_frag_chash, mnesia_frag_jump,
                  mnesia_frag_linear]).
-define(RECORDS, 3000).
-define(T, 120).

grow_test_() ->
    {setup, fun() -> fraghash_test_support:start_journaled("mnesia_grow") end,
     fun fraghash_test_support:stop_mnesia/1,
     fun(_) ->
             {inorder,
              [{timeout, ?T, {atom_to_list(M) ++ ": a hidden fragment changes nothing",
                              fun() -> hidden(M) end}} || M <- ?MODULES]
              ++ [{timeout, ?T, {atom_to_list(M) ++ ": add moves every record, restart keeps them",
                                 fun() -> add(M) end}} || M <- ?MODULES]
              ++ [{timeout, ?T, {atom_to_list(M) ++ ": add under writers and a reader",
                                 fun() -> under_load(M, add) end}}
                  || M <- [mnesia_frag_hash, mnesia_frag_slots]]
              ++ [{timeout, ?T, {atom_to_list(M) ++ ": del moves every record, restart keeps them",
                                 fun() -> del(M) end}} || M <- ?MODULES]
              ++ [{timeout, ?T, {atom_to_list(M) ++ ": del under writers and a reader",
                                 fun() -> under_load(M, del) end}}
                  || M <- [mnesia_frag_hash, mnesia_frag_slots]]
              ++ [{timeout, ?T, {"add and del under writers that never pause: done or "
                                 "refused, the table whole either way",
                                 fun never_pausing/0}}]
              ++ [{timeout, ?T, {"a fragment beyond the count: dropped by recovery when its "
                                 "records are where they route, else kept and reported",
                                 fun orphan/0}}]
              ++ [{timeout, ?T, {"disc_only_copies, clean_pause_percent not a percentage: the "
                                 "add done, a warning names it", fun bad_pause/0}}]
              ++ [{timeout, ?T, {"operations/0 lists an add under way and one interrupted; the "
                                 "progress hook hears every phase", fun operations/0}}]
              ++ [{timeout, ?T, {"stopped at " ++ atom_to_list(Step) ++ ", then recovered",
                                 fun() -> stopped_at(Step) end}}
                  || Step <- fraghash_grow_machine:steps(add)
                                 ++ fraghash_grow_machine:steps(del)]}
     end}.

%%% A hidden fragment

hidden(Mod) ->
    Tab = table(hidden, Mod),
    Before = contents(Tab),
    {_, S, 4} = fraghash_frag:hash(Tab),
    %% A copy of a record in the hidden fragment: no read finds it.
    {atomic, ok} = fraghash_grow_schema:add_hidden(Tab, [node()], [{Tab, S}]),
    ?assertMatch({Mod, S, 5}, fraghash_frag:hash(Tab)),
    Hidden = fraghash_frag:frag_name(Tab, 5),
    ?assertEqual(0, mnesia:table_info(Hidden, size)),
    ok = mnesia:dirty_write(Hidden, {Tab, 1, hidden_copy}),
    ?assertEqual(Before, contents(Tab)),
    ?assertEqual([{Tab, 1, 1}], read(Tab, 1)),
    ?assertEqual(1, fraghash_frag:stale_copies(Tab)),
    %% Dropped: the table as it was, the copy gone with the fragment.
    {atomic, ok} = fraghash_grow_schema:drop_last(Tab, [{Tab, S, S}], [], fun() -> ok end),
    ?assertMatch({Mod, S, 4}, fraghash_frag:hash(Tab)),
    ?assertNot(lists:member(Hidden, mnesia:system_info(tables))),
    ?assertEqual(Before, contents(Tab)),
    %% A state other than the one expected: refused, nothing changed.
    ?assertMatch({aborted, {fraghash, changed_underneath, _}},
                 fraghash_grow_schema:switch(Tab, [{Tab, not_the_state, S, Mod}], [])),
    {atomic, ok} = mnesia:delete_table(Tab).

%%% An add

add(Mod) ->
    Tab = table(add, Mod),
    Before = contents(Tab),
    {_, S, 4} = fraghash_frag:hash(Tab),
    {S2, _, _} = Mod:add_frag(S),
    ?assertEqual({atomic, ok}, fraghash_frag:add_frag(Tab, [node()])),
    ?assertMatch({Mod, S2, 5}, fraghash_frag:hash(Tab)),
    check_after(Tab, Before),
    %% Where each record is: the new fragment holds exactly the keys the
    %% new state sends there.
    New = fraghash_frag:frag_name(Tab, 5),
    ?assertEqual(lists:sort([K || K <- lists:seq(1, ?RECORDS * 2),
                                  Mod:key_to_frag_number(S2, K) =:= 5]),
                 lists:sort(mnesia:dirty_all_keys(New))),
    ?assertEqual(none, fraghash_journal:read(Tab)),
    %% On disc too.
    stopped = mnesia:stop(),
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables(mnesia:system_info(tables), 30000),
    check_after(Tab, Before),
    ?assertEqual({atomic, ok}, fraghash_grow:add_frag(Tab, [node()], none)),
    check_after(Tab, Before),
    {atomic, ok} = mnesia:delete_table(Tab).

%%% A del

del(Mod) ->
    Tab = table(del, Mod),
    Before = contents(Tab),
    {atomic, ok} = fraghash_frag:add_frag(Tab, [node()]),
    {_, S, 5} = fraghash_frag:hash(Tab),
    {S2, _, _} = Mod:del_frag(S),
    ?assertEqual({atomic, ok}, fraghash_frag:del_frag(Tab)),
    ?assertMatch({Mod, S2, 4}, fraghash_frag:hash(Tab)),
    ?assertNot(lists:member(fraghash_frag:frag_name(Tab, 5), mnesia:system_info(tables))),
    check_after(Tab, Before),
    ?assertEqual(none, fraghash_journal:read(Tab)),
    stopped = mnesia:stop(),
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables(mnesia:system_info(tables), 30000),
    check_after(Tab, Before),
    %% Down to one fragment, and refused there.
    [?assertEqual({atomic, ok}, fraghash_frag:del_frag(Tab)) || _ <- [1, 2, 3]],
    check_after(Tab, Before),
    ?assertMatch({aborted, {fraghash, last_fragment, _}}, fraghash_frag:del_frag(Tab)),
    {atomic, ok} = mnesia:delete_table(Tab).

%%% Under load

under_load(Mod, Op) ->
    Tab = table(list_to_atom("load_" ++ atom_to_list(Op)), Mod),
    {atomic, ok} = fraghash_frag:add_frag(Tab, [node()]),
    Self = self(),
    Stop = atomics:new(1, []),
    %% Writers overwrite and delete random keys (deleted keys are written
    %% back later); each keeps the last value it saw acknowledged per key.
    Writers = [spawn_link(fun() -> writer(Self, Tab, Stop, W, #{}) end) || W <- [1, 2, 3]],
    Reader = spawn_link(fun() -> reader(Self, Tab, Stop, 0) end),
    timer:sleep(200),
    ?assertEqual({atomic, ok}, case Op of
                                   add -> fraghash_frag:add_frag(Tab, [node()]);
                                   del -> fraghash_frag:del_frag(Tab)
                               end),
    timer:sleep(200),
    ok = atomics:put(Stop, 1, 1),
    Last = lists:foldl(fun(W, Acc) -> receive {W, Seen} -> maps:merge(Acc, Seen) end end,
                       #{}, Writers),
    Misses = receive {Reader, M} -> M end,
    ?assertEqual(0, Misses),
    %% Writers own disjoint keys, so each key's last acknowledged value is
    %% what a read gives.
    Wrong = [{K, V, read(Tab, K)} || {K, V} <- maps:to_list(Last),
                                      read(Tab, K) =/= expected(Tab, K, V)],
    ?assertEqual([], lists:sublist(Wrong, 5)),
    ?assertEqual(0, fraghash_frag:stale_copies(Tab)),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Writer `W' owns the keys K with K rem 3 =:= W - 1 among 1..?RECORDS;
%% keys above ?RECORDS * 2 are never read by the reader, so deleting is
%% safe for it: it deletes and rewrites only those.
writer(Parent, Tab, Stop, W, Seen) ->
    case atomics:get(Stop, 1) of
        1 ->
            Parent ! {self(), Seen};
        0 ->
            K0 = rand:uniform(?RECORDS * 3),
            K = K0 - (K0 rem 3) + (W - 1),
            V = erlang:unique_integer([positive]),
            Op = case K > ?RECORDS * 2 andalso rand:uniform(4) =:= 1 of
                     true -> delete;
                     false -> write
                 end,
            ok = mnesia:activity(transaction,
                                 fun() ->
                                         case Op of
                                             write -> mnesia:write({Tab, K, V});
                                             delete -> mnesia:delete({Tab, K})
                                         end
                                 end, [], mnesia_frag),
            writer(Parent, Tab, Stop, W, Seen#{K => {Op, V}})
    end.

expected(Tab, K, {write, V}) -> [{Tab, K, V}];
expected(_Tab, _K, {delete, _}) -> [].

%% Reads keys 1..?RECORDS * 2, which always exist; counts misses.
reader(Parent, Tab, Stop, Misses) ->
    case atomics:get(Stop, 1) of
        1 ->
            Parent ! {self(), Misses};
        0 ->
            K = rand:uniform(?RECORDS * 2),
            case read(Tab, K) of
                [_] -> reader(Parent, Tab, Stop, Misses);
                _ -> reader(Parent, Tab, Stop, Misses + 1)
            end
    end.

%%% Writers that never pause

%% An unthrottled `async_dirty' writer (no lock holds it back) beside an
%% unthrottled `sync_transaction' one keep Mnesia's log dumper behind for
%% good, and a schema commit waits for every dump queued before it: the
%% add and the del must still answer (with `schema_wait_ms' at 2 s), done
%% or refused as overloaded, and leave every record once, in its fragment.
%% The writers only overwrite keys 1..2 * ?RECORDS, so each key is there
%% once, whatever value it holds.
never_pausing() ->
    Tab = table(flood, mnesia_frag_slots),
    {_, _, N} = fraghash_tab:hash(Tab),
    ok = application:set_env(fraghash, schema_wait_ms, 2000),
    Stop = atomics:new(1, []),
    Write = fun(Kind) ->
                    fun Loop() ->
                            case atomics:get(Stop, 1) of
                                0 ->
                                    K = rand:uniform(?RECORDS * 2),
                                    ok = mnesia:activity(
                                           Kind, fun() -> mnesia:write({Tab, K, -K}) end, [],
                                           mnesia_frag),
                                    Loop();
                                _ ->
                                    ok
                            end
                    end
            end,
    Writers = [spawn_monitor(Write(Kind)) || Kind <- [async_dirty, sync_transaction]],
    timer:sleep(1000),
    Answers = try [fraghash_frag:add_frag(Tab, [node()]), fraghash_frag:del_frag(Tab)]
              after
                  ok = application:unset_env(fraghash, schema_wait_ms),
                  ok = atomics:put(Stop, 1, 1),
                  [receive {'DOWN', Ref, process, Pid, _} -> ok end || {Pid, Ref} <- Writers]
              end,
    fraghash_test_support:report("writers that never pause: ~0tp~n", [Answers]),
    [?assert(A =:= {atomic, ok} orelse element(1, element(2, A)) =:= fraghash) || A <- Answers],
    [?assertMatch({fraghash, overloaded, _}, R) || {aborted, R} <- Answers],
    wait_dumper(),
    ?assertEqual(ok, fraghash_frag:recover()),
    Added = length([ok || {atomic, ok} <- [hd(Answers)]]),
    Deleted = length([ok || {atomic, ok} <- tl(Answers)]),
    ?assertMatch({_, _, M} when M =:= N + Added - Deleted, fraghash_tab:hash(Tab)),
    ?assertEqual(lists:seq(1, ?RECORDS * 2), [K || {_, K, _} <- contents(Tab)]),
    ?assertEqual(0, fraghash_frag:stale_copies(Tab)),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Until the dumps the writers queued are done (empty ones, quickly).
wait_dumper() ->
    case fraghash_grow_schema:dumps_queued() > 2 of
        true -> timer:sleep(100), wait_dumper();
        false -> ok
    end.

%%% A fragment beyond the count

%% What a schema change that reached one side of a partition can leave: a
%% fragment table of `Tab' that its fragment count does not name, and no
%% journal entry for it.
orphan() ->
    Tab = table(orphan, mnesia_frag_slots),
    Orphan = fraghash_tab:frag_name(Tab, 5),
    Create = fun() ->
                     Cs = mnesia_schema:list2cs([{name, Orphan}, {disc_copies, [node()]},
                                                 {record_name, Tab}, {attributes, [key, val]},
                                                 {frag_properties, [{base_table, Tab}]}]),
                     {atomic, ok} =
                         mnesia_schema:schema_transaction(
                           fun() ->
                                   TidTs = mnesia_schema:get_tid_ts_and_lock(schema, write),
                                   mnesia_schema:insert_schema_ops(
                                     TidTs, mnesia_schema:make_create_table(Cs))
                           end),
                     ok
             end,
    Before = contents(Tab),
    %% Copies of records that are where they route: the orphan goes.
    ok = Create(),
    [R1, R2 | _] = Before,
    [ok = mnesia:dirty_write(Orphan, R) || R <- [R1, R2]],
    ?assertEqual(ok, fraghash_frag:recover()),
    ?assertNot(lists:member(Orphan, mnesia:system_info(tables))),
    ?assertEqual(Before, contents(Tab)),
    %% A record found nowhere else: the orphan stays and recovery says so.
    ok = Create(),
    ok = mnesia:dirty_write(Orphan, {Tab, only_here, 1}),
    ?assertMatch({error, [{Tab, {error, {fraghash, orphan_holds_records, _}}}]},
                 fraghash_frag:recover()),
    ?assertEqual([{Tab, only_here, 1}], mnesia:dirty_read(Orphan, only_here)),
    %% Once it holds only copies again, the next recovery drops it.
    ok = mnesia:dirty_delete(Orphan, only_here),
    ?assertEqual(ok, fraghash_frag:recover()),
    ?assertNot(lists:member(Orphan, mnesia:system_info(tables))),
    {atomic, ok} = mnesia:delete_table(Tab).

%%% Watching an operation

operations() ->
    Tab = table(watched, mnesia_frag_slots),
    Test = self(),
    ok = fraghash_frag:set_progress_hook(fun(R) -> Test ! {progress, R} end),
    ok = fraghash_frag:set_step_hook(
           fun(T, grow_switch) when T =:= Tab -> Test ! {ops, fraghash_frag:operations()};
              (_, _) -> ok
           end),
    try
        {atomic, ok} = fraghash_frag:add_frag(Tab, [node()])
    after
        fraghash_frag:set_step_hook(undefined),
        fraghash_frag:set_progress_hook(undefined)
    end,
    Node = node(),
    receive
        {ops, Ops} ->
            ?assertMatch([#{table := Tab, op := add, phase := switching, node := Node,
                            running := true, to_scan := 0}],
                         [O || #{table := T} = O <- Ops, T =:= Tab])
    end,
    Reports = progress_reports(),
    Phases = lists:usort([P || #{phase := P} <- Reports]),
    ?assertEqual([cleaning, copying, creating, switching], Phases),
    %% The copy read every record of its donors and copied some.
    [Copied | _] = [R || #{phase := copying, scanned := S, to_scan := S} = R <- Reports, S > 0],
    ?assert(maps:get(written, Copied) > 0),
    ?assertEqual([], [O || #{table := T} = O <- fraghash_frag:operations(), T =:= Tab]),
    %% Interrupted after the switch: listed, not running, until recovered.
    fraghash_frag:set_step_hook(fun(T, grow_switched) when T =:= Tab -> exit(interrupted);
                                   (_, _) -> ok
                                end),
    {Pid, Ref} = spawn_monitor(fun() -> fraghash_frag:add_frag(Tab, [node()]) end),
    receive {'DOWN', Ref, process, Pid, Why} -> ?assertEqual(interrupted, Why) end,
    fraghash_frag:set_step_hook(undefined),
    ?assertMatch([#{op := add, phase := switching, running := false}],
                 [O || #{table := T} = O <- fraghash_frag:operations(), T =:= Tab]),
    ok = fraghash_frag:recover(),
    ?assertEqual([], [O || #{table := T} = O <- fraghash_frag:operations(), T =:= Tab]),
    {atomic, ok} = mnesia:delete_table(Tab).

progress_reports() ->
    receive {progress, R} -> [R | progress_reports()]
    after 0 -> []
    end.

%%% Stopped part way

stopped_at(Step) ->
    Mod = mnesia_frag_slots,
    Tab = table(list_to_atom("stop_" ++ atom_to_list(Step)), Mod),
    Before = contents(Tab),
    Op = case atom_to_list(Step) of
             "grow_del" ++ _ -> del;
             _ -> add
         end,
    {_, S, 4} = fraghash_frag:hash(Tab),
    {S2, N2} = case Op of
                   add -> {element(1, Mod:add_frag(S)), 5};
                   del -> {element(1, Mod:del_frag(S)), 3}
               end,
    ok = fraghash_frag:set_step_hook(fun(T, St) when T =:= Tab, St =:= Step ->
                                             error(stopped_here);
                                        (_, _) -> ok
                                     end),
    try
        ?assertError(stopped_here, case Op of
                                       add -> fraghash_grow:add_frag(Tab, [node()], none);
                                       del -> fraghash_grow:del_frag(Tab)
                                   end)
    after
        fraghash_frag:set_step_hook(undefined)
    end,
    ?assertEqual(ok, fraghash_frag:recover(Tab)),
    ?assertEqual(none, fraghash_journal:read(Tab)),
    {_, State, N} = fraghash_frag:hash(Tab),
    Switched = lists:member(Step, [grow_switched, grow_clean, grow_done, grow_del_switched,
                                   grow_del_drop, grow_del_dropped, grow_del_done]),
    case Switched of
        true -> ?assertEqual({S2, N2}, {State, N});
        false -> ?assertEqual({S, 4}, {State, N})
    end,
    check_after(Tab, Before),
    ?assertEqual({atomic, ok}, case Op of
                                   add -> fraghash_frag:add_frag(Tab, [node()]);
                                   del -> fraghash_frag:del_frag(Tab)
                               end),
    check_after(Tab, Before),
    {atomic, ok} = mnesia:delete_table(Tab).

%%% A cleaning pause set wrong

bad_pause() ->
    Tab = grow_bad_pause,
    ok = create_frag(Tab, mnesia_frag_slots, 4, [{n_disc_only_copies, 1}]),
    ok = fill(Tab, lists:seq(1, ?RECORDS), fun(K) -> K end),
    Before = contents(Tab),
    %% Warnings let through to a handler of this test only.
    #{level := Primary} = logger:get_primary_config(),
    {ok, #{level := Default}} = logger:get_handler_config(default),
    ok = logger:update_handler_config(default, level, error),
    ok = logger:set_primary_config(level, warning),
    ok = logger:add_handler(grow_pause_capture, fraghash_test_support, #{config => self(), level => warning}),
    ok = application:set_env(fraghash, clean_pause_percent, lots),
    try
        ?assertEqual({atomic, ok}, fraghash_frag:add_frag(Tab, [node()]))
    after
        application:unset_env(fraghash, clean_pause_percent),
        logger:remove_handler(grow_pause_capture),
        logger:set_primary_config(level, Primary),
        logger:update_handler_config(default, level, Default)
    end,
    check_after(Tab, Before),
    ?assertMatch({_, _, 5}, fraghash_frag:hash(Tab)),
    Logged = [lists:flatten(io_lib:format(F, A)) || {F, A} <- logged()],
    ?assertMatch([_ | _], [L || L <- Logged,
                                string:find(L, "clean_pause_percent lots") =/= nomatch]),
    {atomic, ok} = mnesia:delete_table(Tab).

%%% Helpers

table(Kind, Mod) ->
    Tab = list_to_atom(lists:concat(["grow_", Kind, "_", Mod])),
    ok = create_frag(Tab, Mod, 4, [{n_disc_copies, 1}]),
    ok = fill(Tab, lists:seq(1, ?RECORDS * 2), fun(K) -> K end),
    ok = mnesia:sync_log(),
    Tab.

%% Every record readable by key and by a scan, nothing misplaced.
check_after(Tab, Before) ->
    ?assertEqual(Before, contents(Tab)),
    ?assertEqual([], [K || {_, K, _} <- Before, read(Tab, K) =:= []]),
    ?assertEqual(0, fraghash_frag:stale_copies(Tab)).

%% The table as a scan through mnesia_frag gives it, sorted.
contents(Tab) -> fraghash_test_support:frag_contents(Tab).

read(Tab, K) -> fraghash_test_support:frag_read(Tab, K).
