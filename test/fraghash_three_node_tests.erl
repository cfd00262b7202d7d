%% @doc Three Mnesia nodes (`peer' nodes, one disc schema): growth while
%% Mnesia is stopped on a node that holds nothing of the table (it goes on)
%% or on one that holds a copy (refused, naming it); `fraghash_frag:recover/0'
%% reporting the replicas of a fragment that differ; and the heal of a
%% partition as docs/mnesia-disc-safety.md describes it (one node cut from
%% two; and three nodes alone, as OTP 25's `global' makes of such a cut),
%% after which every fragment's replicas agree and recovery says ok.
%%
%% In the slow tier (`FRAGHASH_SLOW_TESTS=1').
-module(fraghash_three_node_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0]).

-define(T, 300).

three_node_test_() ->
    fraghash_test_support:slow_tier(
      [{timeout, ?T, {"Mnesia stopped on a node of three that holds nothing of the table: "
                      "add, relieve and del go on; a holder stopped is named in the refusal",
                      fun stopped_elsewhere/0}},
       {timeout, ?T, {"recover/0 and check_replicas/1 report the copies of a fragment that "
                      "differ", fun replicas_differ/0}},
       {timeout, ?T, {"a partition of one node from two, writes on both sides, healed as "
                      "docs/mnesia-disc-safety.md says: the copies agree, recover/0 says ok",
                      fun heal/0}},
       {timeout, ?T, {"a partition that global's overlapping-partition rule turns into three "
                      "nodes alone, healed one node at a time: the copies agree, recover/0 "
                      "says ok", fun heal_all_split/0}}]).

%% The journal's failure blames the disc only when a disc failed: a node
%% apart, stopped or starting is named instead.
advice_test() ->
    Advice = fun(Failed, Down, Tables) ->
                     fraghash_durable:advice({fraghash, not_durable, #{failed => Failed,
                                                                        down => Down,
                                                                        tables => Tables}})
             end,
    Apart = Advice([{'c@h', partitioned}], [], []),
    Starting = Advice([{'c@h', {error, {exception, {node_not_running, 'c@h'}, []}}}], [], []),
    Lost = Advice([], ['c@h'], [t_frag2]),
    Full = Advice([{'c@h', {error, {exception, {file_error, "LATEST.LOG", enospc}, []}}}], [], []),
    [?assertNotEqual({T, nomatch}, {T, string:find(T, "c@h")}) || T <- [Apart, Starting, Lost, Full]],
    [?assertEqual({T, nomatch}, {T, string:find(T, "disc of")}) || T <- [Apart, Starting, Lost]],
    ?assertNotEqual(nomatch, string:find(Full, "make room on the disc of")),
    ?assertNotEqual(nomatch, string:find(fraghash_durable:advice({aborted, {node_not_running, 'c@h'}}),
                                         "start Mnesia on c@h")).

%% `Tab' of `mnesia_frag_slots', `N' fragments with `Copies' disc copies
%% each over `Pool', holding `{Tab, K, K}' for K in 1..`Records'; made on
%% `On'.
table(On, Tab, N, Pool, Copies, Records) ->
    {atomic, ok} =
        rpc:call(On, mnesia, create_table,
                 [Tab, [{attributes, [key, val]},
                        {frag_properties, [{n_fragments, N}, {hash_module, mnesia_frag_slots},
                                           {node_pool, Pool}, {n_disc_copies, Copies}]}]]),
    ok = rpc:call(On, fraghash_test_support, fill, [Tab, lists:seq(1, Records), fun(K) -> K end]).

%% Every record of `Tab' read back on `Node' through `mnesia_frag'.
read_back(Node, Tab, Records) ->
    Read = fun() -> [mnesia:read(Tab, K) || K <- lists:seq(1, Records)] end,
    ?assertEqual({Node, [[{Tab, K, K}] || K <- lists:seq(1, Records)]},
                 {Node, rpc:call(Node, mnesia, activity, [async_dirty, Read, [], mnesia_frag])}).

%% Mnesia stopped on C, whose VM runs on, before the journal exists: a
%% table held on A and B grows, is relieved and shrinks from A (the
%% journal is made on A and B), every record reads back on A, then on C
%% once it started again (it loads the table from A and B, and gets its
%% copy of the journal at its recovery), and again with C stopped once it
%% holds that copy; with Mnesia stopped on B, which
%% holds a copy, the add is refused naming B, nothing written.
stopped_elsewhere() ->
    [A, B, C] = Nodes = fraghash_test_support:start_trio("stopped_" ++ os:getpid(), []),
    Tab = three_stopped,
    Records = 600,
    ok = table(A, Tab, 3, [A, B], 2, Records),
    stopped = rpc:call(C, mnesia, stop, []),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, add_frag, [Tab, [A, B]], 60000)),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, relieve, [Tab, [B, A], 1], 60000)),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, add_frag, [Tab, [A, B]], 60000)),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, del_frag, [Tab], 60000)),
    ?assertEqual({mnesia_frag_slots, 5}, frags(A, Tab)),
    read_back(A, Tab, Records),
    ok = rpc:call(C, mnesia, start, []),
    ok = rpc:call(C, mnesia, wait_for_tables, [rpc:call(C, mnesia, system_info, [tables]), 30000]),
    ?assertEqual(ok, rpc:call(C, fraghash_frag, recover, [], 60000)),
    ?assertEqual([A, B, C], lists:sort(rpc:call(C, mnesia, table_info,
                                                [fraghash_journal, disc_copies]))),
    ?assertEqual([], rpc:call(C, fraghash_journal, pending, [])),
    ?assertEqual({mnesia_frag_slots, 5}, frags(C, Tab)),
    read_back(C, Tab, Records),
    %% C stopped again, now holding a copy of the journal: passed over.
    stopped = rpc:call(C, mnesia, stop, []),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, add_frag, [Tab, [B, A]], 60000)),
    ok = rpc:call(C, mnesia, start, []),
    ok = rpc:call(C, mnesia, wait_for_tables, [rpc:call(C, mnesia, system_info, [tables]), 30000]),
    ?assertEqual({mnesia_frag_slots, 6}, frags(C, Tab)),
    read_back(C, Tab, Records),
    %% A holder stopped: refused, naming it, nothing done.
    stopped = rpc:call(B, mnesia, stop, []),
    {aborted, {fraghash, holders_not_running, Text}} =
        rpc:call(A, fraghash_frag, add_frag, [Tab, [A]], 60000),
    ?assertNotEqual(nomatch, string:find(Text, atom_to_list(B))),
    ?assertEqual([], rpc:call(A, fraghash_journal, pending, [])),
    ?assertEqual({mnesia_frag_slots, 6}, frags(A, Tab)),
    fraghash_test_support:kill_nodes(Nodes).

%% Every fragment on two of the three nodes; one record changed in one
%% copy of one fragment alone (its ets table written directly, as no
%% transaction can): recover/0 on any node, and check_replicas/1, report
%% that fragment naming both holders; after Mnesia restarted on the node
%% with the wrong copy (it loads from the other holder), both say ok.
replicas_differ() ->
    [A, B, C] = Nodes = fraghash_test_support:start_trio("differ_" ++ os:getpid(), []),
    Tab = three_differ,
    Records = 600,
    ok = table(A, Tab, 3, Nodes, 2, Records),
    ?assertEqual(ok, rpc:call(A, fraghash_frag, recover, [], 60000)),
    Frag = fraghash_frag:frag_name(Tab, 2),
    [Wrong, Right] = Holders = lists:sort(rpc:call(A, mnesia, table_info, [Frag, disc_copies])),
    [Key | _] = rpc:call(Wrong, mnesia, dirty_all_keys, [Frag]),
    true = rpc:call(Wrong, ets, insert, [Frag, {Tab, Key, changed}]),
    [begin
         {error, [{Tab, {error, {fraghash, replicas_differ, Text}}}]} =
             rpc:call(N, fraghash_frag, recover, [], 60000),
         fraghash_test_support:report("recover/0 on ~s: ~ts~n", [N, Text]),
         [?assertNotEqual({N, S, nomatch}, {N, S, string:find(Text, S)})
          || S <- [atom_to_list(Frag) | [atom_to_list(H) || H <- Holders]]]
     end || N <- Nodes],
    ?assertMatch({error, {fraghash, replicas_differ, _}},
                 rpc:call(C, fraghash_frag, check_replicas, [Tab], 60000)),
    stopped = rpc:call(Wrong, mnesia, stop, []),
    %% A stopped holder is not compared.
    ?assertEqual(ok, rpc:call(Right, fraghash_frag, check_replicas, [Tab], 60000)),
    ok = rpc:call(Wrong, mnesia, start, []),
    ok = rpc:call(Wrong, mnesia, wait_for_tables,
                  [rpc:call(Wrong, mnesia, system_info, [tables]), 30000]),
    [?assertEqual({N, ok}, {N, rpc:call(N, fraghash_frag, recover, [], 60000)}) || N <- Nodes],
    ?assertEqual(ok, rpc:call(B, fraghash_frag_info, replicas, [Tab])),
    read_back(B, Tab, Records),
    fraghash_test_support:kill_nodes(Nodes).

%% C cut from A and B (global's overlapping-partition rule off, so that A
%% and B stay together and this node keeps its peers). During the cut A and
%% C each write keys of `Tab' (every fragment on two of the three nodes):
%% each writes the copies on its side only; an add of `Ab' (held on A and B
%% only) from A cannot make its journal entry durable on C, and says so
%% naming C and the partition, not the disc. The heal keeps A and B: on C,
%% Mnesia stopped, master nodes A and B, started, master nodes cleared;
%% then recover/0 on every node says ok (the add's entry undone, the
%% copies compared), every copy agrees, A's writes are there and C's are
%% not, and both tables grow again.
heal() ->
    Args = fraghash_torture2_partition:peer_args(),
    [A, B, C] = Nodes = fraghash_test_support:start_trio("heal_" ++ os:getpid(), Args),
    Tab = three_heal,
    Ab = three_heal_ab,
    Records = 600,
    ok = table(A, Tab, 4, Nodes, 2, Records),
    ok = table(A, Ab, 2, [A, B], 2, 100),
    [?assertEqual({N, ok}, {N, rpc:call(N, fraghash_frag, recover, [], 60000)}) || N <- Nodes],
    ok = cut(C, [A, B], 200),
    Write = fun(Node, Keys, Val) ->
                    [K || K <- Keys,
                          ok =:= rpc:call(Node, mnesia, activity,
                                          [transaction, fun() -> mnesia:write({Tab, K, Val}) end,
                                           [], mnesia_frag])]
            end,
    OnA = Write(A, lists:seq(1, 100) ++ lists:seq(1001, 1050), a),
    OnC = Write(C, lists:seq(101, 200) ++ lists:seq(2001, 2050), c),
    ?assertEqual(150, length(OnA)),
    ?assert(length(OnC) > 20),
    {aborted, {fraghash, journal_write_failed, Text}} =
        rpc:call(A, fraghash_frag, add_frag, [Ab, [A, B]], 60000),
    fraghash_test_support:report("add during the cut: ~ts~n", [Text]),
    [?assertNotEqual({S, nomatch}, {S, string:find(Text, S)})
     || S <- [atom_to_list(C), "partition"]],
    ?assertEqual(nomatch, string:find(Text, "disc of")),
    %% The heal, A and B kept.
    stopped = rpc:call(C, mnesia, stop, []),
    ok = rpc:call(C, mnesia, set_master_nodes, [[A, B]]),
    ok = rpc:call(C, mnesia, start, []),
    ok = rpc:call(C, mnesia, wait_for_tables,
                  [rpc:call(C, fraghash_frag, loadable_tables, []), 60000]),
    ok = rpc:call(C, mnesia, set_master_nodes, [[]]),
    [?assertEqual({N, ok}, {N, rpc:call(N, fraghash_frag, recover, [], 60000)}) || N <- Nodes],
    [?assertEqual({N, T, ok}, {N, T, rpc:call(N, fraghash_frag_info, replicas, [T], 60000)})
     || N <- Nodes, T <- [Tab, Ab]],
    [?assertEqual({N, []}, {N, rpc:call(N, fraghash_journal, pending, [])}) || N <- Nodes],
    Expected = [{K, case K of _ when K =< 100; K > 1000 -> a; _ -> K end}
                || K <- lists:seq(1, Records) ++ lists:seq(1001, 1050)],
    Read = fun(Node) ->
                   [{K, V} || K <- lists:seq(1, Records) ++ lists:seq(1001, 1050)
                                  ++ lists:seq(2001, 2050),
                              {_, _, V} <- fraghash_two_node_tests_read(Node, Tab, K)]
           end,
    [?assertEqual({N, Expected}, {N, Read(N)}) || N <- Nodes],
    ?assertEqual({atomic, ok}, rpc:call(C, fraghash_frag, add_frag, [Tab, [C, A]], 60000)),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, add_frag, [Ab, [A, B]], 60000)),
    [?assertEqual({N, ok}, {N, rpc:call(N, fraghash_frag, recover, [], 60000)}) || N <- Nodes],
    fraghash_test_support:kill_nodes(Nodes).

%% The heal with OTP 25's default `global' (`prevent_overlapping_partitions'):
%% a cut of C from A disconnects every node from every other, and each
%% Mnesia goes on alone. (Under a heavy load, global was seen to leave A
%% and B together for over 20 s: the test cuts A from B and B from C too,
%% so that it always reaches three nodes alone.) The peers are driven
%% over their standard I/O, not the distribution this rule cuts. Kept: A;
%% B, then C, restarted one at a time, each with the nodes running with A
%% as master nodes (so that C takes a fragment held on B and C alone from
%% B, which now runs with A); then recover/0 on every node says ok, every
%% copy agrees, A's writes are there and C's nowhere, and the table grows
%% again.
heal_all_split() ->
    Id = "split_" ++ os:getpid(),
    Dir = filename:join(scratch(), "three_" ++ Id),
    Paths = lists:usort([filename:dirname(code:which(M)) || M <- [?MODULE, fraghash_frag, fraghash_test_support]]),
    Peers = [begin
                 D = filename:join(Dir, atom_to_list(L)),
                 ok = filelib:ensure_path(D),
                 Name = list_to_atom(lists:concat(["fh3", L, "_", erlang:phash2(Id)])),
                 {ok, P, N} = peer:start(#{name => Name, host => "localhost",
                                           connection => standard_io,
                                           args => ["-pa" | Paths] ++
                                                   ["-mnesia", "dir", "\"" ++ D ++ "\""]}),
                 ok = peer:call(P, fraghash_test_support, quiet_overload, []),
                 ok = peer:call(P, application, set_env, [mnesia, core_dir, scratch()]),
                 fraghash_test_support:record_peer(N),
                 {N, P}
             end || L <- [a, b, c]],
    [A, B, C] = Nodes = [N || {N, _} <- Peers],
    Call = fun(N, M, F, Args) -> peer:call(proplists:get_value(N, Peers), M, F, Args, 120000) end,
    ok = Call(A, mnesia, create_schema, [Nodes]),
    [ok = Call(N, mnesia, start, []) || N <- Nodes],
    Tab = three_split,
    Records = 600,
    {atomic, ok} =
        Call(A, mnesia, create_table,
             [Tab, [{attributes, [key, val]},
                    {frag_properties, [{n_fragments, 6}, {hash_module, mnesia_frag_slots},
                                       {node_pool, Nodes}, {n_disc_copies, 2}]}]]),
    ok = Call(A, fraghash_test_support, fill, [Tab, lists:seq(1, Records), fun(K) -> K end]),
    [?assertEqual({N, ok}, {N, Call(N, fraghash_frag, recover, [])}) || N <- Nodes],
    %% A cut of C from A (and of every other pair): every node alone.
    Cut = fun() -> [Call(X, erlang, disconnect_node, [Y]) || {X, Y} <- [{C, A}, {A, B}, {B, C}]] end,
    _ = Cut(),
    ok = alone(Call, Nodes, Cut, 400),
    Write = fun(Node, Keys, Val) ->
                    [K || K <- Keys,
                          ok =:= (catch Call(Node, mnesia, activity,
                                      [transaction, fun() -> mnesia:write({Tab, K, Val}) end,
                                       [], mnesia_frag]))]
            end,
    OnA = Write(A, lists:seq(1, 100), a),
    OnC = Write(C, lists:seq(101, 200), c),
    ?assert(length(OnA) > 20),
    ?assert(length(OnC) > 20),
    %% The heal, A kept: B and C stopped, then started one at a time.
    [stopped = Call(N, mnesia, stop, []) || N <- [B, C]],
    Restart = fun(N, Masters) ->
                      ok = Call(N, mnesia, set_master_nodes, [Masters]),
                      ok = Call(N, mnesia, start, []),
                      ok = Call(N, mnesia, wait_for_tables,
                                [Call(N, fraghash_frag, loadable_tables, []), 60000]),
                      ok = Call(N, mnesia, set_master_nodes, [[]])
              end,
    Restart(B, [A]),
    Restart(C, [A, B]),
    Recovered = [{N, Call(N, fraghash_frag, recover, [])} || N <- Nodes],
    [?assertEqual({N, ok}, R) || {N, _} = R <- Recovered],
    ?assertEqual(ok, Call(B, fraghash_frag_info, replicas, [Tab])),
    Expected = [{K, case lists:member(K, OnA) of true -> a; false -> K end}
                || K <- lists:seq(1, Records)],
    [?assertEqual({N, Expected},
                  {N, [{K, V} || K <- lists:seq(1, Records),
                                 {_, _, V} <- Call(N, fraghash_two_node_tests, read, [Tab, K])]})
     || N <- Nodes],
    [?assertEqual({N, []}, {N, Call(N, fraghash_journal, pending, [])}) || N <- Nodes],
    ?assertEqual({atomic, ok}, Call(C, fraghash_frag, add_frag, [Tab, [C, B]])),
    ?assertEqual(ok, Call(A, fraghash_frag, recover, [])),
    [peer:stop(P) || {_, P} <- Peers],
    ok.

%% Until every node runs Mnesia alone; the cut (`Cut') made again each
%% second meanwhile, in case a message went through before global's rule
%% took every connection down and the cut nodes reconnected.
alone(Call, Nodes, _Cut, 0) ->
    error({never_apart, [{N, Call(N, mnesia, system_info, [running_db_nodes])} || N <- Nodes]});
alone(Call, Nodes, Cut, Tries) ->
    case lists:all(fun(N) -> Call(N, mnesia, system_info, [running_db_nodes]) =:= [N] end, Nodes) of
        true -> ok;
        false ->
            [Cut() || Tries rem 20 =:= 0],
            timer:sleep(50),
            alone(Call, Nodes, Cut, Tries - 1)
    end.

fraghash_two_node_tests_read(Node, Tab, K) ->
    rpc:call(Node, fraghash_two_node_tests, read, [Tab, K]).

%% Cuts `X' from `Others' and waits until each Mnesia has the other side
%% out of its running nodes.
cut(X, Others, Tries) ->
    [true = rpc:call(X, erlang, disconnect_node, [O]) || O <- Others],
    apart(X, Others, Tries).

apart(_X, _Others, 0) ->
    error(never_apart);
apart(X, Others, Tries) ->
    Running = fun(N) -> rpc:call(N, mnesia, system_info, [running_db_nodes]) end,
    case lists:all(fun(O) -> not lists:member(O, Running(X)) andalso
                                 not lists:member(X, Running(O)) end, Others) of
        true -> ok;
        false -> timer:sleep(50), apart(X, Others, Tries - 1)
    end.

frags(Node, Tab) ->
    {Mod, _, N} = rpc:call(Node, fraghash_frag, hash, [Tab]),
    {Mod, N}.


