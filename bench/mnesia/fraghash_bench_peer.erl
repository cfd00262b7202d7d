%% @doc A comparison peer for {@link fraghash_bench_redb}: aeternity's
%% `mnesia_rocksdb' (storage type `rocksdb_copies'), measured as a fourth
%% storage type when `bench/mnesia/disc-measure.sh redb --peer rocksdb' (or
%% `FRAGHASH_BENCH_ROCKSDB=Dir') asks for it. The peer is no dependency of
%% fraghash: `bench/peer/build-mnesia-rocksdb.sh' builds it outside the
%% application (one directory per application under `Dir'), and only the
%% `rocksdb_copies' VM gets its code paths.
%%
%% == Set-up of the rocksdb_copies VM ==
%% The backend is registered as its README says (`mnesia_rocksdb:register()'
%% after Mnesia has started) and the table created as
%% `{rocksdb_copies, [node()]}' with `user_properties'
%% `[{rocksdb_opts, [{block_based_table_options, [{block_cache, C}]}]}]',
%% `C' an LRU cache of the budget redb's page cache gets
%% ({@link cache_bytes/0}), so that both engines read through caches of the
%% same size. Everything else is as `mnesia_rocksdb' sets it for a table
%% (a column family of one RocksDB database per storage type: RocksDB's
%% defaults, among them a 64 MiB memtable per column family, snappy
%% compression, WAL written but not synced per write), plus
%% `FRAGHASH_BENCH_ROCKSDB_OPTS' (an Erlang list of further `rocksdb_opts')
%% if set.
%%
%% `mnesia_rocksdb' opens the column families again without their options
%% when Mnesia restarts, so after the bench's reopen RocksDB reads through
%% its default 8 MiB block cache; only the overwrite phase (disc) comes
%% after it.
-module(fraghash_bench_peer).

-export([code_paths/1, setup/1, table_size/1, cache_bytes/0,
         ratio_columns/1, print_targets/1, json_ratios/1]).

-define(ENV, "FRAGHASH_BENCH_ROCKSDB").

%% @doc The code paths (`-pa') a VM for `Storage' needs beyond fraghash's:
%% for `rocksdb_copies' every `*/ebin' under `FRAGHASH_BENCH_ROCKSDB' (the
%% bench stops with the reason when it is unset or holds no build).
-spec code_paths(atom()) -> [string()].
code_paths(rocksdb_copies) ->
    Dir = case os:getenv(?ENV) of
              false -> erlang:error({?ENV, unset, "build the peer with "
                                     "bench/peer/build-mnesia-rocksdb.sh"});
              D -> D
          end,
    Ebins = filelib:wildcard(filename:join(Dir, "*/ebin")),
    [erlang:error({?ENV, no_build, Dir}) || not lists:any(fun(E) -> lists:suffix(
        "mnesia_rocksdb/ebin", E) end, Ebins)],
    Ebins;
code_paths(_) ->
    [].

%% @doc In the storage type's own VM, after `mnesia:start()': registers a
%% peer backend (or `floor_copies', {@link fraghash_bench_floor}) and returns the options its table is created with beyond
%% the bench's own (none for Mnesia's and fraghash's types).
-spec setup(atom()) -> [{atom(), term()}].
setup(rocksdb_copies) ->
    {ok, rocksdb_copies} = mnesia_rocksdb:register(),
    %% The same budget as redb's page cache. The cache stays alive as long
    %% as the column family that uses it (RocksDB holds it by a shared
    %% pointer), whatever becomes of the Erlang term.
    {ok, Cache} = rocksdb:new_cache(lru, cache_bytes()),
    Extra = case os:getenv("FRAGHASH_BENCH_ROCKSDB_OPTS") of
                false -> [];
                Text -> parse(Text)
            end,
    [{user_properties,
      [{rocksdb_opts, [{block_based_table_options, [{block_cache, Cache}]} | Extra]}]}];
setup(floor_copies) ->
    ok = fraghash_bench_floor:init_backend(),
    {atomic, ok} = fraghash_bench_floor:register(),
    [];
setup(_) ->
    [].

parse(Text) ->
    {ok, Tokens, _} = erl_scan:string(Text ++ "."),
    {ok, Term} = erl_parse:parse_term(Tokens),
    true = is_list(Term),
    Term.

%% @doc The records in `Tab', exactly: `mnesia_rocksdb' answers
%% `table_info(Tab, size)' with RocksDB's estimate (`estimate-num-keys',
%% some percent off once keys have been overwritten or the database
%% reopened), so its records are counted; the others' size is exact.
-spec table_size(atom()) -> non_neg_integer().
table_size(Tab) ->
    case mnesia:table_info(Tab, storage_type) of
        T when T =:= rocksdb_copies; element(2, T) =:= rocksdb_copies ->
            length(mnesia:activity(async_dirty, fun() ->
                mnesia:select(Tab, [{'_', [], [true]}]) end));
        _ ->
            mnesia:table_info(Tab, size)
    end.

%% @doc The page-cache budget, in bytes, of both engines: redb's
%% (`FRAGHASH_REDB_CACHE_BYTES', else its default,
%% {@link fraghash_redb_db:default_cache_bytes/0}) and RocksDB's block
%% cache.
-spec cache_bytes() -> pos_integer().
cache_bytes() ->
    case os:getenv("FRAGHASH_REDB_CACHE_BYTES") of
        false -> fraghash_redb_db:default_cache_bytes();
        Bytes -> list_to_integer(Bytes)
    end.

%% @doc The storage types the `redb_copies' figures are divided by, given
%% the types measured (`Names'): Mnesia's two always (a `-' where one was
%% not measured), `rocksdb_copies' when it was; each with its column
%% heading.
-spec ratio_columns([atom()]) -> [{atom(), string()}].
ratio_columns(Names) ->
    [{disc_only_copies, "redb / disc_only"}, {disc_copies, "redb / disc_copies"}]
        ++ [{rocksdb_copies, "redb / rocksdb"} || lists:member(rocksdb_copies, Names)]
        ++ [{floor_copies, "redb / floor"} || lists:member(floor_copies, Names)].

%% The targets the redb_copies backend set itself against mnesia_rocksdb:
%% {Label, Key, Goal, at_least | at_most}, on redb_copies ÷ rocksdb_copies.
targets() ->
    [{"reads, async_dirty ops/s", read_dirty_ops_s, 2, at_least},
     {"reads, transaction ops/s", read_tx_ops_s, 2, at_least},
     {"full select scan, records/s", scan_rps, 5, at_least},
     {"writes, 1 writer, writes/s", write1_ops_s, 1.5, at_least},
     {"writes, 16 writers, writes/s", write16_ops_s, 1.5, at_least},
     {"disc right after load (Mnesia running)", disc_loaded_mb, 1.1, at_most},
     {"disc after load and the write rounds", disc_mb, 1.1, at_most},
     {"disc after the overwrites", disc_overwritten_mb, 1.1, at_most}].

%% @doc When `rocksdb_copies' was measured: the targets against it, each
%% with the ratio and whether it is met, and which figures depend on the
%% cache budget. Nothing otherwise.
-spec print_targets([{atom(), map()}]) -> ok.
print_targets(Results) ->
    case {lists:keyfind(redb_copies, 1, Results), lists:keyfind(rocksdb_copies, 1, Results)} of
        {{_, R}, {_, O}} ->
            io:format("~nredb_copies ÷ rocksdb_copies against the targets~n~n"
                      "| figure | ratio | target | met |~n|---|---:|---|---|~n"),
            [io:format("| ~ts | ~.2f | ~ts ~s | ~s |~n",
                       [Label, maps:get(K, R) / maps:get(K, O),
                        case Dir of at_least -> "≥"; at_most -> "≤" end,
                        float_to_list(float(Goal), [{decimals, 1}, compact]),
                        met(maps:get(K, R) / maps:get(K, O), Goal, Dir)])
             || {Label, K, Goal, Dir} <- targets(),
                maps:is_key(K, R), maps:is_key(K, O), maps:get(K, O) /= 0],
            io:format("~nDepend on the cache budget (~b MiB, redb's page cache and "
                      "RocksDB's block cache alike; memtables outside it: redb's "
                      "1 MiB, RocksDB's 64 MiB default): memory, reads, scan, "
                      "writes (redb reads the pages it rewrites). Load, disc and "
                      "reopen hardly do. RocksDB runs with its default 8 MiB block "
                      "cache after the reopen (the overwrites).~n",
                      [cache_bytes() div 1048576]),
            print_floor(Results);
        _ ->
            ok
    end.

%% With `floor_copies' measured too: the write ratios against rocksdb_copies
%% that no backend can pass, since none writes faster than Mnesia's path
%% alone (fraghash_bench_floor).
print_floor(Results) ->
    case lists:keyfind(floor_copies, 1, Results) of
        {_, F} ->
            {_, O} = lists:keyfind(rocksdb_copies, 1, Results),
            {_, R} = lists:keyfind(redb_copies, 1, Results),
            io:format("~nMnesia's path alone (floor_copies, records in ets): the highest "
                      "ratio against rocksdb_copies any backend could reach~n~n"
                      "| figure | floor ÷ rocksdb | redb ÷ rocksdb | redb ÷ floor |~n"
                      "|---|---:|---:|---:|~n"),
            [io:format("| ~ts | ~.2f | ~.2f | ~.2f |~n",
                       [Label, maps:get(K, F) / maps:get(K, O), maps:get(K, R) / maps:get(K, O),
                        maps:get(K, R) / maps:get(K, F)])
             || {Label, K} <- [{"writes, 1 writer, writes/s", write1_ops_s},
                               {"writes, 16 writers, writes/s", write16_ops_s},
                               {"reads, transaction ops/s", read_tx_ops_s}],
                maps:is_key(K, F), maps:is_key(K, O), maps:is_key(K, R)],
            ok;
        false ->
            ok
    end.

met(Ratio, Goal, at_least) -> yes_no(Ratio >= Goal);
met(Ratio, Goal, at_most) -> yes_no(Ratio =< Goal).

yes_no(true) -> "yes";
yes_no(false) -> "no".

%% @doc The JSON member `,"ratio_rocksdb":{...}' (every figure of
%% `redb_copies' divided by `rocksdb_copies'') when both were measured, an
%% empty list otherwise.
-spec json_ratios([{atom(), map()}]) -> iolist().
json_ratios(Results) ->
    case {lists:keyfind(redb_copies, 1, Results), lists:keyfind(rocksdb_copies, 1, Results)} of
        {{_, R}, {_, O}} ->
            [",\"ratio_rocksdb\":{",
             lists:join(",", [io_lib:format("\"~s\":~s", [K, float_to_list(V / maps:get(K, O),
                                                                           [{decimals, 3}, compact])])
                              || {K, V} <- lists:sort(maps:to_list(R)),
                                 is_number(maps:get(K, O, undefined)), maps:get(K, O) /= 0]),
             "}"];
        _ ->
            []
    end.
