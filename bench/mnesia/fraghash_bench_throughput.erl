%% @doc Paired throughput measurement of Mnesia hash modules: `async_dirty'
%% inserts of new keys, overwrites and reads through `mnesia_frag'
%% (ram_copies, one node), each module beside `mnesia_frag_hash' in the
%% same run.
%%
%% On a shared machine the absolute rate of the same table varies by 20 %
%% and more between runs, and two tables of the same module differ by up to
%% 15 % for as long as they live (where their records and fragment names
%% landed in memory). So the comparison is built to cancel both:
%%
%% <ul>
%% <li>Within a repetition every module works at the same moments: the keys
%% are cut into batches of `?BATCH', and for every batch each table in turn
%% inserts that many new keys, then overwrites and reads the batch, in an
%% order drawn afresh for every batch (a fixed seed). Load from other
%% processes, CPU frequency and cache state hit all modules alike. The
%% order must not merely rotate: then each table always follows the same
%% one, and the table that followed the reference lost 5 to 6% of its
%% insert rate whatever its module (three identical copies of the `slots'
%% module scored 0.94 there and 0.96 to 1.00 elsewhere).</li>
%% <li>Each repetition creates its own tables (the creation order rotating
%% too), so table-layout luck is drawn afresh, up to `FreshMax' fragments.
%% Above that, Mnesia takes too long to create tables (30 to 40 s for one
%% of 4,000 fragments on a node that holds many), so two sets of tables,
%% the second created in the reverse order of the first, serve every
%% repetition (a module's time is that of its two tables), and each
%% repetition's inserted keys are deleted (untimed) before the next. Tables
%% are left for the VM's exit: Mnesia takes 50 to 150 s to delete one table
%% of 4,000 fragments.</li>
%% <li>A ratio is computed per repetition (the default's time over the
%% module's) and the median over the repetitions is reported, with the
%% lowest and highest.</li>
%% <li>A second `mnesia_frag_hash' table is measured like any module: its
%% ratio to the first is what the same module scores against itself, the
%% resolution of the measurement.</li>
%% </ul>
%%
%% Tables are created with one fragment fewer, then grown by one `add_frag'
%% (while empty), so the fraghash modules hold real state bytes, as a user's
%% table does once it has grown.
%%
%% Where the operations run: by default (`shared') the benchmark's own
%% process runs every table's batches, so each batch inherits the heap
%% left by whichever table ran before it. A state over 64 bytes adds its
%% size to the binary heap of the process that copies it out of ets, which
%% brings that process's garbage collections forward, so a module with
%% such a state changes the collections that fall in its neighbours'
%% batches and its own: at 50 fragments `slots' lost 5% in whichever phase
%% came first after a change of table, and gained as much in the others.
%% `per_table' gives every table its own process, started with the
%% repetition, that runs that table's batches (the timing is taken inside
%% it): each module then sees only its own collections, as an application
%% process working on one table does.
-module(fraghash_bench_throughput).

-export([run/4, run/5, run/6, print_header/0]).
%% Shared with fraghash_bench_inserts.
-export([batches/2, shuffle/1, write_all/2]).

%% Keys per batch: long enough that the timer and the activity's set-up are
%% well below 1 % of it, short enough that a burst of outside load falls on
%% every module.
-define(BATCH, 1000).
%% Largest fragment count whose tables are created afresh every repetition.
-define(FRESH_MAX, 400).

-type entry() :: {Label :: string(), module()}.
-type op() :: i | w | r.
-type processes() :: shared | per_table.

%% @doc The table header for {@link run/5}'s lines.
-spec print_header() -> ok.
print_header() ->
    io:format("| hash module | fragments | create table (s) | inserts/s | overwrites/s "
              "| reads/s | inserts vs default | overwrites vs default "
              "| reads vs default |~n"
              "|---|---|---|---|---|---|---|---|---|~n").

%% @doc As {@link run/5} with tables created afresh up to 400 fragments.
-spec run([module()], pos_integer(), pos_integer(), {pos_integer(), pos_integer()}) -> ok.
run(Mods, Frags, K, RepsRounds) ->
    run(Mods, Frags, K, RepsRounds, ?FRESH_MAX).

%% @doc As {@link run/6} with every batch run by the calling process.
-spec run([module()], pos_integer(), pos_integer(),
          {pos_integer(), pos_integer()}, non_neg_integer()) -> ok.
run(Mods, Frags, K, RepsRounds, FreshMax) ->
    run(Mods, Frags, K, RepsRounds, FreshMax, shared).

%% @doc One line per module for `Frags' fragments and `K' keys: `Reps'
%% repetitions, each inserting `K' new keys once and making `Rounds' passes
%% of overwrites and reads over the `K' loaded keys. Rates are over all
%% repetitions; a ratio is `mnesia_frag_hash''s time divided by the
%% module's in one repetition (above 1: faster than the default): the
%% median over the repetitions, then the lowest and highest. Tables are
%% created afresh for every repetition when `Frags =< FreshMax', else once.
%% `Processes' says which process runs a table's batches (see the module
%% doc).
-spec run([module()], pos_integer(), pos_integer(),
          {pos_integer(), pos_integer()}, non_neg_integer(), processes()) -> ok.
run(Mods, Frags, K, {Reps, Rounds}, FreshMax, Processes) when Reps =< 99 ->
    Entries = [{"`" ++ atom_to_list(M) ++ "`", M} || M <- Mods]
        ++ [{"`mnesia_frag_hash` (a second table)", mnesia_frag_hash}],
    Keys = [fraghash_bench:key(I) || I <- lists:seq(1, K)],
    Numbered = lists:zip(lists:seq(1, length(Entries)), Entries),
    Shared = case Frags =< FreshMax of
                 true ->
                     fresh;
                 false ->
                     %% Where a table falls in the creation order sets its
                     %% speed for as long as it lives (at 4,000 fragments
                     %% each later table measured slower, the last up to
                     %% 25 %, whatever its module), so a second set is
                     %% created in the reverse order and a module's time is
                     %% that of its two tables: every module then sits at
                     %% the same mean position.
                     create_all(0, Numbered, Frags, Keys)
                         ++ create_all(99, lists:reverse(Numbered), Frags, Keys)
             end,
    PerRep = [repetition(Rep, Numbered, Frags, Keys, Rounds, Shared, Processes)
              || Rep <- lists:seq(1, Reps)],
    Ref = hd(Entries),
    lists:foreach(
      fun(E = {Label, _}) ->
              Sum = fun(Op) -> lists:sum([maps:get({E, Op}, R) || R <- PerRep]) end,
              Ratios = fun(Op) -> [maps:get({Ref, Op}, R) / maps:get({E, Op}, R)
                                   || R <- PerRep]
                       end,
              Cell = fun(Op) ->
                             Rs = Ratios(Op),
                             io_lib:format("~.3f (~.2f-~.2f)",
                                           [fraghash_bench:median(Rs), lists:min(Rs), lists:max(Rs)])
                     end,
              Create = fraghash_bench:median([maps:get({E, create}, R) || R <- PerRep]),
              io:format("| ~s | ~b | ~.1f | ~s | ~s | ~s | ~s | ~s | ~s |~n",
                        [Label, Frags, Create / 1.0e9,
                         fraghash_bench:rate(K * Reps, Sum(i) / 1000),
                         fraghash_bench:rate(K * Rounds * Reps, Sum(w) / 1000),
                         fraghash_bench:rate(K * Rounds * Reps, Sum(r) / 1000),
                         Cell(i), Cell(w), Cell(r)])
      end, Entries).

%% One repetition: the tables (fresh, or the shared ones), then interleaved
%% batches: one batch of inserts (new keys, first round only), overwrites
%% and reads per table. Returns nanoseconds per `{Entry, i | w | r |
%% create}'.
-spec repetition(pos_integer(), [{pos_integer(), entry()}], pos_integer(), [string()],
                 pos_integer(),
                 fresh | [{entry(), atom(), non_neg_integer()}], processes()) ->
          #{{entry(), op() | create} => non_neg_integer()}.
repetition(Rep, Numbered, Frags, Keys, Rounds, Shared, Processes) ->
    Tabs = case Shared of
               fresh -> create_all(Rep, fraghash_bench:rotate(Numbered, Rep rem length(Numbered)),
                                   Frags, Keys);
               _ -> Shared
           end,
    Created = maps:from_list([{{E, create}, TC} || {E, _, TC} <- Tabs]),
    Batches = batches(Keys, ?BATCH),
    NewKeys = batches([new_key(Rep, I) || I <- lists:seq(1, length(Keys))], ?BATCH),
    Work = [{B, N} || {B, N} <- lists:zip(Batches, NewKeys)]
        ++ [{B, none} || _ <- lists:seq(2, Rounds), B <- Batches],
    Pairs = [{E, Tab, runner(Processes)} || {E, Tab, _} <- Tabs],
    rand:seed(exsss, {Rep, Frags, 2009}),
    erlang:garbage_collect(),
    Times = lists:foldl(
              fun(Batch, Acc) ->
                      lists:foldl(fun(P, A) -> time_batch(P, Batch, A) end,
                                  Acc, shuffle(Pairs))
              end, Created, Work),
    _ = [exit(Pid, kill) || {_, _, Pid} <- Pairs, is_pid(Pid)],
    case Shared of
        fresh -> ok;
        _ -> [ok = mnesia:activity(async_dirty, fun() -> delete_all(Tab, lists:append(NewKeys)) end,
                                   [], mnesia_frag) || {_, Tab} <- Pairs]
    end,
    Times.

%% The tables of one repetition (`Rep' 0 and 99: the shared sets), created
%% in the order given, each loaded with `Keys'.
create_all(Rep, Numbered, Frags, Keys) ->
    [begin
         %% Names of equal length: mnesia_frag builds each fragment's
         %% name from the table's on every operation.
         Tab = list_to_atom(lists:flatten(io_lib:format("b~b_~2..0b_~b", [I, Rep, Frags]))),
         T0 = erlang:monotonic_time(nanosecond),
         ok = create_grown(Tab, Mod, Frags),
         T1 = erlang:monotonic_time(nanosecond),
         ok = mnesia:activity(async_dirty, fun() -> write_all(Tab, Keys) end,
                              [], mnesia_frag),
         {E, Tab, T1 - T0}
     end || {I, E = {_, Mod}} <- Numbered].

%% The `I'th key inserted in repetition `Rep': a tuple key, as applications
%% often have, distinct from every loaded key and every other repetition's.
new_key(Rep, I) -> {user, Rep * 100000000 + I, <<"new">>}.

%% The process that runs one table's batches: the caller (`self'), or one
%% of its own.
runner(shared) -> self;
runner(per_table) -> spawn_link(fun run_batches/0).

run_batches() ->
    receive
        {From, Tab, Work} ->
            From ! {self(), phases(Tab, Work)},
            run_batches()
    end.

%% Runs one batch in one table (in its runner) and adds the nanoseconds of
%% each phase to the entry's totals in `Acc'.
time_batch({E, Tab, self}, Work, Acc) ->
    add_phases(E, phases(Tab, Work), Acc);
time_batch({E, Tab, Pid}, Work, Acc) ->
    Pid ! {self(), Tab, Work},
    receive {Pid, Phases} -> add_phases(E, Phases, Acc) end.

add_phases(E, Phases, Acc) ->
    lists:foldl(fun({Op, Ns}, A) -> add({E, Op}, Ns, A) end, Acc, Phases).

%% Inserts (when there are new keys), overwrites, then reads one batch in
%% one table: `[{Op, Nanoseconds}]'.
phases(Tab, {Batch, New}) ->
    T0 = erlang:monotonic_time(nanosecond),
    Inserts = case New of
                  none ->
                      [];
                  _ ->
                      ok = mnesia:activity(async_dirty, fun() -> write_all(Tab, New) end,
                                           [], mnesia_frag),
                      [{i, erlang:monotonic_time(nanosecond) - T0}]
              end,
    T1 = erlang:monotonic_time(nanosecond),
    ok = mnesia:activity(async_dirty, fun() -> write_all(Tab, Batch) end, [], mnesia_frag),
    T2 = erlang:monotonic_time(nanosecond),
    ok = mnesia:activity(async_dirty, fun() -> read_all(Tab, Batch) end, [], mnesia_frag),
    T3 = erlang:monotonic_time(nanosecond),
    [{w, T2 - T1}, {r, T3 - T2} | Inserts].

add(Key, Ns, Acc) -> maps:update_with(Key, fun(V) -> V + Ns end, Ns, Acc).

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

delete_all(Tab, [K | Ks]) -> mnesia:delete({Tab, K}), delete_all(Tab, Ks);
delete_all(_, []) -> ok.

%% `L' in a random order (the process's `rand' state).
shuffle(L) -> [X || {_, X} <- lists:sort([{rand:uniform(), X} || X <- L])].

batches([], _) -> [];
batches(L, B) when length(L) =< B -> [L];
batches(L, B) -> {H, T} = lists:split(B, L), [H | batches(T, B)].

