%% @doc EUnit tests of `fraghash_tab:select/3' and `fold/5', the growth
%% path's reading of a fragment, in real Mnesia: on `disc_only_copies' (read
%% from the dets file slot by slot, not fixed) and on `disc_copies' (through
%% Mnesia), select returns what `mnesia:dirty_select/2' does, filtered; on
%% dets, while a writer inserts and deletes other keys as fast as it can
%% (which rewrites the dets slots those keys share with the listed ones,
%% and grows the file), every key there before and untouched is listed; and
%% a fold that deletes in the fragment it reads sees every key and leaves
%% the file unfixed.
%%
%% Needs `FRAGHASH_TEST_DIR'; `scripts/test-mnesia.sh' sets it up.
-module(fraghash_tab_select_tests).

-include_lib("eunit/include/eunit.hrl").

-define(KEYS, 30000).

select_test_() ->
    {setup, fun() -> fraghash_test_support:start_mnesia("tab_select") end,
     fun fraghash_test_support:stop_mnesia/1,
     fun(_Dir) ->
             {inorder,
              [{timeout, 120, {atom_to_list(S) ++ ": as dirty_select, filtered",
                               fun() -> as_dirty_select(S) end}}
               || S <- [disc_only_copies, disc_copies]]
              ++ [{timeout, 600, {"disc_only_copies: every untouched key once, under a writer",
                                  fun under_writer/0}},
                  {timeout, 120, {"fold/5 of a dets fragment: the file is not fixed, every "
                                  "key is seen, the reader's deletes all land",
                                  fun at_reader/0}}]}
     end}.

create(Tab, Storage) ->
    {atomic, ok} = mnesia:create_table(Tab, [{attributes, [key, val]}, {Storage, [node()]}]),
    Val = binary:copy(<<"v">>, 200),
    mnesia:activity(async_dirty,
                    fun() -> [mnesia:write({Tab, K, Val}) || K <- lists:seq(1, ?KEYS)], ok end),
    ok.

key_spec(Tab) ->
    [{{Tab, '$1', '_'}, [], ['$1']}].

as_dirty_select(Storage) ->
    Tab = list_to_atom("select_" ++ atom_to_list(Storage)),
    ok = create(Tab, Storage),
    Even = fun(K) -> K rem 2 =:= 0 end,
    ?assertEqual(lists:sort(mnesia:dirty_select(Tab, key_spec(Tab))),
                 lists:sort(fraghash_tab:select(Tab, key_spec(Tab), fun(_) -> true end))),
    ?assertEqual([K || K <- lists:seq(1, ?KEYS), Even(K)],
                 lists:sort(fraghash_tab:select(Tab, key_spec(Tab), Even))),
    Pairs = [{'_', [], [{{{element, 2, '$_'}, {element, 3, '$_'}}}]}],
    ?assertEqual(?KEYS, length(fraghash_tab:select(Tab, Pairs, fun({_K, V}) -> is_binary(V) end))),
    {atomic, ok} = mnesia:delete_table(Tab).

under_writer() ->
    Tab = select_churned,
    ok = create(Tab, disc_only_copies),
    Stop = atomics:new(1, []),
    Writer = spawn_link(fun() -> churn(Tab, Stop, ?KEYS + 1, 0) end),
    Listed = [fraghash_tab:select(Tab, key_spec(Tab), fun(K) -> K =< ?KEYS end)
              || _ <- lists:seq(1, 2)],
    ok = atomics:put(Stop, 1, 1),
    Ref = monitor(process, Writer),
    receive {'DOWN', Ref, process, Writer, _} -> ok end,
    %% Counted, not compared whole: a failure prints a number. (A key the
    %% growing file moves to a later slot may be listed twice.)
    [?assertEqual({missing, 0}, {missing, ?KEYS - length(lists:usort(L))}) || L <- Listed].

%% A fixed dets table serves one request at a time and makes each of a
%% process other than the fixer wait 1 ms: a fold of a dets fragment must
%% not fix it. Here `AtReader' deletes the odd keys of each chunk and
%% reports whether the file is fixed; every key is seen, every delete lands.
at_reader() ->
    Tab = select_at_reader,
    ok = create(Tab, disc_only_copies),
    Spec = key_spec(Tab),
    Owner = self(),
    AtReader = fun(Keys) ->
                       Fixed = dets:info(Tab, safe_fixed_monotonic_time),
                       Odd = [K || K <- Keys, K rem 2 =:= 1],
                       mnesia:activity(sync_dirty, fun() -> [mnesia:delete({Tab, K}) || K <- Odd] end),
                       {Fixed, self() =/= Owner, Keys}
               end,
    Reports = fraghash_tab:fold(Tab, Spec, AtReader, fun(R, Acc) -> [R | Acc] end, []),
    ?assertEqual([{false, true}], lists:usort([{Fixed, Apart} || {Fixed, Apart, _} <- Reports])),
    ?assertEqual(lists:seq(1, ?KEYS), lists:usort(lists:append([Ks || {_, _, Ks} <- Reports]))),
    ?assertEqual(lists:seq(2, ?KEYS, 2), lists:sort(mnesia:dirty_all_keys(Tab))).

%% Inserts keys beyond ?KEYS and deletes them again, 2,000 at a time,
%% until told to stop.
churn(Tab, Stop, From, Round) ->
    case atomics:get(Stop, 1) of
        1 ->
            ok;
        0 ->
            Keys = lists:seq(From, From + 1999),
            [ok = mnesia:dirty_write({Tab, K, binary:copy(<<"w">>, 100 + Round rem 300)})
             || K <- Keys],
            [ok = mnesia:dirty_delete(Tab, K) || K <- Keys, K rem 3 =/= 0],
            churn(Tab, Stop, From + 2000, Round + 1)
    end.
