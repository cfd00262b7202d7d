%% @doc Benchmarks of the fraghash Mnesia hash modules beside
%% `mnesia_frag_hash': `async_dirty' writes and reads through `mnesia_frag'
%% (ram_copies, one node) at several fragment counts, and the distribution
%% of random string keys over 50 fragments. Run by `bench/bench.sh'.
-module(fraghash_bench).

-export([main/1, throughput/3, distribution/2, lookup/2, reads_ab/3]).

-define(MODULES, [mnesia_frag_hash, mnesia_frag_slots, mnesia_frag_chash,
                  mnesia_frag_jump]).

%% @doc `main([Keys, FragCounts, DistKeys])', all as strings
%% ("100000", "50,400,4000", "1000000").
-spec main([string()]) -> ok.
main([Keys, Frags, DistKeys]) ->
    ok = mnesia:start(),
    K = list_to_integer(Keys),
    Fs = [list_to_integer(F) || F <- string:lexemes(Frags, ",")],
    io:format("~n## key_to_frag_number alone: ns per call (1,000,000 keys, best of 3)~n~n"),
    io:format("| hash module |~s~n|---|~s~n",
              [[io_lib:format(" ~b fragments |", [F]) || F <- Fs],
               [" ---: |" || _ <- Fs]]),
    [begin
         io:format("| `~s` |", [M]),
         [lookup(M, F) || F <- Fs],
         io:format("~n")
     end || M <- ?MODULES],
    io:format("~n## async_dirty through mnesia_frag, ram_copies, ~b keys (best of ~b interleaved rounds)~n~n",
              [K, rounds()]),
    io:format("| hash module | fragments | create table (s) | writes/s | reads/s |~n"
              "|---|---|---|---|---|~n"),
    plain(K),
    [throughput(?MODULES, F, K) || F <- Fs],
    io:format("~n## reads through mnesia_frag: median ns per read, 9 interleaved rounds~n~n"
              "| fragments |~s~n|---|~s~n",
              [[io_lib:format(" `~s` |", [M]) || M <- ab_modules()],
               [" ---: |" || _ <- ab_modules()]]),
    [reads_ab(ab_modules(), F, K) || F <- Fs],
    io:format("~n## distribution: ~s random string keys over 50 fragments~n~n",
              [DistKeys]),
    io:format("| hash module | stddev | biggest | smallest | max/mean | binomial floor |~n"
              "|---|---|---|---|---|---|~n"),
    [distribution(M, list_to_integer(DistKeys)) || M <- ?MODULES],
    ok.

%% @doc The throughput lines for one fragment count: a table per module,
%% then `rounds()' rounds in which every module writes and reads in turn (so
%% that load from elsewhere hits them alike); the best round of each is
%% shown.
-spec throughput([module()], pos_integer(), pos_integer()) -> ok.
throughput(Mods, Frags, K) ->
    %% Names of equal length: mnesia_frag builds each fragment's name from
    %% the table's on every operation, so a longer name costs time.
    Tabs = [begin
                Tab = list_to_atom(lists:concat(["b", I, "_", Frags])),
                {TC, {atomic, ok}} =
                    timer:tc(fun() ->
                                     mnesia:create_table(Tab, [{attributes, [k, v]},
                                                               {frag_properties,
                                                                [{n_fragments, Frags},
                                                                 {hash_module, Mod},
                                                                 {node_pool, [node()]}]}])
                             end),
                {Mod, Tab, TC}
            end || {I, Mod} <- lists:zip(lists:seq(1, length(Mods)), Mods)],
    Keys = [key(I) || I <- lists:seq(1, K)],
    Rounds = [[{Mod, round_once(Tab, Keys, mnesia_frag)} || {Mod, Tab, _} <- Tabs]
              || _ <- lists:seq(1, rounds())],
    lists:foreach(
      fun({Mod, _Tab, TC}) ->
              Ts = [T || R <- Rounds, {M, T} <- R, M =:= Mod],
              TW = lists:min([W || {W, _} <- Ts]),
              TR = lists:min([Rd || {_, Rd} <- Ts]),
              io:format("| `~s` | ~b | ~.1f | ~s | ~s |~n",
                        [Mod, Frags, TC / 1.0e6, rate(K, TW), rate(K, TR)])
      end, Tabs).
%% The tables are left for the VM's exit: deleting a 4,000-fragment table
%% while 16,000 tables exist takes Mnesia minutes.

ab_modules() -> ?MODULES ++ [fraghash_bench_control].

%% @doc One line: for each module a table of `Frags' fragments and `K'
%% records, then 9 rounds in which each module reads all keys in turn; the
%% median ns per read of each. `fraghash_bench_control' is a pure-Erlang
%% lookup in the same state shape.
-spec reads_ab([module()], pos_integer(), pos_integer()) -> ok.
reads_ab(Mods, Frags, K) ->
    Keys = [key(I) || I <- lists:seq(1, K)],
    Tabs = [begin
                Tab = list_to_atom(lists:concat(["r", I, "_", Frags])),
                {atomic, ok} =
                    mnesia:create_table(Tab, [{attributes, [k, v]},
                                              {frag_properties,
                                               [{n_fragments, Frags}, {hash_module, Mod},
                                                {node_pool, [node()]}]}]),
                ok = mnesia:activity(async_dirty, fun() -> write_all(Tab, Keys) end,
                                     [], mnesia_frag),
                {Mod, Tab}
            end || {I, Mod} <- lists:zip(lists:seq(1, length(Mods)), Mods)],
    Rounds = [[{Mod, element(1, timer:tc(
                                 fun() ->
                                         mnesia:activity(async_dirty,
                                                         fun() -> read_all(Tab, Keys) end,
                                                         [], mnesia_frag)
                                 end))}
               || {Mod, Tab} <- Tabs]
              || _ <- lists:seq(1, 9)],
    io:format("| ~b |", [Frags]),
    [begin
         Ts = lists:sort([T || R <- Rounds, {M, T} <- R, M =:= Mod]),
         io:format(" ~b |", [round(lists:nth(5, Ts) * 1000 / K)])
     end || {Mod, _} <- Tabs],
    io:format("~n").

%% Rounds per measurement: $FRAGHASH_BENCH_ROUNDS, default 5.
rounds() ->
    case os:getenv("FRAGHASH_BENCH_ROUNDS") of
        false -> 5;
        R -> list_to_integer(R)
    end.

round_once(Tab, Keys, Access) ->
    erlang:garbage_collect(),
    {TW, ok} = timer:tc(fun() ->
                                mnesia:activity(async_dirty, fun() -> write_all(Tab, Keys) end,
                                                [], Access)
                        end),
    {TR, ok} = timer:tc(fun() ->
                                mnesia:activity(async_dirty, fun() -> read_all(Tab, Keys) end,
                                                [], Access)
                        end),
    {TW, TR}.

%% Best of 3 rounds of writes and of reads, in microseconds.
rounds(Tab, K, Access) ->
    Keys = [key(I) || I <- lists:seq(1, K)],
    Ts = [round_once(Tab, Keys, Access) || _ <- lists:seq(1, rounds())],
    {lists:min([W || {W, _} <- Ts]), lists:min([R || {_, R} <- Ts])}.

%% The reference line: a plain table, not fragmented.
plain(K) ->
    {atomic, ok} = mnesia:create_table(plain_tab, [{attributes, [k, v]}]),
    {TW, TR} = rounds(plain_tab, K, mnesia),
    io:format("| plain table, not fragmented | 1 | - | ~s | ~s |~n",
              [rate(K, TW), rate(K, TR)]),
    {atomic, ok} = mnesia:delete_table(plain_tab),
    ok.

%% @doc Prints one cell: ns per key_to_frag_number call, best of 3.
-spec lookup(module(), pos_integer()) -> ok.
lookup(Mod, Frags) ->
    S = grow(Mod, Mod:init_state(bench_lookup, undefined), Frags - 1),
    Keys = [key(I) || I <- lists:seq(1, 1000000)],
    _ = Mod:key_to_frag_number(S, warm_up),
    Best = lists:min([element(1, timer:tc(fun() -> lookup_all(Mod, S, Keys) end))
                      || _ <- [1, 2, 3]]),
    io:format(" ~b |", [round(Best * 1000 / 1000000)]).

lookup_all(Mod, S, [K | Ks]) -> _ = Mod:key_to_frag_number(S, K), lookup_all(Mod, S, Ks);
lookup_all(_, _, []) -> ok.

write_all(Tab, [K | Ks]) -> mnesia:write({Tab, K, K}), write_all(Tab, Ks);
write_all(_, []) -> ok.

read_all(Tab, [K | Ks]) -> [_] = mnesia:read(Tab, K), read_all(Tab, Ks);
read_all(_, []) -> ok.

rate(K, Micros) ->
    R = round(K / (Micros / 1.0e6)),
    thousands(integer_to_list(R)).

thousands(S) when length(S) =< 3 -> S;
thousands(S) ->
    {H, T} = lists:split(length(S) - 3, S),
    thousands(H) ++ "," ++ T.

key(I) -> "user-" ++ integer_to_list(I).

%% @doc One line of the distribution table: `N' random short strings (5 to
%% 16 letters and digits, as in the write-ups' experiment) over 50 fragments.
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
