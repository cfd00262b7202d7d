%% @doc EUnit tests that mirror, on `redb_copies', the cases of OTP's
%% Mnesia test suites that run against Mnesia's own external test backend
%% (`ext_test', aliases `ext_ets' / `ext_ram_copies') on a `bag' table.
%% Our own code and wording: each test says which OTP case it follows and
%% checks what that case checks, on a redb_copies replica, sometimes a
%% little more (where the case only reaches Mnesia's own code, the test
%% reaches the backend too).
%%
%% == OTP case -> test here or in fraghash_redb_bag_tests ==
%% <ul>
%% <li>mnesia_dirty_access_test:dirty_read_xets -> fraghash_redb_bag_tests
%%     `mnesia_dirty_cases' (read of a key of one and two records, inside a
%%     transaction) and {@link dirty_access_rest/0} here (malformed oids,
%%     the dirty activity kinds).</li>
%% <li>mnesia_dirty_access_test:dirty_delete_xets -> fraghash_redb_bag_tests
%%     `mnesia_dirty_cases' (absent, present, written twice) and
%%     {@link dirty_access_rest/0} (malformed oids, a dirty delete inside a
%%     transaction).</li>
%% <li>mnesia_dirty_access_test:dirty_delete_object_xets ->
%%     fraghash_redb_bag_tests `mnesia_dirty_cases' (absent, present,
%%     twice, in a transaction, patterns refused) and
%%     {@link dirty_access_rest/0} (malformed records).</li>
%% <li>mnesia_dirty_access_test:dirty_index_update_bag_xets ->
%%     fraghash_redb_bag_tests `mnesia_index_update_bag'.</li>
%% <li>mnesia_dirty_access_test:dirty_iter_xets -> fraghash_redb_bag_tests
%%     `mnesia_iteration' (slots, first/next in and out of a transaction)
%%     and {@link dirty_access_rest/0} (a slot that is no integer).</li>
%% <li>mnesia_evil_coverage_test:table_info (a bag with an index, one of
%%     its three replicas on the test backend) -> {@link evil_table_info/0}.</li>
%% <li>mnesia_evil_coverage_test:record_name_dirty_access_xets ->
%%     {@link evil_record_name_dirty_access/0}.</li>
%% </ul>
%% One difference stays: OTP's dirty_read case expects a key's two records
%% in the order they were written (`[{T, 1, 2}, {T, 1, 3}]', in and out of
%% a transaction), as an ets or dets `bag' returns them; redb_copies
%% returns a key's records in the order of their digests
%% (docs/mnesia-redb.md): for that case's `{dirty_read, 1, 2}' and
%% `{dirty_read, 1, 3}', the second first. Mnesia does not promise an order; the tests here and in
%% fraghash_redb_bag_tests compare a key's records sorted.
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_otp_bag_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, start_peer/2]).

-export([relay/1]).

-define(T, 120).

otp_bag_local_test_() ->
    {setup, fun setup/0, fun fraghash_test_support:stop_mnesia/1,
     fun(_Dir) ->
             [{"mnesia_dirty_access_test dirty_read/dirty_delete/dirty_delete_object/"
               "dirty_iter _xets on a bag: what fraghash_redb_bag_tests leaves out",
               fun dirty_access_rest/0}]
     end}.

otp_bag_peers_test_() ->
    [{timeout, ?T, {"mnesia_evil_coverage_test:table_info on a bag with a redb_copies "
                    "replica beside disc_only_copies and ram_copies", fun evil_table_info/0}},
     {timeout, ?T, {"mnesia_evil_coverage_test:record_name_dirty_access_xets on a bag "
                    "of redb_copies on two nodes", fun evil_record_name_dirty_access/0}}].

setup() ->
    Dir = fraghash_test_support:start_mnesia("redb_otp_bag"),
    {atomic, ok} = fraghash_redb_copies:register(),
    Dir.

%%% mnesia_dirty_access_test: the parts fraghash_redb_bag_tests leaves out

%% Mirrors what OTP's dirty_read, dirty_delete, dirty_delete_object and
%% dirty_iter cases (run on `ext_ram_copies') check beyond
%% fraghash_redb_bag_tests' `mnesia_dirty_cases' and `mnesia_iteration':
%% an oid or record of the wrong shape is refused with an exit; a key's
%% records read the same in every dirty activity, none of which is a
%% transaction; a dirty delete of a key run inside a transaction removes
%% all its records; a slot that is not an integer is refused (asked of
%% the redb table itself, where OTP asks a table that does not exist).
dirty_access_rest() ->
    Tab = otp_dirty_rest,
    {atomic, ok} = mnesia:create_table(Tab, [{redb_copies, [node()]}, {type, bag},
                                             {attributes, [k, v]}]),
    Refused = fun(F) -> ?assertMatch({'EXIT', _}, catch F()) end,
    Refused(fun() -> mnesia:dirty_read([]) end),
    Refused(fun() -> mnesia:dirty_read({Tab, 1, 2}) end),
    Refused(fun() -> mnesia:dirty_delete([]) end),
    Refused(fun() -> mnesia:dirty_delete({Tab}) end),
    Refused(fun() -> mnesia:dirty_delete({Tab, 1, 2}) end),
    Refused(fun() -> mnesia:dirty_delete_object([]) end),
    Refused(fun() -> mnesia:dirty_delete_object({Tab}) end),
    Refused(fun() -> mnesia:dirty_delete_object({Tab, 1}) end),
    Refused(fun() -> mnesia:dirty_slot(Tab, []) end),
    Refused(fun() -> mnesia:dirty_slot(Tab, -1) end),
    Recs = [{Tab, 1, 2}, {Tab, 1, 3}],
    [ok = mnesia:dirty_write(R) || R <- Recs],
    ReadKey = fun() -> {mnesia:is_transaction(), lists:sort(mnesia:dirty_read({Tab, 1}))} end,
    ?assertEqual({false, Recs}, mnesia:async_dirty(ReadKey)),
    ?assertEqual({false, Recs}, mnesia:sync_dirty(ReadKey)),
    ?assertEqual({false, Recs}, mnesia:ets(ReadKey)),
    [?assertEqual({false, Recs}, mnesia:activity(Kind, ReadKey))
     || Kind <- [async_dirty, sync_dirty, ets]],
    ?assertEqual({atomic, ok}, mnesia:transaction(fun() -> mnesia:dirty_delete({Tab, 1}) end)),
    ?assertEqual([], mnesia:dirty_read({Tab, 1})),
    ?assertEqual(0, mnesia:table_info(Tab, size)),
    ?assertEqual('$end_of_table', mnesia:dirty_slot(Tab, 0)),
    {atomic, ok} = mnesia:delete_table(Tab).

%%% mnesia_evil_coverage_test:table_info

%% OTP's table_info case makes a bag with an index whose three replicas
%% are of three kinds, one of them on the test backend, and asks every
%% node for the table's description; then a second such table, empty, is
%% described by a node that restarted and loaded it while another was
%% down. Here: disc_only_copies on A, ram_copies on B, redb_copies on C;
%% every node gives the same answers; C's own copy holds the records and
%% its index finds them. A and B are then stopped and C alone takes more
%% records (three under one key), so A, started again, loads both tables
%% from C's redb copy: the empty one is empty, the other holds every
%% record of C's.
evil_table_info() ->
    {Peers, [A, B, C] = Nodes} = cluster("tinfo", 3),
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    Tab = otp_table_info,
    Def = [{type, bag}, {attributes, [k, v]}, {index, [3]},
           {disc_only_copies, [A]}, {ram_copies, [B]}, {redb_copies, [C]}],
    ?assertEqual({atomic, ok}, rpc:call(A, mnesia, create_table, [Tab, Def])),
    Recs = [{Tab, K, 7} || K <- lists:seq(1, 10)],
    %% Written as one sync_dirty activity: it returns once every replica
    %% holds the records (a dirty write returns before the remote ones do).
    ok = rpc:call(A, mnesia, sync_dirty, [fun() -> lists:foreach(fun mnesia:write/1, Recs) end]),
    Info = fun(N, T, Item) -> rpc:call(N, mnesia, table_info, [T, Item]) end,
    ?assertEqual({[A], [B], [C]}, {Info(A, Tab, disc_only_copies), Info(B, Tab, ram_copies),
                                   Info(C, Tab, redb_copies)}),
    ?assertEqual({ext, redb_copies, fraghash_redb_copies}, Info(C, Tab, storage_type)),
    [begin
         ?assert(lists:member(Info(N, Tab, where_to_read), Nodes)),
         ?assertEqual(lists:sort(Nodes), lists:sort(Info(N, Tab, where_to_write))),
         ?assertMatch(M when is_integer(M), Info(N, Tab, memory)),
         ?assertEqual({N, 10}, {N, Info(N, Tab, size)}),
         ?assertEqual({bag, [3], 3, [k, v], {Tab, '_', '_'}},
                      {Info(N, Tab, type), Info(N, Tab, index), Info(N, Tab, arity),
                       Info(N, Tab, attributes), Info(N, Tab, wild_pattern)}),
         ?assertMatch([_ | _], Info(N, Tab, all)),
         ?assertEqual({atomic, [k, v]},
                      rpc:call(N, mnesia, transaction,
                               [fun() -> mnesia:table_info(Tab, attributes) end]))
     end || N <- Nodes],
    %% C's replica is its redb copy: the records, by key and by index.
    ?assertEqual(C, Info(C, Tab, where_to_read)),
    ?assertEqual(Recs, lists:sort(redb_all(C, Tab))),
    ?assertEqual(Recs, lists:sort(rpc:call(C, mnesia, dirty_index_read, [Tab, 7, v]))),
    ?assert(Info(C, Tab, memory) > 0),

    %% A second table of the same kind, empty, described after a restart.
    Empty = otp_table_info_empty,
    ?assertEqual({atomic, ok}, rpc:call(A, mnesia, create_table, [Empty, Def])),
    stopped = rpc:call(A, mnesia, stop, []),
    stopped = rpc:call(B, mnesia, stop, []),
    More = [{Tab, 1, 8}, {Tab, 1, 9}, {Tab, 11, 7}],
    [ok = rpc:call(C, mnesia, dirty_write, [R]) || R <- More],
    All = lists:sort(Recs ++ More),
    ok = rpc:call(A, mnesia, start, []),
    ok = rpc:call(A, mnesia, wait_for_tables, [[Empty, Tab], 30000]),
    ?assertEqual(0, Info(A, Empty, size)),
    ?assertEqual(0, Info(C, Empty, size)),
    ?assertEqual(length(All), Info(A, Tab, size)),
    ?assertEqual(All, lists:sort(rpc:call(A, mnesia, dirty_select, [Tab, [{'_', [], ['$_']}]]))),
    ?assertEqual([{Tab, 1, 7}, {Tab, 1, 8}, {Tab, 1, 9}],
                 lists:sort(rpc:call(A, mnesia, dirty_read, [Tab, 1]))),
    ok = rpc:call(B, mnesia, start, []),
    ok = rpc:call(B, mnesia, wait_for_tables, [[Empty, Tab], 30000]),
    ?assertEqual({0, length(All)}, {Info(B, Empty, size), Info(B, Tab, size)}),
    stop_all(Peers, Nodes).

%%% mnesia_evil_coverage_test:record_name_dirty_access_xets

%% OTP's record_name_dirty_access case, with both replicas on the test
%% backend: a bag whose records are named `some_record' (not the table),
%% with an index on `val', on two nodes; dirty writes, a checkpoint's
%% backup, table events carrying the table's name, delete_object of one
%% record of a key, match_object and select by value, a restart of the
%% first node (Mnesia loads its copy from the other node's, and builds its
%% index), index reads and
%% all_keys there, a delete of the key and its event, a restore that
%% recreates the table from the backup, and a traversal of the backup.
%% (The case's counter and registry tables are not of the backend's type
%% and are left out.) Here a key's records are also looked up in each
%% node's redb copy after the delete_object and after the restart.
evil_record_name_dirty_access() ->
    {Peers, [A, _B] = Nodes} = cluster("recname", 2),
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    Tab = otp_record_name,
    Rn = some_record,
    On = fun(N, F, Args) -> rpc:call(N, mnesia, F, Args) end,
    Do = fun(F, Args) -> On(A, F, Args) end,
    ?assertEqual({atomic, ok}, Do(create_table, [Tab, [{type, bag}, {record_name, Rn},
                                                       {index, [val]}, {redb_copies, Nodes}]])),
    ?assertEqual(Rn, Do(table_info, [Tab, record_name])),
    Twos = [{Rn, 2, 20}, {Rn, 2, 21}, {Rn, 2, 22}],
    [ok = Do(dirty_write, [Tab, R]) || R <- Twos],
    Bup = filename:join(scratch(), atom_to_list(A) ++ ".bup"),
    ?assertMatch({ok, rn_cp, _},
                 Do(activate_checkpoint, [[{name, rn_cp}, {min, [Tab]}, {ram_overrides_dump, true}]])),
    ok = Do(backup_checkpoint, [rn_cp, Bup]),
    ok = Do(deactivate_checkpoint, [rn_cp]),
    ok = Do(dirty_write, [Tab, {Rn, 1, 10}]),
    Relay = spawn(A, ?MODULE, relay, [self()]),
    ?assertEqual({ok, A}, relay_call(Relay, subscribe, {table, Tab})),
    ok = Do(dirty_write, [Tab, {Rn, 3, 10}]),
    ?assertEqual(Twos, lists:sort(Do(dirty_read, [Tab, 2]))),
    ok = Do(dirty_delete_object, [Tab, {Rn, 2, 21}]),
    Tens = [{Rn, 1, 10}, {Rn, 3, 10}],
    TenPat = {Rn, '_', 10},
    ?assertEqual(Tens, lists:sort(Do(dirty_match_object, [Tab, TenPat]))),
    ?assertEqual(Tens, lists:sort(Do(dirty_select, [Tab, [{TenPat, [], ['$_']}]]))),
    %% Dirty writes reach the other node's copy after they return: B's is
    %% awaited.
    Left = [{Rn, 2, 20}, {Rn, 2, 22}],
    [?assertEqual({N, Left}, {N, settled(fun() -> lists:sort(redb_lookup(N, Tab, 2)) end, Left)})
     || N <- Nodes],
    %% Simple table events name the table, not the record.
    ?assertEqual({write, {Tab, 3, 10}}, table_event()),
    ?assertEqual({delete_object, {Tab, 2, 21}}, table_event()),
    ?assertEqual({ok, A}, relay_call(Relay, unsubscribe, {table, Tab})),

    %% A restarts and loads its copy again; its index with it.
    stopped = On(A, stop, []),
    ok = On(A, start, []),
    ok = On(A, wait_for_tables, [[Tab], 30000]),
    ?assertEqual(Tens, lists:sort(Do(dirty_index_match_object, [Tab, TenPat, val]))),
    ?assertEqual(Tens, lists:sort(Do(dirty_index_read, [Tab, 10, val]))),
    ?assertEqual([1, 2, 3], lists:sort(Do(dirty_all_keys, [Tab]))),
    ?assertEqual(Left, lists:sort(redb_lookup(A, Tab, 2))),
    ?assertEqual({ok, A}, relay_call(Relay, subscribe, {table, Tab})),
    ok = Do(dirty_delete, [Tab, 2]),
    ?assertEqual([], Do(dirty_read, [Tab, 2])),
    [?assertEqual({N, []}, {N, settled(fun() -> redb_lookup(N, Tab, 2) end, [])}) || N <- Nodes],
    ?assertEqual({delete, {Tab, 2}}, table_event()),
    ?assertEqual(none, receive {mnesia_table_event, E} -> E after 300 -> none end),
    ?assertEqual({ok, A}, relay_call(Relay, unsubscribe, {table, Tab})),
    Relay ! stop,

    %% The backup, restored by recreating the table: the checkpoint's records.
    ?assertEqual({atomic, [Tab]}, Do(restore, [Bup, [{recreate_tables, [Tab]}]])),
    ?assertEqual(Rn, Do(table_info, [Tab, record_name])),
    Wild = Do(table_info, [Tab, wild_pattern]),
    ?assertEqual(Twos, lists:sort(Do(dirty_match_object, [Tab, Wild]))),
    ?assertEqual(Twos, lists:sort(Do(dirty_select, [Tab, [{Wild, [], ['$_']}]]))),
    [?assertEqual({N, {ext, redb_copies, fraghash_redb_copies}, Twos},
                  {N, On(N, table_info, [Tab, storage_type]), lists:sort(redb_lookup(N, Tab, 2))})
     || N <- Nodes],
    %% The backup read back item by item: the table's records (named by the
    %% table in the backup), schema items, nothing else.
    Sort = fun(Item, {Mine, Other}) ->
                   case Item of
                       {T, K, V} when T =:= Tab -> {[Item], {[{Rn, K, V} | Mine], Other}};
                       _ when element(1, Item) =:= schema -> {[Item], {Mine, Other}};
                       _ -> {[Item], {Mine, [Item | Other]}}
                   end
           end,
    {ok, {InBackup, Others}} = Do(traverse_backup, [Bup, mnesia_backup, dummy, read_only,
                                                   Sort, {[], []}]),
    ?assertEqual({Twos, []}, {lists:sort(InBackup), Others}),
    ok = file:delete(Bup),
    stop_all(Peers, Nodes).

%% @doc A process on a Mnesia node that subscribes to events for the test
%% process `To' (which runs no Mnesia) and passes them on.
relay(To) ->
    process_flag(trap_exit, true),
    relay_loop(To).

relay_loop(To) ->
    receive
        {call, F, What} ->
            To ! {relay_reply, mnesia:F(What)},
            relay_loop(To);
        stop ->
            ok;
        {mnesia_table_event, _} = Event ->
            To ! Event,
            relay_loop(To);
        _Other ->
            relay_loop(To)
    end.

relay_call(Relay, F, What) ->
    Relay ! {call, F, What},
    receive {relay_reply, R} -> R after 10000 -> error({no_reply_from_relay, F}) end.

%% A simple table event without its activity id.
table_event() ->
    receive
        {mnesia_table_event, {Op, Rec, _ActivityId}} -> {Op, Rec}
    after 5000 ->
            error(no_table_event)
    end.

%%% Helpers

%% What `Read' answers once it answers `Want' or after 5 s, whichever is
%% first (a dirty operation's copy on another node is applied after the
%% call returns).
settled(Read, Want) -> settled(Read, Want, 100).

settled(Read, Want, Tries) ->
    case Read() of
        Want -> Want;
        _ when Tries > 0 -> timer:sleep(50), settled(Read, Want, Tries - 1);
        Got -> Got
    end.

%% Every record of node N's redb copy of Tab, and those of key K.
redb_all(N, Tab) ->
    rpc:call(N, fraghash_redb_copies, select, [redb_copies, Tab, [{'_', [], ['$_']}]]).

redb_lookup(N, Tab, K) ->
    rpc:call(N, fraghash_redb_copies, lookup, [redb_copies, Tab, K]).

%% `Count' peer nodes running Mnesia on one disc schema.
cluster(Case, Count) ->
    Id = Case ++ "_" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:unique_integer([positive])),
    Started = [start_peer(list_to_atom(Name), filename:join(scratch(), Name))
               || I <- lists:seq(1, Count), Name <- ["fhob" ++ integer_to_list(I) ++ "_" ++ Id]],
    {Peers, Nodes} = lists:unzip(Started),
    [First | _] = Nodes,
    [pong = rpc:call(First, net_adm, ping, [N]) || N <- Nodes],
    ok = rpc:call(First, mnesia, create_schema, [Nodes]),
    {Oks, []} = rpc:multicall(Nodes, mnesia, start, []),
    [ok] = lists:usort(Oks),
    {Peers, Nodes}.

stop_all(Peers, Nodes) ->
    [rpc:call(N, mnesia, stop, []) || N <- Nodes],
    [peer:stop(P) || P <- Peers],
    ok.
