%% The growth path's state machine (`fraghash_grow_machine'), without
%% Mnesia: the phases in order, what the schema shows, and the recovery
%% decision for every pair of phase and observation, each written out.
-module(fraghash_grow_machine_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_grow_machine, [phases/1, first_phase/1, next_phase/2, observe/3, recovery/3]).

phases_test() ->
    ?assertEqual([creating, copying, switching, cleaning], phases(add)),
    ?assertEqual([copying, switching, dropping], phases(del)),
    ?assertEqual([copying, switching, cleaning], phases(rehash)),
    ?assertEqual(creating, first_phase(add)),
    ?assertEqual(copying, first_phase(del)),
    ?assertEqual([copying, switching, cleaning, done],
                 [next_phase(add, P) || P <- phases(add)]),
    ?assertEqual([switching, dropping, done], [next_phase(del, P) || P <- phases(del)]),
    ?assertEqual([copying, dropping], phases(move)),
    ?assertEqual(copying, first_phase(move)),
    ?assertEqual([dropping, done], [next_phase(move, P) || P <- phases(move)]).

%% An add from 4 fragments, states `f' to `t'; a del from 4, the same.
observe_test() ->
    Add = {4, f, t},
    ?assertEqual(untouched, observe(add, Add, {f, 4})),
    ?assertEqual(hidden, observe(add, Add, {f, 5})),
    ?assertEqual(switched, observe(add, Add, {t, 5})),
    ?assertEqual(unexpected, observe(add, Add, {t, 4})),
    ?assertEqual(unexpected, observe(add, Add, {f, 6})),
    ?assertEqual(unexpected, observe(add, Add, {other, 5})),
    Del = {4, f, t},
    ?assertEqual(hidden, observe(del, Del, {f, 4})),
    ?assertEqual(switched, observe(del, Del, {t, 4})),
    ?assertEqual(dropped, observe(del, Del, {t, 3})),
    ?assertEqual(unexpected, observe(del, Del, {f, 3})),
    ?assertEqual(unexpected, observe(del, Del, {f, 5})),
    ?assertEqual(unexpected, observe(del, Del, {other, 4})),
    Rehash = {4, {ma, f}, {mb, t}},
    ?assertEqual(hidden, observe(rehash, Rehash, {{ma, f}, 4})),
    ?assertEqual(switched, observe(rehash, Rehash, {{mb, t}, 4})),
    ?assertEqual(unexpected, observe(rehash, Rehash, {{ma, t}, 4})),
    ?assertEqual(unexpected, observe(rehash, Rehash, {{mb, t}, 5})).

%% A move of a `disc_copies' replica from `a' to `c', the fragment also on
%% `b': every case the copies can show.
observe_move_test() ->
    Move = {a, c, disc_copies},
    ?assertEqual(untouched, observe(move, Move, [{a, disc_copies}, {b, disc_copies}])),
    ?assertEqual(copied, observe(move, Move, [{a, disc_copies}, {b, disc_copies},
                                              {c, disc_copies}])),
    ?assertEqual(moved, observe(move, Move, [{b, disc_copies}, {c, disc_copies}])),
    %% Neither copy: a copy lost, which no move does.
    ?assertEqual(unexpected, observe(move, Move, [{b, disc_copies}])),
    %% A copy of another storage type on either node.
    ?assertEqual(unexpected, observe(move, Move, [{a, disc_copies}, {c, ram_copies}])),
    ?assertEqual(unexpected, observe(move, Move, [{a, disc_only_copies}])),
    ?assertEqual(unexpected, observe(move, Move, [{c, redb_copies}])),
    ?assertEqual(copied, observe(move, {a, c, redb_copies}, [{a, redb_copies}, {c, redb_copies}])),
    %% A move onto the node it leaves is none.
    ?assertEqual(unexpected, observe(move, {a, a, disc_copies}, [{a, disc_copies}])).

%% Every phase an entry can name, against every observation, with the
%% action and why. A kill can land anywhere in a phase: before any of its
%% effects, between two, or after all of them (before the next phase is
%% written); each row is the state one of those leaves.
recovery_table() ->
    [%% add, creating: the hidden fragment's schema change committed or not.
     {add, creating, untouched, forget},     % killed before add_hidden committed
     {add, creating, hidden, rollback},      % after it: the fragment is dropped
     {add, creating, switched, unexpected},
     {add, creating, dropped, unexpected},
     %% add, copying: copies in the hidden fragment only.
     {add, copying, untouched, forget},      % a rollback dropped it, then a kill
     {add, copying, hidden, rollback},
     {add, copying, switched, unexpected},   % no switch before `switching'
     {add, copying, dropped, unexpected},
     %% add, switching: the switch committed or not.
     {add, switching, untouched, forget},    % an undo that a kill cut short
     {add, switching, hidden, rollback},     % fenced or copying last, not switched
     {add, switching, switched, clean},      % switched: go forward
     {add, switching, dropped, unexpected},
     %% add, cleaning: switched; deleting the donors' copies again is safe.
     {add, cleaning, untouched, unexpected},
     {add, cleaning, hidden, unexpected},
     {add, cleaning, switched, clean},
     {add, cleaning, dropped, unexpected},
     %% del, copying: copies hidden in the destinations.
     {del, copying, untouched, unexpected},
     {del, copying, hidden, rollback},
     {del, copying, switched, unexpected},
     {del, copying, dropped, unexpected},
     %% del, switching.
     {del, switching, untouched, unexpected},
     {del, switching, hidden, rollback},
     {del, switching, switched, drop},
     {del, switching, dropped, unexpected},  % the drop comes after `dropping'
     %% del, dropping: switched; the drop committed or not.
     {del, dropping, untouched, unexpected},
     {del, dropping, hidden, unexpected},
     {del, dropping, switched, drop},
     {del, dropping, dropped, finish},
     %% rehash: copies hidden in every fragment until the switch.
     {rehash, copying, untouched, unexpected},
     {rehash, copying, hidden, rollback},
     {rehash, copying, switched, unexpected},
     {rehash, copying, dropped, unexpected},
     {rehash, switching, untouched, unexpected},
     {rehash, switching, hidden, rollback},
     {rehash, switching, switched, clean},
     {rehash, switching, dropped, unexpected},
     {rehash, cleaning, untouched, unexpected},
     {rehash, cleaning, hidden, unexpected},
     {rehash, cleaning, switched, clean},
     {rehash, cleaning, dropped, unexpected},
     %% move, copying: the new copy added or not; added, it may not be
     %% loaded or durable yet, and the old one holds everything: undo.
     {move, copying, untouched, forget},     % killed before add_table_copy committed
     {move, copying, copied, rollback},      % after it: the new copy is deleted
     {move, copying, moved, unexpected},     % no old copy goes before `dropping'
     %% move, dropping: the new copy active and durable before the phase.
     {move, dropping, untouched, unexpected},% the new copy gone: not the move's doing
     {move, dropping, copied, drop},         % the old copy goes (again)
     {move, dropping, moved, finish}].       % its delete committed

recovery_test_() ->
    [{lists:concat([Op, " ", Phase, " ", Observed, " -> ", Action]),
      ?_assertEqual(Action, recovery(Op, Phase, Observed))}
     || {Op, Phase, Observed, Action} <- recovery_table()].

%% The table covers every phase of each operation against every
%% observation, `unexpected' included.
recovery_table_complete_test() ->
    Observations = fun(move) -> [untouched, copied, moved];
                      (_Grow) -> [untouched, hidden, switched, dropped]
                   end,
    Ops = [add, del, rehash, move],
    Expected = lists:sort([{Op, P, O} || Op <- Ops, P <- phases(Op), O <- Observations(Op)]),
    ?assertEqual(Expected, lists:sort([{Op, P, O} || {Op, P, O, _} <- recovery_table()])),
    [?assertEqual(unexpected, recovery(Op, P, unexpected)) || Op <- Ops, P <- phases(Op)].

%% Forward only once the switch can have committed: every action other than
%% undoing needs `switching' or later.
forward_only_after_switching_test() ->
    [?assert(lists:member(P, [switching, cleaning, dropping]))
     || {_Op, P, _O, A} <- recovery_table(), lists:member(A, [clean, drop, finish])].

%% A move deletes an old copy only in `dropping', which is written once the
%% new copies are active and durable: no recovery ever leaves a fragment
%% with fewer copies than it had (an old copy goes only where a new one is).
move_drops_old_copy_only_when_new_one_exists_test() ->
    [?assertEqual({P, O}, {dropping, copied})
     || {move, P, O, drop} <- recovery_table()],
    [?assertNotEqual(drop, recovery(move, copying, O)) || O <- [untouched, copied, moved]].
