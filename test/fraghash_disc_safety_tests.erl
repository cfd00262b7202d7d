%% @doc EUnit tests of `fraghash_frag''s safe path in one VM (the kill -9
%% test is `fraghash_torture_tests'):
%% <ul>
%% <li>plain `mnesia:change_table_frag/2' on a disc table with a fraghash
%% hash module is refused with a reason naming the safe call, and allowed
%% on a `ram_copies' table;</li>
%% <li>an operation whose process dies at each of its steps leaves a
%% journal entry that `fraghash_frag:recover/0' finishes or undoes: every
%% record once, in its fragment, with its value; the operation can be run
%% again, on `disc_copies' and `disc_only_copies' tables alike;</li>
%% <li>a step that fails returns a reason and recovery finishes; a bag
%% table grows and shrinks; a racing delete stays deleted; a journal entry
%% of a deleted table is dropped.</li>
%% </ul>
%% Uses the running Mnesia if there is one (with a disc schema), else
%% starts one in `FRAGHASH_TEST_DIR'.
-module(fraghash_disc_safety_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0]).

-define(RECORDS, 3000).
-define(T, 300).

disc_safety_test_() ->
    {setup, fun setup/0, fun cleanup/1,
     fun(_) ->
             {inorder,
              [{timeout, ?T, {"plain change_table_frag refused on disc tables",
                              fun refused/0}},
               {timeout, ?T, {"relieve halves one fragment, moves nothing else",
                              fun relieve/0}},
               {timeout, ?T, {"a delete that raced an add stays deleted",
                              fun racing_delete/0}},
               {timeout, ?T, {"a key a racing writer wrote, then deleted through the new "
                              "routing, stays deleted", fun racing_write_then_delete/0}},
               {timeout, ?T, {"the same in a del, stopped after cleaning: recovery keeps "
                              "it deleted", fun racing_write_then_delete_del/0}},
               {timeout, ?T, {"a delete routed before the switch that asks for its lock "
                              "late stays deleted", fun late_lock_delete/0}},
               {timeout, ?T, {"a bag writer whose delete routes before an add's switch and "
                              "its write after it leaves one record",
                              fun() -> bag_split_writer(add) end}},
               {timeout, ?T, {"the same across a del's switch",
                              fun() -> bag_split_writer(del) end}},
               {timeout, ?T, {"a key the switch copied last, then a writer that waited for "
                              "the switch changed, keeps that change through recovery",
                              fun last_copy_then_writer/0}},
               {timeout, ?T, {"a writer holding a donor's lock across the switch keeps its "
                              "write", fun open_writer/0}},
               {timeout, ?T, {"a journal entry of a deleted or re-created table is dropped",
                              fun stale_journal/0}},
               {timeout, ?T, {"one fragment, plain and missing tables: answers with reasons",
                              fun edges/0}}]
              ++ [{timeout, ?T, {lists:concat(["a step that fails at ", Step,
                                               " returns a reason, and recovery finishes"]),
                                 fun() -> step_fails(Op, Step) end}}
                  || {Op, Step} <- [{add, grow_copy}, {add, grow_switched},
                                    {del, grow_del_copy}, {del, grow_del_dropped}]]
              ++ [{timeout, ?T, {lists:concat([Mod, " ", Copies, ": a bag table grows and shrinks"]),
                                 fun() -> bag_table(Mod, Copies) end}}
                  || Mod <- [mnesia_frag_hash, mnesia_frag_slots],
                     Copies <- [n_disc_copies, n_disc_only_copies]]
              ++ [{timeout, ?T, {lists:concat([Mod, " ", Copies, ": process dies at ",
                                               Op, " step ", Step]),
                                 fun() -> interrupted(Mod, Copies, Op, Step) end}}
                  || Mod <- [mnesia_frag_hash, mnesia_frag_slots],
                     Copies <- [n_disc_copies, n_disc_only_copies],
                     {Op, Step} <- steps()]}
     end}.

%% The steps of an add and a del (fraghash_grow), the same for every
%% storage type.
steps() ->
    [{add, S} || S <- [grow_create, grow_copy, grow_switch, grow_switch_locked, grow_switched,
                       grow_clean]]
        ++ [{del, S} || S <- [grow_del_copy, grow_del_switch, grow_del_switch_locked,
                              grow_del_switched, grow_del_dropped]].

setup() ->
    fraghash_test_support:quiet_overload(),
    case mnesia:system_info(is_running) of
        yes ->
            keep;
        _ ->
            Dir = filename:join(scratch(), "mnesia_safety_" ++ os:getpid()),
            ok = application:set_env(mnesia, dir, Dir),
            ok = mnesia:create_schema([node()]),
            ok = mnesia:start(),
            stop
    end.

cleanup(keep) -> ok;
cleanup(stop) -> stopped = mnesia:stop(), ok.

create(Tab, Mod, Copies) ->
    ok = fraghash_test_support:create_frag(Tab, Mod, 3, [{Copies, 1}]),
    ok = fraghash_test_support:fill(Tab, lists:seq(1, ?RECORDS), fun(I) -> I * 7 end).

refused() ->
    ok = create(safety_refused, mnesia_frag_slots, n_disc_copies),
    {aborted, {fraghash, unsafe_change_table_frag, Msg}} =
        mnesia:change_table_frag(safety_refused, {add_frag, [node()]}),
    ?assertNotEqual(nomatch, string:find(Msg, "fraghash_frag:add_frag/2")),
    {aborted, {fraghash, unsafe_change_table_frag, Msg2}} =
        mnesia:change_table_frag(safety_refused, del_frag),
    ?assertNotEqual(nomatch, string:find(Msg2, "fraghash_frag:del_frag/1")),
    {_, _, 3} = fraghash_frag:hash(safety_refused),
    %% The safe calls go through.
    {atomic, ok} = fraghash_frag:add_frag(safety_refused, [node()]),
    {atomic, ok} = fraghash_frag:del_frag(safety_refused),
    check(safety_refused, 3),
    %% Bad tables: a reason, no crash.
    ?assertEqual({aborted, {no_exists, safety_nope}}, fraghash_frag:add_frag(safety_nope, [node()])),
    {atomic, ok} = mnesia:create_table(safety_plain, [{attributes, [key, val]}]),
    ?assertMatch({aborted, {fraghash, not_fragmented, _}}, fraghash_frag:del_frag(safety_plain)),
    %% ram_copies: nothing on disc to lose, plain calls allowed.
    {atomic, ok} =
        mnesia:create_table(safety_ram, [{attributes, [key, val]},
                                         {frag_properties,
                                          [{n_fragments, 2}, {hash_module, mnesia_frag_slots},
                                           {node_pool, [node()]}, {n_ram_copies, 1}]}]),
    {atomic, ok} = mnesia:change_table_frag(safety_ram, {add_frag, [node()]}),
    {atomic, ok} = mnesia:change_table_frag(safety_ram, del_frag),
    ok.

relieve() ->
    ok = create(safety_relieve, mnesia_frag_slots, n_disc_only_copies),
    Before = sizes(safety_relieve),
    {atomic, ok} = fraghash_frag:relieve(safety_relieve, [node()], 2),
    [A, B, C, New] = sizes(safety_relieve),
    %% Only fragment 2 lost records, all to the new fragment: about half of
    %% them (it gives half of its slots; ~1,000 records over its slots, so
    %% a 35..65% share is a loose bound that still fails for a plain add,
    %% which would take from every fragment).
    [A0, B0, C0] = Before,
    ?assertEqual({A0, C0}, {A, C}),
    ?assertEqual(B0, B + New),
    ?assert(New * 100 >= B0 * 35 andalso New * 100 =< B0 * 65),
    check(safety_relieve, 4),
    %% largest: after the split fragment 2's file is still the largest
    %% (dets does not shrink), so name another one to check the choice.
    {atomic, ok} = fraghash_frag:relieve(safety_relieve, [node()], largest),
    check(safety_relieve, 5),
    %% Other modules cannot.
    ok = create(safety_relieve_hash, mnesia_frag_hash, n_disc_copies),
    {aborted, _} = fraghash_frag:relieve(safety_relieve_hash, [node()], 1),
    check(safety_relieve_hash, 3),
    ?assertEqual([], fraghash_journal:pending()).

%% Mnesia's routing race, made to happen: a writer's transaction, older
%% than the add's switch, routes a key the add moves with the state from
%% before the switch, and asks for its lock while the switch holds it; it
%% deletes the key from the fragment the key has just left.
%% The delete is acknowledged, so the key must stay deleted.
racing_delete() ->
    Tab = safety_racing_delete,
    {_Mod, _S, _S2, _N, K} = key_an_add_moves(Tab, safety_racing_aux),
    Writer = older_writer(safety_racing_aux, K, fun() -> mnesia:delete({Tab, K}) end),
    ok = releasing(Tab, add, Writer),
    assert_gone(Tab, K).

%% The routing race, then a later change of the same writer: its
%% transaction, older than the add's switch, writes a new key with the
%% state from before the switch, so into the fragment the key leaves,
%% after the switch committed; its next transaction routes with the new
%% state and deletes the key from the new fragment, which then holds what
%% it held before the switch: nothing, as the copy the add made (there was
%% no record to copy). Both are acknowledged before cleaning begins, so the
%% key must end deleted: cleaning must not take the donor's record for a
%% change the new fragment never saw.
racing_write_then_delete() ->
    Tab = safety_racing_write,
    ok = create(Tab, mnesia_frag_slots, n_disc_copies),
    {Mod, S, N} = fraghash_frag:hash(Tab),
    {S2, _, _} = Mod:add_frag(S),
    %% A key the table does not hold, which the add sends to fragment N + 1.
    [K | _] = [K || K <- lists:seq(?RECORDS + 1, ?RECORDS * 10),
                    Mod:key_to_frag_number(S2, K) =:= N + 1],
    Writer = racing_writer(Tab, K),
    ok = add_with_hook(Tab, racing_hook(Tab, Writer, grow_switch_locked, none)),
    receive {writer_done, WriterResult} -> ?assertEqual({ok, ok}, WriterResult) end,
    assert_gone(Tab, K).

%% The same race in a del (the writer's first transaction writes a new key
%% routed to the last fragment, its second deletes it), and the del stopped
%% before the last fragment is dropped: recovery drops it. The key must
%% stay deleted.
racing_write_then_delete_del() ->
    Tab = safety_racing_write_del,
    ok = create(Tab, mnesia_frag_slots, n_disc_copies),
    {Mod, S, N} = fraghash_frag:hash(Tab),
    {S2, _, _} = Mod:del_frag(S),
    %% A key the table does not hold, routed to the last fragment now.
    [K | _] = [K || K <- lists:seq(?RECORDS + 1, ?RECORDS * 10),
                    Mod:key_to_frag_number(S, K) =:= N],
    Dest = fraghash_frag:frag_name(Tab, Mod:key_to_frag_number(S2, K)),
    Writer = racing_writer(Tab, K),
    fraghash_frag:set_step_hook(
      racing_hook(Tab, Writer, grow_del_switch_locked, grow_del_drop)),
    {Pid, Ref} = spawn_monitor(fun() -> fraghash_frag:del_frag(Tab) end),
    receive {'DOWN', Ref, process, Pid, Why} -> ?assertEqual(interrupted, Why) end,
    fraghash_frag:set_step_hook(undefined),
    receive {writer_done, WriterResult} -> ?assertEqual({ok, ok}, WriterResult) end,
    %% The writer's delete went where the key routes after the switch.
    ?assertEqual([], mnesia:dirty_read(Dest, K)),
    ok = fraghash_frag:recover(),
    ?assertEqual({Mod, S2, N - 1}, fraghash_frag:hash(Tab)),
    assert_gone(Tab, K).

%% A writer whose first transaction begins as the operation copies
%% (`begin_writer/1'; reading another table, so that it is older than the
%% operation's switch and holds no lock of it), waits for `go', then writes
%% `K' into `Tab' through `mnesia_frag', and whose second transaction
%% deletes `K'; it reports both answers to the process that sends it
%% `{report_to, Pid}'.
racing_writer(Tab, K) ->
    Aux = list_to_atom(atom_to_list(Tab) ++ "_aux"),
    {atomic, ok} = mnesia:create_table(Aux, [{attributes, [key, val]}]),
    spawn_link(fun() ->
                       Wrote = waiting_transaction(Aux, K,
                                                   fun() -> mnesia:write({Tab, K, racing}) end),
                       Deleted = mnesia:activity(transaction, fun() -> mnesia:delete({Tab, K}) end,
                                                 [], mnesia_frag),
                       receive {report_to, P} -> P ! {writer, {Wrote, Deleted}} end
               end).

%% The step hook of a racing writer's test: as the operation copies, the
%% writer begins its first transaction; at `Locked' (the fence holds the
%% sources) the writer goes, routes with the state from before the switch
%% and restarts until the fence is gone; once it is (as cleaning or the
%% drop begins) the operation waits for both of the writer's transactions,
%% and sends their answers to this process as `{writer_done, Answers}';
%% then, if `Stop' is that step, the operation dies.
racing_hook(Tab, Writer, Locked, Stop) ->
    Test = self(),
    Copy = copy_step(Locked),
    Released = released_step(Locked),
    fun(T, Step) when T =:= Tab, Step =:= Copy ->
            begin_writer(Writer);
       (T, Step) when T =:= Tab, Step =:= Locked ->
            Writer ! go,
            timer:sleep(300);
       (T, Step) when T =:= Tab, Step =:= Released ->
            Writer ! {report_to, self()},
            receive {writer, Result} -> Test ! {writer_done, Result}
            after 20000 -> exit(writer_stuck)
            end,
            [exit(interrupted) || Step =:= Stop];
       (_, _) ->
            ok
    end.

%% The routing race at its widest: a writer's transaction, begun while the
%% add copies, is let go once cleaning is done (or after 3 s, whichever
%% comes first), and only then deletes a key the add moves. Its delete is
%% acknowledged, so the key must end deleted: it routes with whichever
%% state the table has when it asks for its lock, and the fence restarts
%% it meanwhile.
late_lock_delete() ->
    Tab = safety_late_lock,
    {_Mod, _S, _S2, _N, K} = key_an_add_moves(Tab, safety_late_lock_aux),
    Self = self(),
    Writer = spawn_link(
               fun() ->
                       receive {begin_tx, From} -> ok end,
                       Result = mnesia:activity(
                                  transaction,
                                  fun() ->
                                          _ = mnesia:read(safety_late_lock_aux, K, read),
                                          first_run(From, 3000),
                                          mnesia:delete({Tab, K})
                                  end, [], mnesia_frag),
                       Self ! {writer, Result}
               end),
    ok = add_with_hook(Tab, fun(T, grow_copy) when T =:= Tab -> begin_writer(Writer);
                               (T, grow_done) when T =:= Tab -> Writer ! go;
                               (_, _) -> ok
                            end),
    receive {writer, WriterResult} -> ?assertEqual(ok, WriterResult) end,
    assert_gone(Tab, K).

%% A writer replaces a bag key's record (a delete, then a write, as the
%% torture's bag writer does) in a transaction begun before `Op' (an add or
%% a del), so older than its switch: the delete routes with the state from
%% before the switch and waits for the switch's lock on the fragment the
%% key leaves; the switch commits; the write routes with the new state,
%% into the fragment the key goes to, which holds the copy of the record
%% the delete took. A bag's write adds a record, so the key had two there
%% until cleaning applied both places' changes.
bag_split_writer(Op) ->
    Tab = list_to_atom("safety_bag_split_" ++ atom_to_list(Op)),
    Aux = list_to_atom(atom_to_list(Tab) ++ "_aux"),
    {atomic, ok} = mnesia:create_table(
                     Tab, [{type, bag}, {attributes, [key, val]},
                           {frag_properties, [{n_fragments, 3}, {hash_module, mnesia_frag_slots},
                                              {node_pool, [node()]}, {n_disc_copies, 1}]}]),
    ok = fraghash_test_support:fill(Tab, lists:seq(1, ?RECORDS), fun(I) -> I * 7 end),
    {atomic, ok} = mnesia:create_table(Aux, [{attributes, [key, val]}]),
    {Mod, S, N} = fraghash_frag:hash(Tab),
    %% A key that moves: into the new fragment, or out of the last one.
    Moves = case Op of
                add -> fun(K) -> Mod:key_to_frag_number(element(1, Mod:add_frag(S)), K) =:= N + 1 end;
                del -> fun(K) -> Mod:key_to_frag_number(S, K) =:= N end
            end,
    [K | _] = lists:filter(Moves, lists:seq(1, ?RECORDS)),
    Writer = older_writer(Aux, K,
                          fun() -> mnesia:delete({Tab, K}), mnesia:write({Tab, K, replaced}) end),
    ok = releasing(Tab, Op, Writer),
    ?assertEqual([{Tab, K, replaced}],
                 mnesia:activity(transaction, fun() -> mnesia:read({Tab, K}) end, [], mnesia_frag)),
    ?assertEqual(0, fraghash_frag:stale_copies(Tab)).

%% A key written just before an add's switch (its copy rounds are done) is
%% copied once more under the fence. A writer whose transaction began
%% while the add copied then writes the key, routed with the state from
%% before the switch, while the fence holds the donor; the add dies once
%% the switch committed, before cleaning. The writer restarts until the
%% fence is gone, then routes with the new state: recovery keeps its
%% value, and no stale copy is left.
last_copy_then_writer() ->
    Tab = safety_last_copy,
    {Mod, _S, S2, N, K} = key_an_add_moves(Tab, safety_last_copy_aux),
    Write = fun(V) -> fun() -> mnesia:write({Tab, K, V}) end end,
    Writer = older_writer(safety_last_copy_aux, K, Write(waited)),
    fraghash_frag:set_step_hook(
      fun(T, grow_copy) when T =:= Tab ->
              begin_writer(Writer);
         (T, grow_switch) when T =:= Tab ->
              %% A writer of its own: the operation's own writes are not
              %% watched.
              {P, R} = spawn_monitor(
                         fun() ->
                                 exit(mnesia:activity(transaction, Write(before_switch), [],
                                                      mnesia_frag))
                         end),
              receive {'DOWN', R, process, P, Wrote} -> ok = Wrote end;
         (T, grow_switch_locked) when T =:= Tab ->
              Writer ! go,
              timer:sleep(300);
         (T, grow_switched) when T =:= Tab ->
              exit(interrupted);
         (_, _) ->
              ok
      end),
    {Pid, Ref} = spawn_monitor(fun() -> fraghash_frag:add_frag(Tab, [node()]) end),
    receive {'DOWN', Ref, process, Pid, Why} -> ?assertEqual(interrupted, Why) end,
    fraghash_frag:set_step_hook(undefined),
    %% The writer committed (after the switch): its answer is in.
    receive {writer, WriterResult} -> ?assertEqual(ok, WriterResult) end,
    ok = fraghash_frag:recover(),
    ?assertEqual({Mod, S2, N + 1}, fraghash_frag:hash(Tab)),
    ?assertEqual([{Tab, K, waited}],
                 mnesia:activity(transaction, fun() -> mnesia:read({Tab, K}) end, [], mnesia_frag)),
    ?assertEqual(0, fraghash_frag:stale_copies(Tab)).

%% A writer's transaction, begun while an add copies, writes a key the add
%% moves just before the fence is asked for (routed with the state from
%% before the switch, so into its donor, whose key lock it then holds), and
%% commits half a second later. The fence must wait for it, so that its
%% write is copied last: a switch that did not would leave that write in
%% the donor for cleaning to delete.
open_writer() ->
    Tab = safety_open_writer,
    {_Mod, _S, _S2, _N, K} = key_an_add_moves(Tab, safety_open_writer_aux),
    Self = self(),
    Writer = spawn_link(
               fun() ->
                       receive {begin_tx, From} -> ok end,
                       R = mnesia:activity(
                             transaction,
                             fun() ->
                                     first_run(From, 20000),
                                     ok = mnesia:write({Tab, K, late}),
                                     [From ! {writer, wrote} || get(wrote) =:= undefined],
                                     put(wrote, true),
                                     timer:sleep(500)
                             end, [], mnesia_frag),
                       Self ! {writer, R}
               end),
    ok = add_with_hook(Tab, fun(T, grow_copy) when T =:= Tab ->
                                    begin_writer(Writer);
                               (T, grow_switch) when T =:= Tab ->
                                    Writer ! go,
                                    receive {writer, wrote} -> ok end;
                               (_, _) ->
                                    ok
                            end),
    receive {writer, WriterResult} -> ?assertEqual(ok, WriterResult) end,
    ?assertEqual([{Tab, K, late}],
                 mnesia:activity(transaction, fun() -> mnesia:read({Tab, K}) end, [], mnesia_frag)),
    ?assertEqual(0, fraghash_frag:stale_copies(Tab)).

%% Creates `Tab' (`mnesia_frag_slots', three `disc_copies' fragments,
%% filled) and a plain table `Aux' for an older writer; returns the hash
%% module, the state, the state after an add, the fragment count, and a
%% key of the table that the add moves into the new fragment.
key_an_add_moves(Tab, Aux) ->
    ok = create(Tab, mnesia_frag_slots, n_disc_copies),
    {atomic, ok} = mnesia:create_table(Aux, [{attributes, [key, val]}]),
    {Mod, S, N} = fraghash_frag:hash(Tab),
    {S2, _, _} = Mod:add_frag(S),
    [K | _] = [K || K <- lists:seq(1, ?RECORDS), Mod:key_to_frag_number(S2, K) =:= N + 1],
    {Mod, S, S2, N, K}.

%% A writer that runs `Ops()' through `mnesia_frag' in a transaction it
%% begins when the operation copies (`begin_writer/1', from the step hook),
%% once it gets `go', and sends its answer as `{writer, Answer}'.
older_writer(Aux, K, Ops) ->
    Self = self(),
    spawn_link(fun() -> Self ! {writer, waiting_transaction(Aux, K, Ops)} end).

%% Waits for `{begin_tx, From}', then runs `Ops()' through `mnesia_frag' in
%% a transaction that first reads `Aux' (holding no lock of the table
%% written), tells `From' `{writer, started}' and waits for `go' (the first
%% time its fun runs: Mnesia runs it again when it restarts the
%% transaction). Returns the activity's answer.
waiting_transaction(Aux, K, Ops) ->
    receive {begin_tx, From} -> ok end,
    mnesia:activity(transaction,
                    fun() ->
                            _ = mnesia:read(Aux, K, read),
                            first_run(From, 20000),
                            Ops()
                    end, [], mnesia_frag).

%% In a writer's transaction: the first time, tells `From' it began and
%% waits for `go' (up to `Ms'); later runs go on at once.
first_run(From, Ms) ->
    case get(racing_started) of
        undefined ->
            put(racing_started, true),
            From ! {writer, started},
            receive go -> ok after Ms -> ok end;
        true ->
            ok
    end.

%% From the step hook: lets `Writer' begin its transaction, and waits until
%% it has.
begin_writer(Writer) ->
    Writer ! {begin_tx, self()},
    receive {writer, started} -> ok end.

%% The step at which an operation copies, and the first after its fence
%% is gone, for its step under the fence.
copy_step(grow_switch_locked) -> grow_copy;
copy_step(grow_del_switch_locked) -> grow_del_copy.

released_step(grow_switch_locked) -> grow_clean;
released_step(grow_del_switch_locked) -> grow_del_drop.

%% Runs `Op' (`add' or `del') on `Tab' and lets `Writer' (`older_writer/3')
%% go while the switch holds its locks, so that it routes with the state
%% from before the switch and queues for them; its transaction must commit.
releasing(Tab, Op, Writer) ->
    Locked = case Op of
                 add -> grow_switch_locked;
                 del -> grow_del_switch_locked
             end,
    Copy = copy_step(Locked),
    fraghash_frag:set_step_hook(fun(T, Step) when T =:= Tab, Step =:= Copy ->
                                        begin_writer(Writer);
                                   (T, Step) when T =:= Tab, Step =:= Locked ->
                                        Writer ! go,
                                        timer:sleep(300);
                                   (_, _) ->
                                        ok
                                end),
    try ?assertEqual({atomic, ok}, run(Tab, Op))
    after fraghash_frag:set_step_hook(undefined)
    end,
    receive {writer, WriterResult} -> ?assertEqual(ok, WriterResult) end,
    ok.

%% Adds a fragment to `Tab' with `Hook' as the step hook.
add_with_hook(Tab, Hook) ->
    fraghash_frag:set_step_hook(Hook),
    try
        {atomic, ok} = fraghash_frag:add_frag(Tab, [node()]),
        ok
    after
        fraghash_frag:set_step_hook(undefined)
    end.

%% `K' is in no fragment of `Tab', and no record of it is misplaced.
assert_gone(Tab, K) ->
    ?assertEqual([], mnesia:activity(transaction, fun() -> mnesia:read({Tab, K}) end, [],
                                     mnesia_frag)),
    ?assertEqual(0, fraghash_frag:stale_copies(Tab)).

%% Runs Op in a process that dies at Step of Tab.
die_at(Tab, Step, Op) ->
    fraghash_frag:set_step_hook(fun(T, S) when T =:= Tab, S =:= Step -> exit(interrupted);
                                   (_, _) -> ok
                                end),
    {Pid, Ref} = spawn_monitor(Op),
    receive {'DOWN', Ref, process, Pid, Why} -> ?assertEqual(interrupted, Why) end,
    fraghash_frag:set_step_hook(undefined).

sizes(Tab) ->
    {_, _, N} = fraghash_frag:hash(Tab),
    [mnesia:table_info(fraghash_frag:frag_name(Tab, F), size) || F <- lists:seq(1, N)].

%% Runs Op with a step hook that kills the calling process at Step, then
%% recovers and checks; then runs the operation again.
interrupted(Mod, Copies, Op, Step) ->
    Tab = list_to_atom(lists:concat([safety_, Mod, "_", Copies, "_", Op, "_", Step])),
    ok = create(Tab, Mod, Copies),
    {atomic, ok} = fraghash_frag:add_frag(Tab, [node()]),
    ok = die_at(Tab, Step, fun() -> run(Tab, Op) end),
    %% The interrupted operation left its journal entry (every step comes
    %% after its first write; the global lock of the dead process is
    %% released by global).
    ?assert(lists:member(Tab, fraghash_journal:pending())),
    ok = fraghash_frag:recover(),
    ?assertEqual([], [T || T <- fraghash_journal:pending(), T =:= Tab]),
    {_, _, N} = fraghash_frag:hash(Tab),
    ?assert(N =:= 4 orelse N =:= 3 orelse N =:= 5),
    check(Tab, N),
    {atomic, ok} = run(Tab, Op),
    check(Tab, element(3, fraghash_frag:hash(Tab))).

run(Tab, add) -> fraghash_frag:add_frag(Tab, [node()]);
run(Tab, del) -> fraghash_frag:del_frag(Tab).

%% Every record once, in the fragment the hash module names, with its
%% value; no fragment table beyond the count.
check(Tab, N) ->
    {Mod, S, N} = fraghash_frag:hash(Tab),
    Rows = lists:append([[{K, F, V} || {_, K, V} <- mnesia:dirty_match_object(
                                                        fraghash_frag:frag_name(Tab, F),
                                                        {'_', '_', '_'})]
                         || F <- lists:seq(1, N)]),
    ?assertEqual(?RECORDS, length(Rows)),
    ?assertEqual(lists:seq(1, ?RECORDS), lists:sort([K || {K, _, _} <- Rows])),
    ?assertEqual([], [K || {K, F, V} <- Rows,
                           V =/= K * 7 orelse Mod:key_to_frag_number(S, K) =/= F]),
    ?assertNot(lists:member(fraghash_frag:frag_name(Tab, N + 1), mnesia:system_info(tables))).

%% A journal entry names one incarnation of a table: after the table is
%% deleted, recovery drops it (it used to stop on the missing table); after
%% the table is created again under the same name and fragment count,
%% recovery drops it too instead of applying it to the new table.
stale_journal() ->
    Tab = safety_stale_journal,
    ok = fraghash_journal:ensure(),
    ok = create(Tab, mnesia_frag_slots, n_disc_copies),
    Old = #{op => add, n => 3, donors => [Tab],
            moves => [{K, Tab, fraghash_frag:frag_name(Tab, 4), {Tab, K, K * 7}}
                      || K <- lists:seq(1, 50)]},
    ok = fraghash_journal:write(Tab, Old),
    {atomic, ok} = mnesia:delete_table(Tab),
    ?assertEqual(stale, fraghash_journal:read(Tab)),
    ?assertEqual(ok, fraghash_frag:recover()),
    ?assertEqual([], fraghash_journal:pending()),
    %% Written again, then the table deleted and created afresh.
    ok = create(Tab, mnesia_frag_slots, n_disc_copies),
    ok = fraghash_journal:write(Tab, Old),
    {atomic, ok} = mnesia:delete_table(Tab),
    ok = create(Tab, mnesia_frag_slots, n_disc_copies),
    ?assertEqual(ok, fraghash_frag:recover()),
    ?assertEqual([], fraghash_journal:pending()),
    check(Tab, 3),
    {atomic, ok} = mnesia:delete_table(Tab).

%% What the inspection and removal calls answer at the edges.
edges() ->
    Tab = safety_edges,
    ok = fraghash_test_support:create_frag(Tab, mnesia_frag_slots, 1, [{n_disc_copies, 1}]),
    ?assertMatch({aborted, {fraghash, last_fragment, _}}, fraghash_frag:del_frag(Tab)),
    {atomic, ok} = mnesia:create_table(safety_edges_plain, [{attributes, [key, val]}]),
    ok = mnesia:dirty_write({safety_edges_plain, 1, 2}),
    ?assertMatch(#{n_fragments := 1, records := 1}, fraghash_frag:distribution(safety_edges_plain)),
    ?assertMatch(#{hash_module := none, n_fragments := 1}, fraghash_frag:info(safety_edges_plain)),
    ?assertMatch({error, {fraghash, no_such_table, _}}, fraghash_frag:distribution(safety_missing)),
    ?assertMatch({error, {fraghash, no_such_table, _}}, fraghash_frag:info(safety_missing)),
    [{atomic, ok} = mnesia:delete_table(T) || T <- [Tab, safety_edges_plain]],
    ok.

%% A bag table (two records under most keys) through two adds and two
%% dels: every record stays, once, in the fragment of its key.
bag_table(Mod, Copies) ->
    Tab = list_to_atom(lists:concat([safety_bag_, Mod, "_", Copies])),
    {atomic, ok} = mnesia:create_table(
                     Tab, [{type, bag}, {attributes, [key, val]},
                           {frag_properties, [{n_fragments, 3}, {hash_module, Mod},
                                              {node_pool, [node()]}, {Copies, 1}]}]),
    Recs = lists:sort([{Tab, K, V} || K <- lists:seq(1, 1000), V <- [K, -K], V =/= 0 orelse K > 0,
                                      K rem 3 =/= 0 orelse V > 0]),
    ok = mnesia:activity(transaction, fun() -> lists:foreach(fun mnesia:write/1, Recs) end,
                         [], mnesia_frag),
    Check = fun(N) ->
                    {M, S, N} = fraghash_frag:hash(Tab),
                    Rows = lists:append(
                             [[{F, R} || R <- mnesia:dirty_match_object(
                                                fraghash_frag:frag_name(Tab, F), {Tab, '_', '_'})]
                              || F <- lists:seq(1, N)]),
                    ?assertEqual(Recs, lists:sort([R || {_, R} <- Rows])),
                    ?assertEqual([], [R || {F, {_, K, _} = R} <- Rows,
                                           M:key_to_frag_number(S, K) =/= F]),
                    ?assertEqual(none, fraghash_journal:read(Tab))
            end,
    Check(3),
    {atomic, ok} = fraghash_frag:add_frag(Tab, [node()]),
    Check(4),
    {atomic, ok} = fraghash_frag:add_frag(Tab, [node()]),
    Check(5),
    {atomic, ok} = fraghash_frag:del_frag(Tab),
    Check(4),
    {atomic, ok} = fraghash_frag:del_frag(Tab),
    Check(3),
    {atomic, ok} = mnesia:delete_table(Tab).

%% A step that raises (as a write into a full disc does) makes the call
%% return `{aborted, {fraghash, interrupted, Text}}' instead of raising;
%% recovery then leaves every record once, in its fragment, with its value,
%% and the operation runs again.
step_fails(Op, Step) ->
    Tab = list_to_atom(lists:concat([safety_fails_, Op, "_", Step])),
    ok = create(Tab, mnesia_frag_slots, n_disc_copies),
    {atomic, ok} = fraghash_frag:add_frag(Tab, [node()]),
    ok = fraghash_frag:set_step_hook(
           fun(T, S) when T =:= Tab, S =:= Step -> error({badmatch, {error, enospc}});
              (_, _) -> ok
           end),
    Result = try run(Tab, Op) after ok = fraghash_frag:set_step_hook(undefined) end,
    ?assertMatch({aborted, {fraghash, interrupted, _}}, Result),
    {aborted, {fraghash, interrupted, Text}} = Result,
    ?assertNotEqual(nomatch, string:find(Text, "fraghash_frag:recover/0")),
    ?assertEqual(ok, fraghash_frag:recover()),
    ?assertEqual(none, fraghash_journal:read(Tab)),
    {_, _, N} = fraghash_frag:hash(Tab),
    check(Tab, N),
    {atomic, ok} = run(Tab, Op),
    {_, _, N2} = fraghash_frag:hash(Tab),
    check(Tab, N2),
    {atomic, ok} = mnesia:delete_table(Tab).
