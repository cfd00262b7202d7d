%% @doc The posts' case measured: one fragment of a fragmented table grown
%% far past the others (a `disc_only_copies' file heading for dets's 2 GB),
%% relieved with `fraghash_frag:relieve(Tab, Nodes, largest)' while an
%% application keeps writing and reading, against a batched copy of the
%% same records in the same run. One case (a storage type and a record
%% size) per call, in a fresh VM: run by `bench/mnesia/relieve-load.sh',
%% which says how.
%%
%% The table: `mnesia_frag_slots', 8 fragments, fragment 1 holding about
%% 93% of the records (as many as fill about `MB' megabytes of a dets
%% file, on either storage type), each of the others
%% about 1%; values of `ValueBytes' bytes. The load, through `mnesia_frag',
%% 3 s before an operation, through it, and until every writer's
%% transaction under way at its end returned: 4 writers overwriting random
%% existing keys in transactions, paced at 2,000 writes/s in all, 90% of
%% them on keys of fragment 1; one reader at 500 reads/s of random
%% existing keys (`async_dirty': a read that finds nothing is a miss).
%%
%% With `Kind' `rehash' the case is a change of hash module instead: the
%% same 8 fragments on `mnesia_frag_hash', every record about `MB' megabytes
%% in all spread as that module spreads them, changed online to
%% `mnesia_frag_slots' (`fraghash_frag:change_hash_module/2'), which moves
%% every record the new module places in another fragment; the writers and
%% the reader pick among all keys, and the copy reads every fragment.
%%
%% Operations, in this order on the same table: `copy', the reference: the
%% keys of fragment 1 listed (by list_keys/1, the same in every version
%% of the code measured), those the
%% relieved state sends to the new fragment copied into a scratch table of
%% the same storage in transactions of 500 (then the scratch table is
%% deleted); `idle', nothing for as long as the copy took, what the
%% writers meet from the table alone (skipped with
%% `FRAGHASH_BENCH_NO_IDLE=1'); `relieve', `fraghash_frag:relieve/3'.
%%
%% Figures per operation: wall time, records moved and per second,
%% relieve ÷ copy, the resident set's peak during it less the resident set
%% at its start (VmHWM, reset through /proc/self/clear_refs at the start),
%% the largest fraghash journal record (its `erlang:external_size', what
%% `term_to_binary' makes of it; read at each step of the relieve, the
%% time that takes left out of its wall time), the largest size Mnesia's
%% log (LATEST.LOG, or PREVIOUS.LOG while a dump runs) reached, the
%% writers' longest write and 99th percentile among the writes that
%% overlapped it, their rate during it against the 3 s before, and the
%% reader's reads and misses (and failures: reads that raised, writes that
%% aborted).
-module(fraghash_bench_relieve).

-export([run/5, run/6]).
%% The load, the figures and the reports, shared with fraghash_bench_move.
-export([start_load/3, figures/4, status_kb/1, json/1]).

-define(FRAGS, 8).
-define(WRITERS, 4).
-define(WRITE_RATE, 2000).
-define(READ_RATE, 500).
%% Share of writes on keys of the relieved fragment, in percent.
-define(HOT_PERCENT, 90).
-define(BEFORE_MS, 3000).
-define(BATCH, 500).
%% The relieved fragment's share of the records, in percent.
-define(SHARE, 93).
-define(TAB, relieved).
-define(SCRATCH, relieved_copy).
-define(REDB, {ext, redb_copies, fraghash_redb_copies}).

%% @doc `Dir': an empty scratch directory for Mnesia; `Storage':
%% `disc_only_copies' or `redb_copies'; `ValueBytes': each value's bytes;
%% `MB': megabytes of records in fragment 1; `Format': `table' (one
%% Markdown row per operation) or `json' (one JSON object per operation
%% as well).
-spec run(string(), disc_only_copies | redb_copies, pos_integer(), number(), table | json) -> ok.
run(Dir, Storage, ValueBytes, MB, Format) ->
    run(Dir, relieve, Storage, ValueBytes, MB, Format).

%% @doc As {@link run/5}, for the operation `Kind': `relieve' or `rehash'.
-spec run(string(), relieve | rehash, disc_only_copies | redb_copies, pos_integer(), number(),
          table | json) -> ok.
run(Dir, Kind, Storage, ValueBytes, MB, Format) ->
    %% Loaded, so that settings given on the command line apply.
    case application:load(fraghash) of
        ok -> ok;
        {error, {already_loaded, fraghash}} -> ok
    end,
    ok = application:set_env(mnesia, dir, Dir),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    ok = fraghash_journal:ensure(),
    [{atomic, ok} = fraghash_redb_copies:register() || Storage =:= redb_copies],
    {Hot, Cold} = create_and_load(Kind, Storage, ValueBytes, MB),
    Cache = fraghash_bench_cache:start(Dir),
    persistent_term:put({?MODULE, keys}, {list_to_tuple(Hot), list_to_tuple(Cold)}),
    Value = binary:copy(<<"v">>, ValueBytes),
    %% The records the operation reads: fragment 1's (relieve), all (rehash).
    SourceMB = case Kind of
                   relieve -> frag_mb(Storage, ?TAB);
                   rehash -> lists:sum([frag_mb(Storage, F) || F <- frags(?FRAGS)])
               end,
    Case = #{storage => Storage, value_bytes => ValueBytes,
             frag1_records => length(Hot), records => length(Hot) + length(Cold),
             frag1_mb => SourceMB},
    [ok = listing(Value)
     || Kind =:= relieve, os:getenv("FRAGHASH_BENCH_NO_LISTING") =/= "1"],
    Copy = measure(Case, {copy, Kind}, Value, Dir),
    CopyS = maps:get(wall_s, Copy),
    Idle = [measure(Case, {idle, round(CopyS * 1000)}, Value, Dir)
            || os:getenv("FRAGHASH_BENCH_NO_IDLE") =/= "1"],
    Relieve = measure(Case, Kind, Value, Dir),
    [print(Format, R#{relieve_over_copy => maps:get(wall_s, R) / max(CopyS, 1.0e-6)})
     || R <- [Copy | Idle] ++ [Relieve]],
    ok = fraghash_bench_cache:stop(Cache),
    stopped = mnesia:stop(),
    ok.

%%% The table

%% Creates the table on `Storage' and fills it: fragment 1 with about
%% `MB' megabytes of records, the others with about 1% of the records
%% each. Returns fragment 1's keys and the others'.
create_and_load(Kind, Storage, ValueBytes, MB) ->
    Copies = case Storage of
                 disc_only_copies -> n_disc_only_copies;
                 %% Mnesia cannot create fragments of a backend type: they
                 %% are made as disc_copies and moved (as the tests do).
                 redb_copies -> n_disc_copies
             end,
    {atomic, ok} =
        mnesia:create_table(?TAB, [{attributes, [key, val]},
                                   {frag_properties,
                                    [{n_fragments, ?FRAGS}, {hash_module, module(Kind)},
                                     {node_pool, [node()]}, {Copies, 1}]}]),
    [{atomic, ok} = mnesia:change_table_copy_type(fraghash_frag:frag_name(?TAB, F), node(),
                                                  redb_copies)
     || Storage =:= redb_copies, F <- lists:seq(1, ?FRAGS)],
    Value = binary:copy(<<"v">>, ValueBytes),
    %% A record's bytes in a dets file, about: dets gives each object a
    %% power of two of room, its external form and a header (measured:
    %% 1,920 bytes a record of 1,000-byte values, 247 of 100-byte ones;
    %% the posts' user had 529,890 records of 1 KB in a 1,017 MB file).
    %% The same records on redb_copies take less room.
    HotCount = round(MB * 1.0e6 / room(erlang:external_size({?TAB, 1000000, Value}) + 16)),
    ColdCount = HotCount * (100 - ?SHARE) div ?SHARE,
    {M, S, ?FRAGS} = fraghash_frag:hash(?TAB),
    {Hot, Cold} = case Kind of
                      relieve -> keys(M, S, 1, HotCount, ColdCount, [], []);
                      %% Every key is as likely to be written as any other.
                      rehash -> {lists:seq(1, HotCount), lists:seq(1, HotCount)}
                  end,
    T0 = erlang:monotonic_time(millisecond),
    ok = load(Storage, M, S, lists:usort(Hot ++ Cold), Value),
    Slots = case Storage of
                disc_only_copies -> io_lib:format(", its dets file ~b hash slots",
                                                  [element(2, dets:info(?TAB, no_slots))]);
                _ -> ""
            end,
    io:format(standard_error, "loaded ~b records (~b in fragment 1~s) in ~.1f s~n",
              [length(lists:usort(Hot ++ Cold)), mnesia:table_info(?TAB, size), Slots,
               (erlang:monotonic_time(millisecond) - T0) / 1000]),
    {Hot, Cold}.

module(relieve) -> mnesia_frag_slots;
module(rehash) -> mnesia_frag_hash.

room(Bytes) ->
    room(Bytes, 16).

room(Bytes, Room) when Room >= Bytes -> Room;
room(Bytes, Room) -> room(Bytes, 2 * Room).

%% Integer keys from `K' on: `HotLeft' more that fragment 1 holds and
%% `ColdLeft' more that the others hold.
keys(_M, _S, _K, 0, 0, Hot, Cold) ->
    {lists:reverse(Hot), lists:reverse(Cold)};
keys(M, S, K, HotLeft, ColdLeft, Hot, Cold) ->
    case M:key_to_frag_number(S, K) of
        1 when HotLeft > 0 -> keys(M, S, K + 1, HotLeft - 1, ColdLeft, [K | Hot], Cold);
        F when F > 1, ColdLeft > 0 -> keys(M, S, K + 1, HotLeft, ColdLeft - 1, Hot, [K | Cold]);
        _ -> keys(M, S, K + 1, HotLeft, ColdLeft, Hot, Cold)
    end.

%% Fills each key's fragment, 500 keys a batch. On redb_copies, dirty
%% writes through Mnesia. On disc_only_copies, straight into the
%% fragments' dets files (Mnesia names each after its table), a batch a
%% call: through Mnesia, one dets insert per record took 140 us a record
%% at 1 million records and about an hour for the 2 GB case; the table
%% is local and has no index, so Mnesia has nothing else to keep. A dets
%% file adds at most 512 hash slots per write it makes: with 2,000
%% records a call, a file of 1,000,000 records was left with 256,256
%% slots, 4 records a slot, and caught up 512 slots a write during the
%% operations measured, which no file grown by single writes does.
load(Storage, M, S, Keys, Value) ->
    Frag = fun(K) -> fraghash_frag:frag_name(?TAB, M:key_to_frag_number(S, K)) end,
    lists:foreach(
      fun(Batch) when Storage =:= disc_only_copies ->
              ByFrag = maps:groups_from_list(Frag, fun(K) -> {?TAB, K, Value} end, Batch),
              maps:foreach(fun(F, Records) -> ok = dets:insert(F, Records) end, ByFrag);
         (Batch) ->
              mnesia:activity(async_dirty,
                              fun() ->
                                      [mnesia:write(Frag(K), {?TAB, K, Value}, write)
                                       || K <- Batch],
                                      ok
                              end)
      end, fraghash_tab:chunks(Keys, 500)),
    [ok = dets:sync(F) || Storage =:= disc_only_copies, F <- frags(?FRAGS)],
    ok = mnesia:sync_log(),
    dumped = mnesia:dump_log(),
    ok.

%% Fragment `F''s bytes as its storage reports them, in MB (dets: its
%% file; redb_copies: the records' bytes in the database).
frag_mb(_Storage, F) ->
    mnesia:table_info(F, memory) / 1.0e6.

%%% One operation under load

measure(Case, Op, Value, Dir) ->
    ok = mnesia:sync_log(),
    dumped = mnesia:dump_log(),
    garbage_collect(),
    Load = start_load(Value),
    timer:sleep(?BEFORE_MS),
    Log = start_log_watch(Dir),
    RssBefore = status_kb("VmRSS"),
    ok = file:write_file("/proc/self/clear_refs", "5"),
    {_, Writers, _} = Load,
    Stalls = fraghash_bench_stalls:start(Writers),
    T0 = now_us(),
    {Moved, HookUs, Journal} = run_op(Op),
    T1 = now_us(),
    Peak = status_kb("VmHWM"),
    ok = fraghash_bench_stalls:stop(Stalls, T0),
    LogMax = stop_log_watch(Log),
    {Writes, Reads} = fraghash_bench_growth:stop_load(Load),
    Steps = fraghash_bench_growth:collect_steps(),
    print_steps(Op, Steps, T0),
    fraghash_bench_growth:print_step_rates(Steps, Writes, T0, T1),
    Wall = (T1 - T0 - HookUs) / 1.0e6,
    Figures = figures(Writes, Reads, T0, T1),
    maps:merge(Case, Figures#{op => op_name(Op), wall_s => Wall, moved => Moved,
                              records_per_s => Moved / max(Wall, 1.0e-6),
                              peak_rss_mb => (Peak - RssBefore) / 1024,
                              journal_record_mb => Journal / 1.0e6,
                              log_mb => LogMax / 1.0e6}).

op_name({copy, _Kind}) -> copy;
op_name({idle, _Ms}) -> idle;
op_name(Op) -> Op.

%% Prints, as a comment, how long listing fragment 1's keys takes under
%% the load: `mnesia:dirty_all_keys/1' and, where the code has it, the
%% growth path's own listing (`fraghash_tab:select/3').
listing(Value) ->
    Load = start_load(Value),
    timer:sleep(?BEFORE_MS),
    Spec = [{{?TAB, '$1', '_'}, [], ['$1']}],
    {DirtyUs, Keys} = timer:tc(fun() -> mnesia:dirty_all_keys(?TAB) end),
    {module, fraghash_tab} = code:ensure_loaded(fraghash_tab),
    Own = case erlang:function_exported(fraghash_tab, select, 3) of
              true ->
                  {Us, Listed} = timer:tc(fraghash_tab, select,
                                          [?TAB, Spec, fun(_) -> true end]),
                  %% dets slot by slot may meet a record that its linear
                  %% hashing moves up meanwhile twice (fraghash_tab:fold/4).
                  Unique = length(lists:usort(Listed)),
                  {Unique, Unique} = {Unique, length(Keys)},
                  io_lib:format("~.2f s (~b met twice)", [Us / 1.0e6, length(Listed) - Unique]);
              false ->
                  "none in this code"
          end,
    _ = fraghash_bench_growth:stop_load(Load),
    io:format("<!-- ~s, ~b-byte values: listing fragment 1's ~b keys under the load: "
              "dirty_all_keys ~.2f s, fraghash_tab:select/3 ~s -->~n",
              [storage_name(mnesia:table_info(?TAB, storage_type)), byte_size(Value),
               length(Keys), DirtyUs / 1.0e6, Own]).

%% Runs the operation: `{RecordsMoved, MicrosecondsSpentMeasuring,
%% LargestJournalRecordBytes}'.
run_op({idle, Ms}) ->
    ok = timer:sleep(Ms),
    {0, 0, 0};
run_op({copy, relieve}) ->
    {M, S, N} = fraghash_frag:hash(?TAB),
    {To, _, _} = try put(fraghash_relieve, {?TAB, 1}), M:add_frag(S)
                 after erase(fraghash_relieve)
                 end,
    Storage = mnesia:table_info(?TAB, storage_type),
    ok = create_scratch(Storage),
    Moving = [K || K <- list_keys(Storage), M:key_to_frag_number(To, K) =:= N + 1],
    lists:foreach(
      fun(Batch) ->
              {atomic, ok} = mnesia:transaction(
                               fun() ->
                                       lists:foreach(
                                         fun(K) ->
                                                 [mnesia:write(?SCRATCH,
                                                               setelement(1, R, ?SCRATCH), write)
                                                  || R <- mnesia:read(?TAB, K, read)]
                                         end, Batch)
                               end)
      end, fraghash_tab:chunks(Moving)),
    Copied = mnesia:table_info(?SCRATCH, size),
    {atomic, ok} = mnesia:delete_table(?SCRATCH),
    {Copied, 0, 0};
run_op({copy, rehash}) ->
    {mnesia_frag_hash, _, ?FRAGS} = fraghash_frag:hash(?TAB),
    Slots = slots_state(),
    Storage = mnesia:table_info(?TAB, storage_type),
    ok = create_scratch(Storage),
    %% Each fragment's keys that the new module places elsewhere.
    Moving = [{F, K} || F <- lists:seq(1, ?FRAGS), Frag <- [fraghash_frag:frag_name(?TAB, F)],
                        K <- mnesia:dirty_all_keys(Frag),
                        mnesia_frag_slots:key_to_frag_number(Slots, K) =/= F],
    lists:foreach(
      fun(Batch) ->
              {atomic, ok} = mnesia:transaction(
                               fun() ->
                                       [mnesia:write(?SCRATCH, setelement(1, R, ?SCRATCH), write)
                                        || {F, K} <- Batch,
                                           R <- mnesia:read(fraghash_frag:frag_name(?TAB, F), K,
                                                            read)],
                                       ok
                               end)
      end, fraghash_tab:chunks(Moving)),
    Copied = mnesia:table_info(?SCRATCH, size),
    {atomic, ok} = mnesia:delete_table(?SCRATCH),
    {Copied, 0, 0};
run_op(rehash) ->
    Slots = slots_state(),
    Moving = lists:sum([length([K || K <- mnesia:dirty_all_keys(fraghash_frag:frag_name(?TAB, F)),
                                     mnesia_frag_slots:key_to_frag_number(Slots, K) =/= F])
                        || F <- lists:seq(1, ?FRAGS)]),
    Spent = atomics:new(2, []),
    ok = fraghash_frag:set_step_hook(journal_hook(Spent)),
    Result = try fraghash_frag:change_hash_module(?TAB, mnesia_frag_slots)
             after fraghash_frag:set_step_hook(undefined)
             end,
    {atomic, ok} = Result,
    {Moving, atomics:get(Spent, 1), atomics:get(Spent, 2)};
run_op(relieve) ->
    Spent = atomics:new(2, []),
    ok = fraghash_frag:set_step_hook(journal_hook(Spent)),
    {_, _, N} = fraghash_frag:hash(?TAB),
    %% `largest' must pick fragment 1, the one the copy read.
    [Largest | _] = lists:reverse(lists:keysort(2, [{F, mnesia:table_info(F, size)}
                                                    || F <- frags(N)])),
    {?TAB, _} = Largest,
    Result = try fraghash_frag:relieve(?TAB, [node()], largest)
             after fraghash_frag:set_step_hook(undefined)
             end,
    {atomic, ok} = Result,
    {mnesia:table_info(fraghash_frag:frag_name(?TAB, N + 1), size),
     atomics:get(Spent, 1), atomics:get(Spent, 2)}.

%% Prints, as a comment, when the operation reached each of its steps
%% (seconds from its start, `T0'): how its time splits between copying,
%% switching and cleaning.
print_steps(_Op, [], _T0) ->
    ok;
print_steps(Op, Steps, T0) ->
    io:format("<!-- ~s steps, s from its start: ~s -->~n",
              [op_name(Op), lists:join(", ", [io_lib:format("~s ~.1f", [S, (T - T0) / 1.0e6])
                                             || {T, S} <- Steps])]).

frags(N) ->
    [fraghash_frag:frag_name(?TAB, F) || F <- lists:seq(1, N)].

%% The step hook that reads the journal's largest record after the switch
%% committed (its locks gone) and before the entry goes: the journal then
%% holds every record the operation writes to it. `Spent' keeps the time
%% that took (µs, left out of the wall time) and the largest size.
journal_hook(Spent) ->
    Steps = self(),
    fun(_Tab, Step) ->
            Steps ! {step, Step, now_us()},
            case lists:member(Step, [grow_switched, grow_done]) of
                true ->
                    {Us, Bytes} = timer:tc(fun largest_journal_record/0),
                    atomics:add(Spent, 1, Us),
                    atomics:put(Spent, 2, max(Bytes, atomics:get(Spent, 2)));
                false ->
                    ok
            end
    end.

%% mnesia_frag_slots's state at the table's fragment count, as
%% `fraghash_frag:change_hash_module/2' makes it.
slots_state() ->
    lists:foldl(fun(_, St) -> element(1, mnesia_frag_slots:add_frag(St)) end,
                mnesia_frag_slots:init_state(?TAB, undefined), lists:seq(2, ?FRAGS)).

%% Fragment 1's keys, for the copy: as fast as this benchmark knows to
%% list them under writers, whatever the code measured does. From a dets
%% file, 500 records a request to its server, fixed throughout (as
%% `dets:select/2' fixes it, with about 8 KB a request, each queued
%% behind the writers': see the listing line printed before the copy);
%% elsewhere `mnesia:dirty_all_keys/1'.
list_keys(disc_only_copies) ->
    ok = dets:safe_fixtable(?TAB, true),
    try dets_keys(dets:select(?TAB, [{{?TAB, '$1', '_'}, [], ['$1']}], 500), [])
    after ok = dets:safe_fixtable(?TAB, false)
    end;
list_keys(_Storage) ->
    mnesia:dirty_all_keys(?TAB).

dets_keys('$end_of_table', Keys) -> lists:append(Keys);
dets_keys({Chunk, Cont}, Keys) -> dets_keys(dets:select(Cont), [Chunk | Keys]).

create_scratch(disc_only_copies) ->
    {atomic, ok} = mnesia:create_table(?SCRATCH, [{attributes, [key, val]},
                                                  {disc_only_copies, [node()]}]),
    ok;
create_scratch(?REDB) ->
    {atomic, ok} = mnesia:create_table(?SCRATCH, [{attributes, [key, val]},
                                                  {disc_copies, [node()]}]),
    {atomic, ok} = mnesia:change_table_copy_type(?SCRATCH, node(), redb_copies),
    ok.

%% The largest record of fraghash's journal now, in bytes of its external
%% form (the journal is disc_copies: an ets table here).
largest_journal_record() ->
    ets:foldl(fun(R, Max) -> max(erlang:external_size(R), Max) end, 0, fraghash_journal).

%% @doc The resident set figure `Name' (VmRSS, VmHWM) of this VM, in kB.
-spec status_kb(string()) -> non_neg_integer().
status_kb(Name) ->
    {ok, B} = file:read_file("/proc/self/status"),
    [Line] = [L || L <- string:split(binary_to_list(B), "\n", all), lists:prefix(Name, L)],
    [_, Kb | _] = string:lexemes(Line, " \t"),
    list_to_integer(Kb).

%% A process that polls the size of Mnesia's log files every 20 ms and
%% keeps the largest.
start_log_watch(Dir) ->
    Files = [filename:join(Dir, F) || F <- ["LATEST.LOG", "PREVIOUS.LOG"]],
    spawn_link(fun() -> log_watch(Files, 0) end).

log_watch(Files, Max) ->
    Now = lists:max([filelib:file_size(F) || F <- Files]),
    receive
        {stop, From} -> From ! {log_max, max(Now, Max)}
    after 20 ->
            log_watch(Files, max(Now, Max))
    end.

stop_log_watch(Pid) ->
    Pid ! {stop, self()},
    receive {log_max, Max} -> Max end.

%%% The load

start_load(Value) ->
    start_load(?TAB, fun() -> key(?HOT_PERCENT) end, Value).

%% @doc Starts the load on fragmented table `Tab': 4 writers writing
%% `{Tab, Key, Value}' in transactions through `mnesia_frag', 2,000 writes/s
%% in all, and a reader at 500 reads/s (`async_dirty'), each key
%% `KeyFun()'. Stopped by `fraghash_bench_growth:stop_load/1', which
%% returns `{Writes, Reads}' for {@link figures/4}.
-spec start_load(atom(), fun(() -> term()), binary()) -> {atomics:atomics_ref(), [pid()], pid()}.
start_load(Tab, KeyFun, Value) ->
    Stop = atomics:new(1, []),
    Parent = self(),
    Period = ?WRITERS * 1000000 div ?WRITE_RATE,
    Writers = [spawn_link(fun() -> writer(Parent, Tab, KeyFun, Value, Stop, Period, now_us(), [])
                          end)
               || _ <- lists:seq(1, ?WRITERS)],
    Reader = spawn_link(fun() -> reader(Parent, Tab, KeyFun, Stop, 1000000 div ?READ_RATE,
                                        now_us(), [])
                        end),
    {Stop, Writers, Reader}.

%% A random existing key: of fragment 1 `HotPercent' times in 100.
key(HotPercent) ->
    {Hot, Cold} = persistent_term:get({?MODULE, keys}),
    case rand:uniform(100) =< HotPercent of
        true -> element(rand:uniform(tuple_size(Hot)), Hot);
        false -> element(rand:uniform(tuple_size(Cold)), Cold)
    end.

%% Each writer keeps `{StartUs, EndUs, ok | failed}' per write; it begins
%% one every `Period' µs, at once after one that took longer (without
%% making up the ones missed).
writer(Parent, Tab, KeyFun, Value, Stop, Period, Next, Acc) ->
    case atomics:get(Stop, 1) of
        1 ->
            Parent ! {writes, self(), Acc};
        0 ->
            K = KeyFun(),
            T0 = now_us(),
            ok = fraghash_bench_stalls:began(T0),
            Outcome = try mnesia:activity(transaction, fun() -> mnesia:write({Tab, K, Value}) end,
                                          [], mnesia_frag) of
                          ok -> ok
                      catch
                          _:_ -> failed
                      end,
            T1 = now_us(),
            ok = fraghash_bench_stalls:ended(),
            writer(Parent, Tab, KeyFun, Value, Stop, Period, pace(Next, Period, T1),
                   [{T0, T1, Outcome} | Acc])
    end.

%% The reader keeps `{StartUs, hit | miss | failed}' per read, at its pace
%% as the writers keep theirs.
reader(Parent, Tab, KeyFun, Stop, Period, Next, Acc) ->
    case atomics:get(Stop, 1) of
        1 ->
            Parent ! {reads, self(), Acc};
        0 ->
            K = KeyFun(),
            T0 = now_us(),
            Outcome = fraghash_bench_growth:read_once(Tab, K),
            reader(Parent, Tab, KeyFun, Stop, Period, pace(Next, Period, now_us()),
                   [{T0, Outcome} | Acc])
    end.

%% Sleeps until the next start, `Period' µs after the last one (or none
%% when that is past); returns it.
pace(Next, Period, Now) ->
    Next2 = max(Next + Period, Now),
    case Next2 - Now >= 1000 of
        true -> timer:sleep((Next2 - Now) div 1000);
        false -> ok
    end,
    Next2.

%%% The figures

%% @doc The load's figures over the operation that ran from `T0' to `T1'
%% (µs, `erlang:monotonic_time'): `writes' completed during it,
%% `write_rate_vs_before' (their rate ÷ that of the 3 s before),
%% `longest_write_ms' and `p99_write_ms' among the writes that overlapped
%% it, `longest_write_at_s' (when the longest began, s from `T0'), the reader's `reads' and `misses' begun during it, and `failures'
%% (reads that raised, writes that aborted).
-spec figures([{integer(), integer(), ok | failed}], [{integer(), atom()}], integer(),
              integer()) -> map().
figures(Writes, Reads, T0, T1) ->
    Before = [W || {S, _, ok} = W <- Writes, S < T0, S >= T0 - ?BEFORE_MS * 1000],
    %% Writes that overlapped the operation: begun before its end, ended
    %% after its start.
    Overlapping = lists:sort([{E - S, S} || {S, E, _} <- Writes, S < T1, E > T0]),
    During = [D || {D, _} <- Overlapping],
    Completed = length([E || {_, E, ok} <- Writes, E > T0, E =< T1]),
    WriteFailures = length([E || {S, E, failed} <- Writes, S < T1, E > T0]),
    RateBefore = length(Before) / (?BEFORE_MS / 1000),
    RateDuring = Completed / max((T1 - T0) / 1.0e6, 1.0e-6),
    ReadsDuring = [O || {S, O} <- Reads, S >= T0, S < T1],
    #{writes => Completed,
      write_rate_vs_before => RateDuring / max(RateBefore, 1.0e-6),
      longest_write_ms => case During of [] -> 0; _ -> lists:last(During) / 1000 end,
      longest_write_at_s => case Overlapping of
                                [] -> 0.0;
                                _ -> (element(2, lists:last(Overlapping)) - T0) / 1.0e6
                            end,
      p99_write_ms => case During of
                          [] -> 0;
                          _ -> lists:nth(max(1, ceil(0.99 * length(During))), During) / 1000
                      end,
      reads => length(ReadsDuring),
      misses => length([x || miss <- ReadsDuring]),
      failures => length([x || failed <- ReadsDuring]) + WriteFailures}.

print(Format, R) ->
    #{storage := Storage, value_bytes := VB, frag1_records := F1, frag1_mb := MB, op := Op} = R,
    io:format("| ~s | ~b | ~s | ~b | ~s | ~.1f | ~s | ~s | ~.2f | ~b | ~.1f | ~.1f | "
              "~s | ~s | ~.2f | ~s | ~s | ~s |~n",
              [storage_name(Storage), VB, thousands(F1), round(MB), Op, maps:get(wall_s, R),
               thousands(maps:get(moved, R)), thousands(round(maps:get(records_per_s, R))),
               maps:get(relieve_over_copy, R), round(maps:get(peak_rss_mb, R)),
               maps:get(journal_record_mb, R), maps:get(log_mb, R),
               thousands(round(maps:get(longest_write_ms, R))),
               thousands(round(maps:get(p99_write_ms, R))),
               maps:get(write_rate_vs_before, R), thousands(maps:get(reads, R)),
               thousands(maps:get(misses, R)), thousands(maps:get(failures, R))]),
    case Format of
        json -> io:format("~s~n", [json(R#{storage => storage_name(Storage)})]);
        table -> io:format("<!-- ~s: the longest write began ~.1f s after its start -->~n",
                           [Op, maps:get(longest_write_at_s, R)])
    end.

storage_name(?REDB) -> "redb_copies";
storage_name(S) -> atom_to_list(S).

%% @doc A flat map of atoms, numbers and strings as one line of JSON.
-spec json(map()) -> iolist().
json(Map) ->
    Fields = [io_lib:format("\"~s\": ~s", [K, json_value(V)]) || {K, V} <- lists:sort(maps:to_list(Map))],
    ["{", lists:join(", ", Fields), "}"].

json_value(V) when is_integer(V) -> integer_to_list(V);
json_value(V) when is_float(V) -> io_lib:format("~.4f", [V]);
json_value(V) when is_atom(V) -> ["\"", atom_to_list(V), "\""];
json_value(V) when is_list(V) -> ["\"", V, "\""].

now_us() -> erlang:monotonic_time(microsecond).

thousands(N) ->
    fraghash_bench_growth:thousands(N).
