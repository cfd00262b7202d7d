%% @doc The `redb_copies' backend ({@link fraghash_redb_copies}) against
%% Mnesia's `disc_only_copies' (dets) and `disc_copies' (ets plus log), in
%% one run: the same plain `set' table of `N' records on each, measured
%% the same way, one storage type after the other. Run by
%% `bench/mnesia/disc-measure.sh redb'.
%%
%% == Set-up ==
%% Each storage type gets a VM of its own (a `peer' node started from this
%% one, so the memory figures are that type's alone; all three live through
%% the whole size) with a fresh Mnesia directory, the backend registered (`fraghash_redb_copies:register/0',
%% for every type alike) and one table `bench' with attributes `[key, val]':
%% keys the integers 1..N, values 100 random bytes (a record is about 120
%% bytes in external format). Every key drawn below is uniform in 1..N and
%% exists; a read that finds nothing stops the run.
%%
%% == What is measured, in this order ==
%% The three VMs load their tables one after the other; every later phase
%% then runs on the three in turn (the order turning by one each phase),
%% so that the figures compared on one line were taken within seconds of
%% each other on a machine shared with other work. The read, scan and
%% write phases go further: each runs in ?ROUNDS rounds (of ?ROUND_SECONDS
%% s per type, or one scan), the types taking turns within each round (the
%% order turning by one each round): a rate is all of a type's rounds'
%% operations over all their time, a latency the median of its rounds'
%% (the line printed as each phase ends has every round's rate), so that
%% the machine's busy seconds fall on every type alike rather than on one
%% type's whole phase. The
%% load average of the machine is printed before and after.
%% <ol>
%% <li>Load: the N records written by ?LOADERS processes, each in
%% transactions of ?LOAD_BATCH records (batches dealt round-robin); wall
%% time and records/s.</li>
%% <li>Memory after the load: `erlang:memory(total)' and the VM's resident
%% set (`VmRSS' of `/proc/self/status'), in MB; and the disc Mnesia's
%% directory takes then, Mnesia running (as `du' below: what each engine
%% has written by then, a log or memtable not yet folded in counting as it
%% stands).</li>
%% <li>Reads: one process, each read one `mnesia:read/2' in its own
%% `mnesia:activity(async_dirty, _)', then the same in `transaction';
%% ops/s, median and 99th percentile latency (µs) of the whole activity.</li>
%% <li>Full scan: `mnesia:select(bench, [{'_', [], ['$_']}])' in one
%% `async_dirty' activity (every record returned in one list), once per
%% round; seconds and records/s.</li>
%% <li>Writes: transactions of one `mnesia:write/1' each, overwriting a
%% random key with a fresh value, by 1 writer, then by 16 concurrent ones;
%% total writes/s and p99 latency (µs) of a transaction.</li>
%% <li>Disc: the disc space Mnesia's directory takes once Mnesia's log is
%% dumped and Mnesia stopped (its files' allocated blocks, `du -sk': a
%% file redb made longer than the pages it holds counts for those pages
%% only).</li>
%% <li>Reopen: `mnesia:start()' until `mnesia:wait_for_tables([bench],
%% infinity)' returns (the backend is in the schema, so Mnesia starts it
%% itself); the table's size is checked afterwards.</li>
%% <li>Overwrites, with `run/4''s `{overwrites, Count}': Mnesia started
%% again, `Count' writes of random existing keys (fresh values) by
%% ?LOADERS processes in transactions of ?LOAD_BATCH records, as the load
%% writes; Mnesia stopped and the disc measured again as above: what the
%% engine leaves on disc once every record has been rewritten about
%% `Count / N' times.</li>
%% <li>Grow, with `run/4''s `grow' (`--big'): the table's fragmentation
%% activated with `mnesia_frag_slots', then one `fraghash_frag:add_frag/2'
%% (half the records move to a second fragment of the same storage type);
%% seconds, records moved, and 10,000 random keys read back through
%% `mnesia_frag'.</li>
%% </ol>
%% Every round of a read or write phase stops after ?ROUND_SECONDS s or
%% ?MAX_OPS operations, whichever comes first, so a run's length grows with
%% N only through the load, the scan and the reopen.
%%
%% Durability differs and the figures should be read with it: a
%% `redb_copies' write (its default `redb_durability', `logged') is in the
%% redb database's log and its memtable before its transaction returns, so
%% it survives a kill -9 of the VM, and synced within `redb_sync_ms' by a
%% flush; a `disc_copies' or
%% `disc_only_copies' write is in Mnesia's log (`LATEST.LOG', written
%% through `disk_log', not synced per transaction) and the table when it
%% returns.
%%
%% == Output ==
%% Per size, a Markdown table: one row per figure, one column per storage
%% type, then `redb / disc_only' and `redb / disc_copies' (and `redb /
%% rocksdb' when `rocksdb_copies' was measured; the `redb_copies' figure
%% divided by the other's; the last column says whether higher or lower is
%% better), the targets against `rocksdb_copies' if it was measured
%% ({@link fraghash_bench_peer:print_targets/1}), and one JSON line starting with `{"bench":"redb"' with
%% every figure, for scripts.
-module(fraghash_bench_redb).

-export([run/2, run/3, run/4, phase/1]).

-define(TAB, bench).
-define(VALUE_BYTES, 100).
-define(LOADERS, 16).
-define(LOAD_BATCH, 1000).
%% Read and write phases: ?ROUNDS rounds of ?ROUND_SECONDS s per storage
%% type, the types taking turns within each round.
-define(ROUNDS, 9).
-define(ROUND_SECONDS, 1).
-define(MAX_OPS, 1000000).
-define(WRITERS, 16).
-define(ALL, [redb_copies, disc_only_copies, disc_copies]).
-define(ROUNDED, [read_dirty, read_tx, scan, write1, write16]).

%% @doc Every storage type, for each of `Sizes' (records), in scratch
%% directories under `Dir' (removed after each size).
-spec run(string(), [pos_integer()]) -> ok.
run(Dir, Sizes) ->
    run(Dir, Sizes, ?ALL).

%% @doc As {@link run/2} for the storage types `Storages' (a subset of
%% `redb_copies', `disc_only_copies', `disc_copies', and
%% `rocksdb_copies': aeternity's mnesia_rocksdb, see {@link
%% fraghash_bench_peer}); a ratio whose types were not measured is printed
%% as `-'.
-spec run(string(), [pos_integer()], [atom()]) -> ok.
run(Dir, Sizes, Storages) ->
    run(Dir, Sizes, Storages, []).

%% @doc As {@link run/3}; `Opts' `grow' adds the grow phase and
%% `{overwrites, Count}' the overwrite phase (see the module documentation)
%% after the reopen.
-spec run(string(), [pos_integer()], [atom()], [grow | {overwrites, pos_integer()}]) -> ok.
run(Dir, Sizes, Storages, Opts) ->
    ok = io:setopts([{encoding, unicode}]),
    io:format("~nMnesia set table, integer keys, ~b-byte random binary values; "
              "~b cores (~s), OTP ~s, Mnesia ~s~n",
              [?VALUE_BYTES, erlang:system_info(logical_processors_available),
               cpu_model(), erlang:system_info(otp_release), mnesia_vsn()]),
    lists:foreach(fun(N) -> one_size(Dir, N, Storages, Opts) end, Sizes).

one_size(Dir, N, Storages, Opts) ->
    io:format("~n~s records; load average before: ~s~n", [thousands(N), loadavg()]),
    Peers = [{S, start_peer(S)} || S <- Storages],
    try
        Loaded = [{S, phase_on(P, S, {load, sub(Dir, S, N), S, N})} || {S, P} <- Peers],
        %% The other phases one storage type after the other, so that all
        %% three meet the same moment of a shared machine; the order turns
        %% by one each phase.
        Phases = [read_dirty, read_tx, scan, write1, write16, reopen]
            ++ [{overwrite, C} || {overwrites, C} <- Opts]
            ++ [grow || lists:member(grow, Opts)],
        Timed = [case lists:member(Phase, ?ROUNDED) of
                     true -> rounds(Phase, I, Peers, N);
                     false -> [{S, phase_on(P, S, phase_term(Phase, N))}
                               || {S, P} <- turn(Peers, I)]
                 end || {I, Phase} <- lists:zip(lists:seq(1, length(Phases)), Phases)],
        Results = [{S, lists:foldl(fun maps:merge/2, L,
                                   [M || Round <- Timed, {S2, M} <- Round, S2 =:= S])}
                   || {S, L} <- Loaded],
        io:format("load average after: ~s~n", [loadavg()]),
        print(N, Results),
        fraghash_bench_peer:print_targets(Results),
        io:format("~s~n", [json(N, Results)])
    after
        [peer:stop(P) || {_, P} <- Peers],
        [file:del_dir_r(sub(Dir, S, N)) || S <- Storages]
    end.

phase_term({overwrite, C}, N) -> {overwrite, N, C};
phase_term(Phase, N) -> {Phase, N}.

%% The storage types in the order of turn I: turning by one each time.
turn(Peers, I) ->
    {A, B} = lists:split((I - 1) rem length(Peers), Peers),
    B ++ A.

%% A phase run in ?ROUNDS rounds, the types taking turns within each (the
%% order turning by one each round), so that a few seconds of a busy
%% machine fall on every type alike; each type's figures combined over its
%% rounds by combine/2.
rounds(Phase, I, Peers, N) ->
    Runs = [[{S, peer:call(P, ?MODULE, phase, [{Phase, N}], infinity)}
             || {S, P} <- turn(Peers, I + R)]
            || R <- lists:seq(0, ?ROUNDS - 1)],
    [begin
         Ms = [M || Round <- Runs, {S2, M} <- Round, S2 =:= S],
         M = maps:map(fun(K, _) -> combine(K, Ms) end, hd(Ms)),
         Rate = hd([K || K <- maps:keys(M), lists:suffix("_ops_s", atom_to_list(K))
                             orelse K =:= scan_rps]),
         io:format("  ~s ~s: ~s; rounds, ~s: ~w~n",
                   [S, Phase, json_object(M), Rate,
                    [round(maps:get(Rate, X)) || X <- Ms]]),
         {S, M}
     end || {S, _} <- Peers].

%% Figure K over a type's rounds Ms: operations summed; a rate (ops/s,
%% records/s) every round's operations over every round's time, which
%% weighs each round by its length; seconds summed over a scan's rounds
%% and divided by their number; a latency the median of the rounds'.
combine(K, Ms) ->
    Vs = [maps:get(K, M) || M <- Ms],
    Name = atom_to_list(K),
    case {lists:suffix("_ops", Name), lists:suffix("_ops_s", Name), K} of
        {true, _, _} ->
            lists:sum(Vs);
        {_, true, _} ->
            Ops = [maps:get(list_to_atom(lists:sublist(Name, length(Name) - 2)), M) || M <- Ms],
            lists:sum(Ops) / lists:sum([O / R || {O, R} <- lists:zip(Ops, Vs)]);
        {_, _, scan_rps} ->
            length(Ms) / lists:sum([1 / R || R <- Vs]);
        {_, _, scan_s} ->
            lists:sum(Vs) / length(Vs);
        _ ->
            lists:nth((length(Vs) + 1) div 2, lists:sort(Vs))
    end.

%% A phase's figures, printed as soon as they are in (a long run stopped
%% part way keeps what it measured).
phase_on(Peer, Storage, Phase) ->
    M = peer:call(Peer, ?MODULE, phase, [Phase], infinity),
    io:format("  ~s ~s: ~s~n", [Storage, element(1, Phase), json_object(M)]),
    M.

sub(Dir, Storage, N) ->
    filename:join(Dir, io_lib:format("~s-~b", [Storage, N])).

%% A VM of its own per storage type, so that its memory is that type's; a
%% peer backend's code only in its own VM.
start_peer(Storage) ->
    Paths = lists:usort([filename:dirname(code:which(M)) || M <- [?MODULE, fraghash_redb_copies]])
        ++ fraghash_bench_peer:code_paths(Storage),
    Args = lists:append([["-pa", P] || P <- Paths]) ++ ["-kernel", "logger_level", "error"],
    {ok, Peer, _} = peer:start_link(#{connection => standard_io, args => Args}),
    Peer.

%% @doc One phase of the measurement (see the module documentation) on
%% this node, a map of its figures; called in a peer node by run/3.
%% `{load, Dir, Storage, N}' starts a fresh Mnesia in `Dir' and loads the
%% table; `reopen' leaves Mnesia stopped.
-spec phase(tuple()) -> #{atom() => number()}.
phase({load, Dir, Storage, N}) ->
    ok = application:set_env(mnesia, dir, Dir),
    %% redb's page cache (the fraghash application's redb_cache_bytes).
    case os:getenv("FRAGHASH_REDB_CACHE_BYTES") of
        false -> ok;
        Bytes -> ok = application:set_env(fraghash, redb_cache_bytes, list_to_integer(Bytes))
    end,
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    {atomic, ok} = fraghash_redb_copies:register(),
    Extra = fraghash_bench_peer:setup(Storage),
    {atomic, ok} = mnesia:create_table(?TAB, [{Storage, [node()]}, {type, set},
                                              {attributes, [key, val]} | Extra]),
    LoadS = seconds(fun() -> load(N) end),
    ok = settle_log(),
    Disc = dir_bytes(Dir),
    N = fraghash_bench_peer:table_size(?TAB),
    true = erlang:garbage_collect(),
    io:format("  ~s: loaded in ~.1f s~n", [Storage, LoadS]),
    #{load_s => LoadS, load_rps => N / LoadS, disc_loaded_mb => Disc / 1048576,
      mem_erlang_mb => erlang:memory(total) / 1048576, mem_rss_mb => rss() / 1048576};
phase({read_dirty, N}) ->
    prefixed(read_dirty, reads(async_dirty, N));
phase({read_tx, N}) ->
    prefixed(read_tx, reads(transaction, N));
phase({scan, N}) ->
    {S, N} = timed(fun() ->
                           length(mnesia:activity(async_dirty, fun() ->
                               mnesia:select(?TAB, [{'_', [], ['$_']}]) end))
                   end),
    true = erlang:garbage_collect(),
    #{scan_s => S, scan_rps => N / S};
phase({write1, N}) ->
    prefixed(write1, writes(1, N));
phase({write16, N}) ->
    prefixed(write16, writes(?WRITERS, N));
phase({reopen, N}) ->
    Dir = mnesia:system_info(directory),
    ok = settle_log(),
    stopped = mnesia:stop(),
    Disc = dir_bytes(Dir),
    ReopenS = seconds(fun() ->
                              ok = mnesia:start(),
                              ok = mnesia:wait_for_tables([?TAB], infinity)
                      end),
    N = fraghash_bench_peer:table_size(?TAB),
    stopped = mnesia:stop(),
    #{disc_mb => Disc / 1048576, reopen_s => ReopenS};
phase({overwrite, N, Count}) ->
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables([?TAB], infinity),
    S = seconds(fun() -> overwrite(N, Count) end),
    N = fraghash_bench_peer:table_size(?TAB),
    Dir = mnesia:system_info(directory),
    ok = settle_log(),
    stopped = mnesia:stop(),
    #{overwrite_rps => Count / S, disc_overwritten_mb => dir_bytes(Dir) / 1048576};
phase({grow, N}) ->
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables([?TAB], infinity),
    {atomic, ok} = mnesia:change_table_frag(?TAB, {activate, [{hash_module, mnesia_frag_slots},
                                                              {node_pool, [node()]}]}),
    GrowS = seconds(fun() -> {atomic, ok} = fraghash_frag:add_frag(?TAB, [node()]) end),
    Moved = mnesia:table_info(fraghash_frag:frag_name(?TAB, 2), size),
    N = Moved + mnesia:table_info(?TAB, size),
    %% Every key still reads, through the fragments.
    Missing = [K || K <- [rand:uniform(N) || _ <- lists:seq(1, 10000)],
                    [] =:= mnesia:activity(async_dirty, fun() -> mnesia:read(?TAB, K) end, [],
                                           mnesia_frag)],
    [] = Missing,
    io:format("  grown to 2 fragments in ~.1f s, ~b records moved~n", [GrowS, Moved]),
    #{grow_s => GrowS, grow_moved => Moved, grow_moved_rps => Moved / GrowS,
      grow_rss_mb => rss() / 1048576}.

prefixed(P, M) ->
    maps:from_list([{list_to_atom(atom_to_list(P) ++ "_" ++ atom_to_list(K)), V}
                    || {K, V} <- maps:to_list(M)]).

%%% Phases

load(N) ->
    Batches = (N + ?LOAD_BATCH - 1) div ?LOAD_BATCH,
    Parent = self(),
    Pids = [spawn_link(fun() -> loader(I, Batches, N), Parent ! {loaded, self()} end)
            || I <- lists:seq(0, ?LOADERS - 1)],
    [receive {loaded, P} -> ok end || P <- Pids],
    ok.

%% Batches I, I + LOADERS, ... of keys 1..N.
loader(I, Batches, _N) when I >= Batches ->
    ok;
loader(I, Batches, N) ->
    From = I * ?LOAD_BATCH + 1,
    To = min(N, From + ?LOAD_BATCH - 1),
    Recs = [{?TAB, K, value()} || K <- lists:seq(From, To)],
    {atomic, ok} = mnesia:transaction(fun() -> lists:foreach(fun mnesia:write/1, Recs) end),
    loader(I + ?LOADERS, Batches, N).

%% Count random keys of 1..N rewritten as load/1 writes, ?LOADERS
%% processes, a transaction per ?LOAD_BATCH records.
overwrite(N, Count) ->
    Batches = (Count + ?LOAD_BATCH - 1) div ?LOAD_BATCH,
    Parent = self(),
    Pids = [spawn_link(fun() ->
                               [begin
                                    Recs = [{?TAB, rand:uniform(N), value()}
                                            || _ <- lists:seq(1, ?LOAD_BATCH)],
                                    {atomic, ok} = mnesia:transaction(fun() ->
                                        lists:foreach(fun mnesia:write/1, Recs) end)
                                end || _ <- lists:seq(I, Batches - 1, ?LOADERS)],
                               Parent ! {overwritten, self()}
                       end) || I <- lists:seq(0, ?LOADERS - 1)],
    [receive {overwritten, P} -> ok end || P <- Pids],
    ok.

reads(Kind, N) ->
    Deadline = deadline(),
    T0 = now_ns(),
    Lat = read_loop(Kind, N, Deadline, 0, []),
    stats(length(Lat), now_ns() - T0, Lat).

read_loop(Kind, N, Deadline, Ops, Acc) ->
    case Ops >= ?MAX_OPS orelse now_ns() >= Deadline of
        true ->
            Acc;
        false ->
            K = rand:uniform(N),
            T0 = now_ns(),
            [_] = mnesia:activity(Kind, fun() -> mnesia:read(?TAB, K) end),
            T1 = now_ns(),
            read_loop(Kind, N, Deadline, Ops + 1, [T1 - T0 | Acc])
    end.

writes(Writers, N) ->
    Deadline = deadline(),
    Parent = self(),
    T0 = now_ns(),
    Pids = [spawn_link(fun() ->
                               Lat = write_loop(N, Deadline, ?MAX_OPS div Writers, []),
                               Parent ! {written, self(), Lat}
                       end) || _ <- lists:seq(1, Writers)],
    Lat = lists:append([receive {written, P, L} -> L end || P <- Pids]),
    stats(length(Lat), now_ns() - T0, Lat).

write_loop(_N, _Deadline, 0, Acc) ->
    Acc;
write_loop(N, Deadline, Left, Acc) ->
    case now_ns() >= Deadline of
        true ->
            Acc;
        false ->
            Rec = {?TAB, rand:uniform(N), value()},
            T0 = now_ns(),
            {atomic, ok} = mnesia:transaction(fun() -> mnesia:write(Rec) end),
            T1 = now_ns(),
            write_loop(N, Deadline, Left - 1, [T1 - T0 | Acc])
    end.

%% ops/s over the phase's wall time; latencies in µs.
stats(Ops, WallNs, Lat) ->
    Sorted = list_to_tuple(lists:sort(Lat)),
    #{ops => Ops, ops_s => Ops / (WallNs / 1.0e9),
      median_us => pct(Sorted, 0.5) / 1000, p99_us => pct(Sorted, 0.99) / 1000}.

pct(Sorted, P) ->
    element(max(1, ceil(P * tuple_size(Sorted))), Sorted).

%%% Helpers

value() ->
    crypto:strong_rand_bytes(?VALUE_BYTES).

deadline() ->
    now_ns() + ?ROUND_SECONDS * 1000000000.

now_ns() ->
    erlang:monotonic_time(nanosecond).

seconds(F) ->
    element(1, timed(F)).

timed(F) ->
    T0 = now_ns(),
    R = F(),
    {(now_ns() - T0) / 1.0e9, R}.

%% The VM's resident set, in bytes (0 where /proc is not there).
rss() ->
    case file:read_file("/proc/self/status") of
        {ok, Bin} ->
            case re:run(Bin, "VmRSS:\\s+(\\d+) kB", [{capture, all_but_first, list}]) of
                {match, [Kb]} -> list_to_integer(Kb) * 1024;
                nomatch -> 0
            end;
        _ ->
            0
    end.

%% The blocks the directory's files take (a sparse file counts for what it
%% holds).
%% Mnesia's own log (LATEST.LOG) holds every commit since its last dump,
%% whatever the storage: dumped every `dump_log_write_threshold' commits
%% (1,000 transactions of any size) or every `dump_log_time_threshold'
%% (3 minutes), it can hold hundreds of megabytes of writes the storage
%% already has, or nothing, depending on the moment. Each disc figure is
%% taken after a dump, so that it is the storage's (for `disc_copies', the
%% dump moves the log's writes into its .DCL).
settle_log() ->
    dumped = mnesia:dump_log(),
    ok.

dir_bytes(Dir) ->
    [Kb | _] = string:lexemes(os:cmd("du -sk '" ++ Dir ++ "'"), " \t\n"),
    list_to_integer(Kb) * 1024.

loadavg() ->
    case file:read_file("/proc/loadavg") of
        {ok, Bin} -> lists:join(" ", lists:sublist(string:lexemes(binary_to_list(Bin), " "), 3));
        _ -> "unknown"
    end.

cpu_model() ->
    case file:read_file("/proc/cpuinfo") of
        {ok, Bin} ->
            case re:run(Bin, "model name\\s*:\\s*([^\\n]+)", [{capture, all_but_first, list}]) of
                {match, [M]} -> M;
                nomatch -> "cpu unknown"
            end;
        _ ->
            "cpu unknown"
    end.

mnesia_vsn() ->
    _ = application:load(mnesia),
    {ok, V} = application:get_key(mnesia, vsn),
    V.

%%% Output

%% {Label, Key, Format, Better}
rows() ->
    [{"load, s", load_s, 2, lower},
     {"load, records/s", load_rps, 0, higher},
     {"memory after load, erlang:memory(total) MB", mem_erlang_mb, 1, lower},
     {"memory after load, VmRSS MB", mem_rss_mb, 1, lower},
     {"read async_dirty, ops/s", read_dirty_ops_s, 0, higher},
     {"read async_dirty, median µs", read_dirty_median_us, 1, lower},
     {"read async_dirty, p99 µs", read_dirty_p99_us, 1, lower},
     {"read transaction, ops/s", read_tx_ops_s, 0, higher},
     {"read transaction, median µs", read_tx_median_us, 1, lower},
     {"read transaction, p99 µs", read_tx_p99_us, 1, lower},
     {"full select scan, s", scan_s, 2, lower},
     {"full select scan, records/s", scan_rps, 0, higher},
     {"write, 1 writer, writes/s", write1_ops_s, 0, higher},
     {"write, 1 writer, p99 µs", write1_p99_us, 1, lower},
     {"write, 16 writers, writes/s", write16_ops_s, 0, higher},
     {"write, 16 writers, p99 µs", write16_p99_us, 1, lower},
     {"disc right after load (Mnesia running), MB", disc_loaded_mb, 1, lower},
     {"disc, MB", disc_mb, 1, lower},
     {"reopen, s", reopen_s, 2, lower},
     {"overwrites (16 × 1000-record transactions), records/s", overwrite_rps, 0, higher},
     {"disc after the overwrites, MB", disc_overwritten_mb, 1, lower},
     {"grow to 2 fragments (mnesia_frag_slots), s", grow_s, 1, lower},
     {"grow, records moved", grow_moved, 0, higher},
     {"grow, records moved/s", grow_moved_rps, 0, higher},
     {"VmRSS after the grow, MB", grow_rss_mb, 1, lower}].

print(N, Results) ->
    Names = [S || {S, _} <- Results],
    Others = fraghash_bench_peer:ratio_columns(Names),
    io:format("~n~s records~n~n| | ~s | ~s | better |~n|---|~s~s---|~n",
              [thousands(N), lists:join(" | ", [atom_to_list(S) || S <- Names]),
               lists:join(" | ", [H || {_, H} <- Others]),
               lists:append(["---:|" || _ <- Names]), lists:append(["---:|" || _ <- Others])]),
    lists:foreach(
      fun({Label, Key, Digits, Better}) ->
              Vals = [maps:get(Key, R) || {_, R} <- Results],
              io:format("| ~ts | ~s | ~s | ~s |~n",
                        [Label, lists:join(" | ", [num(V, Digits) || V <- Vals]),
                         lists:join(" | ", [ratio(Results, Key, O) || {O, _} <- Others]),
                         Better])
      end, [Row || {_, Key, _, _} = Row <- rows(),
                   lists:all(fun({_, R}) -> maps:is_key(Key, R) end, Results)]).

ratio(Results, Key, Other) ->
    case {lists:keyfind(redb_copies, 1, Results), lists:keyfind(Other, 1, Results)} of
        {{_, R}, {_, O}} ->
            case maps:get(Key, O) of
                Zero when Zero == 0 -> "-";
                V -> io_lib:format("~.2f", [maps:get(Key, R) / V])
            end;
        _ ->
            "-"
    end.

num(V, 0) -> thousands(round(V));
num(V, Digits) -> io_lib:format("~.*f", [Digits, float(V)]).

thousands(N) when is_integer(N), N < 0 -> "-" ++ thousands(-N);
thousands(N) when is_integer(N), N < 1000 -> integer_to_list(N);
thousands(N) when is_integer(N) -> thousands(N div 1000) ++ io_lib:format(",~3..0b", [N rem 1000]).

json_object(M) ->
    ["{", lists:join(",", [io_lib:format("\"~s\":~s", [K, jnum(V)])
                           || {K, V} <- lists:sort(maps:to_list(M))]), "}"].

json(N, Results) ->
    Obj = fun json_object/1,
    ["{\"bench\":\"redb\",\"records\":", integer_to_list(N), ",\"value_bytes\":",
     integer_to_list(?VALUE_BYTES), ",\"results\":{",
     lists:join(",", [["\"", atom_to_list(S), "\":", Obj(R)] || {S, R} <- Results]), "}",
     fraghash_bench_peer:json_ratios(Results), "}"].

jnum(V) when is_integer(V) -> integer_to_list(V);
jnum(V) -> float_to_list(V, [{decimals, 3}, compact]).
