%% @doc `key_to_frag_number' as `mnesia_frag' calls it: on every read and
%% write Mnesia copies the table's `#frag_state{}' (hash state included) out
%% of the ets table `mnesia_gvar' (`ets:lookup_element/3'), then calls the
%% hash module. This measures that pair, each module's state in an ets
%% table of its own, beside `mnesia_frag_hash' in the same rounds: what the
%% state's shape costs per operation on top of the lookup itself.
-module(fraghash_bench_state).

-export([run/3]).

%% @doc For each fragment count, `Rounds' rounds in which every module (in
%% an order rotating from round to round) copies its state out of ets and
%% looks up each of `NKeys' keys; a cell is the median over the rounds of
%% the CPU ns per key and of the ratio to `mnesia_frag_hash'.
-spec run([pos_integer()], pos_integer(), pos_integer()) -> ok.
run(Fs, NKeys, Rounds) ->
    Mods = [mnesia_frag_hash, mnesia_frag_slots, mnesia_frag_chash, mnesia_frag_jump,
            mnesia_frag_linear, fraghash_bench_control],
    io:format("~n## key_to_frag_number with the state copied out of ets, as mnesia_frag "
              "calls it: CPU ns per key and ratio to the default (~b keys, median of ~b "
              "interleaved rounds)~n~n", [NKeys, Rounds]),
    io:format("| hash module |~s~n|---|~s~n",
              [[io_lib:format(" ~b fragments |", [F]) || F <- Fs], [" ---: |" || _ <- Fs]]),
    Keys = [fraghash_bench:key(I) || I <- lists:seq(1, NKeys)],
    Cols = [column(Mods, F, Keys, Rounds) || F <- Fs],
    lists:foreach(
      fun(M) ->
              io:format("| `~s` |~s~n",
                        [M, [begin
                                 {Ns, Ratio} = maps:get(M, Col),
                                 io_lib:format(" ~b (~.2f) |", [round(Ns), Ratio])
                             end || Col <- Cols]])
      end, Mods).

column(Mods, Frags, Keys, Rounds) ->
    Gvar = ets:new(fraghash_bench_gvar, [set, {read_concurrency, true}]),
    lists:foreach(
      fun(M) ->
              Tab = list_to_atom("bench_state_" ++ atom_to_list(M)),
              S = grow(M, M:init_state(Tab, undefined), Frags - 1),
              %% The first lookup of a state builds (and publishes) its table.
              _ = M:key_to_frag_number(S, warm_up),
              %% #frag_state{foreign_key, n_fragments, hash_module, hash_state}
              true = ets:insert(Gvar, {M, {frag_state, undefined, Frags, M, S}})
      end, Mods),
    PerRound = [maps:from_list(
                  [{M, cpu_ns(fun() -> lookup_all(Gvar, M, Keys) end) / length(Keys)}
                   || M <- fraghash_bench:rotate(Mods, R rem length(Mods))])
                || R <- lists:seq(1, Rounds)],
    ets:delete(Gvar),
    maps:from_list(
      [{M, {fraghash_bench:median([maps:get(M, R) || R <- PerRound]),
            fraghash_bench:median([maps:get(M, R) / maps:get(mnesia_frag_hash, R)
                                   || R <- PerRound])}}
       || M <- Mods]).

lookup_all(Gvar, M, [K | Ks]) ->
    {frag_state, _, _, Mod, S} = ets:lookup_element(Gvar, M, 2),
    _ = Mod:key_to_frag_number(S, K),
    lookup_all(Gvar, M, Ks);
lookup_all(_, _, []) ->
    ok.

cpu_ns(F) ->
    {_, _} = statistics(runtime),
    F(),
    {_, Ms} = statistics(runtime),
    Ms * 1000000.

grow(_Mod, S, 0) -> S;
grow(Mod, S, K) -> {S2, _, _} = Mod:add_frag(S), grow(Mod, S2, K - 1).
