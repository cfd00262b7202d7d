%% @doc EUnit tests of the hash state and its Erlang lookup without Mnesia
%% (the fast tier): states made by the NIF's own calls (`fresh_state',
%% `add_frag', `split_frag', `del_frag', as the hash modules make them),
%% encoded as Mnesia would hold them.
%% <ul>
%% <li>codec: every state decodes back to what was encoded; damaged,
%% truncated and foreign terms are refused with a reason, never a
%% crash;</li>
%% <li>lookup against the core: for every scheme, after every step of a
%% table grown from 3 to 40 fragments (slots relieving one fragment on the
%% way) and shrunk back to 3, the Erlang lookup
%% (`fraghash_lookup:locate_hash/2', the code the hash modules compile in)
%% answers as the core does through the NIF at every probe of
%% `fraghash_lookup_tests:probes/2' (both ends of every slot and bucket,
%% both sides of every change of owner, 2,000 pseudo-random hashes).</li>
%% </ul>
%% Mnesia is not started; the NIF is loaded as the application loads it.
-module(fraghash_state_tests).

-include_lib("eunit/include/eunit.hrl").
-include("fraghash.hrl").

-define(SCHEMES, [{slots, <<"slots">>}, {chash, <<"ring:100">>}, {jump, <<"jump">>},
                  {linear, <<"linear">>}]).

state_test_() ->
    [{timeout, 120, {atom_to_list(Scheme) ++ ": codec and lookup = core, 3 -> 40 -> 3",
                     fun() -> grow_shrink(Scheme, Spec) end}}
     || {Scheme, Spec} <- ?SCHEMES]
    ++ [{"the hash modules follow the NIF's table of schemes", fun schemes_agree_with_the_nif/0},
        {"damaged and foreign states are refused", fun damaged/0},
        {timeout, 120, {"slots: 8,191 fragments at most", fun slots_limit/0}}].

grow_shrink(Scheme, Spec) ->
    Tab = list_to_atom("state_tests_" ++ atom_to_list(Scheme)),
    {D, B} = fraghash_nif:fresh_state(Spec, 3, []),
    S0 = #fraghash_state{scheme = Scheme, table = Tab, n = 3, opts = [], digest = D, bytes = B},
    check(S0),
    Grown = lists:foldl(fun(I, S) -> check(add(S, I)) end, S0, lists:seq(4, 40)),
    ?assertEqual(40, Grown#fraghash_state.n),
    Shrunk = lists:foldl(fun(_, S) -> check(del(S)) end, Grown, lists:seq(4, 40)),
    ?assertEqual(3, Shrunk#fraghash_state.n).

%% One add_frag; slots relieves its second fragment at the tenth.
add(#fraghash_state{scheme = slots, digest = D, bytes = B, n = N} = S, 10) ->
    {D2, B2, Iter, [New]} = fraghash_nif:split_frag(D, B, 2),
    ?assertEqual({[2], N + 1}, {Iter, New}),
    S#fraghash_state{n = N + 1, digest = D2, bytes = B2};
add(#fraghash_state{digest = D, bytes = B, n = N} = S, _I) ->
    {D2, B2, Iter, [New]} = fraghash_nif:add_frag(D, B, 1, 8),
    ?assert(lists:all(fun(F) -> F >= 1 andalso F =< N end, Iter)),
    ?assertEqual(N + 1, New),
    S#fraghash_state{n = N + 1, digest = D2, bytes = B2}.

del(#fraghash_state{digest = D, bytes = B, n = N} = S) ->
    {D2, B2, Iter, _Lock} = fraghash_nif:del_frag(D, B),
    ?assertEqual([N], Iter),
    S#fraghash_state{n = N - 1, digest = D2, bytes = B2}.

%% The state as Mnesia holds it decodes to `R'; its Erlang lookup answers
%% as the core at every probe.
check(#fraghash_state{scheme = Scheme, n = N, digest = D, bytes = B} = R) ->
    S = fraghash_mnesia:encode(R),
    ?assertEqual({ok, R}, fraghash_state:decode(S)),
    Bad = [{H, E, C} || H <- fraghash_lookup_tests:probes(R, S),
                        E <- [fraghash_lookup:locate_hash(S, H)],
                        C <- [core(D, B, H)],
                        E =/= C],
    ?assertEqual({Scheme, N, []}, {Scheme, N, lists:sublist(Bad, 5)}),
    R.

%% The core's answer through the NIF: its cached scheme, built on a dirty
%% scheduler on a miss.
core(D, B, H) ->
    case fraghash_nif:locate(D, H) of
        miss -> fraghash_nif:load_locate(D, B, H);
        F -> F
    end.

damaged() ->
    {D, B} = fraghash_nif:fresh_state(<<"slots">>, 8, []),
    S = fraghash_mnesia:encode(#fraghash_state{scheme = slots, table = t, n = 8, opts = [],
                                               digest = D, bytes = B}),
    {ok, _} = fraghash_state:decode(S),
    %% Every truncation of the head, the table name, the options or the
    %% recipe is refused. The lookup words after them are not checked:
    %% only the encoder writes them, from the recipe.
    <<"fh", 1, _:8, _:128, _:32, ?FRAGHASH_INLINE_SLOT_WORDS, _:32, Z:32, _/binary>> = S,
    [?assertMatch({error, _}, fraghash_state:decode(binary:part(S, 0, Len)))
     || Len <- lists:seq(0, Z - 1)],
    %% One byte of the recipe changed: its digest no longer matches.
    <<Head:50/binary, Byte, Rest/binary>> = S,
    ?assertMatch({error, _}, fraghash_state:decode(<<Head/binary, (Byte bxor 1), Rest/binary>>)),
    %% Terms that are not states at all.
    [?assertEqual({error, not_a_fraghash_state}, fraghash_state:decode(T))
     || T <- [undefined, [], {frag_hash, 1, 2}, <<>>, <<"fh">>, 42]],
    %% The hash modules turn a bad state into an abort with a reason.
    ?assertExit({aborted, {bad_hash_state, _}},
                mnesia_frag_slots:match_spec_to_frag_numbers(<<"fh", 9>>, [])),
    %% A state of one scheme with another scheme's lookup kind.
    {DL, BL} = fraghash_nif:fresh_state(<<"linear">>, 8, []),
    L = fraghash_mnesia:encode(#fraghash_state{scheme = linear, table = t, n = 8, opts = [],
                                               digest = DL, bytes = BL}),
    <<LHead:2/binary, Layout, _:8, LRest/binary>> = L,
    [?assertEqual({error, bad_layout},
                  fraghash_state:decode(<<LHead/binary, Layout, Code:8, LRest/binary>>))
     || Code <- [1, 2, 3]],
    ok.

%% A slots table holds at most 8,191 fragments (the owner field of its
%% words): the state of one more is refused with a reason, the largest is
%% encoded and answers as the core.
slots_limit() ->
    {D, B} = fraghash_nif:fresh_state(<<"slots">>, 8192, []),
    ?assertExit({aborted, {fraghash, too_many_fragments, _}},
                fraghash_mnesia:encode(#fraghash_state{scheme = slots, table = t, n = 8192,
                                                       opts = [], digest = D, bytes = B})),
    {D1, B1} = fraghash_nif:fresh_state(<<"slots">>, 8191, []),
    R = #fraghash_state{scheme = slots, table = t, n = 8191, opts = [], digest = D1, bytes = B1},
    S = fraghash_mnesia:encode(R),
    ?assertEqual({ok, R}, fraghash_state:decode(S)),
    rand:seed(exsss, {1, 2, 3}),
    Bad = [H || H <- [rand:uniform(1 bsl 32) - 1 || _ <- lists:seq(1, 20000)],
                fraghash_lookup:locate_hash(S, H) =/= core(D1, B1, H)],
    ?assertEqual([], Bad).

%% The NIF's table of schemes (crates/fraghash-nif/src/schemes.rs) is the one
%% the Erlang side follows: each scheme's hash module makes states with the
%% table's code in their header and the table's core scheme in their recipe,
%% the application has a hash module for every scheme of the table and none
%% beside, and this module's own list of schemes names the same ones.
schemes_agree_with_the_nif() ->
    Table = fraghash_nif:schemes(),
    ?assertMatch([_, _, _, _], Table),
    lists:foreach(
      fun({Name, Code, Core, _CoreTag}) ->
              Mod = list_to_atom("mnesia_frag_" ++ atom_to_list(Name)),
              S = Mod:init_state(schemes_test, []),
              <<"fh", _Layout, C:8, _/binary>> = S,
              ?assertEqual({Name, Code}, {Name, C}),
              {ok, #fraghash_state{scheme = Name, digest = D, bytes = B}} =
                  fraghash_state:decode(S),
              #{spec := Spec} = fraghash_nif:info(D, B),
              ?assertEqual({Name, Core}, {Name, hd(binary:split(Spec, <<":">>))})
      end, Table),
    ok = case application:load(fraghash) of
             ok -> ok;
             {error, {already_loaded, fraghash}} -> ok
         end,
    {ok, Mods} = application:get_key(fraghash, modules),
    HashMods = [M || M <- Mods, lists:prefix("mnesia_frag_", atom_to_list(M))],
    ?assertEqual(lists:sort([list_to_atom("mnesia_frag_" ++ atom_to_list(N))
                             || {N, _, _, _} <- Table]),
                 lists:sort(HashMods)),
    ?assertEqual(lists:sort([{N, Core} || {N, _, Core, _} <- Table]),
                 lists:sort([{N, hd(binary:split(Spec, <<":">>))} || {N, Spec} <- ?SCHEMES])).
