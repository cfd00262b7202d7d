%% @doc Benchmarks of the fraghash Mnesia hash modules beside
%% `mnesia_frag_hash': `async_dirty' writes and reads through `mnesia_frag'
%% (ram_copies, one node) at several fragment counts, and the distribution
%% of random string keys over 50 fragments. Run by `bench/bench.sh'.
-module(fraghash_bench).

-export([main/1, distribution/2, lookups/3, key/1, rate/2]).
%% Shared with fraghash_bench_throughput and fraghash_bench_state.
-export([median/1, rotate/2, ns_table/3, rounds/4, grow/3]).

-define(MODULES, [mnesia_frag_hash, mnesia_frag_slots, mnesia_frag_chash,
                  mnesia_frag_jump, mnesia_frag_linear]).

%% @doc `main([Keys, FragCounts, DistKeys])', all as strings
%% ("100000", "50,400,4000", "1000000").
-spec main([string()]) -> ok.
main([Keys, Frags, DistKeys]) ->
    ok = mnesia:start(),
    K = list_to_integer(Keys),
    Fs = [list_to_integer(F) || F <- string:lexemes(Frags, ",")],
    lookups(Fs, 1000000, 7),
    fraghash_bench_state:run(Fs, 1000000, 7),
    {Reps, Rounds} = {env_int("FRAGHASH_BENCH_REPS", 3), env_int("FRAGHASH_BENCH_ROUNDS", 1)},
    FreshMax = env_int("FRAGHASH_BENCH_FRESH_MAX", 400),
    Processes = case os:getenv("FRAGHASH_BENCH_PROCESSES", "shared") of
                    "per_table" -> per_table;
                    _ -> shared
                end,
    io:format("~n## async_dirty through mnesia_frag, ram_copies, ~b keys: ~b repetitions "
              "of ~b inserts of new keys and ~b interleaved passes of overwrites and reads"
              " (batches run by ~s)~n~n",
              [K, Reps, K, Rounds, case Processes of
                                       shared -> "one process";
                                       per_table -> "a process per table"
                                   end]),
    plain(K),
    io:format("~n"),
    fraghash_bench_throughput:print_header(),
    [fraghash_bench_throughput:run(?MODULES ++ [fraghash_bench_control], F, K, {Reps, Rounds},
                                   FreshMax, Processes)
     || F <- Fs],
    PubFrags = env_int("FRAGHASH_BENCH_PUBLISH_FRAGS", 400),
    io:format("~n## add_frag and publishing, ~b fragments, 20,000 records, median of 5~n~n",
              [PubFrags]),
    fraghash_bench_publish:run(?MODULES, PubFrags, 20000),
    io:format("~n## distribution: ~s random string keys over 50 fragments~n~n",
              [DistKeys]),
    io:format("| hash module | stddev | biggest | smallest | max/mean | binomial floor |~n"
              "|---|---|---|---|---|---|~n"),
    [distribution(M, list_to_integer(DistKeys)) || M <- ?MODULES],
    ok.

%% A positive integer from the environment, or `Default'.
env_int(Name, Default) ->
    case os:getenv(Name) of
        false -> Default;
        V -> list_to_integer(V)
    end.

%% The reference line: a plain table, not fragmented, best of 3 passes of
%% overwrites and of reads.
plain(K) ->
    Keys = [key(I) || I <- lists:seq(1, K)],
    {atomic, ok} = mnesia:create_table(plain_tab, [{attributes, [k, v]}]),
    Pass = fun(F) ->
                   element(1, timer:tc(fun() -> mnesia:activity(async_dirty, F) end))
           end,
    Ts = [{Pass(fun() -> [mnesia:write({plain_tab, Ky, Ky}) || Ky <- Keys], ok end),
           Pass(fun() -> [[_] = mnesia:read(plain_tab, Ky) || Ky <- Keys], ok end)}
          || _ <- [1, 2, 3]],
    io:format("A plain table, not fragmented (best of 3 passes): ~s writes/s, ~s reads/s.~n",
              [rate(K, lists:min([W || {W, _} <- Ts])),
               rate(K, lists:min([R || {_, R} <- Ts]))]),
    {atomic, ok} = mnesia:delete_table(plain_tab),
    ok.

%% @doc The table of `key_to_frag_number' alone: for each fragment count,
%% `Rounds' rounds in which every module (in an order rotating from round
%% to round) maps the same `NKeys' keys; a cell is the median over the
%% rounds of the CPU time per call in ns, and the median of the per-round
%% ratios to `mnesia_frag_hash'. CPU time (`statistics(runtime)', the VM's
%% threads), not wall time: on a shared machine the process is often
%% descheduled, which wall time would charge to whichever module ran then.
-spec lookups([pos_integer()], pos_integer(), pos_integer()) -> ok.
lookups(Fs, NKeys, Rounds) ->
    io:format("~n## key_to_frag_number alone: CPU ns per call and ratio to the default "
              "(~b keys, median of ~b interleaved rounds)~n~n", [NKeys, Rounds]),
    Keys = [key(I) || I <- lists:seq(1, NKeys)],
    ns_table(?MODULES, Fs,
             fun(F) ->
                     Ss = [{M, grow(M, M:init_state(list_to_atom("bench_lookup_" ++ atom_to_list(M)),
                                                     undefined), F - 1)}
                           || M <- ?MODULES],
                     %% The first lookup of a state builds (and publishes) its table.
                     _ = [M:key_to_frag_number(S, warm_up) || {M, S} <- Ss],
                     rounds(Ss, Rounds, length(Keys), fun(M, S) -> lookup_all(M, S, Keys) end)
             end).

%% @doc Prints a table of CPU ns per key (and ratio to `mnesia_frag_hash')
%% with a row per module in `Mods' and a column per fragment count in `Fs';
%% `Column(F)' measures one column as {@link rounds/4} returns it.
-spec ns_table([module()], [pos_integer()],
               fun((pos_integer()) -> #{module() => {float(), float()}})) -> ok.
ns_table(Mods, Fs, Column) ->
    io:format("| hash module |~s~n|---|~s~n",
              [[io_lib:format(" ~b fragments |", [F]) || F <- Fs],
               [" ---: |" || _ <- Fs]]),
    Cols = [Column(F) || F <- Fs],
    lists:foreach(
      fun(M) ->
              io:format("| `~s` |~s~n",
                        [M, [begin
                                 {Ns, Ratio} = maps:get(M, Col),
                                 io_lib:format(" ~b (~.2f) |", [round(Ns), Ratio])
                             end || Col <- Cols]])
      end, Mods).

%% @doc `Rounds' rounds in which `Run(Module, Arg)' runs once for every
%% `{Module, Arg}' of `Entries' (in an order rotating from round to round),
%% each run covering `NKeys' keys: `#{Module => {MedianNs, MedianRatio}}',
%% the median over the rounds of the CPU ns per key and of the ratio to
%% `mnesia_frag_hash''s. CPU time (`statistics(runtime)', the VM's
%% threads), not wall time: on a shared machine the process is often
%% descheduled, which wall time would charge to whichever module ran then.
-spec rounds([{module(), term()}], pos_integer(), pos_integer(),
             fun((module(), term()) -> term())) -> #{module() => {float(), float()}}.
rounds(Entries, Rounds, NKeys, Run) ->
    PerRound = [maps:from_list(
                  [{M, cpu_ns(fun() -> Run(M, A) end) / NKeys}
                   || {M, A} <- rotate(Entries, R rem length(Entries))])
                || R <- lists:seq(1, Rounds)],
    maps:from_list(
      [{M, {median([maps:get(M, R) || R <- PerRound]),
            median([maps:get(M, R) / maps:get(mnesia_frag_hash, R) || R <- PerRound])}}
       || {M, _} <- Entries]).

cpu_ns(F) ->
    {_, _} = statistics(runtime),
    F(),
    {_, Ms} = statistics(runtime),
    Ms * 1000000.

rotate(L, 0) -> L;
rotate([H | T], I) -> rotate(T ++ [H], I - 1).

median(L) ->
    S = lists:sort(L),
    N = length(S),
    case N rem 2 of
        1 -> lists:nth((N + 1) div 2, S);
        0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2
    end.

lookup_all(Mod, S, [K | Ks]) -> _ = Mod:key_to_frag_number(S, K), lookup_all(Mod, S, Ks);
lookup_all(_, _, []) -> ok.

%% @doc `K' operations in `Micros' microseconds, as operations per second
%% with thousands separators.
-spec rate(pos_integer(), number()) -> string().
rate(K, Micros) ->
    R = round(K / (Micros / 1.0e6)),
    thousands(integer_to_list(R)).

thousands(S) when length(S) =< 3 -> S;
thousands(S) ->
    {H, T} = lists:split(length(S) - 3, S),
    thousands(H) ++ "," ++ T.

%% @doc The `I'th benchmark key.
-spec key(pos_integer()) -> string().
key(I) -> "user-" ++ integer_to_list(I).

%% @doc One line of the distribution table: `N' random short strings (5 to
%% 16 letters and digits, as in the 2009 posts' experiment) over 50 fragments.
-spec distribution(module(), pos_integer()) -> ok.
distribution(Mod, N) ->
    S = grow(Mod, Mod:init_state(dist, undefined), 49),
    rand:seed(exsss, {7, 7, 7}),
    C0 = erlang:make_tuple(50, 0),
    Counts = tuple_to_list(count(Mod, S, N, C0)),
    Mean = N / 50,
    Sd = math:sqrt(lists:sum([(C - Mean) * (C - Mean) || C <- Counts]) / 50),
    Floor = math:sqrt(N * (1 / 50) * (49 / 50)),
    io:format("| `~s` | ~s | ~s | ~s | ~.3f | ~s |~n",
              [Mod, thousands(integer_to_list(round(Sd))),
               thousands(integer_to_list(lists:max(Counts))),
               thousands(integer_to_list(lists:min(Counts))),
               lists:max(Counts) / Mean, thousands(integer_to_list(round(Floor)))]).

%% @doc `Mod''s state `S' with `K' more fragments.
-spec grow(module(), term(), non_neg_integer()) -> term().
grow(_Mod, S, 0) -> S;
grow(Mod, S, K) ->
    {S2, _, _} = Mod:add_frag(S),
    grow(Mod, S2, K - 1).

count(_Mod, _S, 0, C) -> C;
count(Mod, S, N, C) ->
    F = Mod:key_to_frag_number(S, random_string()),
    count(Mod, S, N - 1, setelement(F, C, element(F, C) + 1)).

-define(CHARS, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789").

random_string() ->
    L = 4 + rand:uniform(12),
    [lists:nth(rand:uniform(62), ?CHARS) || _ <- lists:seq(1, L)].
