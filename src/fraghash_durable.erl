%% @doc Durability across the nodes of a table: what a commit wrote is on
%% disc on every node that holds a disc copy of it.
%%
%% What is made durable is what each node has logged: a commit made by
%% `mnesia:transaction/1' returns once every node holding a replica voted
%% for it, before each has logged it, so the growth path commits with
%% `mnesia:sync_transaction/1', which returns once every replica has
%% applied (and logged) it, and then asks for the sync.
%%
%% `mnesia:sync_log/0' syncs the calling node's log only. A commit
%% replicated to another node sits in that node's disk_log cache until the
%% cache is flushed (seconds later), and dets (`disc_only_copies') keeps
%% recent writes in its own cache: a kill -9 of that node in between loses
%% them there, and where that node holds the only disc copy of a fragment,
%% they are lost for good. So every step of `fraghash_frag' that must be
%% durable asks each node holding a disc copy to sync. A `redb_copies'
%% copy keeps a commit through a kill -9 once it is applied, and the sync
%% (of the node's redb database) makes it survive a power cut too.
-module(fraghash_durable).

-export([tables/1, here/1, write_back/1, write_back_here/1, check_log/0, holders_not_running/1,
         disc_holders/1, advice/1]).

-define(TIMEOUT_MS, 60000).
%% How long a node's sync of Mnesia's log may take before the node is
%% called stuck (see sync_log/0).
-define(SYNC_MS, 20000).

%% @doc Makes what was committed to `Tables' durable on every node holding
%% a disc copy of one of them (and on this node): each syncs Mnesia's log,
%% flushes the dets files of its `disc_only_copies' copies among them and
%% syncs its redb database if it holds `redb_copies' copies among them.
%% A node that is down (or whose Mnesia is stopped) is passed over for a
%% table that some node which did sync also holds on disc: when it comes back, Mnesia loads that table
%% from the live copy, not from its own files. A node that is up but apart
%% (Mnesia here does not count it as running: a partition) is not: it
%% counts as a node that cannot sync; so is one this node cannot reach
%% while a node that synced still runs with it (a cut between this node
%% and it alone), and, in a cluster of three nodes or more, any it cannot
%% reach while this node runs with no majority of them. Raises when a table's commit is on
%% disc nowhere (its only holders down), or a node cannot sync (a write
%% that fails, a partition): whatever the caller was about to record as
%% done (a journal entry removed, an operation returned, a write
%% acknowledged) must then wait for recovery.
-spec tables([atom()]) -> ok.
tables(Tables) ->
    Holders = [{T, disc_holders(T)} || T <- Tables],
    Nodes = lists:usort([node() | lists:append([Ns || {_, Ns} <- Holders])]),
    Results = lists:zip(Nodes, erpc:multicall(Nodes, ?MODULE, here, [Tables], ?TIMEOUT_MS)),
    %% A node that answers but that Mnesia here does not count as running
    %% is on the other side of a partition: what it synced is its own log,
    %% which may lack this node's commits, and it will not load from this
    %% node's copy when the partition is healed by throwing this side away.
    Running = mnesia:system_info(running_db_nodes),
    Apart = [{N, partitioned} || {N, {ok, ok}} <- Results, not lists:member(N, Running)],
    Synced = [N || {N, {ok, ok}} <- Results, lists:member(N, Running)],
    %% A node whose Mnesia is stopped is down to Mnesia: it commits nothing
    %% meanwhile and loads from a live copy when it starts.
    Unreached = [N || {N, R} <- Results, R =:= {error, {erpc, noconnection}}
                                             orelse R =:= {ok, mnesia_stopped}],
    %% A node this one cannot reach but that a node which synced still
    %% runs with is cut from this node only, not down: it may have missed
    %% commits made here since (Mnesia here took it for down, its peers
    %% did not), and it stays in the cluster the heal keeps.
    CutOff = cut_off(Unreached, Synced -- [node()]),
    %% A node that runs with no majority of the cluster may be on the side
    %% a heal throws away: on three nodes or more it excuses no holder it
    %% cannot reach (a pair cannot tell a dead peer from a cut one). One
    %% whose Mnesia stopped is down for every node, and loads from a live
    %% copy when it starts.
    Minority = case [N || {N, {error, {erpc, noconnection}}} <- Results] -- CutOff of
                   [] -> [];
                   NoConnection -> case minority() of
                                       true -> NoConnection;
                                       false -> []
                                   end
               end,
    Down = Unreached -- (CutOff ++ Minority),
    Failed = Apart ++ [{N, partitioned} || N <- CutOff ++ Minority]
        ++ [{N, R} || {N, R} <- Results, R =/= {ok, ok}, not lists:member(N, Unreached)],
    %% Tables a down node holds that no node which synced holds too.
    Lost = [T || {T, Ns} <- Holders, lists:any(fun(N) -> lists:member(N, Down) end, Ns),
                 not lists:any(fun(N) -> lists:member(N, Synced) end, Ns)],
    case {Failed, Lost} of
        {[], []} -> ok;
        _ -> error({fraghash, not_durable, #{failed => Failed, down => Down, tables => Lost}})
    end.

%% @doc Starts writing to disc, on every node holding one of `Tables' as
%% `disc_only_copies', the file changes that dets has made there so far,
%% without the dets server: a later {@link tables/1} then has less to
%% write while the table's users wait. Returns at once, the process doing
%% it; promises nothing (durable means {@link tables/1}).
%%
%% Why: `dets:sync/1' writes the file's free lists (as large as the space
%% freed since the file was opened, after a delete-heavy phase several
%% megabytes) and then flushes the file, all inside the dets server, so
%% every reader and writer of the table waits for it (130 to 140 ms a
%% sync measured, 500,000 deletes into a 166 MB file). A flush from
%% another process holds nobody.
-spec write_back([atom()]) -> pid().
write_back(Tables) ->
    Nodes = lists:usort([N || T <- Tables, N <- mnesia:table_info(T, disc_only_copies)]),
    spawn(fun() -> erpc:multicall(Nodes, ?MODULE, write_back_here, [Tables], ?TIMEOUT_MS) end).

%% @doc {@link write_back/1} on this node, waiting for the flushes: each
%% local `disc_only_copies' table's file opened for reading and flushed
%% (`file:datasync/1'), which writes out every changed page of it in the
%% page cache, whoever changed it. Errors are passed over.
-spec write_back_here([atom()]) -> ok.
write_back_here(Tables) ->
    %% Mnesia keeps a disc_only_copies copy in Tab.DAT in its directory
    %% (the name asked of Mnesia, not of the dets server, which may be
    %% busy).
    Dir = mnesia:system_info(directory),
    lists:foreach(
      fun(T) ->
              File = filename:join(Dir, atom_to_list(T) ++ ".DAT"),
              case file:open(File, [read, raw, binary]) of
                  {ok, Fd} -> _ = file:datasync(Fd), ok = file:close(Fd);
                  {error, _} -> ok
              end
      end, [T || T <- Tables, lists:member(node(), mnesia:table_info(T, disc_only_copies))]).

%% Whether this node's Mnesia runs with no more than half of the
%% cluster's nodes, the cluster three nodes or more.
minority() ->
    Db = mnesia:system_info(db_nodes),
    Running = mnesia:system_info(running_db_nodes),
    length(Db) >= 3 andalso 2 * length([N || N <- Db, lists:member(N, Running)]) =< length(Db).

%% Those of `Unreached' that one of `Synced' counts among the nodes Mnesia
%% runs on (asked only when some node was not reached); all of them when
%% one of `Synced' does not answer (cut off since its sync, it cannot say).
cut_off([], _Synced) ->
    [];
cut_off(_Unreached, []) ->
    [];
cut_off(Unreached, Synced) ->
    Answers = erpc:multicall(Synced, mnesia, system_info, [running_db_nodes], ?TIMEOUT_MS),
    case [L || {ok, L} <- Answers, is_list(L)] of
        Lists when length(Lists) =:= length(Synced) ->
            [N || N <- Unreached, lists:member(N, lists:append(Lists))];
        _ ->
            Unreached
    end.

%% @doc `ok', unless Mnesia's log on this node failed to sync (a full disc)
%% since Mnesia started: then raises `{fraghash, restart_mnesia, Text}'.
%% A sync that failed leaves a torn record in the log, and Mnesia 4.21.3
%% then loses, at its next start, records logged after the torn one, even
%% ones a later sync declared durable (its repair skips them as bad
%% bytes). After a restart Mnesia holds what its files hold and logs to a
%% fresh file, and durability means again what it says.
-spec check_log() -> ok.
check_log() ->
    Running = whereis(mnesia_controller),
    case persistent_term:get({?MODULE, log_failed}, none) of
        {Running, Failed} when is_pid(Running) ->
            error(fraghash_error:new(restart_mnesia,
                                     "Mnesia's log on ~s failed to sync since Mnesia started "
                                     "(~0tP), and Mnesia loses later writes from such a log: "
                                     "make room, restart Mnesia there, then run "
                                     "fraghash_frag:recover/0", [node(), Failed, 8]));
        _ ->
            ok
    end.

%% @doc What to do when a write made durable by {@link tables/1} failed
%% with `Why' (what it raised, or its transaction's abort): a phrase
%% naming the nodes at fault. A node apart (a partition) is to be healed,
%% a table whose only disc copies are on nodes where Mnesia is not running
%% needs Mnesia started there, a node whose disc failed (no space, an I/O
%% error) needs room or a fix there; only then is the disc blamed.
-spec advice(term()) -> string().
advice(Why) ->
    Failed = case find_not_durable(Why) of
                 #{failed := F} -> F;
                 _ -> []
             end,
    Lost = case find_not_durable(Why) of
               #{down := D, tables := [_ | _] = Ts} -> {D, Ts};
               _ -> none
           end,
    Apart = [N || {N, partitioned} <- Failed],
    Disc = [N || {N, R} <- Failed, R =/= partitioned, disc_failure(R)],
    Stopped = [N || {N, R} <- Failed, R =/= partitioned, not disc_failure(R),
                    node_down(R) =/= none],
    Other = [N || {N, R} <- Failed, R =/= partitioned, not disc_failure(R),
                  node_down(R) =:= none],
    Parts = [io_lib:format("heal the partition that keeps ~0p apart from ~s (see "
                           "docs/mnesia-disc-safety.md, After a partition)", [Apart, node()])
             || Apart =/= []]
        ++ [io_lib:format("start Mnesia on ~0p, which hold the only disc copies of ~0p",
                          [element(1, Lost), element(2, Lost)]) || Lost =/= none]
        ++ [io_lib:format("make room on the disc of ~0p (or fix its error) and restart Mnesia "
                          "there", [Disc]) || Disc =/= []]
        ++ [io_lib:format("let Mnesia finish starting or stopping on ~0p (or start it)",
                          [Stopped]) || Stopped =/= []]
        ++ [io_lib:format("fix what failed on ~0p", [Other]) || Other =/= []],
    case Parts of
        [] when Failed =:= [], Lost =:= none ->
            case {disc_failure(Why), node_down(Why)} of
                {true, _} -> "make room on the disc of this node (or fix its error) and "
                                 "restart Mnesia here";
                {false, none} -> "fix the cause given";
                {false, N} -> lists:flatten(io_lib:format("start Mnesia on ~s (or wait until "
                                                          "it has started)", [N]))
            end;
        _ ->
            lists:flatten(lists:join("; ", Parts))
    end.

find_not_durable(T) ->
    find(fun({fraghash, not_durable, #{} = M}) -> M;
            (_) -> none
         end, T).

%% A node named as not running in a transaction's abort, or `none'.
node_down(T) ->
    find(fun({node_not_running, N}) when is_atom(N) -> N;
            ({mnesia_down, N}) when is_atom(N) -> N;
            (_) -> none
         end, T).

%% The first part of term `T' (itself, then its elements and list members,
%% depth first) for which `Match' gives other than `none'; else `none'.
find(Match, T) ->
    case Match(T) of
        none when is_tuple(T) -> find(Match, tuple_to_list(T));
        none when is_list(T) -> find_in(Match, T);
        Found -> Found
    end.

find_in(Match, [H | T]) ->
    case find(Match, H) of
        none -> find_in(Match, T);
        Found -> Found
    end;
find_in(_Match, _) ->
    none.

%% Whether `R' holds a failure of a file (a full disc, an I/O error).
disc_failure({file_error, _, _}) -> true;
disc_failure(enospc) -> true;
disc_failure(eio) -> true;
disc_failure(T) when is_tuple(T) -> disc_failure(tuple_to_list(T));
disc_failure(M) when is_map(M) -> disc_failure(maps:to_list(M));
disc_failure([H | T]) -> disc_failure(H) orelse disc_failure(T);
disc_failure(_) -> false.

%% @doc The nodes holding a disc copy of one of `Tables' where Mnesia is
%% not running with this node (down, stopped, or apart in a partition).
-spec holders_not_running([atom()]) -> [node()].
holders_not_running(Tables) ->
    Running = mnesia:system_info(running_db_nodes),
    lists:usort([N || T <- Tables, N <- disc_holders(T), not lists:member(N, Running)]).

%% @doc The nodes holding a copy of table `T' on disc: `disc_copies',
%% `disc_only_copies', and the copies of an external backend that keeps
%% them on disc (`redb_copies').
-spec disc_holders(atom()) -> [node()].
disc_holders(T) ->
    mnesia:table_info(T, disc_copies) ++ mnesia:table_info(T, disc_only_copies)
        ++ lists:append([Ns || {{Alias, Mod}, Ns} <- mnesia:table_info(T, external_copies),
                               (catch Mod:semantics(Alias, storage)) =/= ram_copies]).

%% `mnesia:sync_log()', or `stuck' after ?SYNC_MS. On a disc that fills
%% up, Mnesia's monitor can wait for ever for `disk_log:sync/1' (seen
%% with OTP 25: the log's process idle, its reply never there), and every
%% later sync behind it: the operation answers then rather than hang.
sync_log() ->
    {Pid, Ref} = spawn_monitor(fun() -> exit({synced, mnesia:sync_log()}) end),
    receive
        {'DOWN', Ref, process, Pid, {synced, Result}} -> Result;
        {'DOWN', Ref, process, Pid, Why} -> {error, Why}
    after ?SYNC_MS ->
            exit(Pid, kill),
            receive {'DOWN', Ref, process, Pid, _} -> ok end,
            stuck
    end.

%% @doc {@link tables/1} on this node alone (what each node runs):
%% `mnesia_stopped' when Mnesia is stopped here. A Mnesia starting (it
%% may be loading a table while the commit reaches it) or stopping is
%% not stopped: its sync fails, and the commit is not durable.
-spec here([atom()]) -> ok | mnesia_stopped.
here(Tables) ->
    case mnesia:system_info(is_running) of
        no -> mnesia_stopped;
        _ -> here_running(Tables)
    end.

here_running(Tables) ->
    ok = check_log(),
    case sync_log() of
        ok ->
            ok;
        stuck ->
            %% Nothing syncs here until Mnesia restarts: later operations
            %% and recovery say so (check_log/0).
            persistent_term:put({?MODULE, log_failed}, {whereis(mnesia_controller), stuck}),
            error(fraghash_error:new(restart_mnesia, "Mnesia's log on ~s did not answer a sync "
                                     "within ~b s (a full disc can leave it so): make room, "
                                     "restart Mnesia there, then run fraghash_frag:recover/0",
                                     [node(), ?SYNC_MS div 1000]));
        Failed ->
            persistent_term:put({?MODULE, log_failed}, {whereis(mnesia_controller), Failed}),
            error(Failed)
    end,
    Here = mnesia:system_info(local_tables),
    Local = [T || T <- Tables, lists:member(T, Here)],
    Storage = [mnesia:table_info(T, storage_type) || T <- Local],
    [ok = dets:sync(T) || {T, disc_only_copies} <- lists:zip(Local, Storage)],
    %% An external backend keeping copies here syncs them through its
    %% module's sync/0, when it has one (`redb_copies' does).
    Backends = lists:usort([Mod || {ext, _Alias, Mod} <- Storage]),
    [ok = Mod:sync() || Mod <- Backends, code:ensure_loaded(Mod) =:= {module, Mod},
                        erlang:function_exported(Mod, sync, 0)],
    ok.
