%% @doc Paired throughput measurement of Mnesia hash modules: `async_dirty'
%% overwrites and reads through `mnesia_frag' (ram_copies, one node), each
%% module beside `mnesia_frag_hash' in the same run.
%%
%% On a shared machine the absolute rate of the same table varies by 20 %
%% and more between runs, and two tables of the same module differ by up to
%% 15 % for as long as they live (where their records and fragment names
%% landed in memory). So the comparison is built to cancel both:
%%
%% <ul>
%% <li>Within a repetition every module works at the same moments: the keys
%% are cut into batches of `?BATCH', and for every batch each table in turn
%% overwrites and then reads that batch, the order rotating from batch to
%% batch. Load from other processes, CPU frequency and cache state hit all
%% modules alike.</li>
%% <li>Each repetition creates its own tables (the creation order rotating
%% too), so table-layout luck is drawn afresh. Tables are left for the VM's
%% exit: Mnesia takes 50 to 150 s to delete one table of 4,000
%% fragments.</li>
%% <li>A second `mnesia_frag_hash' table is measured like any module: its
%% ratio to the first is what the same module scores against itself, the
%% resolution of the measurement.</li>
%% </ul>
%%
%% Tables are created with one fragment fewer, then grown by one `add_frag'
%% (while empty), so the fraghash modules hold real state bytes, as a user's
%% table does once it has grown.
-module(fraghash_bench_throughput).

-export([run/4, print_header/0]).

%% Keys per batch: long enough that the timer and the activity's set-up are
%% well below 1 % of it, short enough that a burst of outside load falls on
%% every module.
-define(BATCH, 1000).

-type entry() :: {Label :: string(), module()}.

%% @doc The table header for {@link run/4}'s lines.
-spec print_header() -> ok.
print_header() ->
    io:format("| hash module | fragments | create table (s) | writes/s | reads/s "
              "| writes vs default (repetitions) | reads vs default (repetitions) |~n"
              "|---|---|---|---|---|---|---|~n").

%% @doc One line per module for `Frags' fragments and `K' keys: `Reps'
%% repetitions, each of `Rounds' passes over the keys. Rates are over all
%% repetitions; a ratio is `mnesia_frag_hash''s time divided by the
%% module's (above 1: faster than the default), over all repetitions, then
%% its lowest and highest single repetition.
-spec run([module()], pos_integer(), pos_integer(),
          {pos_integer(), pos_integer()}) -> ok.
run(Mods, Frags, K, {Reps, Rounds}) when Reps =< 99 ->
    Entries = [{"`" ++ atom_to_list(M) ++ "`", M} || M <- Mods]
        ++ [{"`mnesia_frag_hash` (a second table)", mnesia_frag_hash}],
    Keys = [fraghash_bench:key(I) || I <- lists:seq(1, K)],
    PerRep = [repetition(Rep, Entries, Frags, Keys, Rounds) || Rep <- lists:seq(1, Reps)],
    Ops = K * Rounds * Reps,
    Ref = hd(Entries),
    lists:foreach(
      fun(E = {Label, _}) ->
              Sum = fun(Op) -> lists:sum([maps:get({E, Op}, R) || R <- PerRep]) end,
              Ratio = fun(Op, Rs) ->
                              lists:sum([maps:get({Ref, Op}, R) || R <- Rs])
                                  / lists:sum([maps:get({E, Op}, R) || R <- Rs])
                      end,
              RW = [Ratio(w, [R]) || R <- PerRep],
              RR = [Ratio(r, [R]) || R <- PerRep],
              Create = median([maps:get({E, create}, R) || R <- PerRep]),
              io:format("| ~s | ~b | ~.1f | ~s | ~s | ~.3f (~.2f-~.2f) | ~.3f (~.2f-~.2f) |~n",
                        [Label, Frags, Create / 1.0e9,
                         fraghash_bench:rate(Ops, Sum(w) / 1000),
                         fraghash_bench:rate(Ops, Sum(r) / 1000),
                         Ratio(w, PerRep), lists:min(RW), lists:max(RW),
                         Ratio(r, PerRep), lists:min(RR), lists:max(RR)])
      end, Entries).

%% One repetition: fresh tables, loaded, then `Rounds' interleaved passes.
%% Returns nanoseconds per `{Entry, w | r | create}'.
-spec repetition(pos_integer(), [entry()], pos_integer(), [string()], pos_integer()) ->
          #{{entry(), w | r | create} => non_neg_integer()}.
repetition(Rep, Entries, Frags, Keys, Rounds) ->
    Numbered = lists:zip(lists:seq(1, length(Entries)), Entries),
    Tabs = [begin
                %% Names of equal length: mnesia_frag builds each fragment's
                %% name from the table's on every operation.
                Tab = list_to_atom(lists:flatten(io_lib:format("b~b_~2..0b_~b", [I, Rep, Frags]))),
                T0 = erlang:monotonic_time(nanosecond),
                ok = create_grown(Tab, Mod, Frags),
                T1 = erlang:monotonic_time(nanosecond),
                ok = mnesia:activity(async_dirty, fun() -> write_all(Tab, Keys) end,
                                     [], mnesia_frag),
                {E, Tab, T1 - T0}
            end || {I, E = {_, Mod}} <- rotate(Numbered, Rep rem length(Numbered))],
    Created = maps:from_list([{{E, create}, TC} || {E, _, TC} <- Tabs]),
    Batches = batches(Keys, ?BATCH),
    Pairs = [{E, Tab} || {E, Tab, _} <- Tabs],
    erlang:garbage_collect(),
    Times = lists:foldl(
              fun({I, Batch}, Acc) ->
                      lists:foldl(fun(P, A) -> time_batch(P, Batch, A) end,
                                  Acc, rotate(Pairs, I rem length(Pairs)))
              end, Created,
              lists:zip(lists:seq(1, length(Batches) * Rounds),
                        lists:append(lists:duplicate(Rounds, Batches)))),
    Times.

%% Overwrites, then reads, one batch in one table; adds the nanoseconds of
%% each to the entry's totals in `Acc'.
time_batch({E, Tab}, Batch, Acc) ->
    T0 = erlang:monotonic_time(nanosecond),
    ok = mnesia:activity(async_dirty, fun() -> write_all(Tab, Batch) end, [], mnesia_frag),
    T1 = erlang:monotonic_time(nanosecond),
    ok = mnesia:activity(async_dirty, fun() -> read_all(Tab, Batch) end, [], mnesia_frag),
    T2 = erlang:monotonic_time(nanosecond),
    A1 = maps:update_with({E, w}, fun(V) -> V + T1 - T0 end, T1 - T0, Acc),
    maps:update_with({E, r}, fun(V) -> V + T2 - T1 end, T2 - T1, A1).

%% A table of `Frags' fragments made as a user's grown table: created with
%% one fewer, then one `add_frag' (while empty, so it moves nothing).
create_grown(Tab, Mod, Frags) ->
    {atomic, ok} = mnesia:create_table(Tab, [{attributes, [k, v]},
                                             {frag_properties,
                                              [{n_fragments, max(1, Frags - 1)},
                                               {hash_module, Mod},
                                               {node_pool, [node()]}]}]),
    case Frags > 1 of
        true -> {atomic, ok} = mnesia:change_table_frag(Tab, {add_frag, [node()]}), ok;
        false -> ok
    end.

write_all(Tab, [K | Ks]) -> mnesia:write({Tab, K, K}), write_all(Tab, Ks);
write_all(_, []) -> ok.

read_all(Tab, [K | Ks]) -> [_] = mnesia:read(Tab, K), read_all(Tab, Ks);
read_all(_, []) -> ok.

batches([], _) -> [];
batches(L, B) when length(L) =< B -> [L];
batches(L, B) -> {H, T} = lists:split(B, L), [H | batches(T, B)].

rotate(L, 0) -> L;
rotate([H | T], I) -> rotate(T ++ [H], I - 1).

median(L) -> lists:nth((length(L) + 1) div 2, lists:sort(L)).
