%% @doc The list of moved items an add keeps while it runs
%% (`fraghash_grow_moved'): the cleaning reads it instead of the donors,
%% falls back to reading the donors when the list is missing or damaged,
%% and no list outlives its run.
-module(fraghash_grow_moved_tests).

-include_lib("eunit/include/eunit.hrl").

-define(RECORDS, 4000).
-define(T, 120).

moved_test_() ->
    {setup, fun() -> fraghash_test_support:start_journaled("mnesia_grow_moved") end,
     fun fraghash_test_support:stop_mnesia/1,
     fun(Dir) ->
             {inorder,
              [{timeout, ?T, {"the list is read back whole, in order, and gone once closed",
                              fun() -> list_roundtrip(Dir) end}},
               {timeout, ?T, {"an add under writers cleans from the list: no stale copy, no "
                              "list left", fun() -> add_with(Dir, list) end}},
               {timeout, ?T, {"no list (its file cannot be made): the donors are read",
                              fun() -> add_with(Dir, no_list) end}},
               {timeout, ?T, {"a list damaged before the cleaning: the donors are read",
                              fun() -> add_with(Dir, damaged) end}},
               {timeout, ?T, {"recover/0 deletes lists no running operation owns",
                              fun() -> sweep(Dir) end}},
               {timeout, ?T, {"the cleaning's write-back runs while the dets server is held",
                              fun write_back/0}}]}
     end}.

list_roundtrip(Dir) ->
    ok = fraghash_grow_moved:open(roundtrip),
    Items = [{roundtrip_frag2, K} || K <- lists:seq(1, 1234)],
    ok = fraghash_grow_moved:note(lists:sublist(Items, 1000)),
    ok = fraghash_grow_moved:note(lists:nthtail(1000, Items)),
    ?assertEqual(1234, fraghash_grow_moved:count()),
    Moved = fraghash_grow_moved:take(),
    ?assertEqual(0, fraghash_grow_moved:count()),
    Self = self(),
    ok = fraghash_grow_moved:fold(Moved, fun(Chunk) -> Self ! {chunk, Chunk}, ok end),
    ?assertEqual(Items, lists:append(chunks())),
    ?assertEqual([list_file(roundtrip)], lists_in(Dir)),
    ok = fraghash_grow_moved:close(Moved),
    ?assertEqual([], lists_in(Dir)),
    %% Without a list, notes are dropped.
    ?assertEqual(none, fraghash_grow_moved:take()),
    ok = fraghash_grow_moved:note([{roundtrip, 1}]),
    ?assertEqual(0, fraghash_grow_moved:count()).

chunks() ->
    receive {chunk, C} -> [C | chunks()]
    after 0 -> []
    end.

%% An add of a `disc_only_copies' table under two writers that overwrite,
%% delete and write back keys (so some moving records exist only after the
%% bulk copy passed them: the list must hold what the rounds copied too).
%% `How' is what happens to the list: kept, never made, or damaged at the
%% switch. Either way no donor keeps a moved record, and every key holds
%% its last acknowledged value.
add_with(Dir, How) ->
    Tab = list_to_atom("moved_" ++ atom_to_list(How)),
    ok = fraghash_test_support:create_frag(Tab, mnesia_frag_slots, 4,
                                           [{n_disc_only_copies, 1}]),
    ok = fraghash_test_support:fill(Tab, lists:seq(1, ?RECORDS), fun(_) -> 0 end),
    File = filename:join(Dir, list_file(Tab)),
    Stop = atomics:new(1, []),
    Self = self(),
    Writers = [spawn_link(fun() -> writer(Self, Tab, Stop, W, #{}) end) || W <- [0, 1]],
    case How of
        no_list -> ok = file:make_dir(File);
        _ -> ok
    end,
    Damage = fun(T, grow_switched) when T =:= Tab ->
                     %% What the log still caches goes to the file first.
                     [Log] = [L || {fraghash_grow_moved, T1, _} = L <- disk_log:all(), T1 =:= Tab],
                     ok = disk_log:sync(Log),
                     {ok, Size} = file_size(File),
                     ?assert(Size > 1000),
                     {ok, F} = file:open(File, [read, write, raw, binary]),
                     ok = file:pwrite(F, Size div 2, binary:copy(<<255>>, 64)),
                     ok = file:close(F);
                (_, _) ->
                     ok
             end,
    [fraghash_frag:set_step_hook(Damage) || How =:= damaged],
    timer:sleep(100),
    Answer = try fraghash_frag:relieve(Tab, [node()], 1)
             after
                 fraghash_frag:set_step_hook(undefined)
             end,
    timer:sleep(100),
    ok = atomics:put(Stop, 1, 1),
    Last = lists:foldl(fun(W, Acc) -> receive {W, Seen} -> maps:merge(Acc, Seen) end end,
                       #{}, Writers),
    [ok = file:del_dir(File) || How =:= no_list],
    ?assertEqual({atomic, ok}, Answer),
    ?assertEqual(0, fraghash_frag:stale_copies(Tab)),
    Expected = maps:merge(maps:from_list([{K, 0} || K <- lists:seq(1, ?RECORDS)]), Last),
    Held = maps:from_list([{K, V} || {_, K, V} <- fraghash_test_support:frag_contents(Tab)]),
    ?assertEqual(maps:filter(fun(_, V) -> V =/= deleted end, Expected), Held),
    ?assertEqual([], lists_in(Dir)),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Writer `W' owns the keys K with K rem 2 =:= W among 1..?RECORDS * 2: it
%% writes them, and deletes some of those above ?RECORDS and writes them
%% back later.
writer(Parent, Tab, Stop, W, Seen) ->
    case atomics:get(Stop, 1) of
        1 ->
            Parent ! {self(), Seen};
        0 ->
            K0 = rand:uniform(?RECORDS * 2),
            K = K0 - (K0 rem 2) + W,
            V = erlang:unique_integer([positive]),
            Delete = K > ?RECORDS andalso rand:uniform(3) =:= 1,
            ok = mnesia:activity(transaction,
                                 fun() when Delete -> mnesia:delete({Tab, K});
                                    () -> mnesia:write({Tab, K, V})
                                 end, [], mnesia_frag),
            Seen2 = case Delete of
                        true -> Seen#{K => deleted};
                        false -> Seen#{K => V}
                    end,
            writer(Parent, Tab, Stop, W, Seen2)
    end.

sweep(Dir) ->
    Left = filename:join(Dir, list_file(left_by_a_kill)),
    ok = file:write_file(Left, <<"whatever a killed run wrote">>),
    ?assertEqual([list_file(left_by_a_kill)], lists_in(Dir)),
    ?assertEqual(ok, fraghash_frag:recover()),
    ?assertEqual([], lists_in(Dir)).

%% fraghash_durable:write_back/1, which the cleaning calls each second,
%% flushes a disc_only_copies file without asking its dets server (which
%% would make every writer of the table wait behind it): held, the server
%% does not hold the write-back up.
write_back() ->
    {atomic, ok} = mnesia:create_table(written_back, [{disc_only_copies, [node()]}]),
    ok = mnesia:activity(sync_dirty, fun() ->
                                             [mnesia:write({written_back, K, K})
                                              || K <- lists:seq(1, 500)],
                                             ok
                                     end),
    Server = dets:info(written_back, pid),
    ok = sys:suspend(Server),
    try
        {Pid, Ref} = spawn_monitor(fun() -> exit(fraghash_durable:write_back_here([written_back])) end),
        ?assertEqual(ok, receive {'DOWN', Ref, process, Pid, R} -> R after 10000 -> held end),
        {Pid2, Ref2} = spawn_monitor(fun() -> exit(fraghash_durable:write_back([written_back])) end),
        {Pid2, WriteBack} = receive {'DOWN', Ref2, process, Pid2, P} -> {Pid2, P} end,
        Ref3 = monitor(process, WriteBack),
        %% (noproc: it ended before it was watched.)
        ?assert(lists:member(receive {'DOWN', Ref3, process, WriteBack, R3} -> R3
                             after 10000 -> held
                             end, [normal, noproc]))
    after
        ok = sys:resume(Server)
    end,
    ?assertEqual(500, mnesia:table_info(written_back, size)).

list_file(Tab) ->
    "fraghash.moved." ++ atom_to_list(Tab).

lists_in(Dir) ->
    {ok, Names} = file:list_dir(Dir),
    lists:sort([N || "fraghash.moved." ++ _ = N <- Names]).

file_size(File) ->
    case file:read_file_info(File) of
        {ok, Info} -> {ok, element(2, Info)};
        Error -> Error
    end.
