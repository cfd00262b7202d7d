%% @doc What a `bag' costs on `redb_copies' against a `set', per record:
%% run by `bench/mnesia/disc-measure.sh bag [RECORDS]' in one VM.
%%
%% Two tables of `N' records of ~100 bytes on `redb_copies': a `set' of
%% `N' keys and a `bag' of `N div 10' keys holding 10 records each (the
%% key's values differ). Figures, each a rate of records:
%% <ul>
%% <li>load: the records written in transactions of 10 records (a bag
%% key's 10 records in one transaction, 10 set keys in another), by 16
%% processes;</li>
%% <li>reads: random keys read in `async_dirty' (a bag key gives its 10
%% records, a set key its one), ?ROUNDS rounds of ?ROUND_MS ms, the two
%% tables taking turns within each round;</li>
%% <li>writes: one-record transactions by 16 processes, rounds as the
%% reads: a set key's value replaced; a record added to a bag key (the
%% bag grows by the writes, about a fifth at the default size).</li>
%% </ul>
%% Then `bag ÷ set' per figure, records per second (the issue of a bag:
%% its records must cost about what a set's cost).
-module(fraghash_bench_bag).

-export([run/2]).

-define(VALUES, 10).
-define(WRITERS, 16).
-define(ROUNDS, 7).
-define(ROUND_MS, 1000).

%% @doc Measures with `N' records in Mnesia directory `Dir' (made anew).
-spec run(string(), pos_integer()) -> ok.
run(Dir, N) ->
    ok = application:set_env(mnesia, dir, Dir),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    {atomic, ok} = fraghash_redb_copies:register(),
    Keys = N div ?VALUES,
    [{atomic, ok} = mnesia:create_table(T, [{redb_copies, [node()]}, {type, Type},
                                            {attributes, [key, val]}])
     || {T, Type} <- [{s, set}, {b, bag}]],
    io:format("redb_copies, ~b records of ~b-byte values: a set of ~b keys, a bag of ~b keys "
              "of ~b records; load average ~s~n",
              [N, 100, N, Keys, ?VALUES, string:trim(os:cmd("cut -d' ' -f1-3 /proc/loadavg"))]),
    LoadS = load(s, [[K + I * Keys || I <- lists:seq(0, ?VALUES - 1)] || K <- lists:seq(1, Keys)],
                 fun(K, _) -> {s, K, value(K, 0)} end),
    LoadB = load(b, [[K] || K <- lists:seq(1, Keys)], fun(K, I) -> {b, K, value(K, I)} end),
    N = mnesia:table_info(s, size),
    N = mnesia:table_info(b, size),
    Reads = rounds(fun(T) -> reads(T, N, Keys) end),
    Writes = rounds(fun(T) -> writes(T, N, Keys) end),
    Rows = [{"load, records/s", N / LoadS, N / LoadB},
            {"reads, records/s", maps:get(s, Reads), maps:get(b, Reads)},
            {"writes, records/s", maps:get(s, Writes), maps:get(b, Writes)}],
    io:format("~n| records/s | set | bag | bag / set |~n|---|---:|---:|---:|~n"),
    [io:format("| ~s | ~b | ~b | ~.2f |~n", [What, round(S), round(B), B / S])
     || {What, S, B} <- Rows],
    stopped = mnesia:stop(),
    ok.

value(K, I) ->
    <<K:64, I:32, 0:(88 * 8)>>.

%% Writes each group of `Groups' in one transaction (a bag key's records
%% are `Make(K, 0..9)', a set's group ten keys), by ?WRITERS processes;
%% seconds.
load(Tab, Groups, Make) ->
    Parts = split(Groups, ?WRITERS),
    {Us, _} = timer:tc(fun() ->
        par([fun() ->
                     [{atomic, ok} = mnesia:transaction(
                                       fun() -> [mnesia:write(R) || R <- records(Tab, G, Make)],
                                                ok end)
                      || G <- Part]
             end || Part <- Parts])
    end),
    Us / 1.0e6.

records(s, Keys, Make) -> [Make(K, 0) || K <- Keys];
records(b, [K], Make) -> [Make(K, I) || I <- lists:seq(0, ?VALUES - 1)].

%% Records per second of `Measure(Tab)' over ?ROUNDS rounds, the set and
%% the bag taking turns: `#{s => Rate, b => Rate}'.
rounds(Measure) ->
    Totals = lists:foldl(
               fun(_, Acc) ->
                       lists:foldl(fun(T, A) ->
                                           {Recs, Us} = Measure(T),
                                           maps:update_with(T, fun({R0, U0}) -> {R0 + Recs, U0 + Us} end,
                                                            {Recs, Us}, A)
                                   end, Acc, [s, b])
               end, #{}, lists:seq(1, ?ROUNDS)),
    maps:map(fun(_, {Recs, Us}) -> Recs / (Us / 1.0e6) end, Totals).

%% Random keys read for ?ROUND_MS by one process: `{Records, Us}'.
reads(Tab, N, Keys) ->
    Range = case Tab of s -> N; b -> Keys end,
    Until = erlang:monotonic_time(millisecond) + ?ROUND_MS,
    {Us, Recs} = timer:tc(fun() -> read_loop(Tab, Range, Until, 0) end),
    {Recs, Us}.

read_loop(Tab, Range, Until, Recs) ->
    case erlang:monotonic_time(millisecond) < Until of
        false ->
            Recs;
        true ->
            Got = mnesia:activity(async_dirty, fun() -> mnesia:read(Tab, rand:uniform(Range)) end),
            read_loop(Tab, Range, Until, Recs + length(Got))
    end.

%% One-record transactions by ?WRITERS processes for ?ROUND_MS: a set
%% key's value replaced; a record added to a bag key.
writes(Tab, N, Keys) ->
    Until = erlang:monotonic_time(millisecond) + ?ROUND_MS,
    {Us, Counts} = timer:tc(fun() ->
        par([fun() -> write_loop(Tab, N, Keys, Until, 0) end || _ <- lists:seq(1, ?WRITERS)])
    end),
    {lists:sum(Counts), Us}.

write_loop(Tab, N, Keys, Until, Done) ->
    case erlang:monotonic_time(millisecond) < Until of
        false ->
            Done;
        true ->
            Seq = erlang:unique_integer([positive]),
            K = rand:uniform(case Tab of s -> N; b -> Keys end),
            {atomic, ok} = mnesia:transaction(fun() -> mnesia:write({Tab, K, value(K, Seq)}) end),
            write_loop(Tab, N, Keys, Until, Done + 1)
    end.

%% Runs each fun in a process of its own; their results, in order.
par(Funs) ->
    Self = self(),
    Pids = [spawn_link(fun() -> Self ! {self(), F()} end) || F <- Funs],
    [receive {P, R} -> R end || P <- Pids].

%% `L' cut into at most `Parts' runs of about equal length.
split(L, Parts) ->
    fraghash_tab:chunks(L, max(1, (length(L) + Parts - 1) div Parts)).
