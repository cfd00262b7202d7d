%% @doc Foreign-key co-location in real Mnesia, for every fraghash hash
%% module: a table created with `{foreign_key, {Master, mkey}}' must keep
%% each record in the fragment number that holds its master's record for
%% the same key, whatever the master's history of adds, dels and relieves
%% before the foreigner was created, and through every change made to both
%% afterwards: `mnesia:change_table_frag/2' on `ram_copies' tables, which
%% Mnesia applies to the master and its foreigners in one schema
%% transaction, and the safe path (`fraghash_frag:add_frag/2', `del_frag/1',
%% `relieve/3') on `disc_copies' and `disc_only_copies' tables, which grows
%% them together too.
%% After every step each table holds every record written to it.
%%
%% The check reads where records physically are (each fragment table's
%% contents), not where the hash module says they are, so a misplaced
%% record cannot hide behind a lookup that agrees with it.
%%
%% Needs `FRAGHASH_TEST_DIR' (scripts/test-mnesia.sh sets it up).
-module(fraghash_colocation_tests).

-include_lib("eunit/include/eunit.hrl").

-define(MODULES, [mnesia_frag_slots, mnesia_frag_chash, mnesia_frag_jump, mnesia_frag_linear]).
-define(KEYS, 600).
-define(STEPS, 24).
-define(HISTORIES, 3).
-define(T, 300).

colocation_test_() ->
    {setup, fun setup/0, fun cleanup/1,
     fun(_) ->
             [{timeout, ?T, {lists:concat([M, " ", Storage, ": random histories, foreigners "
                                           "follow their master"]),
                             fun() -> histories(M, Storage) end}}
              || Storage <- [ram_copies, disc_copies, disc_only_copies], M <- ?MODULES]
             ++ [{timeout, ?T, {atom_to_list(M) ++ ": a foreigner created without {master, M} "
                                "follows from the next change on",
                                fun() -> late_follower(M) end}}
                 || M <- ?MODULES]
             ++ [{timeout, ?T, {"foreigners that cannot follow are refused with a reason",
                                fun refusals/0}}]
     end}.

setup() ->
    fraghash_test_support:start_mnesia("colocation_mnesia").

cleanup(Dir) ->
    fraghash_test_support:stop_mnesia(Dir).

%%% Random histories

%% For each of ?HISTORIES seeds: a master of 1..6 fragments, then ?STEPS
%% random steps (add, del, relieve for slots, a new foreigner, more
%% records), co-location and contents checked after every step.
histories(Mod, Storage) ->
    [history(Mod, Storage, Seed) || Seed <- lists:seq(1, ?HISTORIES)],
    ok.

history(Mod, Storage, Seed) ->
    rand:seed(exsss, {Seed, 17, erlang:phash2({Mod, Storage})}),
    Master = name(Mod, Seed, atom_to_list(Storage) ++ "_m"),
    ok = create_master(Master, Mod, rand:uniform(6), [], Storage),
    ok = write_master(Master, 1, ?KEYS),
    W0 = #{mod => Mod, master => Master, seed => Seed, foreigners => [], keys => ?KEYS,
           next_id => 1, log => [], storage => Storage, counts => #{}},
    W = lists:foldl(fun(I, Acc) -> step(I, Acc) end, W0, lists:seq(1, ?STEPS)),
    %% At least one foreigner existed through some changes.
    ?assertNotEqual([], maps:get(foreigners, W)),
    [{atomic, ok} = mnesia:delete_table(F) || F <- maps:get(foreigners, W)],
    {atomic, ok} = mnesia:delete_table(Master).

step(I, #{mod := Mod, master := Master, foreigners := Fs} = W) ->
    N = n_fragments(Master),
    Choices = [add, add, foreigner, write]
        ++ [del || N > 1]
        ++ [relieve || Mod =:= mnesia_frag_slots],
    Step = lists:nth(rand:uniform(length(Choices)), Choices),
    %% The first foreigner comes after some history.
    Step2 = case {Step, Fs, I} of
                {foreigner, [], I} when I < 4 -> add;
                {_, [], I} when I >= ?STEPS div 2 -> foreigner;
                _ -> Step
            end,
    W2 = do_step(Step2, W),
    Log = [{Step2, n_fragments(Master)} | maps:get(log, W2)],
    W3 = W2#{log := Log},
    check(W3),
    W3.

do_step(add, #{master := Master, storage := ram_copies} = W) ->
    {atomic, ok} = mnesia:change_table_frag(Master, {add_frag, [node()]}),
    W;
do_step(add, #{master := Master} = W) ->
    {atomic, ok} = fraghash_frag:add_frag(Master, [node()]),
    W;
do_step(del, #{master := Master, storage := ram_copies} = W) ->
    {atomic, ok} = mnesia:change_table_frag(Master, del_frag),
    W;
do_step(del, #{master := Master} = W) ->
    {atomic, ok} = fraghash_frag:del_frag(Master),
    W;
do_step(relieve, #{master := Master} = W) ->
    Which = rand:uniform(n_fragments(Master)),
    {atomic, ok} = fraghash_frag:relieve(Master, [node()], Which),
    W;
do_step(foreigner, #{mod := Mod, master := Master, seed := Seed, foreigners := Fs,
                     next_id := Id, storage := Storage, counts := Counts} = W)
  when length(Fs) < 3 ->
    F = name(Mod, Seed, lists:concat([Storage, "_f", length(Fs) + 1])),
    ok = create_foreigner(F, Master, Mod, [{master, Master}]),
    Last = Id + ?KEYS - 1,
    ok = write_foreigner(F, Id, Last, maps:get(keys, W)),
    W#{foreigners := Fs ++ [F], next_id := Last + 1, counts := Counts#{F => ?KEYS}};
do_step(foreigner, W) ->
    do_step(write, W);
do_step(write, #{master := Master, foreigners := Fs, keys := K, next_id := Id,
                 counts := Counts} = W) ->
    %% New master keys, and foreigner records on old and new keys.
    ok = write_master(Master, K + 1, K + 50),
    [ok = write_foreigner(F, Id, Id + 99, K + 50) || F <- Fs],
    W#{keys := K + 50, next_id := Id + 100,
       counts := maps:map(fun(_, C) -> C + 100 end, Counts)}.

%%% A foreigner created with no {master, M} after the master grew

late_follower(Mod) ->
    Master = name(Mod, 0, "late_m"),
    F = name(Mod, 0, "late_f"),
    %% More fragments than slots' donor bound (8), so that a change the
    %% master's placement alone asks for scans only some fragments; an add
    %% after a del, so that a ring's new fragment gets a fresh token.
    ok = create_master(Master, Mod, 12, [], ram_copies),
    ok = write_master(Master, 1, ?KEYS),
    Add = fun() -> {atomic, ok} = mnesia:change_table_frag(Master, {add_frag, [node()]}) end,
    Add(), Add(),
    {atomic, ok} = mnesia:change_table_frag(Master, del_frag),
    Add(),
    ok = create_foreigner(F, Master, Mod, []),
    ok = write_foreigner(F, 1, ?KEYS, ?KEYS),
    Misplaced = misplaced(Master, F),
    fraghash_test_support:report("~s late foreigner: ~b of ~b records misplaced before the next change~n",
                                 [Mod, Misplaced, ?KEYS]),
    %% info/1 tells, before any record says so.
    #{co_located := Told} = fraghash_frag:info(F),
    ?assertEqual(Told, Misplaced =:= 0),
    ?assertEqual(Mod =/= mnesia_frag_slots andalso Mod =/= mnesia_frag_chash, Told),
    %% Whatever the placement it started with, the next change makes the
    %% foreigner follow its master, moving every record it must.
    {atomic, ok} = mnesia:change_table_frag(Master, {add_frag, [node()]}),
    check(#{master => Master, foreigners => [F], log => late}),
    ?assertEqual(?KEYS, foreigner_count(F)),
    {atomic, ok} = mnesia:change_table_frag(Master, del_frag),
    check(#{master => Master, foreigners => [F], log => late}),
    ?assertEqual(state_digest(Master), state_digest(F)),
    {atomic, ok} = mnesia:delete_table(F),
    {atomic, ok} = mnesia:delete_table(Master).

%%% Refusals

refusals() ->
    M = refuse_m,
    ok = create_master(M, mnesia_frag_slots, 4, [{donors, 3}], ram_copies),
    {atomic, ok} = mnesia:change_table_frag(M, {add_frag, [node()]}),
    %% Options that contradict the master's.
    ?assertMatch({aborted, {fraghash, options_differ_from_master, _}},
                 create_foreigner_result(refuse_f1, M, mnesia_frag_slots,
                                         [{master, M}, {donors, 5}])),
    %% The master's own options, repeated: accepted.
    ok = create_foreigner(refuse_f2, M, mnesia_frag_slots, [{master, M}, {donors, 3}]),
    ?assertEqual(state_digest(M), state_digest(refuse_f2)),
    %% Another hash module than the master's.
    ?assertMatch({aborted, {fraghash, master_module_differs, _}},
                 create_foreigner_result(refuse_f3, M, mnesia_frag_chash, [{master, M}])),
    %% A foreigner on Mnesia's default module: Mnesia accepts it, but it
    %% cannot follow slots, so the master's next change is refused.
    ok = create_foreigner(refuse_f4, M, mnesia_frag_hash, undefined),
    Refused = mnesia:change_table_frag(M, {add_frag, [node()]}),
    ?assertMatch({aborted, {fraghash, foreigner_module_differs, _}}, Refused),
    {aborted, {fraghash, _, Text}} = Refused,
    ?assert(io_lib:printable_unicode_list(Text)),
    {atomic, ok} = mnesia:delete_table(refuse_f4),
    {atomic, ok} = mnesia:change_table_frag(M, {add_frag, [node()]}),
    ?assertEqual(state_digest(M), state_digest(refuse_f2)),
    %% A linear table's foreigner may use mnesia_frag_hash: same answers.
    ok = create_master(refuse_lin, mnesia_frag_linear, 3, [], ram_copies),
    ok = create_foreigner(refuse_lin_f, refuse_lin, mnesia_frag_hash, undefined),
    ok = write_master(refuse_lin, 1, 300),
    ok = write_foreigner(refuse_lin_f, 1, 300, 300),
    {atomic, ok} = mnesia:change_table_frag(refuse_lin, {add_frag, [node()]}),
    check(#{master => refuse_lin, foreigners => [refuse_lin_f], log => linear}),
    [{atomic, ok} = mnesia:delete_table(T) || T <- [refuse_lin_f, refuse_lin, refuse_f2, M]],
    ok.

%%% The check

%% Every foreigner record sits in the fragment number of its master's
%% record for the same key (every master key has a record), and the
%% master's records sit where its hash module says.
check(#{master := Master, foreigners := Fs} = W) ->
    Where = master_fragments(Master),
    ok = check_counts(W),
    [begin
         Bad = [{I, Rec} || {I, Rec} <- foreigner_records(F),
                            maps:get(element(3, Rec), Where) =/= I],
         case Bad of
             [] -> ok;
             _ -> ?assertEqual({F, maps:get(log, W), []},
                               {F, maps:get(log, W), lists:sublist(Bad, 5)})
         end,
         ?assertEqual(n_fragments(Master), n_fragments(F)),
         ?assertMatch(#{master := Master, co_located := true}, fraghash_frag:info(F))
     end || F <- Fs],
    ?assertEqual(0, fraghash_frag:stale_copies(Master)),
    ok.

%% Nothing lost, nothing left twice (in a history, which counts what it
%% wrote).
check_counts(#{master := Master, foreigners := Fs, keys := Keys, counts := Counts}) ->
    ?assertEqual(Keys, length(lists:append([mnesia:dirty_all_keys(
                                               fraghash_frag:frag_name(Master, I))
                                           || I <- lists:seq(1, n_fragments(Master))]))),
    [?assertEqual({F, maps:get(F, Counts)}, {F, foreigner_count(F)}) || F <- Fs],
    ok;
check_counts(_) ->
    ok.

%% How many of foreigner F's records are not beside their master record.
misplaced(Master, F) ->
    Where = master_fragments(Master),
    length([R || {I, R} <- foreigner_records(F), maps:get(element(3, R), Where) =/= I]).

%% Master key -> the fragment number whose table holds it.
master_fragments(Master) ->
    maps:from_list([{K, I} || I <- lists:seq(1, n_fragments(Master)),
                              K <- mnesia:dirty_all_keys(fraghash_frag:frag_name(Master, I))]).

%% {FragmentNumber, Record} for every record of a foreigner.
foreigner_records(F) ->
    [{I, R} || I <- lists:seq(1, n_fragments(F)),
               Frag <- [fraghash_frag:frag_name(F, I)],
               R <- mnesia:dirty_match_object(Frag, mnesia:table_info(Frag, wild_pattern))].

foreigner_count(F) ->
    length(foreigner_records(F)).

%%% Tables

name(Mod, Seed, Suffix) ->
    list_to_atom(lists:concat(["co_", Mod, "_", Seed, "_", Suffix])).

create_master(Tab, Mod, N, HashState, Storage) ->
    Copies = case Storage of
                 ram_copies -> n_ram_copies;
                 disc_copies -> n_disc_copies;
                 disc_only_copies -> n_disc_only_copies
             end,
    fraghash_test_support:create_frag(Tab, Mod, N, [{hash_state, HashState}, {Copies, 1}]).

create_foreigner(F, Master, Mod, HashState) ->
    {atomic, ok} = create_foreigner_result(F, Master, Mod, HashState),
    ok.

create_foreigner_result(F, Master, Mod, HashState) ->
    mnesia:create_table(F, [{attributes, [id, mkey, val]},
                            {frag_properties, [{foreign_key, {Master, mkey}},
                                               {hash_module, Mod},
                                               {hash_state, HashState}]}]).

write_master(Tab, From, To) ->
    fraghash_test_support:fill(Tab, lists:seq(From, To), fun(K) -> -K end).

%% Records `From..To' of foreigner `F', each on a random master key of
%% 1..`Keys'.
write_foreigner(F, From, To, Keys) ->
    Recs = [{F, Id, rand:uniform(Keys), Id} || Id <- lists:seq(From, To)],
    mnesia:activity(transaction, fun() -> [ok = mnesia:write(R) || R <- Recs], ok end,
                    [], mnesia_frag).

n_fragments(Tab) ->
    {n_fragments, N} = lists:keyfind(n_fragments, 1, mnesia:table_info(Tab, frag_properties)),
    N.

state_digest(Tab) ->
    {hash_state, S} = lists:keyfind(hash_state, 1, mnesia:table_info(Tab, frag_properties)),
    {ok, Decoded} = fraghash_state:decode(S),
    element(6, Decoded).
