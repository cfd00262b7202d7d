%% @doc EUnit tests of `bag' tables on the `redb_copies' backend
%% (fraghash_redb_copies, fraghash_redb_bag) in real Mnesia: random
%% operations from a fixed seed on a redb bag with an index and on an ets
%% `bag' side by side (write, delete, delete_object, read, match_object,
%% select whole and in chunks, index reads, first/next/last/prev, size),
%% both holding the same records after each step and after a restart of
%% Mnesia; the bag cases of Mnesia's own backend tests (written for its
%% test backend), on redb_copies; a fragmented bag grown and shrunk;
%% a peer killed with kill -9 while it writes and deletes records of a bag,
%% every acknowledged change found after its restart, then a copy loaded
%% by a second node.
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_bag_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, start_peer/2, start_redb_peer/3, wait_down/1,
                                report/2]).

-export([acked_bag_writer/3]).

-define(T, 300).
-define(SEED, {exsss, {20261206, 41, 3}}).
-define(STEPS, 3000).
-define(KEYS, 40).
-define(VALS, 6).

redb_bag_test_() ->
    {setup, fun setup/0, fun fraghash_test_support:stop_mnesia/1,
     fun(Dir) ->
             {inorder,
              [{"reads, duplicates, delete and delete_object of a bag", fun basics/0},
               {timeout, ?T, {"random operations hold a bag equal to an ets bag, "
                              "and after a restart", fun against_ets/0}},
               {"Mnesia's own bag cases: dirty read, delete, delete_object",
                fun mnesia_dirty_cases/0},
               {"Mnesia's own bag case: delete_object in transactions, with writes and "
                "deletes of the same key", fun mnesia_trans_delete_object/0},
               {"Mnesia's own bag case: indexes follow writes and deletes",
                fun mnesia_index_update_bag/0},
               {"Mnesia's own bag case: slots and first/next see every record",
                fun mnesia_iteration/0},
               {"records that hold pids, and large records", fun odd_records/0},
               {timeout, ?T, {"backup, checkpoint, restore, change_table_copy_type, "
                              "transform_table of a bag", fun() -> tools(Dir) end}},
               {"a fragmented bag grows and shrinks through the safe path", fun fragmented_grows/0}]}
     end}.

setup() ->
    Dir = fraghash_test_support:start_mnesia("redb_bag"),
    {atomic, ok} = fraghash_redb_copies:register(),
    Dir.

create(Tab, Attrs, More) ->
    {atomic, ok} = mnesia:create_table(Tab, [{redb_copies, [node()]}, {type, bag},
                                             {attributes, Attrs} | More]),
    ok.

all(Tab) ->
    lists:sort(mnesia:dirty_select(Tab, [{'_', [], ['$_']}])).

%%% Cases

basics() ->
    Tab = bag_basics,
    ok = create(Tab, [k, v], []),
    ?assertEqual({ext, redb_copies, fraghash_redb_copies}, mnesia:table_info(Tab, storage_type)),
    ?assertEqual(bag, mnesia:table_info(Tab, type)),
    {atomic, ok} = mnesia:transaction(
                     fun() -> [mnesia:write({Tab, K, V}) || K <- [a, b, c], V <- [1, 2, 3]], ok end),
    %% The same record again is no second record.
    ok = mnesia:dirty_write({Tab, b, 2}),
    ?assertEqual(9, mnesia:table_info(Tab, size)),
    ?assertEqual([{Tab, b, 1}, {Tab, b, 2}, {Tab, b, 3}], lists:sort(mnesia:dirty_read(Tab, b))),
    ?assertEqual([], mnesia:dirty_read(Tab, d)),
    ok = mnesia:dirty_delete_object({Tab, b, 2}),
    ok = mnesia:dirty_delete_object({Tab, b, 99}),
    ?assertEqual([{Tab, b, 1}, {Tab, b, 3}], lists:sort(mnesia:dirty_read(Tab, b))),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete({Tab, a}) end),
    ?assertEqual([], mnesia:dirty_read(Tab, a)),
    ?assertEqual(5, mnesia:table_info(Tab, size)),
    %% A delete of the key then writes, in one transaction.
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete({Tab, c}),
                                               mnesia:write({Tab, c, new}) end),
    ?assertEqual([{Tab, c, new}], mnesia:dirty_read(Tab, c)),
    ?assertEqual([b, c], walk(Tab, mnesia:dirty_first(Tab), fun mnesia:dirty_next/2)),
    ?assertEqual([c, b], walk(Tab, mnesia:dirty_last(Tab), fun mnesia:dirty_prev/2)),
    ?assertEqual([{Tab, b, 1}, {Tab, b, 3}],
                 lists:sort(mnesia:dirty_match_object({Tab, b, '_'}))),
    ?assertEqual([{Tab, b, 3}], mnesia:dirty_select(Tab, [{{Tab, '_', '$1'}, [{'==', '$1', 3}],
                                                           ['$_']}])),
    ok = mnesia:dirty_delete(Tab, b),
    ?assertEqual([{Tab, c, new}], all(Tab)),
    %% A key of more records than one chunk of a read (64) or of a
    %% delete's scan (256), between two other keys.
    Many = [{Tab, many, I} || I <- lists:seq(1, 600)],
    {atomic, ok} = mnesia:transaction(fun() -> lists:foreach(fun mnesia:write/1, Many) end),
    ok = mnesia:dirty_write({Tab, zz, last}),
    ?assertEqual(Many, lists:sort(mnesia:dirty_read(Tab, many))),
    ?assertEqual(zz, mnesia:dirty_next(Tab, many)),
    ?assertEqual(c, mnesia:dirty_prev(Tab, many)),
    ok = mnesia:dirty_delete(Tab, many),
    ?assertEqual([{Tab, c, new}, {Tab, zz, last}], all(Tab)),
    {atomic, ok} = mnesia:clear_table(Tab),
    ?assertEqual(0, mnesia:table_info(Tab, size)),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Random operations on a redb bag (indexed on `v') and an ets bag.
against_ets() ->
    Tab = bag_random,
    ok = create(Tab, [k, v, w], [{index, [v]}]),
    Ets = ets:new(bag_reference, [bag, {keypos, 2}]),
    rand:seed(element(1, ?SEED), element(2, ?SEED)),
    Counts = lists:foldl(fun(Step, Acc) ->
                                 Op = step(Tab, Ets),
                                 case ets:info(Ets, size) =:= mnesia:table_info(Tab, size) of true -> ok; false -> ?assertEqual({Step, Op, sorted(ets:tab2list(Ets))}, {Step, Op, all(Tab)}) end,
                                 Step rem 500 =:= 0 andalso same(Tab, Ets),
                                 maps:update_with(Op, fun(C) -> C + 1 end, 1, Acc)
                         end, #{}, lists:seq(1, ?STEPS)),
    same(Tab, Ets),
    ?assert(ets:info(Ets, size) > 100),
    ?assertEqual(lists:sort(maps:keys(Counts)),
                 [delete, delete_object, index_read, match_object, read, select, select_chunks,
                  size, walk, write, write_dirty]),
    %% Kept as written: a stop and start of Mnesia changes nothing, and the
    %% index is rebuilt from the table.
    stopped = mnesia:stop(),
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables([Tab], 60000),
    same(Tab, Ets),
    [?assertEqual(sorted(ets:match_object(Ets, {Tab, '_', V, '_'})),
                  lists:sort(mnesia:dirty_index_read(Tab, V, v))) || V <- lists:seq(1, ?VALS)],
    {atomic, ok} = mnesia:delete_table(Tab).

%% Keys: integers, and tuples whose leading part a select can bind (a
%% range of keys).
step(Tab, Ets) ->
    K = case rand:uniform(3) of
            3 -> {g, rand:uniform(4), rand:uniform(?KEYS div 4)};
            _ -> rand:uniform(?KEYS)
        end,
    Rec = {Tab, K, rand:uniform(?VALS), rand:uniform(2)},
    case rand:uniform(20) of
        N when N =< 6 ->
            {atomic, ok} = mnesia:transaction(fun() -> mnesia:write(Rec) end),
            ets:insert(Ets, Rec),
            write;
        N when N =< 8 ->
            ok = mnesia:dirty_write(Rec),
            ets:insert(Ets, Rec),
            write_dirty;
        9 ->
            {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete({Tab, K}) end),
            ets:delete(Ets, K),
            delete;
        N when N =< 11 ->
            %% Mostly a record that is there.
            Del = case ets:lookup(Ets, K) of
                      [_ | _] = There -> lists:nth(rand:uniform(length(There)), There);
                      [] -> Rec
                  end,
            {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete_object(Del) end),
            ets:delete_object(Ets, Del),
            delete_object;
        12 ->
            ?assertEqual(sorted(ets:lookup(Ets, K)), sorted(mnesia:dirty_read(Tab, K))),
            {atomic, InTrans} = mnesia:transaction(fun() -> mnesia:read(Tab, K) end),
            ?assertEqual(sorted(ets:lookup(Ets, K)), sorted(InTrans)),
            read;
        13 ->
            Pat = {Tab, '_', element(3, Rec), '_'},
            ?assertEqual(sorted(ets:match_object(Ets, Pat)),
                         sorted(mnesia:dirty_match_object(Pat))),
            Pat2 = {Tab, K, '_', element(4, Rec)},
            {atomic, M} = mnesia:transaction(fun() -> mnesia:match_object(Pat2) end),
            ?assertEqual(sorted(ets:match_object(Ets, Pat2)), sorted(M)),
            match_object;
        14 ->
            MS = [{{Tab, '$1', '$2', '_'}, [{'<', '$1', {const, K}}, {'>', '$2', 2}], [{{'$1', '$2'}}]}],
            ?assertEqual(sorted(ets:select(Ets, MS)), sorted(mnesia:dirty_select(Tab, MS))),
            %% A leading part of the key bound: the range of those keys.
            G = rand:uniform(4),
            Range = [{{Tab, {g, G, '$1'}, '_', '$2'}, [{'=:=', '$2', element(4, Rec)}], ['$_']}],
            ?assertEqual({prefix, fraghash_redb_nif:order_key({g, G, 0})},
                         setelement(2, fraghash_redb_select:plan(2, Range),
                                    fraghash_redb_nif:order_key({g, G, 0}))),
            {atomic, InRange} = mnesia:transaction(
                                  fun() -> chunks(mnesia:select(Tab, Range, 2, read), []) end),
            ?assertEqual(sorted(ets:select(Ets, Range)), sorted(lists:append(InRange))),
            select;
        15 ->
            MS = [{{Tab, '_', '$1', '$2'}, [{'=/=', '$1', element(3, Rec)}], ['$_']}],
            Chunk = rand:uniform(30),
            {atomic, Chunks} = mnesia:transaction(
                                 fun() -> chunks(mnesia:select(Tab, MS, Chunk, read), []) end),
            ?assert(lists:all(fun(C) -> length(C) =< Chunk end, Chunks)),
            ?assertEqual(sorted(ets:select(Ets, MS)), sorted(lists:append(Chunks))),
            select_chunks;
        16 ->
            V = element(3, Rec),
            ?assertEqual(sorted(ets:match_object(Ets, {Tab, '_', V, '_'})),
                         sorted(mnesia:dirty_index_read(Tab, V, v))),
            index_read;
        17 ->
            Keys = lists:usort([element(2, R) || R <- ets:tab2list(Ets)]),
            ?assertEqual(Keys, walk(Tab, mnesia:dirty_first(Tab), fun mnesia:dirty_next/2)),
            ?assertEqual(lists:reverse(Keys),
                         walk(Tab, mnesia:dirty_last(Tab), fun mnesia:dirty_prev/2)),
            walk;
        _ ->
            ?assertEqual(ets:info(Ets, size), mnesia:table_info(Tab, size)),
            size
    end.

chunks('$end_of_table', Acc) -> lists:reverse(Acc);
chunks({Matches, Cont}, Acc) -> chunks(mnesia:select(Cont), [Matches | Acc]).

same(Tab, Ets) ->
    ?assertEqual(sorted(ets:tab2list(Ets)), all(Tab)),
    ?assertEqual(ets:info(Ets, size), mnesia:table_info(Tab, size)).

sorted(L) -> lists:sort(L).

walk(_Tab, '$end_of_table', _Next) -> [];
walk(Tab, K, Next) -> [K | walk(Tab, Next(Tab, K), Next)].

%% The bag cases of Mnesia's dirty access tests (their read, delete and
%% delete_object cases run on bag tables): the same facts on redb_copies.
%% A bag's records come in no promised order here, so they are compared
%% sorted.
mnesia_dirty_cases() ->
    Tab = bag_dirty,
    ok = create(Tab, [k, v], []),
    ?assertMatch({'EXIT', _}, catch mnesia:dirty_read({Tab})),
    ?assertEqual([], mnesia:dirty_read({Tab, 1})),
    ok = mnesia:dirty_write({Tab, 1, 2}),
    ?assertEqual([{Tab, 1, 2}], mnesia:dirty_read({Tab, 1})),
    ok = mnesia:dirty_write({Tab, 1, 3}),
    ?assertEqual([{Tab, 1, 2}, {Tab, 1, 3}], lists:sort(mnesia:dirty_read({Tab, 1}))),
    {atomic, InTrans} = mnesia:transaction(fun() -> mnesia:dirty_read({Tab, 1}) end),
    ?assertEqual([{Tab, 1, 2}, {Tab, 1, 3}], lists:sort(InTrans)),
    %% Deleting a key: absent, present, written twice.
    ok = mnesia:dirty_delete({Tab, 7}),
    ok = mnesia:dirty_delete({Tab, 1}),
    ?assertEqual([], mnesia:dirty_read({Tab, 1})),
    ok = mnesia:dirty_write({Tab, 1, 2}),
    ok = mnesia:dirty_write({Tab, 1, 2}),
    ?assertEqual([{Tab, 1, 2}], mnesia:dirty_read({Tab, 1})),
    ok = mnesia:dirty_delete({Tab, 1}),
    ?assertEqual(0, mnesia:table_info(Tab, size)),
    %% Deleting one record: absent, present, written twice, in a transaction.
    One = {Tab, 1, 2},
    ok = mnesia:dirty_delete_object(One),
    ok = mnesia:dirty_write(One),
    ok = mnesia:dirty_delete_object(One),
    ok = mnesia:dirty_write(One),
    ok = mnesia:dirty_write(One),
    ok = mnesia:dirty_delete_object(One),
    ?assertEqual([], mnesia:dirty_read({Tab, 1})),
    ok = mnesia:dirty_write(One),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:dirty_delete_object(One) end),
    ?assertEqual([], mnesia:dirty_read({Tab, 1})),
    %% Mnesia refuses a pattern in the key before the backend sees it.
    ?assertMatch({'EXIT', {aborted, {bad_type, Tab, _}}},
                 catch mnesia:dirty_delete_object(Tab, {Tab, {['_']}, 21})),
    ?assertMatch({'EXIT', {aborted, {bad_type, Tab, _}}},
                 catch mnesia:dirty_delete_object(Tab, {Tab, {['$5']}, 21})),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Mnesia's transaction case of delete_object on a bag: what a
%% transaction reads after its own write, delete and delete_object of one
%% key, and what the table holds once it commits them in order.
mnesia_trans_delete_object() ->
    Tab = bag_trans,
    ok = create(Tab, [k, v], []),
    One = {Tab, 1, 2},
    Other = {Tab, 1, 3},
    T = fun(F) -> mnesia:transaction(F) end,
    {atomic, ok} = T(fun() -> mnesia:delete_object(One) end),
    %% A record there, written once or twice.
    [begin
         [{atomic, ok} = T(fun() -> mnesia:write(One) end) || _ <- lists:seq(1, Times)],
         {atomic, ok} = T(fun() -> [One] = mnesia:read(Tab, 1),
                                   ok = mnesia:delete_object(One),
                                   [] = mnesia:read(Tab, 1),
                                   ok end),
         ?assertEqual([], mnesia:dirty_read(Tab, 1))
     end || Times <- [1, 2]],
    %% Written and deleted in one transaction.
    {atomic, ok} = T(fun() -> ok = mnesia:write(One),
                              ok = mnesia:delete_object(One),
                              [] = mnesia:read(Tab, 1),
                              ok end),
    ?assertEqual([], mnesia:dirty_read(Tab, 1)),
    %% Another record of the key deleted: the written one stays.
    {atomic, ok} = T(fun() -> ok = mnesia:write(One),
                              ok = mnesia:delete_object(Other),
                              [One] = mnesia:read(Tab, 1),
                              ok end),
    ?assertEqual([One], mnesia:dirty_read(Tab, 1)),
    {atomic, ok} = T(fun() -> ok = mnesia:delete_object(Other),
                              [One] = mnesia:read(Tab, 1),
                              ok end),
    ?assertEqual([One], mnesia:dirty_read(Tab, 1)),
    %% The key deleted, then another record of it deleted.
    {atomic, ok} = T(fun() -> ok = mnesia:delete({Tab, 1}),
                              ok = mnesia:delete_object(Other),
                              [] = mnesia:read(Tab, 1),
                              ok end),
    ?assertEqual([], mnesia:dirty_read(Tab, 1)),
    %% Two records of the key, one deleted by delete_object, one by a
    %% delete of the key, then a write: only the write remains.
    {atomic, ok} = T(fun() -> mnesia:write(One), mnesia:write(Other) end),
    {atomic, ok} = T(fun() -> ok = mnesia:delete_object(One),
                              ok = mnesia:delete({Tab, 1}),
                              ok = mnesia:write({Tab, 1, 4}),
                              [{Tab, 1, 4}] = mnesia:read(Tab, 1),
                              ok end),
    ?assertEqual([{Tab, 1, 4}], mnesia:dirty_read(Tab, 1)),
    ?assertEqual(1, mnesia:table_info(Tab, size)),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Mnesia's index update case on a bag: two indexes, added and dropped
%% while the table holds records, against writes, deletes of keys and of
%% single records.
mnesia_index_update_bag() ->
    Tab = bag_index,
    ok = create(Tab, [k, v1, v2, v3], [{index, [v1]}]),
    Ix = fun(V, Attr) -> lists:sort(mnesia:dirty_index_read(Tab, V, Attr)) end,
    R1 = {Tab, 1, 2, 3, 4},
    R2 = {Tab, 2, 2, 13, 14},
    R3 = {Tab, 1, 12, 13, 14},
    R4 = {Tab, 4, 2, 13, 4},
    R5 = {Tab, 1, 2, 234, 14},
    ?assertEqual([], Ix(2, v1)),
    ok = mnesia:dirty_write(R1),
    ?assertEqual([R1], Ix(2, v1)),
    %% Deleting a record that is not there keeps its key's other record.
    ok = mnesia:dirty_delete_object(R5),
    ?assertEqual([R1], Ix(2, v1)),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:write(R2) end),
    ?assertEqual([R1, R2], Ix(2, v1)),
    ok = mnesia:dirty_write(R3),
    ?assertEqual([R1, R2], Ix(2, v1)),
    ?assertEqual([R1, R2], lists:sort(mnesia:dirty_index_match_object({Tab, '$1', 2, '$2', '$3'},
                                                                      v1))),
    ?assertEqual([R1, R3, R2], lists:sort(mnesia:dirty_match_object({Tab, '_', '_', '_', '_'}))),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:write(R4) end),
    ?assertEqual([R1, R2, R4], Ix(2, v1)),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete({Tab, 4}) end),
    ?assertEqual([R1, R2], Ix(2, v1)),
    ok = mnesia:dirty_delete_object(R1),
    ?assertEqual([R2], Ix(2, v1)),
    ?assertEqual([R3, R2], lists:sort(mnesia:dirty_match_object({Tab, '_', '_', '_', '_'}))),
    %% Two indexes, built from records already there.
    {atomic, ok} = mnesia:del_table_index(Tab, v1),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:write(R1) end),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:write(R4) end),
    {atomic, ok} = mnesia:add_table_index(Tab, v1),
    {atomic, ok} = mnesia:add_table_index(Tab, v3),
    ?assertEqual([R1, R2, R4], Ix(2, v1)),
    ?assertEqual([R1, R4], Ix(4, v3)),
    ?assertEqual([R3, R2], Ix(14, v3)),
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:write(R5) end),
    ?assertEqual([R1, R5, R2, R4], Ix(2, v1)),
    ?assertEqual([R5, R3, R2], Ix(14, v3)),
    %% R1 and R5 share key 1 and value 2 in v1: deleting R1 keeps R5 found.
    {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete_object(R1) end),
    ?assertEqual([R5, R2, R4], Ix(2, v1)),
    ?assertEqual([R4], Ix(4, v3)),
    ok = mnesia:dirty_delete_object(R5),
    ?assertEqual([R2, R4], Ix(2, v1)),
    ?assertEqual([R3, R2], Ix(14, v3)),
    ok = mnesia:dirty_write(R1),
    ok = mnesia:dirty_delete({Tab, 1}),
    ?assertEqual([R2, R4], Ix(2, v1)),
    ?assertEqual([R4], Ix(4, v3)),
    ?assertEqual([R2], Ix(14, v3)),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Mnesia's iteration case on a bag: every record by slot, every key once
%% by first/next, in and out of a transaction.
mnesia_iteration() ->
    Tab = bag_iter,
    ok = create(Tab, [k, v], []),
    ?assertEqual([], slots(Tab, 0)),
    ?assertEqual('$end_of_table', mnesia:dirty_first(Tab)),
    Keys = lists:seq(1, 5),
    Recs = [{Tab, A, B} || A <- Keys, B <- [1, 2]],
    [ok = mnesia:dirty_write(R) || R <- Recs],
    ?assertEqual(Recs, lists:sort(slots(Tab, 0))),
    ?assertEqual(Keys, walk(Tab, mnesia:dirty_first(Tab), fun mnesia:dirty_next/2)),
    ?assertEqual({atomic, Keys},
                 mnesia:transaction(fun() -> walk(Tab, mnesia:first(Tab), fun mnesia:next/2) end)),
    ?assertEqual(lists:reverse(Keys),
                 walk(Tab, mnesia:dirty_last(Tab), fun mnesia:dirty_prev/2)),
    ?assertEqual(Keys, lists:sort(mnesia:dirty_all_keys(Tab))),
    {atomic, ok} = mnesia:delete_table(Tab).

slots(Tab, N) ->
    case mnesia:dirty_slot(Tab, N) of
        '$end_of_table' -> [];
        Recs -> Recs ++ slots(Tab, N + 1)
    end.

%% A record holding a pid has no order key (its digest is of its external
%% format); a record past 64 KiB has none either. Both are one row each,
%% written again without a duplicate, deleted by delete_object.
odd_records() ->
    Tab = bag_odd,
    ok = create(Tab, [k, v], []),
    WithPid = {Tab, k, self()},
    Large = {Tab, k, binary:copy(<<"x">>, 100000)},
    Plain = {Tab, k, 1},
    [ok = mnesia:dirty_write(R) || R <- [WithPid, Large, Plain, WithPid, Large]],
    ?assertEqual(lists:sort([WithPid, Large, Plain]), lists:sort(mnesia:dirty_read(Tab, k))),
    ?assertEqual(3, mnesia:table_info(Tab, size)),
    ok = mnesia:dirty_delete_object(WithPid),
    ok = mnesia:dirty_delete_object(Large),
    ?assertEqual([Plain], mnesia:dirty_read(Tab, k)),
    %% A key that cannot be stored aborts the write, as in a set.
    ?assertMatch({aborted, {fraghash_redb, unsupported_key, Tab, _}},
                 mnesia:transaction(fun() -> mnesia:write({Tab, self(), 1}) end)),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Mnesia's tools on a bag: they read it by select and write it by
%% insert, a checkpoint keeps its retained records in a table of its own.
tools(Dir) ->
    Tab = bag_tools,
    ok = create(Tab, [k, v], []),
    Recs = lists:sort([{Tab, K, V} || K <- lists:seq(1, 30), V <- [a, b, c]]),
    {atomic, ok} = mnesia:transaction(fun() -> lists:foreach(fun mnesia:write/1, Recs) end),
    Backup = filename:join(Dir, "bag_tools.bup"),
    ok = mnesia:backup(Backup),
    {atomic, ok} = mnesia:transaction(fun() -> [mnesia:delete({Tab, K}) || K <- lists:seq(1, 10)],
                                               mnesia:delete_object({Tab, 20, a}) end),
    Restore = fun(B) -> mnesia:restore(B, [{clear_tables, [Tab]}, {default_op, skip_tables}]) end,
    ?assertEqual({atomic, [Tab]}, Restore(Backup)),
    ?assertEqual(Recs, all(Tab)),
    {ok, bag_cp, _} = mnesia:activate_checkpoint([{name, bag_cp}, {max, [Tab]}]),
    ok = mnesia:dirty_write({Tab, 7, changed}),
    ok = mnesia:dirty_delete_object({Tab, 8, b}),
    ok = mnesia:dirty_delete(Tab, 9),
    CpBackup = filename:join(Dir, "bag_tools_cp.bup"),
    ok = mnesia:backup_checkpoint(bag_cp, CpBackup),
    ok = mnesia:deactivate_checkpoint(bag_cp),
    ?assertEqual({atomic, [Tab]}, Restore(CpBackup)),
    ?assertEqual(Recs, all(Tab)),
    {atomic, ok} = mnesia:change_table_copy_type(Tab, node(), disc_copies),
    ?assertEqual({disc_copies, Recs}, {mnesia:table_info(Tab, storage_type), all(Tab)}),
    {atomic, ok} = mnesia:change_table_copy_type(Tab, node(), redb_copies),
    ?assertEqual({{ext, redb_copies, fraghash_redb_copies}, Recs},
                 {mnesia:table_info(Tab, storage_type), all(Tab)}),
    ?assertEqual(length(Recs), mnesia:table_info(Tab, size)),
    {atomic, ok} = mnesia:transform_table(Tab, fun({T, K, V}) -> {T, K, V, K} end, [k, v, w]),
    ?assertEqual([{T, K, V, K} || {T, K, V} <- Recs], all(Tab)),
    ?assertEqual([{Tab, 2, a, 2}, {Tab, 2, b, 2}, {Tab, 2, c, 2}],
                 lists:sort(mnesia:dirty_read(Tab, 2))),
    {atomic, ok} = mnesia:delete_table(Tab).

%% A fragmented bag grows and shrinks through the safe path: created with
%% fragments, grown from one fragment, then shrunk, every key's records
%% where they route and nothing else anywhere. (A kill of a bag's copy
%% applied in part is undone with the hidden copies before the switch; the
%% kill -9 tortures grow bags.)
fragmented_grows() ->
    Opts = [{type, bag}, {attributes, [k, v]}],
    Frag = [{n_fragments, 2}, {n_redb_copies, 1}, {node_pool, [node()]}],
    {atomic, ok} = fraghash_frag_create:create_table(bag_frag, [{frag_properties, Frag} | Opts]),
    {atomic, ok} = mnesia:create_table(bag_one, [{redb_copies, [node()]} | Opts]),
    {atomic, ok} = mnesia:change_table_frag(bag_one, {activate, []}),
    Recs = [{K, V} || K <- lists:seq(1, 300), V <- [a, b, c]],
    [ok = mnesia:activity(transaction, fun() -> [mnesia:write({T, K, V}) || {K, V} <- Recs],
                                               ok end, [], mnesia_frag)
     || T <- [bag_one, bag_frag]],
    Check = fun(T, N) ->
                    ?assertEqual(N, mnesia:activity(transaction,
                                                    fun() -> mnesia:table_info(T, n_fragments) end,
                                                    [], mnesia_frag)),
                    ?assertEqual(lists:sort([{T, K, V} || {K, V} <- Recs]),
                                 lists:sort(mnesia:activity(
                                              transaction,
                                              fun() -> lists:append([mnesia:read(T, K)
                                                                     || K <- lists:seq(1, 300)])
                                              end, [], mnesia_frag))),
                    ?assertEqual(0, fraghash_frag:stale_copies(T)),
                    ?assertEqual(length(Recs),
                                 lists:sum([mnesia:table_info(fraghash_frag:frag_name(T, I), size)
                                            || I <- lists:seq(1, N)]))
            end,
    Check(bag_frag, 2),
    ?assertEqual({atomic, ok}, fraghash_frag:add_frag(bag_one, [node()])),
    ?assertEqual({atomic, ok}, fraghash_frag:add_frag(bag_one, [node()])),
    Check(bag_one, 3),
    ?assertEqual({atomic, ok}, fraghash_frag:del_frag(bag_one)),
    Check(bag_one, 2),
    ?assertEqual({atomic, ok}, fraghash_frag:add_frag(bag_frag, [node()])),
    Check(bag_frag, 3),
    ?assertEqual(ok, fraghash_frag:recover()),
    [{atomic, ok} = mnesia:delete_table(T) || T <- [bag_one, bag_frag]],
    ok.

%%% kill -9 of a node writing a bag; a second node loads a copy

kill9_test_() ->
    {timeout, ?T, {"kill -9 while writing a bag: every acknowledged write and delete_object "
                   "holds, no duplicate; a second node loads a copy", fun kill9/0}}.

-define(WRITERS, 3).

kill9() ->
    Id = os:getpid(),
    DirA = filename:join(scratch(), "redb_bag_kill_a_" ++ Id),
    NameA = list_to_atom("fhbaga_" ++ Id),
    {_, A} = start_redb_peer(NameA, DirA, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [kb, [{redb_copies, [A]}, {type, bag},
                                                           {attributes, [k, v, w]},
                                                           {index, [v]}]]),
    Merge = fun(List, Acks) -> maps:merge(Acks, maps:from_list(List)) end,
    Collector = fraghash_test_acks:collector(#{}, 300 + rand:uniform(300), Merge),
    _ = [spawn(A, ?MODULE, acked_bag_writer, [Collector, W, 1]) || W <- lists:seq(1, ?WRITERS)],
    ok = fraghash_test_acks:await(Collector),
    _ = os:cmd("kill -9 " ++ rpc:call(A, os, getpid, [])),
    wait_down(A),
    timer:sleep(200),
    Final = fraghash_test_acks:recorded(Collector),
    {_, A} = start_peer(NameA, DirA),
    ok = rpc:call(A, mnesia, start, []),
    ok = rpc:call(A, mnesia, wait_for_tables, [[kb], 60000]),
    Held = rpc:call(A, mnesia, dirty_select, [kb, [{'_', [], ['$_']}]]),
    ?assertEqual(length(Held), length(lists:usort(Held))),
    ?assertEqual(length(Held), rpc:call(A, mnesia, table_info, [kb, size])),
    HeldSet = sets:from_list(Held),
    Lost = [R || {R, written} <- maps:to_list(Final), not sets:is_element(R, HeldSet)],
    Back = [R || {R, deleted} <- maps:to_list(Final), sets:is_element(R, HeldSet)],
    Deleted = length([R || {R, deleted} <- maps:to_list(Final)]),
    report("kill -9 of a bag writer: ~b records acknowledged, ~b of them deleted~n",
           [maps:size(Final), Deleted]),
    ?assert(Deleted > 0),
    ?assertEqual({[], []}, {Lost, Back}),
    %% Each record again by its key and by its index.
    [?assert(lists:member(R, rpc:call(A, mnesia, dirty_read, [kb, element(2, R)])))
     || R <- lists:sublist(Held, 50)],
    [?assert(lists:member(R, rpc:call(A, mnesia, dirty_index_read, [kb, element(3, R), v])))
     || R <- lists:sublist(Held, 50)],

    %% A second node loads a copy of kb from A (chunks of the bag's rows).
    DirB = filename:join(scratch(), "redb_bag_kill_b_" ++ Id),
    {PeerB, B} = start_peer(list_to_atom("fhbagb_" ++ Id), DirB),
    ok = rpc:call(B, mnesia, start, []),
    {atomic, ok} = rpc:call(B, fraghash_redb_copies, register, []),
    {ok, [A]} = rpc:call(B, mnesia, change_config, [extra_db_nodes, [A]]),
    {atomic, ok} = rpc:call(B, mnesia, change_table_copy_type, [schema, B, disc_copies]),
    {atomic, ok} = rpc:call(A, mnesia, add_table_copy, [kb, B, redb_copies]),
    ok = rpc:call(B, mnesia, wait_for_tables, [[kb], 60000]),
    All = [{'_', [], ['$_']}],
    ?assertEqual(lists:sort(Held),
                 lists:sort(rpc:call(B, fraghash_redb_copies, select, [redb_copies, kb, All]))),
    ?assertEqual(length(Held), rpc:call(B, fraghash_redb_copies, info, [redb_copies, kb, size])),
    peer:stop(PeerB),
    _ = rpc:call(A, mnesia, stop, []),
    _ = os:cmd("kill -9 " ++ rpc:call(A, os, getpid, [])),
    ok.

%% @doc On a peer: transactions writing two records of one key of a bag
%% (five keys per writer, so keys gather records), each acknowledged to
%% `To' once it returned; every third, a delete_object of an earlier
%% record, announced before and acknowledged after. Runs until the node
%% dies. Each message waits for `To''s confirmation ({@link fraghash_test_acks}).
acked_bag_writer(To, W, I) ->
    Recs = [{kb, {W, I rem 5}, {I, J}, J} || J <- [1, 2]],
    {atomic, ok} = mnesia:transaction(fun() -> [mnesia:write(R) || R <- Recs], ok end),
    fraghash_test_acks:confirmed(To, [{R, written} || R <- Recs]),
    case I rem 3 =:= 0 of
        true ->
            Old = {kb, {W, (I - 2) rem 5}, {I - 2, 1}, 1},
            fraghash_test_acks:confirmed(To, [{Old, maybe_deleted}]),
            {atomic, ok} = mnesia:transaction(fun() -> mnesia:delete_object(Old) end),
            fraghash_test_acks:confirmed(To, [{Old, deleted}]);
        false ->
            ok
    end,
    acked_bag_writer(To, W, I + 1).
