%% @doc What growing a loaded table costs, and what it does to the
%% application using it: one add (50 to 51 fragments) of a `disc_copies'
%% (or `disc_only_copies') table of `Records' integer records, while
%% writers and a reader keep working on it, per hash module and path, in one
%% run. Run by `bench/mnesia/disc-measure.sh growth'.
%%
%% Paths, each undone before the next (the table back at 50 fragments,
%% the log dumped), in rotating order per repetition:
%% <ul>
%% <li>`plain': `mnesia:change_table_frag/2', Mnesia's own (unsafe on disc:
%% the reference; fraghash modules let it through with
%% `{fraghash, allow_unsafe_change_table_frag, true}');</li>
%% <li>`safe': `fraghash_frag:add_frag/2';</li>
%% <li>`copy': no add at all; the records that add would move are read from
%% their fragments and written to a scratch table of the same storage, in
%% ordinary transactions of 500: the floor for a path that moves records in
%% batches instead of in the schema transaction.</li>
%% </ul>
%% Load: `Writers' processes (4) each run transactions through `mnesia_frag'
%% that overwrite one random existing key, back to back or, with
%% `FRAGHASH_BENCH_WRITE_RATE', at that many writes per second in all;
%% one reader reads
%% random existing keys through `mnesia_frag' (`async_dirty'). Every key
%% read exists, so a read that returns nothing is a miss and one that
%% raises a failure. The load runs 3 s before the operation (the writers'
%% rate before), through it, and until every writer's transaction under
%% way at its end has returned.
%%
%% Printed per operation: wall time; records scanned (the records of the
%% fragments the module's `add_frag' names) and moved (the new fragment's
%% size, or the records copied); writes completed during the operation and
%% their rate against the rate before; the longest a write took that
%% overlapped the operation (a writer blocked that long) and the 99th
%% percentile of those writes; reads during it, misses, and failures (reads
%% that raised and writes that aborted). Before each row, as a comment, when
%% each write that took over 200 ms began (seconds into the operation) and
%% how long it took, and for the safe path when each of its steps began.
-module(fraghash_bench_growth).

-export([run/1, run/5]).
%% Shared with fraghash_bench_relieve.
-export([stop_load/1, read_once/2, thousands/1]).
%% Shared with fraghash_bench_relieve and fraghash_bench_move.
-export([collect_steps/0, print_step_rates/4]).

-define(WRITERS, 4).
-define(BEFORE_MS, 3000).
-define(BATCH, 500).
%% An operation still running after this long is reported as unfinished.
-define(LIMIT_MS, 900000).

%% @doc The defaults: 200,000 records, `mnesia_frag_hash' and
%% `mnesia_frag_slots', one repetition, `disc_copies'.
-spec run(string()) -> ok.
run(Dir) ->
    run(Dir, 200000, [mnesia_frag_hash, mnesia_frag_slots], 1, disc_copies).

%% @doc `Dir': an empty scratch directory; `Records' per table; `Modules'
%% the hash modules; `Reps' repetitions of the three paths per module;
%% `Storage' `disc_copies' or `disc_only_copies'.
-spec run(string(), pos_integer(), [module()], pos_integer(),
          disc_copies | disc_only_copies) -> ok.
run(Dir, Records, Modules, Reps, Storage) ->
    ok = application:set_env(mnesia, dir, Dir),
    ok = application:set_env(fraghash, allow_unsafe_change_table_frag, true),
    %% Mnesia dumps its log every `dump_log_write_threshold' writes (1,000
    %% by default); FRAGHASH_BENCH_DUMP_THRESHOLD sets it, to see what the
    %% queue of dumps that fast writers build does to the schema commits.
    Threshold = case os:getenv("FRAGHASH_BENCH_DUMP_THRESHOLD") of
                    false -> 1000;
                    V -> list_to_integer(V)
                end,
    ok = application:set_env(mnesia, dump_log_write_threshold, Threshold),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    ok = fraghash_journal:ensure(),
    io:format("~n~s, ~s records, 50 -> 51 fragments, ~b writers (transactions~s) and "
              "1 reader (async_dirty) on random keys, dump_log_write_threshold ~b~n~n",
              [Storage, thousands(Records), ?WRITERS,
               case write_rate() of
                   unpaced -> ", back to back";
                   Rate -> io_lib:format(", ~s writes/s in all", [thousands(Rate)])
               end, Threshold]),
    io:format("| module | path | wall s | scanned | moved | writes during | write rate "
              "vs before | longest write ms | p99 write ms | reads | misses | failures |~n"
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|~n"),
    [module(Mod, Records, Reps, Storage) || Mod <- Modules],
    stopped = mnesia:stop(),
    ok.

module(Mod, Records, Reps, Storage) ->
    Copies = case Storage of
                 disc_copies -> n_disc_copies;
                 disc_only_copies -> n_disc_only_copies
             end,
    Tab = list_to_atom("growth_" ++ atom_to_list(Mod)),
    {atomic, ok} =
        mnesia:create_table(Tab, [{attributes, [key, val]},
                                  {frag_properties,
                                   [{n_fragments, 50}, {hash_module, Mod},
                                    {node_pool, [node()]}, {Copies, 1}]}]),
    Scratch = list_to_atom("growth_copy_" ++ atom_to_list(Mod)),
    {atomic, ok} = mnesia:create_table(Scratch, [{attributes, [key, val]},
                                                 {Storage, [node()]}]),
    load(Tab, 1, Records),
    Paths = [plain, safe, copy],
    lists:foreach(
      fun(Rep) ->
              %% Rotate which path goes first, so none always meets a fuller
              %% log or a colder cache.
              Shift = (Rep - 1) rem length(Paths),
              {A, B} = lists:split(Shift, Paths),
              [measure(Tab, Scratch, Mod, Path, Records) || Path <- B ++ A]
      end, lists:seq(1, Reps)),
    {atomic, ok} = mnesia:delete_table(Scratch),
    {atomic, ok} = mnesia:delete_table(Tab),
    ok.

load(_Tab, From, To) when From > To ->
    ok;
load(Tab, From, To) ->
    Last = min(To, From + 9999),
    mnesia:activity(async_dirty,
                    fun() -> [mnesia:write({Tab, K, K}) || K <- lists:seq(From, Last)], ok end,
                    [], mnesia_frag),
    load(Tab, Last + 1, To).

measure(Tab, Scratch, Mod, Path, Records) ->
    {M, S, N} = fraghash_frag:hash(Tab),
    {NewState, Iter, _} = M:add_frag(S),
    Donors = [fraghash_frag:frag_name(Tab, F) || F <- Iter],
    Scanned = lists:sum([mnesia:table_info(F, size) || F <- Donors]),
    %% Every path starts from an empty transaction log.
    ok = mnesia:sync_log(),
    dumped = mnesia:dump_log(),
    Load = start_load(Tab, Records),
    timer:sleep(?BEFORE_MS),
    T0 = now_us(),
    Result = run_op(Path, Tab, Scratch, M, NewState, N, Donors),
    T1 = now_us(),
    {Writes, Reads} = stop_load(Load),
    Moved = case {Path, Result} of
                {copy, {copied, C}} -> C;
                {_, {atomic, ok}} -> mnesia:table_info(fraghash_frag:frag_name(Tab, N + 1), size);
                _ -> 0
            end,
    report(Mod, Path, Result, T0, T1, Scanned, Moved, Writes, Reads),
    undo(Path, Result, Tab, Scratch).

run_op(plain, Tab, _Scratch, _M, _NewState, _N, _Donors) ->
    limited(fun() -> mnesia:change_table_frag(Tab, {add_frag, [node()]}) end);
run_op(safe, Tab, _Scratch, _M, _NewState, _N, _Donors) ->
    %% Where the time goes: the moment each step of the add begins.
    Steps = ets:new(steps, [public, duplicate_bag]),
    T0 = erlang:monotonic_time(microsecond),
    ok = fraghash_frag:set_step_hook(
           fun(_, S) -> ets:insert(Steps, {erlang:monotonic_time(microsecond) - T0, S}) end),
    try limited(fun() -> fraghash_frag:add_frag(Tab, [node()]) end)
    after
        ok = fraghash_frag:set_step_hook(undefined),
        io:format("<!-- safe add, step begins (s): ~s -->~n",
                  [lists:join(", ", [io_lib:format("~s ~.2f", [S, T / 1.0e6])
                                     || {T, S} <- lists:sort(ets:tab2list(Steps))])]),
        ets:delete(Steps)
    end;
run_op(copy, Tab, Scratch, M, NewState, N, Donors) ->
    New = fraghash_frag:frag_name(Tab, N + 1),
    limited(
      fun() ->
              %% The keys the add would move: read as a path that copies in
              %% batches would find them, then copied, 500 per transaction.
              Moving = [{F, K} || F <- Donors, K <- mnesia:dirty_all_keys(F),
                                  fraghash_frag:frag_name(Tab, M:key_to_frag_number(NewState, K))
                                      =:= New],
              {atomic, ok} = batches(Moving, Scratch),
              {copied, length(Moving)}
      end).

batches(Items, Scratch) ->
    lists:foreach(
      fun(Batch) ->
              {atomic, ok} = mnesia:transaction(
                               fun() ->
                                       lists:foreach(
                                         fun({F, K}) ->
                                                 [mnesia:write(Scratch, setelement(1, R, Scratch),
                                                               write)
                                                  || R <- mnesia:read(F, K, read)]
                                         end, Batch)
                               end)
      end, fraghash_tab:chunks(Items, ?BATCH)),
    {atomic, ok}.

%% Runs an operation in a process of its own, giving up after ?LIMIT_MS.
limited(Op) ->
    {Pid, Ref} = spawn_monitor(fun() -> exit({done, Op()}) end),
    receive
        {'DOWN', Ref, process, Pid, {done, Result}} -> Result;
        {'DOWN', Ref, process, Pid, Other} -> {crashed, Other}
    after ?LIMIT_MS ->
            exit(Pid, kill),
            receive {'DOWN', Ref, process, Pid, _} -> ok end,
            unfinished
    end.

%% The table back at 50 fragments (and the scratch table empty).
undo(copy, _Result, _Tab, Scratch) ->
    {atomic, ok} = mnesia:clear_table(Scratch),
    ok;
undo(plain, {atomic, ok}, Tab, _Scratch) ->
    {atomic, ok} = mnesia:change_table_frag(Tab, del_frag),
    ok;
undo(safe, {atomic, ok}, Tab, _Scratch) ->
    {atomic, ok} = fraghash_frag:del_frag(Tab),
    ok;
undo(_Path, _Result, Tab, _Scratch) ->
    %% Unfinished or refused: whatever it left is recovered, then the table
    %% is brought back to 50 fragments.
    ok = fraghash_frag:recover(Tab),
    case fraghash_frag:hash(Tab) of
        {_, _, 51} -> {atomic, ok} = fraghash_frag:del_frag(Tab), ok;
        {_, _, 50} -> ok
    end.

%%% The load

start_load(Tab, Records) ->
    Stop = atomics:new(1, []),
    Parent = self(),
    %% Each writer's pace: the microseconds between the starts of two of
    %% its writes (0: back to back).
    Period = case write_rate() of
                 unpaced -> 0;
                 Rate -> ?WRITERS * 1000000 div Rate
             end,
    Writers = [spawn_link(fun() -> writer(Parent, Tab, Records, Stop, I, Period, now_us(), []) end)
               || I <- lists:seq(1, ?WRITERS)],
    Reader = spawn_link(fun() -> reader(Parent, Tab, Records, Stop, []) end),
    {Stop, Writers, Reader}.

%% The writers' pace, writes per second in all, from
%% FRAGHASH_BENCH_WRITE_RATE; `unpaced' (back to back) when it is unset.
write_rate() ->
    case os:getenv("FRAGHASH_BENCH_WRITE_RATE") of
        false -> unpaced;
        "" -> unpaced;
        R -> list_to_integer(R)
    end.

%% Each writer keeps `{StartUs, EndUs, Outcome}' per write: `ok', or
%% `failed' for a transaction that aborted. A paced writer begins a write
%% every `Period' µs (`Next' the next start), and after a write that took
%% longer it goes on at once, without making up the writes it missed.
writer(Parent, Tab, Records, Stop, I, Period, Next, Acc) ->
    case atomics:get(Stop, 1) of
        1 ->
            Parent ! {writes, self(), Acc};
        0 ->
            K = rand:uniform(Records),
            T0 = now_us(),
            Outcome = try mnesia:activity(transaction,
                                          fun() -> mnesia:write({Tab, K, {I, T0}}) end, [],
                                          mnesia_frag) of
                          ok -> ok
                      catch
                          _:_ -> failed
                      end,
            T1 = now_us(),
            Next2 = max(Next + Period, T1),
            case Period > 0 andalso Next2 - T1 >= 1000 of
                true -> timer:sleep((Next2 - T1) div 1000);
                false -> ok
            end,
            writer(Parent, Tab, Records, Stop, I, Period, Next2, [{T0, T1, Outcome} | Acc])
    end.

%% The reader keeps `{StartUs, Outcome}' per read: `hit', `miss' or
%% `failed'.
reader(Parent, Tab, Records, Stop, Acc) ->
    case atomics:get(Stop, 1) of
        1 ->
            Parent ! {reads, self(), Acc};
        0 ->
            K = rand:uniform(Records),
            T0 = now_us(),
            Outcome = read_once(Tab, K),
            reader(Parent, Tab, Records, Stop, [{T0, Outcome} | Acc])
    end.

%% @doc One read of key `K' of `Tab' through `mnesia_frag' (`async_dirty'):
%% `hit', `miss' (nothing found) or `failed' (it raised).
read_once(Tab, K) ->
    try mnesia:activity(async_dirty, fun() -> mnesia:read(Tab, K) end, [], mnesia_frag) of
        [_] -> hit;
        _ -> miss
    catch
        _:_ -> failed
    end.

%% @doc Stops the writers and the reader that share atomic `Stop' and
%% collects what each kept: `{Writes, Reads}'.
stop_load({Stop, Writers, Reader}) ->
    ok = atomics:put(Stop, 1, 1),
    Writes = lists:append([receive {writes, W, Acc} -> Acc end || W <- Writers]),
    Reads = receive {reads, Reader, Acc} -> Acc end,
    {Writes, Reads}.

%%% The figures

report(Mod, Path, Result, T0, T1, Scanned, Moved, Writes, Reads) ->
    Before = [W || {S, _, ok} = W <- Writes, S < T0, S >= T0 - ?BEFORE_MS * 1000],
    %% Writes that overlapped the operation: begun before its end, ended
    %% after its start.
    Overlapping = [{S, E} || {S, E, _} <- Writes, S < T1, E > T0],
    During = [E - S || {S, E} <- Overlapping],
    Completed = length([E || {_, E, ok} <- Writes, E > T0, E =< T1]),
    WriteFailures = length([E || {S, E, failed} <- Writes, S < T1, E > T0]),
    Wall = (T1 - T0) / 1.0e6,
    RateBefore = length(Before) / (?BEFORE_MS / 1000),
    RateDuring = Completed / max(Wall, 1.0e-6),
    Sorted = lists:sort(During),
    LongestAt = lists:sort([{S - T0, E - S} || {S, E} <- Overlapping, E - S > 200000]),
    io:format("<!-- writes over 200 ms (start s, ms): ~s -->~n",
              [lists:join(", ", [io_lib:format("~.2f ~b", [St / 1.0e6, D div 1000]) || {St, D} <- LongestAt])]),
    Longest = case Sorted of [] -> 0; _ -> lists:last(Sorted) end,
    P99 = case Sorted of
              [] -> 0;
              _ -> lists:nth(max(1, ceil(0.99 * length(Sorted))), Sorted)
          end,
    ReadsDuring = [O || {S, O} <- Reads, S >= T0, S < T1],
    Outcome = case Result of
                  {atomic, ok} -> "";
                  {copied, _} -> "";
                  unfinished -> " (unfinished)";
                  Other -> io_lib:format(" (~0tp)", [Other])
              end,
    io:format("| `~s` | ~s~s | ~.1f | ~s | ~s | ~s | ~.2f | ~s | ~s | ~s | ~s | ~s |~n",
              [Mod, Path, Outcome, Wall, thousands(Scanned), thousands(Moved),
               thousands(Completed), RateDuring / max(RateBefore, 1.0e-6),
               thousands(Longest div 1000), thousands(P99 div 1000),
               thousands(length(ReadsDuring)),
               thousands(length([x || miss <- ReadsDuring])),
               thousands(length([x || failed <- ReadsDuring]) + WriteFailures)]).

%% @doc The steps a step hook reported to this process as `{step, Step,
%% TimeUs}', as `{TimeUs, Step}' in order.
collect_steps() ->
    collect_steps([]).

collect_steps(Acc) ->
    receive {step, Step, T} -> collect_steps([{T, Step} | Acc])
    after 0 -> lists:reverse(Acc)
    end.

%% @doc Prints, as a comment, the time spent from each step to the next
%% (`Steps': `{TimeUs, Step}' in order; an operation from `T0' to `T1'),
%% summed per step name (a rebalance runs the steps of each move), with
%% the writes completed meanwhile per second and their mean time; the same
%% for the 3 s before (`before'). The writers wait for each write before
%% the next: past 2 ms a write (4 writers, 2,000/s), their rate is 4 ÷ its
%% mean time.
print_step_rates([], _Writes, _T0, _T1) ->
    ok;
print_step_rates(Steps, Writes, T0, T1) ->
    Spans = lists:zip([{T0 - ?BEFORE_MS * 1000, before}, {T0, start} | Steps],
                      [T0 | [T || {T, _} <- Steps]] ++ [T1]),
    Totals = lists:foldl(
               fun({{From, Step}, To}, Acc) ->
                       Times = [E - S || {S, E, ok} <- Writes, E > From, E =< To],
                       maps:update_with(Step, fun({Us, N, Sum}) ->
                                                      {Us + To - From, N + length(Times),
                                                       Sum + lists:sum(Times)}
                                              end, {To - From, length(Times), lists:sum(Times)},
                                        Acc)
               end, #{}, Spans),
    Order = [before | lists:sort(fun(X, Y) -> first(X, Steps) =< first(Y, Steps) end,
                                 maps:keys(Totals) -- [before])],
    io:format("<!-- time from each step to the next (s; writes/s, mean write ms meanwhile): "
              "~s -->~n",
              [lists:join(", ", [io_lib:format("~s ~.2f; ~b, ~.1f",
                                               [St, Us / 1.0e6, round(N / max(Us / 1.0e6, 1.0e-6)),
                                                Sum / max(N, 1) / 1000])
                                 || St <- Order, {Us, N, Sum} <- [maps:get(St, Totals)]])]).

first(start, [{T, _} | _]) -> T - 1;
first(Step, Steps) -> hd([T || {T, S} <- Steps, S =:= Step]).

now_us() -> erlang:monotonic_time(microsecond).

%% @doc `N' with a comma between thousands.
thousands(N) when N < 1000 -> integer_to_list(N);
thousands(N) -> thousands(N div 1000) ++ io_lib:format(",~3..0b", [N rem 1000]).
