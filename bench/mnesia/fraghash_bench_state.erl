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
    Keys = [fraghash_bench:key(I) || I <- lists:seq(1, NKeys)],
    fraghash_bench:ns_table(Mods, Fs, fun(F) -> column(Mods, F, Keys, Rounds) end).

column(Mods, Frags, Keys, Rounds) ->
    Gvar = ets:new(fraghash_bench_gvar, [set, {read_concurrency, true}]),
    lists:foreach(
      fun(M) ->
              Tab = list_to_atom("bench_state_" ++ atom_to_list(M)),
              S = fraghash_bench:grow(M, M:init_state(Tab, undefined), Frags - 1),
              %% The first lookup of a state builds (and publishes) its table.
              _ = M:key_to_frag_number(S, warm_up),
              %% #frag_state{foreign_key, n_fragments, hash_module, hash_state}
              true = ets:insert(Gvar, {M, {frag_state, undefined, Frags, M, S}})
      end, Mods),
    Col = fraghash_bench:rounds([{M, Gvar} || M <- Mods], Rounds, length(Keys),
                                fun(M, G) -> lookup_all(G, M, Keys) end),
    ets:delete(Gvar),
    Col.

lookup_all(Gvar, M, [K | Ks]) ->
    {frag_state, _, _, Mod, S} = ets:lookup_element(Gvar, M, 2),
    _ = Mod:key_to_frag_number(S, K),
    lookup_all(Gvar, M, Ks);
lookup_all(_, _, []) ->
    ok.
