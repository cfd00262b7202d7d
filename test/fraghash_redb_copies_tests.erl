%% @doc EUnit tests of the `redb_copies' Mnesia backend
%% (fraghash_redb_copies) in real Mnesia: tables of both supported types
%% written and read through transactions and dirty operations, their order
%% held to an ets `ordered_set' of the same random terms (the generator of
%% fraghash_redb_order_tests), `select' against `ets:select' (whole, and in
%% chunks with a continuation), deletes by pattern, counters, an index, a
%% key that cannot be stored, group commit of concurrent writers, a stop and
%% start of Mnesia, a corrupt database file, a `bag' index refused (bag
%% tables: fraghash_redb_bag_tests). A writing node killed with kill -9:
%% fraghash_redb_kill_tests.
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_copies_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, report/2, wait_mnesia_stopped/2, logged/0]).

-define(T, 300).
-define(TERMS, 1500).
-define(ALIAS, redb_copies).

redb_copies_test_() ->
    {setup, fun setup/0, fun cleanup/1,
     fun(Dir) ->
             {inorder,
              [{"bag indexes are refused with a reason", fun bag_index_refused/0},
               {timeout, ?T, {"set and ordered_set: write, read, delete", fun crud/0}},
               {timeout, ?T, {"first/next/prev/last in the order of an ets ordered_set",
                              fun order/0}},
               {timeout, ?T, {"select as ets:select, whole and in chunks", fun select/0}},
               {timeout, ?T, {"delete_object, match_delete, clear_table", fun match_delete/0}},
               {timeout, ?T, {"update_counter, concurrent too", fun update_counter/0}},
               {timeout, ?T, {"an index follows its table", fun index/0}},
               {"a key that cannot be stored aborts the transaction", fun bad_key/0},
               {timeout, ?T, {"concurrent writers share syncs", fun group_commit/0}},
               {timeout, ?T, {"the memtable is flushed in the background: past its size, "
                              "and within redb_sync_ms", fun background_flush/0}},
               {timeout, ?T, {"backup, checkpoint, restore, change_table_copy_type, "
                              "transform_table, slot", fun() -> tools(Dir) end}},
               {timeout, ?T, {"stop and start Mnesia: everything still there", fun restart/0}},
               {timeout, ?T, {"a corrupt fraghash.redb: Mnesia refuses to start, with the reason",
                              fun() -> corrupt(Dir) end}}]}
     end}.

setup() ->
    Dir = fraghash_test_support:start_mnesia("redb_copies"),
    {atomic, ok} = fraghash_redb_copies:register(),
    Dir.

cleanup(Dir) ->
    fraghash_test_support:stop_mnesia(Dir).

create(Tab, Type) ->
    create(Tab, Type, []).

create(Tab, Type, More) ->
    {atomic, ok} = mnesia:create_table(Tab, [{redb_copies, [node()]}, {type, Type},
                                             {attributes, [key, val]} | More]),
    ok.

all(Tab) ->
    mnesia:dirty_select(Tab, [{'_', [], ['$_']}]).

%%% Cases

bag_index_refused() ->
    %% A bag index (and an index plugin) returned one record of several.
    ?assertMatch({aborted, {{fraghash_redb, index_not_supported, Text}, bi, _}}
                   when is_binary(Text),
                 mnesia:create_table(bi, [{redb_copies, [node()]}, {attributes, [k, v]},
                                          {index, [{v, bag}]}])),
    ?assertNot(lists:member(bi, mnesia:system_info(tables))),
    {atomic, ok} = mnesia:create_table(oi, [{redb_copies, [node()]}, {attributes, [k, v]},
                                            {index, [v, {v, ordered}]}]),
    {atomic, ok} = mnesia:delete_table(oi).

crud() ->
    lists:foreach(fun crud/1, [{crud_set, set}, {crud_ord, ordered_set}]).

crud({Tab, Type}) ->
    ok = create(Tab, Type),
    ?assertEqual(Type, mnesia:table_info(Tab, type)),
    ?assertEqual({ext, ?ALIAS, fraghash_redb_copies}, mnesia:table_info(Tab, storage_type)),
    {atomic, ok} = mnesia:transaction(
                     fun() -> lists:foreach(fun(K) -> mnesia:write({Tab, K, K * 2}) end,
                                            lists:seq(1, 100))
                     end),
    ok = mnesia:dirty_write({Tab, {tuple, key}, <<"bin">>}),
    ?assertEqual({atomic, [{Tab, 7, 14}]}, mnesia:transaction(fun() -> mnesia:read(Tab, 7) end)),
    ?assertEqual([{Tab, {tuple, key}, <<"bin">>}], mnesia:dirty_read(Tab, {tuple, key})),
    ?assertEqual([], mnesia:dirty_read(Tab, 1000)),
    ?assertEqual(101, mnesia:table_info(Tab, size)),
    %% Overwrite, delete in a transaction, delete dirty.
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:write({Tab, 7, seven}) end),
    ?assertEqual([{Tab, 7, seven}], mnesia:dirty_read(Tab, 7)),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete({Tab, 8}) end),
    ok = mnesia:dirty_delete(Tab, {tuple, key}),
    ok = mnesia:dirty_delete(Tab, not_there),
    ?assertEqual([], mnesia:dirty_read(Tab, 8)),
    ?assertEqual(99, mnesia:table_info(Tab, size)),
    %% An aborted transaction leaves nothing.
    {aborted, oops} = mnesia:transaction(fun() -> mnesia:write({Tab, 500, x}), mnesia:abort(oops) end),
    ?assertEqual([], mnesia:dirty_read(Tab, 500)),
    Expected = [{Tab, K, K * 2} || K <- lists:seq(1, 100), K =/= 7, K =/= 8] ++ [{Tab, 7, seven}],
    ?assertEqual(lists:sort(Expected), lists:sort(all(Tab))),
    %% Any type walks every key once.
    ?assertEqual(lists:sort([element(2, R) || R <- Expected]),
                 lists:sort(walk(Tab, mnesia:dirty_first(Tab), fun mnesia:dirty_next/2))),
    ?assertEqual(lists:sort(mnesia:dirty_all_keys(Tab)),
                 lists:sort([element(2, R) || R <- Expected])).

walk(_Tab, '$end_of_table', _Step) -> [];
walk(Tab, K, Step) -> [K | walk(Tab, Step(Tab, K), Step)].

%% The test terms, distinct under == (so that no two share a key and the
%% stored key is the one written), in random order.
terms() ->
    Terms = lists:usort(fraghash_redb_order_tests:terms(?TERMS)),
    [T || {_, T} <- lists:sort([{rand:uniform(), T} || T <- Terms])].

%% Writes {Tab, T, I} for the I-th term, in transactions of 50. One
%% writer: four concurrent writers of these keys stalled in Mnesia's lock
%% manager here (with disc_copies tables too); concurrency has its own case
%% (group_commit/0).
write_terms(Tab, Terms) ->
    Numbered = lists:zip(Terms, lists:seq(1, length(Terms))),
    lists:foreach(fun(Batch) ->
                          {atomic, ok} = mnesia:transaction(
                                           fun() -> [mnesia:write({Tab, T, I}) || {T, I} <- Batch],
                                                    ok
                                           end)
                  end, batches(Numbered, 50)),
    Numbered.

batches([], _) -> [];
batches(L, N) when length(L) =< N -> [L];
batches(L, N) -> {B, Rest} = lists:split(N, L), [B | batches(Rest, N)].

order() ->
    ok = create(ord, ordered_set),
    Terms = terms(),
    Numbered = write_terms(ord, Terms),
    Ets = ets:new(order_reference, [ordered_set]),
    ets:insert(Ets, [{T, I} || {T, I} <- Numbered]),
    ?assertEqual(ets:info(Ets, size), mnesia:table_info(ord, size)),
    Forward = walk(Ets, ets:first(Ets), fun ets:next/2),
    ?assertEqual(length(Terms), length(Forward)),
    ?assert(Forward =:= walk(ord, mnesia:dirty_first(ord), fun mnesia:dirty_next/2)),
    ?assert(lists:reverse(Forward) =:= walk(ord, mnesia:dirty_last(ord), fun mnesia:dirty_prev/2)),
    ?assertEqual({atomic, {hd(Forward), lists:last(Forward)}},
                 mnesia:transaction(fun() -> {mnesia:first(ord), mnesia:last(ord)} end)),
    %% Neighbours of terms in the table and of terms near them that are not.
    Sample = lists:sublist(Terms, 400),
    Probes = Sample ++ [{P} || P <- Sample] ++ [[P] || P <- Sample]
        ++ [P + 0.5 || P <- Sample, is_number(P), abs(P) < 1.0e300],
    lists:foreach(fun(P) ->
                          ?assertEqual({P, ets:next(Ets, P)}, {P, mnesia:dirty_next(ord, P)}),
                          ?assertEqual({P, ets:prev(Ets, P)}, {P, mnesia:dirty_prev(ord, P)})
                  end, Probes),
    %% Records as written.
    lists:foreach(fun({T, I}) -> ?assertEqual({T, [{ord, T, I}]}, {T, mnesia:dirty_read(ord, T)}) end,
                  lists:sublist(Numbered, 300)),
    ets:delete(Ets).

select() ->
    %% The table of order/0, mirrored in ets.
    Mirror = ets:new(mirror, [ordered_set, {keypos, 2}]),
    ets:insert(Mirror, all(ord)),
    ?assertEqual(ets:info(Mirror, size), mnesia:table_info(ord, size)),
    Specs = [[{{ord, '$1', '$2'}, [{'==', {'rem', '$2', 3}, 0}], [{{'$2', '$1'}}]}],
             [{{ord, '$1', '_'}, [{is_atom, '$1'}], ['$1']},
              {{ord, '$1', '$2'}, [{is_tuple, '$1'}, {'<', '$2', 100}], ['$_']}],
             [{'_', [], ['$_']}],
             %% Every record as it is (matches without running the spec),
             %% and near misses that must run it.
             [{'$1', [], ['$1']}],
             [{'$1', [], ['$_']}],
             [{'_', [], ['$_']}, {{ord, '$1', '_'}, [], ['$1']}],
             [{'$1', [], [{{'$1'}}]}],
             [{'_', [], [match]}],
             [{'$1', [{is_integer, '$1'}], ['$1']}],
             [{{ord, '_', '_'}, [], ['$_']}],
             [{{ord, '_', -1}, [], ['$_']}],
             %% Bound keys: read by key, not scanned.
             [{{ord, K, '$1'}, [], [{{K, '$1'}}]} || {ord, K, _} <- lists:sublist(all(ord), 5)],
             [{{ord, [not_a_key], '_'}, [], ['$_']}],
             %% Partly bound keys: a range of the table.
             [{{ord, {'$1'}, '$2'}, [], [{{'$1', '$2'}}]}],
             [{{ord, {a, '_'}, '_'}, [], ['$_']}, {{ord, {b, '_'}, '_'}, [], ['$_']}],
             [{{ord, [a | '_'], '$1'}, [], ['$1']}],
             [{{ord, ['_' | '_'], '$1'}, [{'<', '$1', 500}], ['$1']}],
             [{{ord, {{'_'}, '_'}, '_'}, [], ['$_']}, {{ord, {[], '$1'}, '_'}, [], ['$1']}],
             [{{ord, {1, '_'}, '_'}, [], ['$_']}, {{ord, {1.0, '_'}, '_'}, [], ['$_']}],
             [{{ord, "ab" ++ '_', '_'}, [], ['$_']}]],
    lists:foreach(
      fun(MS) ->
              Want = ets:select(Mirror, MS),
              ?assertEqual({MS, Want}, {MS, mnesia:dirty_select(ord, MS)}),
              ?assertEqual({MS, {atomic, Want}},
                           {MS, mnesia:transaction(fun() -> mnesia:select(ord, MS) end)}),
              %% Chunks: as ets's, and through Mnesia's own continuation.
              ?assertEqual({MS, ets_chunks(ets:select(Mirror, MS, 37))},
                           {MS, backend_chunks(fraghash_redb_copies:select(?ALIAS, ord, MS, 37))}),
              {atomic, Chunks} = mnesia:transaction(
                                   fun() -> mnesia_chunks(mnesia:select(ord, MS, 37, read)) end),
              ?assert(lists:all(fun(C) -> length(C) =< 37 end, Chunks)),
              ?assertEqual({MS, Want}, {MS, lists:append(Chunks)})
      end, Specs),
    ?assertEqual('$end_of_table',
                 fraghash_redb_copies:select(?ALIAS, ord, [{{ord, '_', -1}, [], ['$_']}], 10)),
    %% A spec ets rejects is rejected, also behind a clause that takes all.
    ?assertError(badarg, ets:select(Mirror, [{'_', [], ['$_']}, not_a_clause])),
    ?assertError(badarg, fraghash_redb_copies:select(?ALIAS, ord,
                                                     [{'_', [], ['$_']}, not_a_clause], 10)),
    %% What each reads.
    Plan = fun(MS) -> fraghash_redb_select:plan(2, MS) end,
    ?assertEqual({keys, [a, b]}, Plan([{{ord, b, '_'}, [], []}, {{ord, a, '$1'}, [], []}])),
    ?assertEqual(scan, Plan([{{ord, '_', '_'}, [], []}])),
    ?assertEqual(scan, Plan([{'_', [], []}])),
    ?assertEqual(scan, Plan([{{ord, {a, '_'}, '_'}, [], []}, {{ord, '$1', '_'}, [], []}])),
    %% Tuples of the same size: the common prefix is their tag and size.
    ?assertMatch({prefix, _}, Plan([{{ord, {a, '_'}, '_'}, [], []}, {{ord, {b, '_'}, '_'}, [], []}])),
    {prefix, P1} = Plan([{{ord, {a, '_', c}, '_'}, [], []}]),
    K1 = fraghash_redb_nif:order_key({a, b, c}),
    ?assertEqual(P1, binary:part(K1, 0, byte_size(P1))),
    ?assertNotEqual(P1, binary:part(fraghash_redb_nif:order_key({b, b, c}), 0, byte_size(P1))),
    {prefix, P2} = Plan([{{ord, [a, b | '_'], '_'}, [], []}]),
    ?assertEqual(P2, binary:part(fraghash_redb_nif:order_key([a, b, c]), 0, byte_size(P2))),
    ?assertNotEqual(P2, binary:part(fraghash_redb_nif:order_key([a, c]), 0, byte_size(P2))),
    ets:delete(Mirror),
    %% A map in a partly bound key matches every map holding its keys, of
    %% any size (as in ets): the range is that of the map's type.
    ok = create(map_keyed, ordered_set),
    Maps = [{map_keyed, {M, I}, I} || M <- [#{}, #{a => 1}, #{a => 1, b => 2}, #{b => 1}],
                                      I <- [1, 2]],
    MapMirror = ets:new(map_mirror, [ordered_set, {keypos, 2}]),
    ets:insert(MapMirror, Maps),
    {atomic, ok} = mnesia:transaction(fun() -> lists:foreach(fun mnesia:write/1, Maps) end),
    lists:foreach(fun(MS) ->
                          ?assertMatch([_, _ | _], ets:select(MapMirror, MS)),
                          ?assertEqual({MS, ets:select(MapMirror, MS)},
                                       {MS, mnesia:dirty_select(map_keyed, MS)})
                  end,
                  [[{{map_keyed, {#{a => 1}, '_'}, '_'}, [], ['$_']}],
                   [{{map_keyed, {#{a => '$1'}, 2}, '_'}, [], ['$1']}],
                   [{{map_keyed, {#{}, '_'}, '_'}, [], ['$_']}]]),
    ets:delete(MapMirror),
    {atomic, ok} = mnesia:delete_table(map_keyed),
    %% A stored value that is not a term is an error, never a record.
    ok = create(garbled, set),
    ok = fraghash_redb_nif:write(fraghash_redb_db:handle(),
                                 [{put, <<"m:garbled">>, fraghash_redb_nif:order_key(1),
                                   <<131, 0, 1, 2>>}], immediate),
    ?assertExit({aborted, {badarg, _}}, mnesia:dirty_select(garbled, [{'_', [], ['$_']}])),
    {atomic, ok} = mnesia:delete_table(garbled).

ets_chunks('$end_of_table') -> [];
ets_chunks({Matches, Cont}) -> [Matches | ets_chunks(ets:select(Cont))].

backend_chunks('$end_of_table') -> [];
backend_chunks({Matches, Cont}) -> [Matches | backend_chunks(fraghash_redb_copies:select(Cont))].

mnesia_chunks('$end_of_table') -> [];
mnesia_chunks({Matches, Cont}) -> [Matches | mnesia_chunks(mnesia:select(Cont))].

match_delete() ->
    ok = create(md, ordered_set),
    {atomic, ok} = mnesia:transaction(
                     fun() -> [mnesia:write({md, K, K rem 5}) || K <- lists:seq(1, 200)], ok end),
    %% delete_object deletes only the very record.
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete_object({md, 3, 0}) end),
    ?assertEqual([{md, 3, 3}], mnesia:dirty_read(md, 3)),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete_object({md, 3, 3}) end),
    ?assertEqual([], mnesia:dirty_read(md, 3)),
    ok = mnesia:dirty_delete_object({md, 4, 4}),
    ?assertEqual([], mnesia:dirty_read(md, 4)),
    %% The callback itself, with a pattern that leaves the key free.
    ok = fraghash_redb_copies:match_delete(?ALIAS, md, {md, '_', 2}),
    Left = [{md, K, K rem 5} || K <- lists:seq(1, 200), K rem 5 =/= 2, K =/= 3, K =/= 4],
    ?assertEqual(Left, all(md)),
    ?assertEqual(length(Left), mnesia:table_info(md, size)),
    {atomic, ok} = mnesia:clear_table(md),
    ?assertEqual(0, mnesia:table_info(md, size)),
    ?assertEqual('$end_of_table', mnesia:dirty_first(md)).

update_counter() ->
    ok = create(cnt, set),
    ?assertEqual(5, mnesia:dirty_update_counter(cnt, a, 5)),
    ?assertEqual(8, mnesia:dirty_update_counter(cnt, a, 3)),
    ?assertEqual(6, mnesia:dirty_update_counter(cnt, a, -2)),
    ?assertEqual([{cnt, a, 6}], mnesia:dirty_read(cnt, a)),
    %% Not an integer: Mnesia writes the increment over it.
    ok = mnesia:dirty_write({cnt, b, not_a_number}),
    ?assertEqual(4, mnesia:dirty_update_counter(cnt, b, 4)),
    %% Concurrent increments of an existing counter: none lost. (Of a
    %% missing one, Mnesia writes each first increment over the others,
    %% whatever the storage.)
    ok = mnesia:dirty_write({cnt, c, 0}),
    Self = self(),
    Pids = [spawn_link(fun() ->
                               [mnesia:dirty_update_counter(cnt, c, 1) || _ <- lists:seq(1, 50)],
                               Self ! {done, self()}
                       end) || _ <- lists:seq(1, 4)],
    [receive {done, P} -> ok end || P <- Pids],
    ?assertEqual([{cnt, c, 200}], mnesia:dirty_read(cnt, c)).

index() ->
    ok = create(ix, set, [{index, [val]}]),
    {atomic, ok} = mnesia:transaction(
                     fun() -> [mnesia:write({ix, K, K rem 7}) || K <- lists:seq(1, 100)], ok end),
    Want = fun(V) -> [{ix, K, V} || K <- lists:seq(1, 100), K rem 7 =:= V] end,
    ?assertEqual(Want(3), lists:sort(mnesia:dirty_index_read(ix, 3, val))),
    ?assertEqual({atomic, Want(5)},
                 mnesia:transaction(fun() -> lists:sort(mnesia:index_read(ix, 5, val)) end)),
    %% An update moves the record from one index value to another.
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:write({ix, 3, 5}) end),
    ?assertEqual(Want(3) -- [{ix, 3, 3}], lists:sort(mnesia:dirty_index_read(ix, 3, val))),
    ?assertEqual(lists:sort([{ix, 3, 5} | Want(5)]), lists:sort(mnesia:dirty_index_read(ix, 5, val))),
    %% An index added to a filled table is built from it.
    {atomic, ok} = mnesia:del_table_index(ix, val),
    {atomic, ok} = mnesia:add_table_index(ix, val),
    ?assertEqual(Want(3) -- [{ix, 3, 3}], lists:sort(mnesia:dirty_index_read(ix, 3, val))).

bad_key() ->
    ok = create(bk, ordered_set),
    Pid = self(),
    ?assertEqual({aborted, {fraghash_redb, unsupported_key, bk, Pid}},
                 mnesia:transaction(fun() -> mnesia:write({bk, 1, ok}),
                                             mnesia:write({bk, Pid, x}) end)),
    Big = binary:copy(<<1>>, 100000),
    ?assertEqual({aborted, {fraghash_redb, key_too_large, bk, Big}},
                 mnesia:transaction(fun() -> mnesia:write({bk, Big, x}) end)),
    %% Nothing of the aborted transactions, and reads by such keys find nothing.
    ?assertEqual(0, mnesia:table_info(bk, size)),
    ?assertEqual([], mnesia:dirty_read(bk, Pid)).

group_commit() ->
    ok = create(gc, set),
    %% Logged writes are made by their callers: none reaches the writer.
    #{calls := C0} = fraghash_redb_db:stats(),
    writers(gc, logged),
    ?assertMatch(#{calls := C0}, fraghash_redb_db:stats()),
    %% Synced ones go through it, where concurrent callers share syncs.
    ok = application:set_env(fraghash, redb_durability, immediate),
    try
        restart_mnesia(),
        #{calls := C1, commits := K1} = fraghash_redb_db:stats(),
        writers(gc, immediate),
        #{calls := C2, commits := K2} = fraghash_redb_db:stats(),
        report("group commit: ~b writes in ~b syncs~n", [C2 - C1, K2 - K1]),
        ?assertEqual(400, C2 - C1),
        ?assert(K2 - K1 < C2 - C1)
    after
        ok = application:unset_env(fraghash, redb_durability),
        restart_mnesia()
    end,
    ?assertEqual(800, mnesia:table_info(gc, size)).

%% 8 writers, 50 dirty writes each, of keys {Tag, Writer, I}.
writers(Tab, Tag) ->
    Self = self(),
    Pids = [spawn_link(fun() ->
                               [ok = mnesia:dirty_write({Tab, {Tag, W, I}, I}) || I <- lists:seq(1, 50)],
                               Self ! {done, self()}
                       end) || W <- lists:seq(1, 8)],
    [receive {done, P} -> ok end || P <- Pids],
    ok.

%% The log holds what no flush has committed yet: a lone write is flushed
%% within redb_sync_ms, and past the memtable's size (1 MiB by default) the
%% writer has it flushed while writes go on. (A changed redb_sync_ms counts
%% from the next flush the writer arms.)
background_flush() ->
    ok = create(bf, set),
    Log = fun() -> filelib:file_size(fraghash_redb_db:path() ++ ".log")
                       + filelib:file_size(fraghash_redb_db:path() ++ ".log2") end,
    Value = binary:copy(<<7>>, 500),
    ok = application:set_env(fraghash, redb_sync_ms, 100),
    %% Any flush armed by the earlier cases (after 1 s) has run.
    timer:sleep(1500),
    ok = mnesia:dirty_write({bf, first, Value}),
    %% Both files back to their 8-byte headers.
    ?assert(wait_until(fun() -> Log() =:= 16 end, 5000)),
    ok = application:set_env(fraghash, redb_sync_ms, 600000),
    timer:sleep(300),
    [ok = mnesia:dirty_write({bf, I, Value}) || I <- lists:seq(1, 3000)],
    %% 1.5 MB written and no flush due for 10 minutes: one past the size
    %% emptied a log file, and only what came after it (under 1 MiB and a
    %% group) may be left once it ends.
    Flushed = wait_until(fun() -> Log() < 1 bsl 20 end, 5000),
    ok = application:unset_env(fraghash, redb_sync_ms),
    ok = fraghash_redb_copies:sync(),
    ?assert(Flushed),
    ?assertEqual(3001, mnesia:table_info(bf, size)).

wait_until(Pred, Ms) when Ms =< 0 ->
    Pred();
wait_until(Pred, Ms) ->
    Pred() orelse begin timer:sleep(50), wait_until(Pred, Ms - 50) end.

tools(Dir) ->
    ok = create(tools, ordered_set),
    Recs = [{tools, K, K * 3} || K <- lists:seq(1, 60)],
    {atomic, ok} = mnesia:transaction(fun() -> lists:foreach(fun mnesia:write/1, Recs) end),
    ?assertEqual([[{tools, 1, 3}], [{tools, 60, 180}], '$end_of_table'],
                 [mnesia:dirty_slot(tools, S) || S <- [0, 59, 60]]),
    %% A backup, records deleted, the backup restored.
    Backup = filename:join(Dir, "tools.bup"),
    ok = mnesia:backup(Backup),
    {atomic, ok} = mnesia:transaction(fun() -> [mnesia:delete({tools, K}) || K <- lists:seq(1, 20)],
                                               ok end),
    ?assertEqual({atomic, [tools]}, mnesia:restore(Backup, [{clear_tables, [tools]}, {default_op, skip_tables}])),
    ?assertEqual(Recs, all(tools)),
    %% A checkpoint retains what a later write changes (in a redb table of
    %% its own while active).
    {ok, cp, _} = mnesia:activate_checkpoint([{name, cp}, {max, [tools]}]),
    ok = mnesia:dirty_write({tools, 7, changed}),
    CpBackup = filename:join(Dir, "tools_cp.bup"),
    ok = mnesia:backup_checkpoint(cp, CpBackup),
    ok = mnesia:deactivate_checkpoint(cp),
    ?assertEqual({atomic, [tools]}, mnesia:restore(CpBackup, [{clear_tables, [tools]}, {default_op, skip_tables}])),
    ?assertEqual(Recs, all(tools)),
    %% To disc_copies and back, then a new record shape.
    {atomic, ok} = mnesia:change_table_copy_type(tools, node(), disc_copies),
    ?assertEqual({disc_copies, Recs}, {mnesia:table_info(tools, storage_type), all(tools)}),
    {atomic, ok} = mnesia:change_table_copy_type(tools, node(), redb_copies),
    ?assertEqual({{ext, ?ALIAS, fraghash_redb_copies}, Recs},
                 {mnesia:table_info(tools, storage_type), all(tools)}),
    {atomic, ok} = mnesia:transform_table(tools, fun({tools, K, V}) -> {tools, K, V, K} end,
                                          [key, val, extra]),
    ?assertEqual([{tools, K, V, K} || {tools, K, V} <- Recs], all(tools)),
    %% No redb table left behind by the checkpoint.
    {ok, Names} = fraghash_redb_nif:tables(fraghash_redb_db:handle()),
    ?assertEqual([], [N || {N, _} <- Names, binary:match(N, <<"x:">>) =:= {0, 2},
                           element(2, binary_to_term(binary:decode_hex(
                                                       binary:part(N, 2, byte_size(N) - 2))))
                               =:= retainer]).

tables() ->
    [T || T <- mnesia:system_info(tables),
          mnesia:table_info(T, storage_type) =:= {ext, ?ALIAS, fraghash_redb_copies}].

snapshot() ->
    [{T, lists:sort(all(T))} || T <- lists:sort(tables())].

restart_mnesia() ->
    stopped = mnesia:stop(),
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables(tables(), 60000).

restart() ->
    Before = snapshot(),
    ?assert(length(Before) >= 8),
    ?assert(lists:sum([length(Rs) || {_, Rs} <- Before]) > 1000),
    restart_mnesia(),
    ?assert(Before =:= snapshot()),
    %% The index is there (kept, not rebuilt) and the table writable.
    ?assertEqual([{ix, 3, 5}], [R || {ix, 3, _} = R <- mnesia:dirty_index_read(ix, 5, val)]),
    ok = mnesia:dirty_write({crud_ord, after_restart, 1}),
    ?assertEqual([{crud_ord, after_restart, 1}], mnesia:dirty_read(crud_ord, after_restart)).

corrupt(Dir) ->
    Before = snapshot(),
    stopped = mnesia:stop(),
    Path = filename:join(Dir, "fraghash.redb"),
    {ok, Bytes} = file:read_file(Path),
    %% Keep redb's magic number; garble the header and both commit slots.
    <<Magic:16/binary, _:512/binary, Rest/binary>> = Bytes,
    Garbage = << <<((I * 37) bxor 16#A5):8>> || I <- lists:seq(0, 511) >>,
    ok = file:write_file(Path, [Magic, Garbage, Rest]),
    %% Mnesia's start fails; its reason, logged, names the file and why.
    %% (Captured here, and kept off the terminal: Mnesia's crash reports
    %% of its own shutdown say nothing more.)
    %% Its core file goes to the scratch directory, not the current one.
    ok = application:set_env(mnesia, core_dir, scratch()),
    ok = logger:add_handler(redb_capture, fraghash_test_support, #{config => self(), level => error}),
    {ok, #{level := Level}} = logger:get_handler_config(default),
    ok = logger:update_handler_config(default, level, none),
    Result = try
                 R = mnesia:start(),
                 ok = wait_mnesia_stopped(node(), 200),
                 R
             after
                 %% The reason is logged while Mnesia stops: waited for
                 %% before the handlers are put back.
                 _ = wait_logged(fun(Msg) -> names_corrupt(Msg, Path) end, 20000),
                 logger:update_handler_config(default, level, Level),
                 logger:remove_handler(redb_capture)
             end,
    report("start on a corrupt fraghash.redb: ~0p~n", [Result]),
    ?assertMatch({error, _}, Result),
    ?assertMatch([_ | _], [M || M <- logged(), names_corrupt(M, Path)]),
    %% The same reason on demand, without Mnesia.
    ?assertMatch({error, {fraghash_redb, corrupt, Path, Msg}} when is_binary(Msg),
                 fraghash_redb_db:check_file(Path)),
    %% No file at all: refused too (not created empty).
    ok = file:delete(Path),
    ?assertMatch({error, _}, quiet_start()),
    ?assertNot(filelib:is_file(Path)),
    %% The file as it was: all back.
    ok = file:write_file(Path, Bytes),
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables(tables(), 60000),
    ?assert(Before =:= snapshot()).

%% Starts Mnesia with its log kept off the terminal, for a start that fails.
quiet_start() ->
    {ok, #{level := Level}} = logger:get_handler_config(default),
    ok = logger:update_handler_config(default, level, none),
    try
        R = mnesia:start(),
        ok = wait_mnesia_stopped(node(), 200),
        timer:sleep(500),
        R
    after
        logger:update_handler_config(default, level, Level)
    end.

%% Waits until a message `Pred' holds for was logged; keeps it for logged/0.
wait_logged(Pred, Timeout) ->
    receive
        {logged, M} = Event ->
            case Pred(M) of
                true -> self() ! Event, ok;
                false -> [M | wait_logged(Pred, Timeout)]
            end
    after Timeout -> timeout
    end.

%% Whether a logged message holds Mnesia's abort of its start with the
%% backend's reason: {backend_init_error, {error, {fraghash_redb, corrupt,
%% Path, Text}}}, anywhere in it.
names_corrupt(Msg, Path) ->
    holds(fun({backend_init_error, {error, {fraghash_redb, corrupt, P, Text}}}) ->
                  P =:= Path andalso is_binary(Text);
             (_) -> false
          end, Msg).

holds(Pred, T) ->
    Pred(T) orelse
        case T of
            _ when is_tuple(T) -> holds(Pred, tuple_to_list(T));
            [H | Tl] -> holds(Pred, H) orelse holds(Pred, Tl);
            _ when is_map(T) -> holds(Pred, maps:to_list(T));
            _ -> false
        end.
