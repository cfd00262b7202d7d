%% @doc Kill -9 torture of `fraghash_frag' on two or three Mnesia nodes. A
%% and B (and C) are `peer' nodes (OS processes) with one disc schema. On
%% two nodes, three fragmented `disc_copies' tables with `node_pool [A, B]'
%% (`mnesia_frag_slots' with every fragment on both nodes,
%% `mnesia_frag_slots' and `mnesia_frag_hash' with each fragment on one
%% node); on three ({@link torture/1} with 3, run by
%% `fraghash_torture3_tests'), every fragment on two of the three, one
%% table on `disc_copies' and two on `redb_copies'. Each table has a
%% never-migrated control; they are written on every node and grown,
%% shrunk and relieved by a controller on one of them
%% (`fraghash_torture2_node' has the node side and the files). Per run this
%% process kills one node or two with kill -9: mostly
%% inside a step of an operation (the marks its step hook writes), some
%% right after an operation returned, some during the recovery that
%% follows a kill. It then stops the survivor's writers and controller
%% (once their current transaction or operation returned), restarts the
%% dead node(s) in a random order with the same name and Mnesia directory,
%% waits for the tables (`fraghash_frag:loadable_tables/0'), runs
%% `fraghash_frag:recover()' on both nodes (at once after both were
%% killed, as both would after a restart of both; one after the other
%% otherwise, or always with `FRAGHASH_TORTURE2_RECOVER_AT_ONCE=0') and
%% checks each table on both nodes:
%% <ul>
%% <li>every acknowledged key holds its last acknowledged value, or the
%% value of a later intent (a deleted key stays deleted unless a later
%% intent wrote it); what the table lost or got wrong that its control kept
%% is ours and fails the test; the controls' own losses are reported, and
%% fail it too with `FRAGHASH_TORTURE2_STRICT=1';</li>
%% <li>no key in two fragments, none in the wrong fragment, sizes adding
%% up, every fragment with its copies, no orphan fragment table, no
%% journal entry left; both nodes with the same hash state and the same
%% keys in every fragment.</li>
%% </ul>
%% The next run grows the checked tables again; at the end every table is
%% added to and shrunk once more with both nodes up.
%%
%% Some faults (`FRAGHASH_TORTURE2_PARTITIONS' percent, default 20) are
%% partitions instead of kills, at the same moments: one node is cut from
%% the others with `erlang:disconnect_node/1' run on it
%% (`fraghash_torture2_partition'); on three nodes the heal keeps the two
%% that stayed together.
%% Each Mnesia then takes the other for down and goes on alone: writers
%% acknowledge what their side holds, the controller's operations go on
%% where they touch only its side. Mnesia does not merge the two again
%% (`running_partitioned_network'), so the torture heals as an operator
%% would, after a random 0.1 to 1.5 s apart: it keeps one side (A or B at
%% random) and throws the other away, with kill -9 of that node and a
%% restart with the kept node as master (`mnesia:set_master_nodes/1'
%% before Mnesia starts, cleared once the tables are loaded): the node
%% loads from the kept node every table the kept node holds, and keeps of
%% its own files only the fragments nobody else holds. Then
%% `fraghash_frag:recover()' on both nodes at once, and the same checks,
%% with one exception: acknowledgements given on the thrown-away side
%% after the cut are the operator's loss and are read as intents (the key
%% may hold that value or not). The cut is marked in every acknowledgement
%% log just before `disconnect_node' is called, so everything acknowledged
%% before it must be there, on either side, and everything the kept side
%% acknowledged after it too; after a partition, what the controls lost
%% fails the test as well.
%%
%% In the slow tier (`FRAGHASH_SLOW_TESTS=1'); needs `-sname' and
%% `FRAGHASH_TEST_DIR' (scripts/test-mnesia.sh gives both).
%% `FRAGHASH_TORTURE2_KILLS' is the number of faults, kills and
%% partitions (default 24, about a minute). The random choices use a
%% fixed seed; where the faults land still depends on timing.
-module(fraghash_torture2_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0]).
-import(fraghash_torture_tests, [wait_mark/4, mark_lines/2, file_size/1]).

-export([start_mnesia_here/1, torture/1]).

-define(NODE, fraghash_torture2_node).
-define(T, 7200).
-define(WAIT_MS, 120000).

torture2_test_() ->
    fraghash_test_support:slow_tier(
      {timeout, ?T, {"kill -9 of one or both of two nodes, or a partition, during growth",
                       fun() -> torture(2) end}}).

%% The faults to make: `FRAGHASH_TORTURE2_KILLS' (default 24) on two
%% nodes, `FRAGHASH_TORTURE3_KILLS' (default 12) on three.
kills() ->
    {Var, Default} = case ?NODE:nodes_count() of
                         2 -> {"FRAGHASH_TORTURE2_KILLS", 24};
                         3 -> {"FRAGHASH_TORTURE3_KILLS", 12}
                     end,
    case os:getenv(Var) of
        V when V =:= false; V =:= "" -> Default;
        V -> list_to_integer(V)
    end.

%% @doc The torture on `NNodes' (2 or 3) nodes.
torture(NNodes) ->
    T0 = erlang:monotonic_time(millisecond),
    ok = ?NODE:configure(NNodes),
    Tag = "torture" ++ integer_to_list(NNodes),
    Dir = filename:join(scratch(), Tag ++ "_" ++ os:getpid()),
    ok = filelib:ensure_path(Dir),
    rand:seed(exsss, {NNodes, 11, 2026}),
    Id = os:getpid(),
    Names = maps:from_list(
              [{K, {list_to_atom(lists:concat(["fht", NNodes, K, "_", Id])),
                    filename:join(Dir, atom_to_list(K))}}
               || K <- lists:sublist([a, b, c], NNodes)]),
    Cl0 = maps:map(fun(_, {Name, NDir}) -> start_node(Name, NDir) end, Names),
    Nodes = [A | _] = nodes_of(Cl0),
    ok = rpc:call(A, mnesia, create_schema, [Nodes]),
    [ok = start_mnesia(N) || N <- Nodes],
    ok = rpc:call(A, ?NODE, create_tables, [Nodes]),
    ok = wait_tables(Cl0),
    [ok = rpc:call(N, ?NODE, set_hook, [Dir]) || N <- Nodes],
    Ctx = #{dir => Dir, names => Names},
    {Cl, Runs, Kills, Checks} = runs(Ctx, 1, Cl0, [], []),
    %% Every table grows and shrinks again with every node up, and the
    %% nodes still agree.
    Final = [{T, Op, rpc:call(A, fraghash_frag, Op, Args, ?WAIT_MS)}
             || T <- ?NODE:tables(),
                {Op, Args} <- [{add_frag, [T, lists:reverse(Nodes)]}, {del_frag, [T]}]],
    {_, LastChecks} = check_all(Ctx, Runs + 1, Cl),
    Secs = (erlang:monotonic_time(millisecond) - T0) div 1000,
    fraghash_torture2_report:report(Kills, Checks ++ LastChecks, Secs,
                                    fraghash_torture2_partition:excluded(Dir)),
    io:format(user, "starts that found a fragment table beyond its table's count (not "
              "waited for; recover/0 dropped it): ~b~nstarts that took the running nodes' "
              "definition of a table (a redb_copies change missed): ~b~nnodes rejoined "
              "afresh (their schema not mergeable after a redb_copies move): ~b~n",
              [length(get_list(L)) || L <- [beyond_count, aligned, rejoins]]),
    ok = fraghash_test_support:kill_nodes(nodes_of(Cl)),
    All = Checks ++ LastChecks,
    ?assertEqual([], [F || {_, _, R} = F <- Final, R =/= {atomic, ok}]),
    ?assertEqual([], lists:sublist([C || C <- All, faulty(C)], 5)),
    case os:getenv("FRAGHASH_TORTURE2_STRICT") of
        "1" -> ?assertEqual([], [C || C <- All, control_lost(C) > 0]);
        _ -> ok
    end,
    %% The last check saw every table.
    ?assertEqual(?NODE:tables(), [T || #{tab := T} <- LastChecks]).

%%% One run

%% Runs until `kills()' faults (kills and partitions) were made (a run
%% whose recovery is killed or cut makes two or more).
runs(Ctx, Run, Cl, Kills, Checks) ->
    case length(Kills) >= kills() of
        true ->
            {Cl, Run - 1, Kills, Checks};
        false ->
            {Cl2, K, C} = run(Ctx, Run, Cl),
            runs(Ctx, Run + 1, Cl2, Kills ++ K, Checks ++ C)
    end.

%% Work, kill or cut, stop the survivor, restart (the victims, or the side
%% a heal throws away), recover (perhaps killed or cut there too, and
%% again), check. Returns the nodes, the faults and the checks.
run(Ctx = #{dir := Dir}, Run, Cl) ->
    Marks = filename:join(Dir, "marks.log"),
    fraghash_torture2_report:note(Dir, "run ~b", [Run]),
    From = file_size(Marks),
    Ctl = pick(keys(Cl)),
    Nodes = nodes_of(Cl),
    [ok = rpc:call(node_of(Cl, K), ?NODE, start_work, [Dir, Run, writer(K), K =:= Ctl, Nodes])
     || K <- keys(Cl)],
    Aim = aim(Marks, From),
    Lines = mark_lines(Marks, From),
    Where = fraghash_torture2_report:classify(Lines, Aim),
    {Fault, Cl2, Together} =
        case partition() of
            false ->
                Victims = pick(victims(Cl, [1, 1, 2])),
                kill(Dir, Cl, Victims),
                {#{kind => kill, victims => Victims}, restart(Ctx, Cl, Victims, []),
                 length(Victims) > 1};
            true ->
                {P, ClP} = partition(Ctx, Run, Cl, fun() -> ok end),
                {P, ClP, true}
        end,
    {Cl3, RecFaults} = recover_all(Ctx, Run, Cl2, Together),
    {Cl4, Checks} = check_all(Ctx, Run, Cl3),
    fraghash_torture2_report:note(Dir, "checked ~b, faulty: ~0p",
                                  [Run, [T || #{tab := T} = C <- Checks, faulty(C)]]),
    Faults = [Fault#{run => Run, controller => Ctl, where => Where} | RecFaults],
    Partitioned = lists:any(fun(#{kind := K}) -> K =:= partition end, Faults),
    {Cl4, Faults, [C#{partition => Partitioned, faults => Faults} || C <- Checks]}.

%% Whether this fault is a partition (`fraghash_torture2_partition:share/0'
%% percent of them).
partition() -> rand:uniform(100) =< fraghash_torture2_partition:share().

%% A partition, healed as an operator would: cut one node from the others,
%% let both sides work apart for a moment (writers on each side acknowledge what their
%% side holds, the controller goes on on its side), then keep one side and
%% throw the other away: kill -9 its node, mark its writer's
%% acknowledgements since the cut as given up, and restart it with the
%% kept node as Mnesia's master node, so that it loads every table the
%% kept node holds from there and keeps only its own files of the
%% fragments nobody else holds; once its tables are loaded the master
%% setting is cleared (a later start must load as usual). `Wait' runs once
%% the thrown-away node is dead (it waits for recoveries it was running).
%% On three nodes the two that stayed together are kept. Returns the fault
%% and the nodes.
partition(Ctx = #{dir := Dir}, Run, Cl, Wait) ->
    X = pick(keys(Cl)),
    Others = keys(Cl) -- [X],
    Split = fraghash_torture2_partition:cut(Dir, Run, node_of(Cl, X),
                                            [node_of(Cl, O) || O <- Others]),
    fraghash_torture2_report:note(Dir, "cut ~s from ~0p", [X, Others]),
    timer:sleep(100 + rand:uniform(1400)),
    {Keep, Drop} = case Others of
                       [Y] -> pick([{[X], [Y]}, {[Y], [X]}]);
                       _ -> {Others, [X]}
                   end,
    kill(Dir, Cl, Drop),
    [ok = fraghash_torture2_partition:rejoin(node_of(Cl, X), [node_of(Cl, D) || D <- Drop])
     || lists:member(X, Keep)],
    [ok = fraghash_torture2_partition:discarded(Dir, Run, writer(D)) || D <- Drop],
    Wait(),
    Cl2 = restart(Ctx, Cl, Drop, [node_of(Cl, K) || K <- Keep]),
    {#{kind => partition, kept => Keep, victims => Drop, split => Split}, Cl2}.

%% The writer number of node `K' (1 on a, 2 on b, 3 on c).
writer(a) -> 1;
writer(b) -> 2;
writer(c) -> 3.

%% The sets of victims a kill picks from: every single node `W1' times,
%% every pair `W2' times... (`Weights' by set size, up to one node fewer
%% than the cluster on three nodes, all on two).
victims(Cl, Weights) ->
    Ks = keys(Cl),
    Max = case length(Ks) of 2 -> 2; N -> N - 1 end,
    lists:append([lists:duplicate(W, Set)
                   || {Size, W} <- lists:zip(lists:seq(1, length(Weights)), Weights),
                      Size =< Max, Set <- subsets(Ks, Size)]).

subsets(_, 0) -> [[]];
subsets([], _) -> [];
subsets([H | T], N) -> [[H | S] || S <- subsets(T, N - 1)] ++ subsets(T, N).

%% Waits for the moment chosen for this run: `leave' (right after an
%% operation returned), or inside a step (after a random time, the next
%% step mark, then a random short delay).
aim(Marks, From) ->
    wait_mark(Marks, From, "running", ?WAIT_MS),
    case rand:uniform(100) =< 12 of
        true ->
            wait_new(Marks, file_size(Marks), "leave ", 20000),
            leave;
        false ->
            timer:sleep(100 + rand:uniform(1200)),
            wait_new(Marks, file_size(Marks), "step ", 500),
            timer:sleep(rand:uniform(60) - 1),
            step
    end.

%% Waits (at most `Ms') for a mark with `Prefix' after byte `From'.
wait_new(_Marks, _From, _Prefix, Ms) when Ms =< 0 ->
    timeout;
wait_new(Marks, From, Prefix, Ms) ->
    case lists:any(fun(L) -> lists:prefix(Prefix, L) end, mark_lines(Marks, From)) of
        true -> ok;
        false -> timer:sleep(3), wait_new(Marks, From, Prefix, Ms - 3)
    end.

%% Recovers on both nodes, perhaps killing one or both during a recovery
%% (then restarting and recovering again): both at once after both nodes
%% were killed (as both would after a restart of both) and during the
%% recovery a kill aims at, else one node after the other in a random
%% order (always, with `FRAGHASH_TORTURE2_RECOVER_AT_ONCE=0'). Recoveries of
%% one table take turns (see fraghash_recover_at_once_tests).
recover_all(Ctx = #{dir := Dir}, Run, Cl, Together) ->
    Marks = filename:join(Dir, "marks.log"),
    [A | _] = nodes_of(Cl),
    Pending = rpc:call(A, fraghash_journal, pending, []),
    case Pending =/= [] andalso rand:uniform(100) =< 40 orelse rand:uniform(100) =< 5 of
        true ->
            From = file_size(Marks),
            Self = self(),
            %% Both nodes recover (one with FRAGHASH_TORTURE2_RECOVER_AT_ONCE=0);
            %% the kill takes it, the other or both.
            Recovering = case at_once() of
                             true -> nodes_of(Cl);
                             false -> [pick(nodes_of(Cl))]
                         end,
            [spawn(fun() -> Self ! {recovered, rpc:call(N, ?NODE, recover, [Dir], ?WAIT_MS)} end)
             || N <- Recovering],
            wait_mark(Marks, From, "recover_start", ?WAIT_MS),
            timer:sleep(rand:uniform(30) - 1),
            Lines = mark_lines(Marks, From),
            %% The survivor's recovery returns (done, or failed with the
            %% other node gone); either way it runs again below.
            Wait = fun() ->
                           [receive {recovered, _} -> ok after ?WAIT_MS -> error(recovery_hung) end
                            || _ <- Recovering]
                   end,
            {Fault, Cl2, Together2} =
                case partition() of
                    false ->
                        Victims = pick(victims(Cl, [1, 1])),
                        kill(Dir, Cl, Victims),
                        Wait(),
                        {#{kind => kill, victims => Victims}, restart(Ctx, Cl, Victims, []),
                         length(Victims) > 1};
                    true ->
                        {P, ClP} = partition(Ctx, Run, Cl, Wait),
                        {P, ClP, true}
                end,
            {Cl3, More} = recover_all(Ctx, Run, Cl2, Together2),
            Last = fraghash_torture2_report:last_step(Lines),
            {Cl3, [Fault#{run => Run, controller => none,
                          where => {recovery, Pending =/= [], Last}} | More]};
        false ->
            Ns = shuffle(nodes_of(Cl)),
            Results = case Together andalso at_once() of
                          true -> rpc_parallel(Ns, ?NODE, recover, [Dir]);
                          false -> [rpc:call(N, ?NODE, recover, [Dir], ?WAIT_MS) || N <- Ns]
                      end,
            case lists:usort(Results) of
                [ok] -> ok;
                _ ->
                    case differing(Results) of
                        {true, Tabs} ->
                            %% Copies Mnesia resolved apart (a commit cut
                            %% or killed on its way): made to agree, and
                            %% checked against the acknowledgements below.
                            [settle(Run, hd(Ns), T) || T <- Tabs],
                            case lists:usort([rpc:call(N, ?NODE, recover, [Dir], ?WAIT_MS)
                                              || N <- Ns]) of
                                [ok] -> ok;
                                Again -> error({recover_failed, Run, Again,
                                                recover_diag(Dir, Cl)})
                            end;
                        false ->
                            error({recover_failed, Run, Results, recover_diag(Dir, Cl)})
                    end
            end,
            {Cl, []}
    end.

%% `{true, Tables}' when every recovery that failed found only copies that
%% differ (in `Tables'), else `false'.
differing(Results) ->
    Per = [case R of
               ok -> [];
               {error, L} when is_list(L) ->
                   [case E of
                        {T, {error, {fraghash, replicas_differ, _}}} -> T;
                        _ -> other
                    end || E <- L];
               _ -> [other]
           end || R <- Results],
    Tabs = lists:usort(lists:append(Per)),
    case lists:member(other, Tabs) of
        true -> false;
        false -> {true, Tabs}
    end.

%% fraghash_frag:repair_replicas/1 of `T' on `Node', what it settled kept
%% (`settled' in the process dictionary) for check_all/3.
settle(Run, Node, T) ->
    {ok, Settled} = rpc:call(Node, fraghash_frag, repair_replicas, [T], ?WAIT_MS),
    put(settled, [{Run, T, S} || S <- Settled] ++ get_list(settled)),
    ok.

%% What each node holds of every fragmented table and the journal, with
%% the last marks: for telling what a failed recovery met.
recover_diag(Dir, Cl) ->
    Lines = mark_lines(filename:join(Dir, "marks.log"), 0),
    Tail = lists:nthtail(max(0, length(Lines) - 60), Lines),
    [{N, [{T, catch rpc:call(N, fraghash_frag, hash, [T], 5000),
           [{F, [{I, catch rpc:call(N, mnesia, table_info, [F, I], 5000)}
                 || I <- [disc_copies, external_copies, where_to_read, active_replicas]]}
            || F <- rpc:call(N, mnesia, system_info, [tables], 5000),
               lists:prefix(atom_to_list(T), atom_to_list(F))]}
          || T <- ?NODE:tables()],
      catch rpc:call(N, mnesia, dirty_match_object, [{fraghash_journal, '_', '_'}], 5000)}
     || N <- nodes_of(Cl)] ++ [{marks, Tail}].

at_once() -> os:getenv("FRAGHASH_TORTURE2_RECOVER_AT_ONCE") =/= "0".

rpc_parallel(Ns, M, F, Args) ->
    Self = self(),
    Pids = [spawn(fun() -> Self ! {self(), rpc:call(N, M, F, Args, ?WAIT_MS)} end) || N <- Ns],
    [receive {P, R} -> R end || P <- Pids].

%%% Checks

%% Checks every table and its control on every node, then repairs what
%% was lost (so that the next check counts new losses only). Returns one
%% check per table: a map of counts summed over the nodes, `ours' (keys the
%% table got wrong that its control kept, on any node), `disagree'
%% (whether the nodes differ in hash state or in the keys of a fragment).
check_all(#{dir := Dir}, Run, Cl) ->
    Nodes = nodes_of(Cl),
    Checks =
        [begin
             Exp = expected(Dir, Tab),
             Per = [{N, rpc:call(N, ?NODE, check, [Tab, Exp], ?WAIT_MS),
                     rpc:call(N, ?NODE, check, [?NODE:control(Tab), Exp], ?WAIT_MS)}
                    || N <- Nodes],
             Layouts = lists:usort([{L, CL} || {_, {_, _, L}, {_, _, CL}} <- Per]),
             Ours = lists:usort(lists:append([[K || K <- Bad, not lists:member(K, CBad)]
                                              || {_, {_, Bad, _}, {_, CBad, _}} <- Per])),
             CtlBad = lists:usort(lists:append([CBad || {_, _, {_, CBad, _}} <- Per])),
             AllBad = lists:usort(CtlBad ++ lists:append([Bad || {_, {_, Bad, _}, _} <- Per])),
             %% What each node holds of a key the table got wrong, fragment
             %% by fragment, and where the state routes it there: read
             %% before the repair below writes the key again.
             OursKeys = [{K, maps:get(K, Exp, none),
                          [{N, rpc:call(N, fraghash_torture_child, found, [Tab, K], ?WAIT_MS)}
                           || N <- Nodes]}
                         || K <- lists:sublist(Ours, 5)],
             [ok = rpc:call(hd(Nodes), ?NODE, repair, [Dir, Run, Tab, {AllBad, Exp}], ?WAIT_MS)
              || AllBad =/= []],
             %% Each key repair_replicas/1 settled in this run: every
             %% copy held, before, a value the acknowledgements allow (a
             %% copy lacking an acknowledged write would not).
             Settled = [{K, Copies} || {R, T, #{key := K, copies := Copies}} <- get_list(settled),
                                       R =:= Run, lists:member(T, [Tab, ?NODE:control(Tab)])],
             SettledBad = [K || {K, Copies} <- Settled, not settled_ok(maps:get(K, Exp, none),
                                                                       Copies)],
             Sum = fun(Key) -> lists:sum([maps:get(Key, C) || {_, {C, _, _}, _} <- Per]) end,
             #{run => Run, tab => Tab, nodes => [{N, C} || {N, {C, _, _}, _} <- Per],
               checked => Sum(checked), ours => length(Ours),
               ours_keys => OursKeys,
               control_lost => length(CtlBad),
               control_keys => [{K, maps:get(K, Exp, none)} || K <- lists:sublist(CtlBad, 5)],
               duplicates => Sum(duplicates), misplaced => Sum(misplaced),
               orphans => Sum(orphans), journal_left => Sum(journal_left),
               structure => [{N, K} || {N, {C, _, _}, _} <- Per,
                                       K <- [sizes_add_up, frag_names_match, copies_ok, index_ok],
                                       not maps:get(K, C)],
               settled => length(Settled), settled_bad => SettledBad,
               disagree => length(Layouts) > 1,
               disagree_detail => [fraghash_torture2_report:differences(Per)
                                   || length(Layouts) > 1]}
         end || Tab <- ?NODE:tables()],
    {Cl, Checks}.

%% Whether every copy's records of a settled key held values `Exp'
%% (`{LastAcked, [LaterIntents]}', `none' for a key never written) allows.
settled_ok(none, _Copies) ->
    false;
settled_ok({Last, Maybe}, Copies) ->
    lists:all(fun({_Node, Recs}) ->
                      Vals = case Recs of
                                 [] -> [deleted];
                                 _ -> [element(3, R) || R <- Recs]
                             end,
                      lists:all(fun(V) -> lists:member(V, [Last | Maybe]) end, Vals)
              end, Copies).

%% Key => {LastAcked, [LaterIntents]}: each writer's log (the keys of one
%% are no other's).
expected(Dir, Tab) ->
    lists:foldl(fun(W, Acc) ->
                        maps:merge(Acc, fraghash_torture_child:expected_terms(
                                          fraghash_torture2_partition:terms(
                                            ?NODE:ack_file(Dir, Tab, W))))
                end, #{}, lists:seq(1, ?NODE:nodes_count())).

%% A check after a partition fails on what the controls lost too: what the
%% heal gives up is left out of the expected values, and Mnesia keeps
%% everything else on the kept side.
faulty(#{ours := O, duplicates := D, misplaced := M, orphans := Or, journal_left := J,
         structure := S, disagree := Dis, settled_bad := SB} = C) ->
    O > 0 orelse D > 0 orelse M > 0 orelse Or > 0 orelse J > 0 orelse S =/= [] orelse Dis
        orelse SB =/= []
        orelse (maps:get(partition, C, false) andalso control_lost(C) > 0).

control_lost(#{control_lost := C}) -> C.

%%% Nodes

start_node(Name, Dir) ->
    fraghash_test_rejoin:restart_peer(Name, Dir, fraghash_torture2_partition:peer_args()).

start_mnesia(Node) ->
    rpc:call(Node, ?MODULE, start_mnesia_here, [?NODE:nodes_count()]).

%% @private On the node: the cluster's size set, Mnesia dumping its log
%% often, as under load (a kill finds more dumps).
start_mnesia_here(NNodes) ->
    ok = ?NODE:configure(NNodes),
    ok = application:set_env(mnesia, dump_log_write_threshold, 200),
    mnesia:start().

keys(Cl) -> lists:sort(maps:keys(Cl)).

nodes_of(Cl) -> [node_of(Cl, K) || K <- keys(Cl)].

node_of(Cl, K) -> element(2, maps:get(K, Cl)).

wait_tables(Cl) ->
    lists:foreach(
      fun(N) ->
              %% A fragment table beyond its table's count (a kill just after
              %% the change that dropped it) may load nowhere: it is not
              %% waited for (recover/0 drops it), only counted.
              All = rpc:call(N, mnesia, system_info, [tables]),
              Tabs = rpc:call(N, fraghash_frag, loadable_tables, []),
              case All -- Tabs of
                  [] -> ok;
                  Beyond -> put(beyond_count, [{N, Beyond} | get_list(beyond_count)])
              end,
              case rpc:call(N, mnesia, wait_for_tables, [Tabs, ?WAIT_MS], ?WAIT_MS + 5000) of
                  ok -> ok;
                  Other -> error({tables_not_loaded, N, Other, table_diag(Cl, Other)})
              end
      end, nodes_of(Cl)).

%% What each node knows of the tables that did not load: for telling a
%% schema the nodes disagree on from a copy nobody may load.
table_diag(Cl, {timeout, Tabs}) ->
    Items = [disc_copies, where_to_read, active_replicas, load_node, load_reason],
    [{N, T, [{I, catch rpc:call(N, mnesia, table_info, [T, I], 5000)} || I <- Items],
      [{Base, catch rpc:call(N, fraghash_frag, hash, [Base], 5000)}
       || Base <- [base(T)]],
      catch rpc:call(N, fraghash_journal, pending, [], 5000)}
     || N <- nodes_of(Cl), T <- Tabs];
table_diag(_Cl, _) ->
    [].

get_list(K) -> case get(K) of undefined -> []; L -> L end.

base(Frag) -> list_to_atom(hd(string:split(atom_to_list(Frag), "_frag"))).


%% kill -9 of the victims' OS processes (both in one command), noted.
kill(Dir, Cl, Victims) ->
    fraghash_torture2_report:note(Dir, "kill ~0p", [Victims]),
    Pids = [rpc:call(node_of(Cl, V), os, getpid, []) || V <- Victims],
    os:cmd("kill -9 " ++ lists:join(" ", Pids)),
    [wait_down(node_of(Cl, V)) || V <- Victims],
    ok.

wait_down(Node) -> fraghash_test_support:wait_down(Node).

%% mnesia:set_master_nodes/1 before Mnesia starts writes to its log, and
%% fails on a log whose header the kill tore (`not_a_log_file'): Mnesia's
%% own start deletes such a file (it holds nothing it can read) and opens a
%% new one, which is done here first.
set_master_nodes(Node, Masters) ->
    case rpc:call(Node, mnesia, set_master_nodes, [Masters]) of
        {error, {not_a_log_file, Log}} ->
            ok = rpc:call(Node, file, delete, [Log]),
            rpc:call(Node, mnesia, set_master_nodes, [Masters]);
        Other ->
            Other
    end.

%% Stops the survivors' work, restarts the victims (random order, same
%% name and directory; with `Masters' as Mnesia's master nodes until their
%% tables are loaded, when not []), waits for every table on both nodes.
restart(Ctx = #{dir := Dir, names := Names}, Cl, Victims, Masters) ->
    Survivors = keys(Cl) -- Victims,
    [case rpc:call(node_of(Cl, K), ?NODE, stop_work, [60000], 70000) of
         {stopped, 0} ->
             ok;
         {stopped, Killed} ->
             %% A writer killed inside a transaction may leave it to
             %% commit later, with its old value.
             io:format(user, "torture2: ~b worker(s) on ~s did not stop within 60 s and were "
                       "killed~n", [Killed, K])
     end || K <- Survivors],
    [catch peer:stop(element(1, maps:get(V, Cl))) || V <- Victims],
    Order = shuffle(Victims),
    Cl2 = lists:foldl(fun(V, Acc) ->
                              {Name, NDir} = maps:get(V, Names),
                              Acc#{V => start_node(Name, NDir)}
                      end, Cl, Order),
    %% Written to the schema's files before Mnesia starts, so that its first
    %% loads already follow it.
    [ok = set_master_nodes(node_of(Cl2, V), Masters) || Masters =/= [], V <- Order],
    %% Mnesia starts on the victims at once (spawned in that order): a node
    %% whose log holds a transaction of unclear outcome (a schema change the
    %% kill cut short on both) waits in mnesia:start() for the other to
    %% tell it.
    Started = rpc_parallel([node_of(Cl2, V) || V <- Order], ?MODULE, start_mnesia_here,
                           [?NODE:nodes_count()]),
    Cl3 = lists:foldl(fun({_, ok}, Acc) -> Acc;
                         ({V, Failed}, Acc) -> rejoin(Ctx, Acc, V, Failed)
                      end, Cl2, lists:zip(Order, Started)),
    put(aligned, [V || {V, ok} <- lists:zip(Order, Started),
                       rpc:call(node_of(Cl3, V), fraghash_redb_align, taken, []) =/= []]
        ++ get_list(aligned)),
    [ok = rpc:call(node_of(Cl3, V), ?NODE, set_hook, [Dir]) || V <- Order],
    ok = wait_tables(Cl3),
    [ok = rpc:call(node_of(Cl3, V), mnesia, set_master_nodes, [[]]) || Masters =/= [],
                                                                      V <- Order],
    Cl3.

%% A victim whose Mnesia did not start: on three nodes, when Mnesia could
%% not merge its schema (a `redb_copies' move it missed, where its own
%% definition was the newer: fraghash_redb_align), it rejoins afresh
%% through a node running Mnesia, counted; any other failure fails the run.
rejoin(#{names := Names}, Cl, V, Failed) ->
    Node = node_of(Cl, V),
    Merge = ?NODE:nodes_count() =:= 3 andalso fraghash_test_rejoin:merge_failed(Node),
    ?assertEqual({restart, V, ok}, {restart, V, case Merge of true -> ok; false -> Failed end}),
    [Peer | _] = [N || N <- nodes_of(Cl) -- [Node],
                       rpc:call(N, mnesia, system_info, [is_running]) =:= yes],
    put(rejoins, [V | get_list(rejoins)]),
    New = fraghash_test_rejoin:rejoin(Node, Peer, maps:get(V, Names),
                                      fraghash_torture2_partition:peer_args(),
                                      fun(N) -> rpc:call(N, ?MODULE, start_mnesia_here,
                                                         [?NODE:nodes_count()])
                                      end),
    Cl#{V => New}.

pick(L) -> lists:nth(rand:uniform(length(L)), L).

shuffle(L) -> [X || {_, X} <- lists:sort([{rand:uniform(), X} || X <- L])].
