%% @doc EUnit tests of `redb_copies' replicas on more than one node, and of
%% the ways Mnesia makes, moves and brings back a copy: every way a replica
%% comes to exist (`create_table' on two nodes, `add_table_copy',
%% `change_table_copy_type' run on the node itself or on another,
%% `move_table_copy'), with the second node's database open or not yet
%% opened, must leave a replica that holds every later write; a fallback
%% installed from a backup and `restore/2' (both `recreate_tables' and
%% `keep_tables') must give back exactly the backup's records.
%%
%% Each case runs on peer nodes of its own, so the test VM's Mnesia is not
%% involved. Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_cluster_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, start_peer/2]).

-define(T, 120).
%% Records written before and after the replica is made.
-define(BEFORE, 50).
-define(AFTER, 300).
%% Records in a table copied while written.
-define(LOADED, 30000).

replica_test_() ->
    Ways = [{convert_from_other_node, open},
            {convert_from_other_node, closed},
            {convert_on_the_node, open},
            {convert_both, closed},
            {add_table_copy, closed},
            {create_on_both, closed},
            {move_table_copy, closed}],
    [{timeout, ?T, {lists:flatten(io_lib:format("a replica made by ~p (database ~p beforehand) "
                                                "holds every write", [Way, Db])),
                    fun() -> replica(Way, Db) end}}
     || {Way, Db} <- Ways].

frag_test_() ->
    [{timeout, ?T, {"a fragmented redb_copies table in one call: 6 fragments, 2 copies each "
                    "over two nodes", fun frag_create/0}}].

fallback_test_() ->
    [{timeout, ?T, {"install_fallback of a backup, then a restart: the backup's records, "
                    "and Mnesia starts", fun fallback/0}},
     {timeout, ?T, {"restore/2 with recreate_tables and keep_tables", fun restore/0}},
     {timeout, ?T, {"restore/2 of a table with copies on two nodes, and install_fallback "
                    "on both", fun restore_two/0}}].

loading_test_() ->
    [{timeout, ?T, {lists:flatten(io_lib:format("a copy added while a writer writes and deletes "
                                                "ends equal to its source: ~p", [Kind])),
                    fun() -> loading(Kind) end}}
     || Kind <- [set, ordered_set, bag, indexed]].

%%% Replicas

replica(Way, Db) ->
    [A, B] = cluster(atom_to_list(Way) ++ "_" ++ atom_to_list(Db), 2),
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    %% `closed': B's database is not open when the replica is made, as on a
    %% node that ran when another added the type before this release.
    Db =:= closed andalso (ok = rpc:call(B, fraghash_redb_db, stop, [])),
    Tab = t,
    Holders = make_replica(Way, Tab, A, B),
    ?assertEqual({ext, redb_copies, fraghash_redb_copies},
                 rpc:call(hd(Holders), mnesia, table_info, [Tab, storage_type])),
    %% sync_transaction: `transaction' answers once the replicas voted, and
    %% B may apply the last write just after the select below reads it.
    W = fun(K) ->
                rpc:call(A, mnesia, sync_transaction, [fun() -> mnesia:write({Tab, K, K * 2}) end])
        end,
    ?assertEqual(lists:duplicate(?AFTER, {atomic, ok}),
                 [W(K) || K <- lists:seq(?BEFORE + 1, ?BEFORE + ?AFTER)]),
    Want = [{Tab, K, K * 2} || K <- lists:seq(1, ?BEFORE + ?AFTER)],
    [?assertEqual({N, Want}, {N, lists:sort(rpc:call(N, fraghash_redb_copies, select,
                                                       [redb_copies, Tab, [{'_', [], ['$_']}]]))})
     || N <- Holders],
    %% And after a restart of each holder, from its own disc.
    [begin
         stopped = rpc:call(N, mnesia, stop, []),
         ok = rpc:call(N, mnesia, start, []),
         ok = rpc:call(N, mnesia, wait_for_tables, [[Tab], 30000])
     end || N <- Holders],
    [?assertEqual({N, length(Want)}, {N, rpc:call(N, mnesia, table_info, [Tab, size])})
     || N <- Holders],
    stop_all([A, B]).

%% Makes `Tab' with a redb_copies replica on B (and maybe A) in the way
%% named, holding ?BEFORE records; returns the nodes holding redb_copies.
make_replica(Way, Tab, A, B) when Way =:= convert_from_other_node;
                                  Way =:= convert_on_the_node;
                                  Way =:= convert_both ->
    {atomic, ok} = rpc:call(A, mnesia, create_table, [Tab, [{disc_copies, [A, B]}]]),
    fill(A, Tab),
    Caller = case Way of convert_on_the_node -> B; _ -> A end,
    {atomic, ok} = rpc:call(Caller, mnesia, change_table_copy_type, [Tab, B, redb_copies]),
    case Way of
        convert_both ->
            {atomic, ok} = rpc:call(B, mnesia, change_table_copy_type, [Tab, A, redb_copies]),
            [A, B];
        _ ->
            [B]
    end;
make_replica(add_table_copy, Tab, A, B) ->
    {atomic, ok} = rpc:call(A, mnesia, create_table, [Tab, [{redb_copies, [A]}]]),
    fill(A, Tab),
    {atomic, ok} = rpc:call(A, mnesia, add_table_copy, [Tab, B, redb_copies]),
    [A, B];
make_replica(create_on_both, Tab, A, B) ->
    {atomic, ok} = rpc:call(A, mnesia, create_table, [Tab, [{redb_copies, [A, B]}]]),
    fill(A, Tab),
    [A, B];
make_replica(move_table_copy, Tab, A, B) ->
    {atomic, ok} = rpc:call(A, mnesia, create_table, [Tab, [{redb_copies, [A]}]]),
    fill(A, Tab),
    {atomic, ok} = rpc:call(A, mnesia, move_table_copy, [Tab, A, B]),
    [B].

fill(N, Tab) ->
    {atomic, ok} = rpc:call(N, mnesia, transaction,
                            [fun() -> [ok = mnesia:write({Tab, K, K * 2})
                                       || K <- lists:seq(1, ?BEFORE)], ok end]).

%%% A copy loaded under writes

%% A table of `Kind' on A (?LOADED records), a writer on A writing,
%% deleting (and in a bag adding records to) random keys in transactions
%% while B's copy is added: afterwards both copies hold the same records
%% (and index reads on B agree with A). The writer's changes during the
%% copy are the ones Mnesia's loader keeps and fraghash_redb_load catches
%% up on (writes and deletes of a set or ordered_set, indexed or not) or
%% Mnesia applies (a bag's, a record's delete).
loading(Kind) ->
    [A, B] = cluster("loading_" ++ atom_to_list(Kind), 2),
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    Tab = list_to_atom("ld_" ++ atom_to_list(Kind)),
    Opts = case Kind of
               indexed -> [{index, [3]}];
               bag -> [{type, bag}];
               ordered_set -> [{type, ordered_set}];
               set -> []
           end,
    {atomic, ok} = rpc:call(A, mnesia, create_table, [Tab, [{redb_copies, [A]} | Opts]]),
    {atomic, ok} = rpc:call(A, mnesia, transaction,
                            [fun() -> [ok = mnesia:write({Tab, K, K rem 97})
                                       || K <- lists:seq(1, ?LOADED)], ok end]),
    Test = self(),
    Objects = Kind =:= bag orelse Kind =:= indexed,
    Writer = spawn_link(A, fun() -> load_writer(Test, Tab, Objects, 0) end),
    receive {writes, Writer, _} -> ok end,
    Before = writes(Writer),
    {atomic, ok} = rpc:call(A, mnesia, add_table_copy, [Tab, B, redb_copies], 60000),
    During = writes(Writer) - Before,
    timer:sleep(200),
    Writer ! stop,
    receive {stopped, Writer} -> ok end,
    fraghash_test_support:report("~p: ~b writer transactions during the copy~n", [Kind, During]),
    ?assert(During > 0),
    All = fun(N) ->
                  lists:sort(rpc:call(N, fraghash_redb_copies, select,
                                      [redb_copies, Tab, [{'_', [], ['$_']}]]))
          end,
    ?assertEqual(All(A), All(B)),
    ?assert(length(All(A)) > ?LOADED div 2),
    [?assertEqual(lists:sort(rpc:call(A, mnesia, dirty_index_read, [Tab, V, 3])),
                  lists:sort(rpc:call(B, mnesia, dirty_index_read, [Tab, V, 3])))
     || Kind =:= indexed, V <- lists:seq(0, 96)],
    stop_all([A, B]).

%% Runs on A: random transactions on `Tab' (deletes of a record too when
%% `Objects') until told to stop; answers `writes' with the count so far.
load_writer(Test, Tab, Objects, N) ->
    receive
        {count, From} -> From ! {writes, self(), N}, load_writer(Test, Tab, Objects, N);
        stop -> Test ! {stopped, self()}
    after 0 ->
            N == 0 andalso (Test ! {writes, self(), 0}),
            K = rand:uniform(?LOADED + 1000),
            {atomic, ok} =
                mnesia:transaction(
                  fun() ->
                          case rand:uniform(4) of
                              1 -> mnesia:delete({Tab, K});
                              2 when Objects -> mnesia:delete_object({Tab, K, K rem 97});
                              _ -> mnesia:write({Tab, K, rand:uniform(97) - 1})
                          end
                  end),
            load_writer(Test, Tab, Objects, N + 1)
    end.

writes(Writer) ->
    Writer ! {count, self()},
    receive {writes, Writer, N} -> N end.

%%% A fragmented table in one call

frag_create() ->
    [A, B] = cluster("frag_create", 2),
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    Props = [{n_fragments, 6}, {node_pool, [A, B]}, {n_redb_copies, 2},
             {hash_module, mnesia_frag_slots}],
    {atomic, ok} = rpc:call(A, fraghash_frag_create, create_table,
                            [u, [{attributes, [id, name]}, {frag_properties, Props}]], 120000),
    Frags = rpc:call(B, mnesia, activity,
                     [async_dirty, fun() -> mnesia:table_info(u, frag_names) end, [], mnesia_frag]),
    ?assertEqual(6, length(Frags)),
    [?assertEqual({F, [{{redb_copies, fraghash_redb_copies}, lists:sort([A, B])}]},
                  {F, [{Type, lists:sort(Ns)}
                       || {Type, Ns} <- rpc:call(A, mnesia, table_info, [F, external_copies])]})
     || F <- Frags],
    [?assertEqual({F, []}, {F, rpc:call(A, mnesia, table_info, [F, disc_copies])}) || F <- Frags],
    Write = fun() -> [mnesia:write({u, I, I}) || I <- lists:seq(1, 600)], ok end,
    ok = rpc:call(A, mnesia, activity, [sync_transaction, Write, [], mnesia_frag]),
    Read = fun() -> [mnesia:read(u, I) || I <- lists:seq(1, 600)] end,
    ?assertEqual([[{u, I, I}] || I <- lists:seq(1, 600)],
                 rpc:call(B, mnesia, activity, [async_dirty, Read, [], mnesia_frag])),
    %% Even: every fragment holds some of the records.
    Sizes = [rpc:call(B, mnesia, table_info, [F, size]) || F <- Frags],
    ?assertEqual(600, lists:sum(Sizes)),
    ?assert(lists:min(Sizes) > 50),
    %% Every copy of every fragment holds the same records; a record
    %% written into one copy alone is found.
    ?assertEqual(ok, rpc:call(A, fraghash_frag_info, replicas, [u])),
    [F1 | _] = Frags,
    Stray = {u, 100000, stray},
    ok = rpc:call(B, fraghash_redb_db, write,
                  [[{put, <<"m:", (atom_to_binary(F1))/binary>>,
                     rpc:call(B, fraghash_redb_nif, order_key, [100000]), term_to_binary(Stray)}]]),
    ?assertMatch({error, {fraghash, replicas_differ, _}, [{F1, [_, _]}]},
                 rpc:call(A, fraghash_frag_info, replicas, [u])),
    %% Refusals leave nothing behind.
    ?assertMatch({aborted, {fraghash, bad_frag_properties, _}},
                 rpc:call(A, fraghash_frag_create, create_table,
                          [v, [{frag_properties, [{n_redb_copies, 3}, {node_pool, [A, B]}]}]])),
    ?assertNot(lists:member(v, rpc:call(A, mnesia, system_info, [tables]))),
    stop_all([A, B]).

%%% Backups

fallback() ->
    [A] = cluster("fallback", 1),
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [f, [{redb_copies, [A]}]]),
    fill(A, f),
    Backup = filename:join(scratch(), "fallback_" ++ os:getpid() ++ ".bup"),
    ok = rpc:call(A, mnesia, backup, [Backup]),
    {atomic, ok} = rpc:call(A, mnesia, transaction,
                            [fun() -> mnesia:write({f, later, 1}), mnesia:delete({f, 1}) end]),
    ok = rpc:call(A, mnesia, install_fallback, [Backup]),
    stopped = rpc:call(A, mnesia, stop, []),
    ok = rpc:call(A, mnesia, start, []),
    ok = rpc:call(A, mnesia, wait_for_tables, [[f], 30000]),
    Want = [{f, K, K * 2} || K <- lists:seq(1, ?BEFORE)],
    ?assertEqual(Want, lists:sort(rpc:call(A, mnesia, dirty_match_object, [{f, '_', '_'}]))),
    %% And again: the fallback is gone, the table is as restored.
    stopped = rpc:call(A, mnesia, stop, []),
    ok = rpc:call(A, mnesia, start, []),
    ok = rpc:call(A, mnesia, wait_for_tables, [[f], 30000]),
    ?assertEqual(Want, lists:sort(rpc:call(A, mnesia, dirty_match_object, [{f, '_', '_'}]))),
    stop_all([A]).

restore() ->
    [A] = cluster("restore", 1),
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [r, [{redb_copies, [A]}]]),
    fill(A, r),
    Backup = filename:join(scratch(), "restore_" ++ os:getpid() ++ ".bup"),
    ok = rpc:call(A, mnesia, backup, [Backup]),
    Want = [{r, K, K * 2} || K <- lists:seq(1, ?BEFORE)],
    Read = fun() -> lists:sort(rpc:call(A, mnesia, dirty_match_object, [{r, '_', '_'}])) end,
    Change = fun() ->
                     {atomic, ok} = rpc:call(A, mnesia, transaction,
                                             [fun() -> mnesia:write({r, later, 1}),
                                                       mnesia:delete({r, 1})
                                              end])
             end,
    Change(),
    {atomic, [r]} = rpc:call(A, mnesia, restore, [Backup, [{recreate_tables, [r]}]]),
    ?assertEqual(Want, Read()),
    Change(),
    %% keep_tables: the backup's records written over the table's.
    {atomic, [r]} = rpc:call(A, mnesia, restore, [Backup, [{keep_tables, [r]}]]),
    ?assertEqual(lists:sort([{r, later, 1} | Want]), Read()),
    stopped = rpc:call(A, mnesia, stop, []),
    ok = rpc:call(A, mnesia, start, []),
    ok = rpc:call(A, mnesia, wait_for_tables, [[r], 30000]),
    ?assertEqual(lists:sort([{r, later, 1} | Want]), Read()),
    stop_all([A]).

%% A table with copies on A and B: a backup, changes, restore/2 with
%% recreate_tables (both copies hold the backup's records), changes again,
%% then install_fallback and a restart of both nodes.
restore_two() ->
    [A, B] = Nodes = cluster("restore_two", 2),
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [r2, [{redb_copies, Nodes}]]),
    fill(A, r2),
    Backup = filename:join(scratch(), "restore_two_" ++ os:getpid() ++ ".bup"),
    ok = rpc:call(A, mnesia, backup, [Backup]),
    Want = [{r2, K, K * 2} || K <- lists:seq(1, ?BEFORE)],
    Local = fun(N) -> lists:sort(rpc:call(N, fraghash_redb_copies, select,
                                           [redb_copies, r2, [{'_', [], ['$_']}]])) end,
    Change = fun() ->
                     {atomic, ok} = rpc:call(A, mnesia, sync_transaction,
                                             [fun() -> mnesia:write({r2, later, 1}),
                                                       mnesia:delete({r2, 1})
                                              end])
             end,
    Change(),
    {atomic, [r2]} = rpc:call(A, mnesia, restore, [Backup, [{recreate_tables, [r2]}]]),
    [?assertEqual({N, Want}, {N, Local(N)}) || N <- Nodes],
    Change(),
    ok = rpc:call(A, mnesia, install_fallback, [Backup]),
    [stopped = rpc:call(N, mnesia, stop, []) || N <- Nodes],
    {Oks, []} = rpc:multicall(Nodes, mnesia, start, []),
    [ok] = lists:usort(Oks),
    [ok = rpc:call(N, mnesia, wait_for_tables, [[r2], 30000]) || N <- Nodes],
    [?assertEqual({N, Want}, {N, Local(N)}) || N <- Nodes],
    _ = B,
    stop_all(Nodes).

%%% Nodes

%% `N' peer nodes with one disc schema and Mnesia running on each.
cluster(Case, N) ->
    Id = Case ++ "_" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:unique_integer([positive])),
    Nodes = [begin
                 Name = "fhrc" ++ integer_to_list(I) ++ "_" ++ Id,
                 {_, Node} = start_peer(list_to_atom(Name), filename:join(scratch(), Name)),
                 Node
             end || I <- lists:seq(1, N)],
    [First | _] = Nodes,
    [pong = rpc:call(First, net_adm, ping, [Other]) || Other <- Nodes],
    ok = rpc:call(First, mnesia, create_schema, [Nodes]),
    {Oks, []} = rpc:multicall(Nodes, mnesia, start, []),
    [ok] = lists:usort(Oks),
    Nodes.

stop_all(Nodes) ->
    [rpc:call(N, mnesia, stop, []) || N <- Nodes],
    [rpc:call(N, erlang, halt, []) || N <- Nodes],
    ok.
