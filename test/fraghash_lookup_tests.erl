%% @doc EUnit tests of the lookup without a NIF call (include/
%% fraghash_lookup.hrl, fraghash_lookup): the Erlang
%% lookup of slots, chash and linear answers as the core (through the NIF's
%% locate) at every slot or segment boundary after every step of 8 -> 64 ->
%% 8 fragments in real Mnesia, and publishing stays bounded and safe under
%% concurrent misses.
%%
%% Needs the environment variable `FRAGHASH_TEST_DIR' (a scratch
%% directory); `scripts/test-mnesia.sh' sets it. Mnesia runs with a RAM
%% schema here, so this module does not depend on the disc schema of
%% fraghash_mnesia_tests.
-module(fraghash_lookup_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, grow/3, inline_kind/1]).

-export([probes/2]).
-include("fraghash.hrl").

-define(CONVERTED, [mnesia_frag_slots, mnesia_frag_chash, mnesia_frag_linear]).
%% Pseudo-random hashes checked per state, besides the boundaries.
-define(RANDOM, 2000).
-define(T, 300).

lookup_test_() ->
    {setup, fun setup/0, fun cleanup/1,
     fun(_) ->
             {inorder,
              [{timeout, ?T, {atom_to_list(M) ++ ": Erlang lookup = core, 8 -> 64 -> 8",
                              fun() -> grow_shrink(M) end}}
               || M <- ?CONVERTED]
              ++ [{timeout, ?T, {"jump: the NIF answers, named by its published marker",
                                 fun jump_through_nif/0}},
                  {timeout, ?T, {"chash of 10,000 and 40,000 points: the published lookup = core",
                                 fun many_points/0}},
                  {timeout, ?T, {"concurrent misses: right answers, published",
                                 fun concurrent_misses/0}},
                  {timeout, ?T, {"a foreign term under the key falls back to the NIF",
                                 fun foreign_entry/0}}]}
     end}.

setup() ->
    Dir = filename:join(scratch(), "mnesia_lookup_" ++ atom_to_list(node())),
    WasRunning = mnesia:system_info(is_running) =:= yes,
    case WasRunning of
        true -> ok;
        false ->
            ok = application:set_env(mnesia, dir, Dir),
            ok = mnesia:start()
    end,
    WasRunning.

cleanup(true) -> ok;
cleanup(false) -> stopped = mnesia:stop(), ok.

%%% 8 -> 64 -> 8 fragments, checking every state.

grow_shrink(Mod) ->
    Tab = list_to_atom("lookup_" ++ atom_to_list(Mod)),
    {atomic, ok} = mnesia:create_table(Tab, [{attributes, [k, v]},
                                             {frag_properties,
                                              [{n_fragments, 8}, {hash_module, Mod},
                                               {node_pool, [node()]}]}]),
    %% A few records, so that every add_frag and del_frag moves some, and
    %% looks keys up in the new state inside the schema transaction.
    ok = mnesia:activity(async_dirty,
                         fun() -> [mnesia:write({Tab, I, I}) || I <- lists:seq(1, 2000)], ok end,
                         [], mnesia_frag),
    check_state(Tab),
    [begin
         {atomic, ok} = mnesia:change_table_frag(Tab, {add_frag, [node()]}),
         check_state(Tab)
     end || _ <- lists:seq(9, 64)],
    [begin
         {atomic, ok} = mnesia:change_table_frag(Tab, del_frag),
         check_state(Tab)
     end || _ <- lists:seq(9, 64)],
    %% Every record is where the Erlang lookup says.
    {_, S, 8} = fraghash_frag:hash(Tab),
    ?assertEqual(2000, length(lists:append(
                                [[K || K <- mnesia:dirty_all_keys(frag(Tab, F)),
                                       Mod:key_to_frag_number(S, K) =:= F]
                                 || F <- lists:seq(1, 8)]))),
    %% 113 states were published; the table keeps two.
    ?assert(length([T || {T, _, _} <- fraghash_lookup:published(), T =:= Tab]) =< 2),
    {atomic, ok} = mnesia:delete_table(Tab).

%% The current state of `Tab': the Erlang lookup (published, not the NIF)
%% answers as the NIF's locate at every probe.
check_state(Tab) ->
    {Mod, S, N} = fraghash_frag:hash(Tab),
    {ok, #fraghash_state{digest = D, bytes = B, n = N} = R} = fraghash_state:decode(S),
    _ = Mod:key_to_frag_number(S, first),
    %% Carried in the state, or published on first use.
    ?assert(inline_kind(S) =/= ?FRAGHASH_INLINE_NONE
            orelse lists:keymember(key(D), 2, fraghash_lookup:published())),
    Bad = [{H, E, C} || H <- probes(R, S),
                        E <- [fraghash_lookup:locate_hash(S, H)],
                        C <- [core(D, B, H)],
                        E =/= C],
    ?assertEqual({Mod, N, []}, {Mod, N, lists:sublist(Bad, 5)}).

%% The core's answer, through the NIF (its cached scheme: the normal
%% scheduler's locate, building the scheme on a dirty one on a miss).
core(D, B, H) ->
    case fraghash_nif:locate(D, H) of
        miss -> fraghash_nif:load_locate(D, B, H);
        F -> F
    end.

%% The hashes to check: both ends of every slot (slots); the first and last
%% hash of every bucket of the lookup, carried (slots) or published
%% (chash), and both sides of every point inside a bucket where the owner
%% changes;
%% the low hashes where linear's two branches meet; and ?RANDOM
%% pseudo-random ones (fixed seed).
probes(#fraghash_state{scheme = Scheme, digest = D}, S) ->
    {K, Check} = fraghash_state:key_of_digest(D),
    rand:seed(exsss, {11, 22, 33}),
    Random = [rand:uniform(1 bsl 32) - 1 || _ <- lists:seq(1, ?RANDOM)],
    Slots = case Scheme of
                slots ->
                    #{slot_bits := Bits} = fraghash_mnesia:info(S),
                    Shift = 32 - Bits,
                    lists:append([[I bsl Shift, ((I + 1) bsl Shift) - 1]
                                  || I <- lists:seq(0, (1 bsl Bits) - 1)]);
                _ ->
                    []
            end,
    Table = case S of
                <<"fh", 1, _:8, _:128, _:32, ?FRAGHASH_INLINE_SLOT_WORDS, Buckets:16,
                  PerBucket:16, Off:32, _/binary>> ->
                    slot_word_probes(Buckets, PerBucket, Off, S);
                <<"fh", 1, _:8, _:128, Nl:32, ?FRAGHASH_INLINE_LOW_BITS, _Mask:32, Half:32,
                  _/binary>> ->
                    lists:seq(0, 4 * max(Half, Nl));
                _ ->
                    case persistent_term:get(K, miss) of
                        {fraghash_words, Check, Shift2, Words, _, _} ->
                            word_probes(Shift2, 0, Words);
                        _ ->
                            []
                    end
            end,
    Random ++ Slots ++ Table.

%% The first and last hash of every bucket of a word lookup (words from
%% byte `Base' of `Bin'), and both sides of every segment start inside one
%% (see the NIF's lookup_words).
word_probes(Shift, Base, Bin) ->
    N = 1 bsl (32 - Shift),
    OBits = 30 - Shift,
    OffMask = (1 bsl Shift) - 1,
    <<_:Base/binary, Buckets:N/binary-unit:32, _/binary>> = Bin,
    lists:append(
      [begin
           First = I bsl Shift,
           Inside = if
                        E < 16#80000000 -> [];
                        E < 16#C0000000 -> [First + ((E bsr OBits) band OffMask)];
                        true ->
                            overflow_starts(Bin, Base + 4 * (E band 16#3FFFFFFF))
                    end,
           [First, First + OffMask | lists:append([[X - 1, X] || X <- Inside])]
       end || {I, E} <- lists:zip(lists:seq(0, N - 1), [E || <<E:32>> <= Buckets])]).

%% The segment starts of the overflow record at byte `J' of `Bin'.
overflow_starts(Bin, J) ->
    <<_:J/binary, _:32, K:32, Pairs:K/binary-unit:64, _/binary>> = Bin,
    [Start || <<Start:32, _:32>> <= Pairs].

%% The first and last hash of every bucket of a slot-word lookup
%% (words from byte `Base' of `Bin', `Buckets' buckets of `PerBucket'
%% slots), and both sides of every segment start inside one.
slot_word_probes(Buckets, PerBucket, Base, Bin) ->
    Size = (1 bsl 32) div Buckets,
    SlotSize = Size div PerBucket,
    <<_:Base/binary, Words:Buckets/binary-unit:64, _/binary>> = Bin,
    lists:append(
      [begin
           First = I * Size,
           Inside = if
                        E < 1 bsl 58 ->
                            [First + X * SlotSize
                             || X <- [(E bsr 26) band 16#1FF, E bsr 48], X > 0];
                        true ->
                            overflow_starts(Bin, Base + (E band ((1 bsl 58) - 1)))
                    end,
           [First, First + Size - 1 | lists:append([[X - 1, X] || X <- Inside])]
       end || {I, E} <- lists:zip(lists:seq(0, Buckets - 1), [E || <<E:64>> <= Words])]).

%% Rings of 100 fragments (10,000 points) and 400 (40,000 points), looked
%% up in their published 32-bit words: each checked fresh, after an add
%% (records moving) and after two removals.
many_points() ->
    many_points(lookup_points_100, 100),
    many_points(lookup_points_400, 400).

many_points(Tab, Frags) ->
    {atomic, ok} = mnesia:create_table(Tab, [{attributes, [k, v]},
                                             {frag_properties,
                                              [{n_fragments, Frags},
                                               {hash_module, mnesia_frag_chash},
                                               {node_pool, [node()]}]}]),
    ok = mnesia:activity(async_dirty,
                         fun() -> [mnesia:write({Tab, I, I}) || I <- lists:seq(1, 2000)], ok end,
                         [], mnesia_frag),
    check_state(Tab),
    {_, S, _} = fraghash_frag:hash(Tab),
    {ok, #fraghash_state{digest = D}} = fraghash_state:decode(S),
    %% (Published by whichever table first looked a state of this recipe
    %% up: fresh tables of one scheme and size share it.)
    ?assertEqual(fraghash_words, element(1, persistent_term:get(key(D)))),
    {atomic, ok} = mnesia:change_table_frag(Tab, {add_frag, [node()]}),
    check_state(Tab),
    {atomic, ok} = mnesia:change_table_frag(Tab, del_frag),
    {atomic, ok} = mnesia:change_table_frag(Tab, del_frag),
    check_state(Tab),
    ?assertEqual(2000, mnesia:activity(async_dirty,
                                       fun() -> mnesia:table_info(Tab, size) end,
                                       [], mnesia_frag)),
    {atomic, ok} = mnesia:delete_table(Tab).

frag(Tab, 1) -> Tab;
frag(Tab, N) -> list_to_atom(atom_to_list(Tab) ++ "_frag" ++ integer_to_list(N)).

%%% Publishing.

jump_through_nif() ->
    S = grow(mnesia_frag_jump, mnesia_frag_jump:init_state(lookup_jump, undefined), 9),
    {ok, #fraghash_state{digest = D, bytes = B}} = fraghash_state:decode(S),
    [?assertEqual(core(D, B, erlang:phash2(K, 1 bsl 32)),
                  mnesia_frag_jump:key_to_frag_number(S, K))
     || K <- lists:seq(1, 1000)],
    {K, C} = fraghash_state:key_of_digest(D),
    ?assertMatch({fraghash_nif, C, D, lookup_jump, _}, persistent_term:get(K)).

%% Fifty processes look keys up in a new state at once: every answer is
%% the core's (those that miss while another publishes ask the NIF), and
%% the state ends up published.
concurrent_misses() ->
    S = grow(mnesia_frag_chash, mnesia_frag_chash:init_state(lookup_herd, undefined), 199),
    {ok, #fraghash_state{digest = D, bytes = B}} = fraghash_state:decode(S),
    Self = self(),
    Pids = [spawn_link(fun() ->
                               receive go -> ok end,
                               Bad = [K || K <- lists:seq(I * 1000, I * 1000 + 999),
                                           mnesia_frag_chash:key_to_frag_number(S, K)
                                               =/= core(D, B, erlang:phash2(K, 1 bsl 32))],
                               Self ! {self(), Bad}
                       end) || I <- lists:seq(1, 50)],
    [P ! go || P <- Pids],
    [receive {P, Bad} -> ?assertEqual([], Bad) end || P <- Pids],
    ?assertEqual(1, length([x || {lookup_herd, K2, _} <- fraghash_lookup:published(),
                                 K2 =:= key(D)])).

%% A term under a state's key that is not its lookup (another
%% application's term, or the lookup of a state whose digest shares the
%% key's 59 bits but not the check's) is not read as one, nor replaced:
%% the lookup asks the NIF.
foreign_entry() ->
    S = grow(mnesia_frag_chash, mnesia_frag_chash:init_state(lookup_foreign, undefined), 199),
    {ok, #fraghash_state{digest = D, bytes = B}} = fraghash_state:decode(S),
    {K, C} = fraghash_state:key_of_digest(D),
    Hs = [erlang:phash2(I, 1 bsl 32) || I <- lists:seq(1, 1000)],
    Foreign = [{ranges, 31, 16#7fffffff, 3, 6, 7, {5, 5}, lookup_foreign, 0},
               {fraghash_words, C + 1, 31, <<5:32, 5:32>>, other, 0}],
    lists:foreach(
      fun(Term) ->
              persistent_term:put(K, Term),
              try
                  Got = [mnesia_frag_chash:key_to_frag_number(S, I) || I <- lists:seq(1, 1000)],
                  ?assertEqual([core(D, B, H) || H <- Hs], Got),
                  ?assertNotEqual(lists:duplicate(1000, 5), Got),
                  ?assertEqual(Term, persistent_term:get(K))
              after
                  persistent_term:erase(K)
              end
      end, Foreign).

key(D) -> element(1, fraghash_state:key_of_digest(D)).
