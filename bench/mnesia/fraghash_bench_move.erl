%% @doc Moving fragment replicas between nodes, measured: one move
%% (`fraghash_frag:move_replica/3') and a rebalance from two nodes to
%% three (`fraghash_frag:rebalance/1'), each while an application writes
%% and reads. One case per call, in a fresh VM (the bench node, `a')
%% with `peer' nodes on this host, each with its own Mnesia directory:
%% run by `bench/mnesia/move-load.sh', which says how.
%%
%% The tables: `mnesia_frag_slots', `disc_copies', one copy of each
%% fragment (`n_disc_copies' 1), records `{Tab, IntKey, Value}' with a
%% 100-byte binary value of its own each; the bench node holds none of
%% them (it is the application's node: its transactions are remote).
%% <ul>
%% <li>`move': nodes `b' and `c', 2 fragments of `Records' records each,
%% one on each node (fragment 1 on `Home', where Mnesia puts it). First
%% the reference, on the idle table: `mnesia:add_table_copy(moved, Away,
%% disc_copies)' (then `mnesia:del_table_copy(moved, Away)', timed too);
%% then, under the load, `fraghash_frag:move_replica(moved, Home, Away)'
%% (`move_replica_written': the copy the load wrote record by record
%% goes) and back (`move_replica_loaded_back': the copy Mnesia loaded in
%% one go goes, which Mnesia deletes much faster).</li>
%% <li>`rebalance': nodes `b', `c' and `d', 32 fragments holding keys 1 to
%% `Records' (their sizes as the hash spreads them), 16 on `b', 16 on `c';
%% `d' joins the node pool, then `fraghash_frag:rebalance(rebalanced)'
%% runs under the load. One copy a fragment: a fragment, 9.4% of a node's
%% mean share of three, is narrower than the band (20% of the mean), so
%% some count of them lands each node in it; two copies would make that
%% 4.7%, for twice the records moved.</li>
%% </ul>
%% The load (`fraghash_bench_relieve:start_load/3', on the bench node), 3 s
%% before the operation, through it, and until every write under way at
%% its end returned: 4 writers overwriting random existing keys of the
%% table in transactions through `mnesia_frag', 2,000 writes/s in all, and
%% a reader at 500 reads/s of random existing keys (`async_dirty'; one
%% that finds nothing is a miss).
%%
%% The columns: `wall s', the operation's time; `÷ add_table_copy', its
%% time over the reference `add_table_copy''s (and `÷ add + del' over
%% `add_table_copy' and `del_table_copy' together); `longest
%% write ms', the longest write
%% that overlapped the operation (begun before its end, ended after its
%% start): the move's writer pause, Redis's `write_pause_ms'; `p99 write
%% ms', the 99th percentile of those writes; `write rate vs before', the
%% writes completed during the operation per second over the rate in the
%% 3 s before; `writes', `reads', `misses', `failures' (reads that raised,
%% writes that aborted) during it; `peak RSS MB', each node's peak resident
%% set during the operation (VmHWM, reset through /proc/self/clear_refs at
%% its start) and, after `+', how much above its resident set at the
%% start. Rebalance only: `records per node after', each pool node's
%% records (`mnesia:table_info(F, size)' of each fragment it holds) and
%% its distance from the mean; `within 10%', whether every node is;
%% `records moved', the records of the fragments the plan moved;
%% `minimum', the fewest records any plan could move to bring every node
%% within 10% of the mean, from the fragments' sizes ({@link
%% fewest_to_balance/3}: one figure when exact, else `lower to upper'
%% bounds); `moved ÷ minimum', over its lower bound (so at least the
%% ratio to the true minimum). Comment lines give the operation's steps
%% (`fraghash_frag:set_step_hook/1') with their times and the write rate
%% meanwhile, each write over 200 ms with the step under way at its start,
%% and Mnesia's calls that took 50 ms or more on each node (`?TRACED',
%% `fraghash_bench_trace'): where writers waited and the time went.
-module(fraghash_bench_move).

-export([run/4, run/5, load_local/1, random_key/0, fewest_to_balance/3]).

-define(MOVED, moved).
-define(REBALANCED, rebalanced).
-define(REBALANCE_FRAGS, 32).
-define(VALUE_BYTES, 100).
-define(BATCH, 2000).
%% As fraghash_bench_relieve:figures/4 measures the rate before.
-define(BEFORE_MS, 3000).
-define(SLOW_WRITE_US, 200000).
-define(TOLERANCE, 0.1).
-define(CALL_MS, 3600000).
%% The calls timed on every node during an operation, to say where writers
%% wait and time goes: Mnesia's loader (the receiver's dump of a new
%% disc_copies copy, `ets2dcd', under the sender's read lock held by
%% `finish_copy/5'), a schema commit's parts (locks, prepare, dump and
%% dumper lock, changes applied, a deleted copy's table and files), the
%% dumper's runs, the move's own calls; a `redb_copies' receiver's last
%% step (the changes made during the copy, the copy put in place).
-define(TRACED, [{mnesia_log, ets2dcd, 1}, {mnesia_loader, finish_copy, 5},
                 {mnesia_controller, wait_for_schema_commit_lock, 0},
                 {mnesia_controller, sync_dump_log, 1}, {mnesia_dumper, opt_dump_log, 1},
                 {mnesia_dumper, update, 3}, {mnesia_schema, prepare_commit, 3},
                 {mnesia_schema, get_tid_ts_and_lock, 2}, {mnesia_dumper, insert_cstruct, 5},
                 {mnesia_controller, del_active_replica, 2},
                 {mnesia_dumper, disc_delete_table, 2}, {mnesia_schema, ram_delete_table, 2},
                 {ets, delete, 1}, {mnesia, add_table_copy, 3}, {mnesia, del_table_copy, 2},
                 {fraghash_durable, tables, 1}, {fraghash_redb_load, received, 4},
                 {fraghash_redb_nif, replace_table, 3}]).
%% Traced calls shorter than this are left out of the comment line.
-define(TRACE_MIN_US, 50000).

%% @doc Runs case `Case' (`move' or `rebalance', see the module doc) with
%% `Records' records (the moved fragment's; the rebalanced table's) under
%% `Dir', an empty scratch directory; prints a Markdown table, with a JSON
%% object per row as well when `Format' is `json'. The moved fragment's
%% copies are `disc_copies'.
-spec run(string(), move | rebalance, pos_integer(), table | json) -> ok.
run(Dir, Case, Records, Format) ->
    run(Dir, Case, Records, Format, disc_copies).

%% @doc As {@link run/4}, the move case's fragments of `Storage'
%% (`disc_copies' or `redb_copies'; made on `disc_copies' and changed, as
%% Mnesia cannot create fragments of a backend type).
-spec run(string(), move | rebalance, pos_integer(), table | json,
          disc_copies | redb_copies) -> ok.
run(Dir, Case, Records, Format, Storage) ->
    Peers = case Case of
                move -> [b, c];
                rebalance -> [b, c, d]
            end,
    %% The tables' headers hold a ÷.
    ok = io:setopts(standard_io, [{encoding, unicode}]),
    {Nodes, PeerPids} = cluster(Dir, Peers),
    try
        case Case of
            move -> move_case(Nodes, Records, Format, Storage);
            rebalance -> rebalance_case(Nodes, Records, Format)
        end
    after
        _ = [rpc:call(N, mnesia, stop, []) || N <- tl(Nodes)],
        _ = mnesia:stop(),
        [peer:stop(P) || P <- PeerPids]
    end.

%%% The cluster

%% The bench node and one peer per name in `Names', one disc schema,
%% Mnesia running on all, the growth path's journal made.
cluster(Dir, Names) ->
    ok = application:set_env(mnesia, dir, filename:join(Dir, "a")),
    Paths = lists:usort([filename:dirname(code:which(M)) || M <- [?MODULE, fraghash_frag]]),
    Peers = [begin
                 PeerDir = filename:join(Dir, atom_to_list(Name)),
                 ok = filelib:ensure_path(PeerDir),
                 {ok, Pid, Node} =
                     peer:start(#{name => list_to_atom(lists:concat(["fhmove_", Name, "_",
                                                                     os:getpid()])),
                                  host => "localhost",
                                  args => lists:append([["-pa", P] || P <- Paths])
                                          ++ ["-mnesia", "dir", "\"" ++ PeerDir ++ "\""]}),
                 {Pid, Node}
             end || Name <- Names],
    Nodes = [node() | [N || {_, N} <- Peers]],
    ok = mnesia:create_schema(Nodes),
    [ok = rpc:call(N, mnesia, start, []) || N <- Nodes],
    ok = fraghash_journal:ensure(),
    {Nodes, [P || {P, _} <- Peers]}.

%% `Tab' on `mnesia_frag_slots', `N' fragments of one disc copy on `Pool'.
create(Tab, N, Pool) ->
    {atomic, ok} = mnesia:create_table(
                     Tab, [{attributes, [key, val]},
                           {frag_properties, [{n_fragments, N}, {hash_module, mnesia_frag_slots},
                                              {node_pool, Pool}, {n_disc_copies, 1}]}]),
    ok.

%% Fills each fragment on the node holding it (the nodes at once), with
%% `FragKeys' (`[{FragmentNumber, Keys}]'), then dumps every log.
load(Tab, FragKeys, Nodes) ->
    T0 = erlang:monotonic_time(millisecond),
    ByNode = [{N, [{F, Ks} || {I, Ks} <- FragKeys, F <- [fraghash_frag:frag_name(Tab, I)],
                             holders(F) =:= [N]]}
              || N <- Nodes],
    Requests = [erpc:send_request(N, ?MODULE, load_local, [Work]) || {N, Work} <- ByNode,
                                                                     Work =/= []],
    [ok = erpc:receive_response(R, ?CALL_MS) || R <- Requests],
    ok = quiet(Nodes),
    %% Every record is in its fragment's .DCL file now, which the next
    %% schema commit's dump would rewrite into .DCD files within the first
    %% operation measured: done now, as for a table written long ago.
    [dumped = rpc:call(N, mnesia_controller, snapshot_dcd, [Disc], ?CALL_MS)
     || {N, Work} <- ByNode,
        Disc <- [[F || {F, _} <- Work, mnesia:table_info(F, storage_type) =:= disc_copies]],
        Disc =/= []],
    io:format(standard_error, "loaded ~b records in ~.1f s~n",
              [lists:sum([length(Ks) || {_, Ks} <- FragKeys]),
               (erlang:monotonic_time(millisecond) - T0) / 1000]).

%% @doc Writes `{Tab, K, Value}' for each key of each `{Fragment, Keys}'
%% of `Work' into that fragment on this node, a batch of 2,000 at a time
%% (`async_dirty'); each value 100 bytes of its own.
-spec load_local([{atom(), [integer()]}]) -> ok.
load_local(Work) ->
    [begin
         Tab = mnesia:table_info(F, record_name),
         lists:foreach(
           fun(Batch) ->
                   mnesia:activity(async_dirty,
                                   fun() -> [mnesia:write(F, {Tab, K, value(K)}, write)
                                             || K <- Batch], ok end)
           end, fraghash_tab:chunks(Ks, ?BATCH))
     end || {F, Ks} <- Work],
    ok.

value(K) ->
    <<K:64, (binary:copy(<<"v">>, ?VALUE_BYTES - 8))/binary>>.

%% Every node's log synced and dumped: each operation starts from the same
%% quiet state.
quiet(Nodes) ->
    [ok = rpc:call(N, mnesia, sync_log, []) || N <- Nodes],
    [dumped = rpc:call(N, mnesia, dump_log, [], ?CALL_MS) || N <- Nodes],
    ok.

%% @doc A random key of the table the load writes: of those the case
%% stored (`{Module, keys}' in `persistent_term': a tuple of keys, or
%% `{range, Max}' for 1 to `Max').
-spec random_key() -> integer().
random_key() ->
    case persistent_term:get({?MODULE, keys}) of
        {range, Max} -> rand:uniform(Max);
        Keys -> element(rand:uniform(tuple_size(Keys)), Keys)
    end.

%%% One move

move_case([_A, B, C] = Nodes, Records, Format, Storage) ->
    ok = create(?MOVED, 2, [B, C]),
    case Storage of
        disc_copies ->
            ok;
        redb_copies ->
            {atomic, ok} = fraghash_redb_copies:register(),
            [{atomic, ok} = mnesia:change_table_copy_type(F, N, Storage)
             || F <- [fraghash_frag:frag_name(?MOVED, I) || I <- [1, 2]],
                N <- mnesia:table_info(F, disc_copies)]
    end,
    Frag = ?MOVED,
    %% Mnesia places fragment 1 on either node: `Home'.
    [Home] = holders(Frag),
    [Away] = [B, C] -- [Home],
    %% Keys from 1 on, `Records' in each fragment exactly.
    {M, S, 2} = fraghash_frag:hash(?MOVED),
    FragKeys = frag_keys(M, S, 1, #{1 => Records, 2 => Records}, #{1 => [], 2 => []}),
    load(?MOVED, FragKeys, Nodes),
    persistent_term:put({?MODULE, keys}, list_to_tuple(lists:append([Ks || {_, Ks} <- FragKeys]))),
    Case = #{case_name => move, frag_records => Records, storage => Storage},
    %% The reference, on the idle table: Mnesia's own copy of the fragment
    %% onto `Away', and its delete again.
    Add = measure(Case, Nodes, [Home, Away], none,
                  fun() -> {atomic, ok} = mnesia:add_table_copy(Frag, Away, Storage), ok end),
    Delete = measure(Case, Nodes, [Home, Away], none,
                     fun() -> {atomic, ok} = mnesia:del_table_copy(Frag, Away), ok end),
    %% Under the load, the copy the load wrote record by record (as a
    %% table's copy is, written over time) moves to `Away', then the copy
    %% Mnesia just loaded there moves back: Mnesia deletes the first far
    %% more slowly (see the traced `ets:delete').
    Moves = [{Op, measure(Case, Nodes, [From, To], ?MOVED,
                          fun() -> {atomic, ok} = fraghash_frag:move_replica(Frag, From, To), ok
                          end)}
             || {Op, From, To} <- [{move_replica_written, Home, Away},
                                   {move_replica_loaded_back, Away, Home}]],
    check("the moved fragment's copies", [Home], holders(Frag)),
    check("the moved fragment's records", Records,
          rpc:call(Home, mnesia, table_info, [Frag, size])),
    Both = maps:get(wall_s, Add) + maps:get(wall_s, Delete),
    io:format("~nThe moved fragment's copies: ~s~n~n", [Storage]),
    print_move_header(),
    [print_move(Format, maps:remove(result, R#{op => Op, over_add_and_del => Wall / Both,
                                               over_reference => Wall / maps:get(wall_s, Add)}))
     || {Op, #{wall_s := Wall} = R} <- [{add_table_copy_idle, Add},
                                         {del_table_copy_idle, Delete} | Moves]].

%% The nodes holding a copy of fragment `F' (of one storage type).
holders(F) ->
    mnesia:table_info(F, disc_copies)
        ++ lists:append([Ns || {_, Ns} <- mnesia:table_info(F, external_copies)]).

%% `Left' more keys (a count per fragment number) from `K' on, as
%% `[{FragmentNumber, Keys}]'.
frag_keys(M, S, K, Left, Acc) ->
    case lists:sum(maps:values(Left)) of
        0 ->
            lists:sort([{I, lists:reverse(Ks)} || {I, Ks} <- maps:to_list(Acc)]);
        _ ->
            I = M:key_to_frag_number(S, K),
            case maps:get(I, Left) of
                0 -> frag_keys(M, S, K + 1, Left, Acc);
                L -> frag_keys(M, S, K + 1, Left#{I := L - 1},
                               Acc#{I := [K | maps:get(I, Acc)]})
            end
    end.

%%% The rebalance

rebalance_case([_A, B, C, D] = Nodes, Records, Format) ->
    ok = create(?REBALANCED, ?REBALANCE_FRAGS, [B, C]),
    {M, S, N} = fraghash_frag:hash(?REBALANCED),
    Keys = lists:seq(1, Records),
    Grouped = maps:groups_from_list(fun(K) -> M:key_to_frag_number(S, K) end, Keys),
    load(?REBALANCED, lists:sort(maps:to_list(Grouped)), Nodes),
    persistent_term:put({?MODULE, keys}, {range, Records}),
    {atomic, ok} = mnesia:change_table_frag(?REBALANCED, {add_node, D}),
    Pool = [B, C, D],
    Sizes = [{I, fraghash_tab:records(F), hd(mnesia:table_info(F, disc_copies))}
             || I <- lists:seq(1, N), F <- [fraghash_frag:frag_name(?REBALANCED, I)]],
    {Lower, Upper} = fewest_to_balance([{Sz, H} || {_, Sz, H} <- Sizes], Pool, D),
    {atomic, #{moves := Planned}} = fraghash_frag:rebalance(?REBALANCED, [dry_run]),
    Case = #{case_name => rebalance, records => Records, frags => N},
    R = measure(Case, Nodes, Pool, ?REBALANCED,
                fun() -> {atomic, #{done := true} = Done} = fraghash_frag:rebalance(?REBALANCED),
                         Done
                end),
    #{result := #{moves := Moves}} = R,
    check("the moves run against the dry run's", Planned, Moves),
    Moved = lists:sum([Sz || {F, _, _} <- Moves, {I, Sz, _} <- Sizes,
                             fraghash_frag:frag_name(?REBALANCED, I) =:= F]),
    Loads = [{P, lists:sum([rpc:call(P, mnesia, table_info, [F, size])
                            || I <- lists:seq(1, N), F <- [fraghash_frag:frag_name(?REBALANCED, I)],
                               lists:member(P, mnesia:table_info(F, disc_copies))])}
             || P <- Pool],
    Mean = lists:sum([L || {_, L} <- Loads]) / length(Pool),
    print_rebalance_header(),
    print_rebalance(Format, (maps:remove(result, R))#{moves => length(Moves), moved => Moved,
                              minimum_lower => Lower, minimum_upper => Upper,
                              loads => Loads, mean => Mean,
                              within => lists:all(fun({_, L}) -> abs(L / Mean - 1) =< ?TOLERANCE
                                                  end, Loads)}).

%% @doc The fewest records any plan moves to bring every node of `Pool'
%% within 10% of the mean, for fragments of one copy each (`{Records,
%% Holder}'), `New' the node that holds none: `{Lower, Upper}', equal when
%% exact. `Lower': `New' ends with at least 90% and at most 110% of the
%% mean, every record of it moved there, so no plan moves fewer records
%% than the smallest sum of fragment sizes within that band (every subset
%% of the fragments, the exact minimum found by meeting in the middle:
%% the subset sums of each half, 2^16 each for 32 fragments). `Upper': the
%% smallest plan of moves onto `New' only that brings every node into the
%% band (each old node's subset sums that leave it in the band, paired),
%% a plan that exists, so no more is needed; `none' when there is none.
-spec fewest_to_balance([{non_neg_integer(), node()}], [node()], node()) ->
          {non_neg_integer() | none, non_neg_integer() | none}.
fewest_to_balance(Frags, Pool, New) ->
    Mean = lists:sum([R || {R, _} <- Frags]) / length(Pool),
    {Low, High} = {(1 - ?TOLERANCE) * Mean, (1 + ?TOLERANCE) * Mean},
    {Left, Right} = lists:split(length(Frags) div 2, [R || {R, _} <- Frags]),
    Lower = smallest_pair_sum(subset_sums(Left), subset_sums(Right), Low, High),
    Old = [P || P <- Pool, P =/= New],
    %% Per old node, what it may give: sums of its fragments that leave it
    %% in the band.
    Gives = [[G || G <- subset_sums([R || {R, H} <- Frags, H =:= P]),
                   Held <- [lists:sum([R || {R, H} <- Frags, H =:= P]) - G],
                   Held >= Low, Held =< High]
             || P <- Old],
    Upper = case Gives of
                [G1, G2] -> smallest_pair_sum(G1, G2, Low, High);
                _ -> none
            end,
    {Lower, Upper}.

subset_sums(Sizes) ->
    lists:usort(lists:foldl(fun(S, Sums) -> Sums ++ [X + S || X <- Sums] end, [0], Sizes)).

%% The smallest `X + Y' within `[Low, High]', `X' of `Xs', `Y' of `Ys'.
smallest_pair_sum(Xs, Ys, Low, High) ->
    Sorted = list_to_tuple(lists:usort(Ys)),
    Sums = [X + Y || X <- Xs, Y <- [at_least(Sorted, Low - X)], Y =/= none, X + Y =< High],
    case Sums of
        [] -> none;
        _ -> lists:min(Sums)
    end.

%% The smallest element of sorted tuple `T' that is at least `V'.
at_least(T, V) ->
    at_least(T, V, 1, tuple_size(T)).

at_least(T, _V, Lo, Hi) when Lo > Hi ->
    case Lo =< tuple_size(T) of
        true -> element(Lo, T);
        false -> none
    end;
at_least(T, V, Lo, Hi) ->
    Mid = (Lo + Hi) div 2,
    case element(Mid, T) >= V of
        true -> at_least(T, V, Lo, Mid - 1);
        false -> at_least(T, V, Mid + 1, Hi)
    end.

%%% One operation, under the load or not

%% Runs `Op' on a quiet cluster, under the load on `Tab' (none: idle),
%% with the peak RSS of `Nodes' and the operation's steps.
measure(Case, Nodes, Watched, Tab, Op) ->
    ok = quiet(Nodes),
    Value = value(0),
    Load = case Tab of
               none -> none;
               _ -> fraghash_bench_relieve:start_load(Tab, fun ?MODULE:random_key/0, Value)
           end,
    [timer:sleep(?BEFORE_MS) || Tab =/= none],
    Parent = self(),
    ok = fraghash_frag:set_step_hook(fun(_T, Step) -> Parent ! {step, Step, now_us()} end),
    RssStart = [{N, rss(N, "VmRSS")} || N <- Watched],
    [ok = rpc:call(N, file, write_file, ["/proc/self/clear_refs", "5"]) || N <- Watched],
    Tracers = fraghash_bench_trace:start(Nodes, ?TRACED),
    T0 = now_us(),
    Sys0 = erlang:system_time(microsecond),
    Result = try Op() after fraghash_frag:set_step_hook(undefined) end,
    T1 = now_us(),
    Peaks = [{N, rss(N, "VmHWM"), Start} || {N, Start} <- RssStart],
    Calls = fraghash_bench_trace:stop(Tracers),
    Steps = fraghash_bench_growth:collect_steps(),
    Writes = case Load of
                 none ->
                     Figures = #{},
                     [];
                 _ ->
                     {Writes0, Reads} = fraghash_bench_growth:stop_load(Load),
                     print_slow_writes(Writes0, Steps, T0),
                     Figures = fraghash_bench_relieve:figures(Writes0, Reads, T0, T1),
                     Writes0
             end,
    fraghash_bench_growth:print_step_rates(Steps, Writes, T0, T1),
    fraghash_bench_trace:print(Calls, Sys0, ?TRACE_MIN_US, fun short/1),
    maps:merge(Case, Figures#{wall_s => (T1 - T0) / 1.0e6, rss => Peaks, loaded => Tab =/= none,
                              result => Result}).

%% Says so, as a comment, when `Got' is not `Expected'.
check(_What, Same, Same) ->
    ok;
check(What, Expected, Got) ->
    io:format("<!-- MISMATCH: ~s: expected ~0p, found ~0p -->~n", [What, Expected, Got]).

%% A node's resident set figure `Name', in MB.
rss(Node, Name) ->
    rpc:call(Node, fraghash_bench_relieve, status_kb, [Name]) / 1024.

%% Each write over 200 ms that overlapped the operation: its start
%% (seconds from the operation's), its time, the step under way at its
%% start.
print_slow_writes(Writes, Steps, T0) ->
    Slow = lists:sort([{S, E - S} || {S, E, _} <- Writes, E > T0, E - S > ?SLOW_WRITE_US]),
    io:format("<!-- writes over 200 ms (start s, ms, step under way at its start): ~s -->~n",
              [lists:join(", ", [io_lib:format("~.2f ~b ~s", [(S - T0) / 1.0e6, D div 1000,
                                                               step_at(S, Steps)])
                                 || {S, D} <- Slow])]).

step_at(T, Steps) ->
    case [S || {At, S} <- Steps, At =< T] of
        [] -> "before";
        Before -> atom_to_list(lists:last(Before))
    end.

%%% The tables printed

print_move_header() ->
    io:format("~ts~n~ts~n",
              ["| fragment records | operation | wall s | ÷ add_table_copy | ÷ add + del | "
               "longest write ms (write_pause_ms) | p99 write ms | write rate vs before | "
               "writes | reads | misses | failures | peak RSS MB (+ over start) |",
               "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]).

print_move(Format, R) ->
    io:format("| ~s | ~s | ~.1f | ~.2f | ~.2f | ~s | ~s |~n",
              [thousands(maps:get(frag_records, R)), maps:get(op, R), maps:get(wall_s, R),
               maps:get(over_reference, R), maps:get(over_add_and_del, R), load_cells(R),
               rss_cell(R)]),
    json(Format, R).

print_rebalance_header() ->
    io:format("~ts~n~ts~n",
              ["| records | fragments | wall s | moves | records moved | minimum "
               "| moved ÷ minimum (its lower bound) | records per node after (vs mean) "
               "| within 10% | longest write ms | p99 write ms | write rate vs before | writes "
               "| reads | misses | failures | peak RSS MB (+ over start) |",
               "|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"
               "---|"]).

print_rebalance(Format, R) ->
    #{minimum_lower := Lower, minimum_upper := Upper, moved := Moved, mean := Mean} = R,
    Minimum = case {Lower, Upper} of
                  {X, X} -> thousands(X);
                  _ -> io_lib:format("~s to ~s", [thousands(Lower), thousands(Upper)])
              end,
    %% Against the lower bound: the ratio to the true minimum is at most this.
    Ratio = Moved / max(Lower, 1),
    Loads = lists:join(", ", [io_lib:format("~s ~s (~s~.1f%)", [short(P), thousands(L),
                                                                  sign(L - Mean),
                                                                  100 * (L / Mean - 1)])
                              || {P, L} <- maps:get(loads, R)]),
    io:format("| ~s | ~b | ~.1f | ~b | ~s | ~s | ~.3f | ~s | ~s | ~s | ~s |~n",
              [thousands(maps:get(records, R)), maps:get(frags, R), maps:get(wall_s, R),
               maps:get(moves, R), thousands(Moved), Minimum, Ratio, Loads,
               maps:get(within, R), load_cells(R), rss_cell(R)]),
    json(Format, R#{moved_over_minimum => Ratio, loads => lists:flatten(Loads)}).

sign(X) when X >= 0 -> "+";
sign(_) -> "".

%% The load's cells: longest and p99 write, rate vs before, writes, reads,
%% misses, failures ("-" each when idle).
load_cells(#{loaded := false}) ->
    lists:join(" | ", lists:duplicate(7, "-"));
load_cells(R) ->
    io_lib:format("~s | ~s | ~.2f | ~s | ~s | ~s | ~s",
                  [thousands(round(maps:get(longest_write_ms, R))),
                   thousands(round(maps:get(p99_write_ms, R))),
                   maps:get(write_rate_vs_before, R), thousands(maps:get(writes, R)),
                   thousands(maps:get(reads, R)), thousands(maps:get(misses, R)),
                   thousands(maps:get(failures, R))]).

rss_cell(#{rss := Peaks}) ->
    lists:flatten(lists:join(", ", [io_lib:format("~s ~b (~s~b)", [short(N), round(P),
                                                                   sign(P - S), round(P - S)])
                                    || {N, P, S} <- Peaks])).

%% A peer's letter (`fhmove_b_123@localhost' is `b').
short(Node) ->
    lists:nth(2, string:lexemes(atom_to_list(Node), "_")).

%% With `json', the row as one flat JSON object.
json(table, _R) ->
    ok;
json(json, R) ->
    Flat = maps:map(fun(_, V) when is_number(V); is_atom(V) -> V;
                       (_, V) -> lists:flatten(string:replace(io_lib:format("~0tp", [V]), "\"",
                                                               "", all))
                    end, maps:remove(rss, R)),
    %% The longest write overlapping the operation, as Redis names it.
    Pause = case R of
                #{longest_write_ms := Ms} -> #{write_pause_ms => Ms};
                _ -> #{}
            end,
    io:format("~s~n", [fraghash_bench_relieve:json(maps:merge(Flat#{peak_rss_mb => rss_cell(R)},
                                                              Pause))]).

now_us() -> erlang:monotonic_time(microsecond).

thousands(N) ->
    fraghash_bench_growth:thousands(N).
