%% EUnit tests of the change of a table's hash module
%% (`fraghash_frag:change_hash_module/2,3', a `rehash' of the growth path),
%% in real Mnesia on `disc_copies' and `disc_only_copies' tables:
%% <ul>
%% <li>under writers: every write that returned is what a read gives
%% afterwards and after a restart, every record where the new module places
%% it, the module and state the ones asked for;</li>
%% <li>stopped at each step, then recovered: before the switch the table is
%% as before (module included), after it as after the change; either way
%% every record reads back, and the change runs again;</li>
%% <li>the refusals: a module without the callbacks, a table with
%% foreign-key tables.</li>
%% </ul>
-module(fraghash_rehash_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [create_frag/4, fill/3]).

-define(RECORDS, 4000).
-define(T, 120).

rehash_test_() ->
    {setup, fun() -> fraghash_test_support:start_journaled("mnesia_rehash") end,
     fun fraghash_test_support:stop_mnesia/1,
     fun(_) ->
             {inorder,
              [{timeout, ?T, {lists:concat([From, " to ", To, " on ", Copies, " under writers"]),
                              fun() -> under_writers(From, To, Copies) end}}
               || {From, To} <- [{mnesia_frag_hash, mnesia_frag_slots},
                                 {mnesia_frag_slots, mnesia_frag_jump}],
                  Copies <- [n_disc_copies, n_disc_only_copies]]
              ++ [{timeout, ?T, {"stopped at " ++ atom_to_list(Step) ++ ", then recovered",
                                 fun() -> stopped_at(Step) end}}
                  || Step <- [grow_copy, grow_switch, grow_switch_locked, grow_switched,
                              grow_clean, grow_done]]
              ++ [{timeout, ?T, {"refusals", fun refusals/0}}]}
     end}.

%%% Under writers

under_writers(From, To, Copies) ->
    Tab = list_to_atom(lists:concat([rehash_, From, "_", To, "_", Copies])),
    ok = create_frag(Tab, From, 5, [{Copies, 1}]),
    ok = fill(Tab, lists:seq(1, ?RECORDS), fun(K) -> K end),
    %% The last value each writer's key was acknowledged with, per key.
    Acked = ets:new(acked, [public, set]),
    Stop = atomics:new(1, []),
    Writer = fun(W) ->
                     fun Loop(I) ->
                             case atomics:get(Stop, 1) of
                                 0 ->
                                     %% Keys of this writer only, so that the
                                     %% last acknowledged value is the value.
                                     K = rand:uniform(?RECORDS div 4) * 4 - W,
                                     V = {W, I},
                                     ok = mnesia:activity(
                                            transaction,
                                            fun() -> mnesia:write({Tab, K, V}) end, [], mnesia_frag),
                                     true = ets:insert(Acked, {K, V}),
                                     timer:sleep(1),
                                     Loop(I + 1);
                                 _ ->
                                     ok
                             end
                     end
             end,
    Writers = [spawn_monitor(fun() -> (Writer(W))(0) end) || W <- [0, 1, 2, 3]],
    timer:sleep(300),
    T0 = erlang:monotonic_time(millisecond),
    Answer = try fraghash_frag:change_hash_module(Tab, To)
             after
                 ok = atomics:put(Stop, 1, 1),
                 [receive {'DOWN', Ref, process, Pid, Why} -> ?assertEqual(normal, Why) end
                  || {Pid, Ref} <- Writers]
             end,
    fraghash_test_support:report("~s: rehash of ~b records in ~b ms under 4 writers, ~b keys "
                                 "written~n", [Tab, ?RECORDS, erlang:monotonic_time(millisecond) - T0,
                                               ets:info(Acked, size)]),
    ?assertEqual({atomic, ok}, Answer),
    Expected = expected(Tab, Acked),
    check(Tab, To, 5, Expected),
    stopped = mnesia:stop(),
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables(mnesia:system_info(tables), 30000),
    check(Tab, To, 5, Expected),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Every key's value: the last acknowledged, else the one it was filled with.
expected(Tab, Acked) ->
    [{Tab, K, case ets:lookup(Acked, K) of
                  [{K, V}] -> V;
                  [] -> K
              end} || K <- lists:seq(1, ?RECORDS)].

%% `Tab' has module `Mod' with the state Mnesia would give it at `N'
%% fragments, holds `Expected' (sorted), read by key and scanned, and every
%% record is where the module places it.
check(Tab, Mod, N, Expected) ->
    {Mod, State, N} = fraghash_frag:hash(Tab),
    ?assertEqual(fraghash_test_support:grow(Mod, Mod:init_state(Tab, undefined), N - 1), State),
    ?assertEqual(Expected, contents(Tab)),
    ?assertEqual(Expected, lists:append([read(Tab, K) || {_, K, _} <- Expected])),
    ?assertEqual(0, fraghash_frag:stale_copies(Tab)),
    ?assertEqual(length(Expected),
                 lists:sum([mnesia:table_info(fraghash_frag:frag_name(Tab, I), size)
                            || I <- lists:seq(1, N)])),
    ?assertEqual([], [O || #{table := T} = O <- fraghash_frag:operations(), T =:= Tab]).

%%% Stopped part way

stopped_at(Step) ->
    Tab = list_to_atom("rehash_stop_" ++ atom_to_list(Step)),
    ok = create_frag(Tab, mnesia_frag_hash, 4, [{n_disc_copies, 1}]),
    ok = fill(Tab, lists:seq(1, ?RECORDS), fun(K) -> K end),
    Before = contents(Tab),
    ok = fraghash_frag:set_step_hook(fun(T, St) when T =:= Tab, St =:= Step ->
                                             error(stopped_here);
                                        (_, _) -> ok
                                     end),
    try
        ?assertError(stopped_here, fraghash_grow:rehash(Tab, mnesia_frag_slots, undefined))
    after
        fraghash_frag:set_step_hook(undefined)
    end,
    ?assertEqual(ok, fraghash_frag:recover(Tab)),
    Switched = lists:member(Step, [grow_switched, grow_clean, grow_done]),
    case Switched of
        true -> check(Tab, mnesia_frag_slots, 4, Before);
        false -> check(Tab, mnesia_frag_hash, 4, Before)
    end,
    ?assertEqual({atomic, ok}, fraghash_frag:change_hash_module(Tab, mnesia_frag_jump)),
    check(Tab, mnesia_frag_jump, 4, Before),
    {atomic, ok} = mnesia:delete_table(Tab).

%%% Refusals

refusals() ->
    Tab = rehash_refused,
    ok = create_frag(Tab, mnesia_frag_hash, 3, [{n_disc_copies, 1}]),
    ok = fill(Tab, lists:seq(1, 100), fun(K) -> K end),
    ?assertMatch({aborted, {fraghash, bad_hash_module, _}},
                 fraghash_frag:change_hash_module(Tab, lists)),
    ?assertMatch({aborted, {fraghash, bad_hash_module, _}},
                 fraghash_frag:change_hash_module(Tab, "mnesia_frag_slots")),
    {atomic, ok} = mnesia:create_table(rehash_refused_fk,
                                       [{attributes, [key, val, mkey]},
                                        {frag_properties, [{foreign_key, {Tab, mkey}}]}]),
    ?assertMatch({aborted, {fraghash, rehash_foreign_keys, _}},
                 fraghash_frag:change_hash_module(Tab, mnesia_frag_slots)),
    ?assertMatch({mnesia_frag_hash, _, 3}, fraghash_frag:hash(Tab)),
    [{atomic, ok} = mnesia:delete_table(T) || T <- [rehash_refused_fk, Tab]].

%%% Helpers

contents(Tab) -> fraghash_test_support:frag_contents(Tab).

read(Tab, K) -> fraghash_test_support:frag_read(Tab, K).
