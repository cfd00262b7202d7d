%% @doc Inserts of new keys alone, interleaved: for each repetition one
%% fresh 50-fragment `ram_copies' table per hash module (created with 49
%% fragments and grown by one, the creation order rotating), then batches
%% of 1,000 new keys written through `mnesia_frag' (`async_dirty') into
%% every table, in an order drawn afresh per batch (fixed seed). Prints,
%% per table, the median time per insert and the median over repetitions
%% of the first table's time over this one's (list the default first, and
%% again last for an A/A line). A smaller, quicker harness than
%% `fraghash_bench_throughput' for the insert gap of
%% docs/mnesia-performance.md; run it on one scheduler:
%%
%%   erl +S 1:1 -pa _build/bench/lib/fraghash/ebin _build/bench/lib/fraghash/bench/mnesia \
%%       -eval 'mnesia:start(), fraghash_bench_inserts:run([mnesia_frag_hash,
%%              mnesia_frag_slots, fraghash_bench_control, mnesia_frag_hash], 30), halt().'
-module(fraghash_bench_inserts).

-export([run/2]).

-define(FRAGS, 50).
-define(KEYS, 50000).
-define(BATCH, 1000).

%% @doc `Mods': one table per entry (a module may appear twice); `Reps'
%% repetitions.
-spec run([module()], pos_integer()) -> ok.
run(Mods, Reps) ->
    Numbered = lists:zip(lists:seq(1, length(Mods)), Mods),
    Results = [repetition(R, Numbered) || R <- lists:seq(1, Reps)],
    lists:foreach(
      fun({I, Mod}) ->
              Ns = [maps:get(I, M) || M <- Results],
              Ratios = [maps:get(1, M) / maps:get(I, M) || M <- Results],
              io:format("~b ~-24s ~.3f us/insert, ratio to the first ~.3f~n",
                        [I, Mod, fraghash_bench:median(Ns) / ?KEYS / 1000,
                         fraghash_bench:median(Ratios)])
      end, Numbered).

repetition(R, Numbered) ->
    Order = fraghash_bench:rotate(Numbered, R rem length(Numbered)),
    Tabs = [{I, create(list_to_atom(lists:concat([bench_inserts_, R, "_", I])), Mod)}
            || {I, Mod} <- Order],
    Keys = [{user, R * 100000000 + K, <<"new">>} || K <- lists:seq(1, ?KEYS)],
    rand:seed(exsss, {R, 9, 9}),
    Times = lists:foldl(
              fun(Batch, Acc) ->
                      lists:foldl(fun({I, Tab}, Acc2) ->
                                          Ns = timed(Tab, Batch),
                                          maps:update_with(I, fun(V) -> V + Ns end, Ns, Acc2)
                                  end, Acc, fraghash_bench_throughput:shuffle(Tabs))
              end, #{}, fraghash_bench_throughput:batches(Keys, ?BATCH)),
    [{atomic, ok} = mnesia:delete_table(Tab) || {_, Tab} <- Tabs],
    Times.

create(Tab, Mod) ->
    {atomic, ok} = mnesia:create_table(Tab, [{attributes, [k, v]},
                                             {frag_properties,
                                              [{n_fragments, ?FRAGS - 1}, {hash_module, Mod},
                                               {node_pool, [node()]}]}]),
    {atomic, ok} = mnesia:change_table_frag(Tab, {add_frag, [node()]}),
    Tab.

timed(Tab, Batch) ->
    T0 = erlang:monotonic_time(nanosecond),
    ok = mnesia:activity(async_dirty,
                         fun() -> fraghash_bench_throughput:write_all(Tab, Batch) end,
                         [], mnesia_frag),
    erlang:monotonic_time(nanosecond) - T0.
