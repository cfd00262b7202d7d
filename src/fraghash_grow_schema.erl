%% @doc The schema changes of the growth path, and every call it makes into
%% Mnesia's internals (`mnesia_schema', `mnesia_frag', `mnesia_lib'). None
%% of them moves a record: records move in ordinary transactions
%% (`fraghash_grow'), because Mnesia 4.21.3 may not bring to disc the
%% record operations of a schema transaction (see
%% `repro/mnesia-frag-disc-bug.md'). Each change is one schema transaction
%% of Mnesia's own kind (`{op, change_table_frag, _, TabDef}' and
%% `create_table'/`delete_table' ops), so Mnesia logs, replicates and
%% replays it as it does `mnesia:change_table_frag/2':
%% <ul>
%% <li>{@link add_hidden/3}: fragment `N + 1' is created and the hash state
%% is kept, so no key routes to it (the hash modules name fragments
%% `1..N' only, for reads and for scans): a hidden fragment to copy the
%% moving records into.</li>
%% <li>{@link switch/4}: the hash states are replaced, under write locks on
%% the fragments named, after a check that runs under those locks; the
%% routing of every key changes at once.</li>
%% <li>{@link drop_last/4}: the last fragment is deleted and the hash state
%% replaced in one change (a del_frag whose records were copied
%% beforehand, or a hidden fragment given up).</li>
%% </ul>
%% Each changes a table and its foreign-key tables together, as Mnesia
%% does (`fraghash_grow_group'): `Changes' lists, per table, the state it
%% must hold and the one it gets. Each aborts with `{fraghash,
%% changed_underneath, Text}' when a table holds another state (a change
%% made meanwhile by a call that bypassed the growth path).
-module(fraghash_grow_schema).

-export([add_hidden/3, switch/3, drop_last/4, drop_orphan/1, load_somewhere/1, hash/1,
         foreigners/1, fresh_log/0, drop_unloaded_copy/2]).
%% Called on every running node.
-export([dumps_queued/0]).

-type changes() :: [{atom(), term(), term()}].

%% How long a schema change waits, in all, for running nodes to load the
%% tables it changes.
-define(ACTIVE_MS, 60000).
%% How many log dumps a schema change lets Mnesia's dumpers have queued
%% when it commits (`dumper_caught_up/2'), and how long, by default, it
%% waits under its locks for them to catch up (the application setting
%% `schema_wait_ms').
-define(DUMPS_QUEUED, 2).
-define(SCHEMA_WAIT_MS, 30000).
%% How long a schema change waits at most, before it takes any lock, for
%% the one log dump a dumper that keeps up has running (`dump_done/1').
-define(DUMP_DONE_MS, 500).
%% How long fresh_log/0 waits for its dump.
-define(FRESH_LOG_MS, 3000).

%% @doc The table's hash module, hash state and fragment count as Mnesia
%% holds them on this node: `{Mod, State, N}'.
-spec hash(atom()) -> {module(), term(), pos_integer()}.
hash(Tab) ->
    fraghash_tab:hash(Tab).

%% @doc The foreign-key tables of `Tab'.
-spec foreigners(atom()) -> [atom()].
foreigners(Tab) ->
    mnesia_frag:lookup_foreigners(Tab).

%% @doc Creates fragment `N + 1' of `Tab' and of each of its foreign-key
%% tables on `Nodes' (as `mnesia:change_table_frag(Tab, {add_frag,
%% Nodes})' places them, with the same storage as the table's other
%% fragments, a storage backend's included) and keeps each table's hash
%% state, which must be the one in `States' (`[{Table, State}]'): no key
%% routes to the new fragments and no record moves.
-spec add_hidden(atom(), [node() | {node(), non_neg_integer()}], [{atom(), term()}]) ->
          {atomic, ok} | {aborted, term()}.
add_hidden(Tab, Nodes, States) ->
    {_Mod, _State, N} = hash(Tab),
    transaction(
      Tab,
      fun(TidTs) ->
              [ok = expect(T, State, N) || {T, State} <- States],
              Ops = [hidden_fragment(T, State, N, Nodes) || {T, State} <- States],
              mnesia_schema:insert_schema_ops(TidTs, lists:append(Ops))
      end).

%% @doc Replaces each table's hash state and module (`{Table, From, To,
%% Module}' in `Changes', `Tab' and its foreign-key tables; same fragment
%% count). The
%% caller's fence holds the fragments `Fenced' (`fraghash_grow_fence'),
%% which the change must not ask for: the fence is older than it, and it
%% would restart until the fence ends.
-spec switch(atom(), [{atom(), term(), term(), module()}], [atom()]) ->
          {atomic, ok} | {aborted, term()}.
switch(Tab, Changes, Fenced) ->
    {_Mod, _State, N} = hash(Tab),
    %% The fence let a dump under way finish before it took its locks
    %% (quiet_dumper/0): this change does not wait for one under them.
    transaction(
      Tab, not lists:member(Tab, Fenced), false,
      fun(TidTs) ->
              [ok = expect(T, From, N) || {T, From, _To, _ToMod} <- Changes],
              mnesia_schema:insert_schema_ops(
                TidTs, [{op, change_table_frag, {fraghash, switch}, tab_def(T, To, N, Mod)}
                        || {T, _From, To, Mod} <- Changes])
      end).

%% @doc Deletes the last fragment of each table in `Changes' (`Tab' and its
%% foreign-key tables) and replaces its hash state `From' by `To' (which
%% names one fragment fewer, or is `From' itself for a fragment no key
%% routes to), holding write locks on `Frags' and the last fragments while
%% `Check()' runs.
-spec drop_last(atom(), changes(), [atom()], fun(() -> ok)) -> {atomic, ok} | {aborted, term()}.
drop_last(Tab, Changes, Frags, Check) ->
    {_Mod, _State, N} = hash(Tab),
    Lasts = [fraghash_tab:frag_name(T, N) || {T, _, _} <- Changes],
    case N > 1 of
        false ->
            {aborted, fraghash_error:new(last_fragment,
                                         "~s has one fragment, which a table keeps",
                                         [Tab])};
        true ->
            transaction(
              Tab,
              fun(TidTs) ->
                      [ok = expect(T, From, N) || {T, From, _To} <- Changes],
                      [_ = mnesia_schema:get_tid_ts_and_lock(F, write)
                       || F <- lists:usort(Lasts ++ Frags)],
                      ok = Check(),
                      Ops = [[{op, change_table_frag, {fraghash, drop_last}, tab_def(T, To, N - 1)}
                              | mnesia_schema:make_delete_table(fraghash_tab:frag_name(T, N),
                                                                single_frag)]
                             || {T, _From, To} <- Changes],
                      mnesia_schema:insert_schema_ops(TidTs, lists:append(Ops))
              end)
    end.

%% @doc Deletes the table `Frag' when it exists: a fragment table beyond
%% its table's count, as Mnesia can leave one when a kill lands between
%% the schema change that removed it and the next dump of the log.
-spec drop_orphan(atom()) -> ok.
drop_orphan(Frag) ->
    case lists:member(Frag, mnesia:system_info(tables)) of
        false ->
            ok;
        true ->
            ok = load_somewhere(Frag),
            {atomic, ok} =
                when_active(
                  fun() ->
                          mnesia_schema:schema_transaction(
                            fun() ->
                                    TidTs = mnesia_schema:get_tid_ts_and_lock(schema, write),
                                    mnesia_schema:insert_schema_ops(
                                      TidTs, mnesia_schema:make_delete_table(Frag, single_frag)),
                                    ok
                            end)
                  end),
            ok
    end.

%% @doc Deletes `Node''s copy of `Frag' from the schema, as
%% `mnesia:del_table_copy(Frag, Node)' does, without waiting for that copy
%% to be active: for a copy the schema lists on a running node that never
%% loads it. Mnesia merges the schema of a node that starts with the
%% others' by joining the nodes each lists for a table, so a
%% `del_table_copy' that a node's disc had not kept when it was killed
%% comes back when it restarts, listed on a node that deleted it and that
%% will not load it again before its own restart; `del_table_copy' then
%% aborts (`not_active') however long it waits. The other copies must be
%% active, as for `del_table_copy'.
-spec drop_unloaded_copy(atom(), node()) -> {atomic, ok} | {aborted, term()}.
drop_unloaded_copy(Frag, Node) ->
    mnesia_schema:schema_transaction(
      fun() ->
              TidTs = mnesia_schema:get_tid_ts_and_lock(schema, write),
              Cs = mnesia_schema:incr_version(mnesia_lib:val({Frag, cstruct})),
              Storage = mnesia_lib:schema_cs_to_storage_type(Node, Cs),
              Storage =/= unknown orelse mnesia:abort({no_exists, Frag, Node}),
              Without = fun(Ns) -> [N || N <- Ns, N =/= Node] end,
              %% The definition lists a backend's copies under its alias
              %% (`{redb_copies, Nodes}'), beside the native types.
              Kinds = [ram_copies, disc_copies, disc_only_copies
                       | [Alias || {{Alias, _Mod}, _} <- mnesia:table_info(Frag, external_copies)]],
              Def = [case Prop of
                         {Kind, Ns} when is_list(Ns) ->
                             case lists:member(Kind, Kinds) of
                                 true -> {Kind, Without(Ns)};
                                 false -> Prop
                             end;
                         _ ->
                             Prop
                     end || Prop <- mnesia_schema:vsn_cs2list(Cs)],
              Others = mnesia_lib:cs_to_nodes(mnesia_schema:list2cs(Def)),
              Others =/= [] orelse mnesia:abort({fraghash, last_copy, Frag}),
              _ = mnesia_schema:get_tid_ts_and_lock(Frag, write),
              mnesia_schema:insert_schema_ops(TidTs, [{op, del_table_copy, Storage, Node, Def}])
      end).

%% Runs the schema change `Change()' again while it aborts because a
%% running node holding a disc copy of a table it changes has not loaded
%% that table yet (Mnesia's `not_active'), as just after a restart, when
%% recovery on one node can run before the other node loaded its tables:
%% waits for those nodes to load it, up to ?ACTIVE_MS in all. A node that
%% is down makes the change abort, as Mnesia answers.
when_active(Change) ->
    when_active(Change, erlang:monotonic_time(millisecond) + ?ACTIVE_MS).

when_active(Change, Deadline) ->
    case Change() of
        {aborted, {not_active, _Why, Tab, Nodes}} = Aborted when is_list(Nodes) ->
            Left = Deadline - erlang:monotonic_time(millisecond),
            Running = mnesia:system_info(running_db_nodes),
            case Left > 0 andalso Nodes -- Running =:= [] of
                true ->
                    _ = [rpc:call(N, mnesia, wait_for_tables, [[Tab], Left], Left + 1000)
                         || N <- Nodes],
                    when_active(Change, Deadline);
                false ->
                    Aborted
            end;
        Result ->
            Result
    end.

%%% Internals

%% @doc Loads `Frag' on a node that holds it when no node has it loaded.
%% Mnesia deletes only a table some node has loaded, and an orphan that a
%% kill left on a cluster may be loaded nowhere (each node waits for
%% another to load it): loaded by force, from the disc of a running node
%% that holds a copy, it can go.
-spec load_somewhere(atom()) -> ok.
load_somewhere(Frag) ->
    case mnesia:table_info(Frag, active_replicas) of
        [_ | _] ->
            ok;
        [] ->
            Running = mnesia:system_info(running_db_nodes),
            Holders = [N || N <- fraghash_durable:disc_holders(Frag)
                                ++ mnesia:table_info(Frag, ram_copies),
                            lists:member(N, Running)],
            case Holders of
                [N | _] ->
                    yes = rpc:call(N, mnesia, force_load_table, [Frag]),
                    ok;
                [] ->
                    error(fraghash_error:new(orphan_not_loadable,
                                             "~s, a fragment table left by a kill, is loaded "
                                             "nowhere and no running node holds it: start the "
                                             "nodes that hold it, then run fraghash_frag:"
                                             "recover/0", [Frag]))
            end
    end.

%% One schema transaction holding the schema and `Tab' (fragment 1)
%% write-locked, run by a process of its own (again, while a running node
%% still loads a table it changes: `when_active/1'). The lock on fragment 1 is
%% not needed for the change itself, but it is what lets the change commit
%% under heavy writes: a schema commit waits for Mnesia's dumper queue,
%% and writers faster than the dumper keep that queue growing (Mnesia's
%% "overloaded" warnings); the lock holds back the writers that reach
%% fragment 1 while the queue drains. Without it one add under four
%% unthrottled writers (about 12,000 writes/s) waited 360 s for the commit
%% instead of 1 s (docs/mnesia-growth-cost.md). The change waits for the
%% drain under its locks, and gives up before its commit when the queue
%% does not drain (`dumper_caught_up/2'): dirty writers take no lock.
%% Before it takes any lock, it lets a dump under way finish
%% (`dump_done/1').
%% `mnesia_schema:schema_transaction/1' waits for its coordinator without
%% a monitor, and when Mnesia stops under it (as a full disc makes it do)
%% the coordinator can go without an answer. So the
%% caller watches the transaction's process and Mnesia's controller, and
%% answers `{aborted, {node_not_running, Node}}' when the controller goes.
transaction(Tab, Fun) ->
    transaction(Tab, true, true, Fun).

%% As transaction/2; the lock on `Tab' only when `LockTab' (a fence holds
%% it otherwise, and holds back its writers the same way), and the wait for
%% a dump under way only when `WaitDump'.
transaction(Tab, LockTab, WaitDump, Fun) ->
    case whereis(mnesia_controller) of
        undefined ->
            {aborted, {node_not_running, node()}};
        Controller ->
            Watch = monitor(process, Controller),
            {Pid, Ref} =
                spawn_monitor(
                  fun() ->
                          Now = erlang:monotonic_time(millisecond),
                          Deadline = Now + application:get_env(fraghash, schema_wait_ms,
                                                               ?SCHEMA_WAIT_MS),
                          ok = case WaitDump of
                                   true -> dump_done(Now + ?DUMP_DONE_MS);
                                   false -> ok
                               end,
                          Change = fun() ->
                                           mnesia_schema:schema_transaction(
                                             fun() ->
                                                     TidTs = mnesia_schema:get_tid_ts_and_lock(
                                                               schema, write),
                                                     _ = [mnesia_schema:get_tid_ts_and_lock(
                                                            Tab, write) || LockTab],
                                                     Fun(TidTs),
                                                     dumper_caught_up(Tab, Deadline)
                                             end)
                                   end,
                          exit({schema_transaction_done, when_active(Change)})
                  end),
            receive
                {'DOWN', Ref, process, Pid, {schema_transaction_done, Result}} ->
                    demonitor(Watch, [flush]),
                    %% Mnesia stopped under the change (a dump that found
                    %% the disc full stops it), which answered for a table
                    %% gone with it.
                    case {Result, is_process_alive(Controller)} of
                        {{aborted, _}, false} -> {aborted, {node_not_running, node()}};
                        _ -> Result
                    end;
                {'DOWN', Ref, process, Pid, Why} ->
                    demonitor(Watch, [flush]),
                    {aborted, {transaction_crashed, Why}};
                {'DOWN', Watch, process, Controller, _} ->
                    exit(Pid, kill),
                    receive {'DOWN', Ref, process, Pid, _} -> ok end,
                    {aborted, {node_not_running, node()}}
            end
    end.

%% Waits, under the transaction's locks, until Mnesia's dumper on every
%% running node has at most ?DUMPS_QUEUED log dumps queued, so that the
%% commit, which each node's dumper serves in turn behind every dump
%% queued before it (`mnesia_controller:wait_for_schema_commit_lock/0'),
%% gets through at once. Writers faster than the dumper queue a dump each
%% time they pass `dump_log_write_threshold', so the queue grows without
%% end; transactional writers that reach fragment 1 are held by its lock
%% meanwhile and the queue drains, but dirty writers take no lock. A queue
%% that does not drain by `Deadline' aborts the change with `{fraghash,
%% overloaded, Text}', before its commit began.
dumper_caught_up(Tab, Deadline) ->
    Queued = [{N, Q} || {N, Q} <- queued(), Q > ?DUMPS_QUEUED],
    case {Queued, erlang:monotonic_time(millisecond) >= Deadline} of
        {[], _} ->
            ok;
        {[{Node, Q} | _], true} ->
            mnesia:abort(fraghash_error:new(overloaded,
                                            "Mnesia's log dumper on ~s is ~b dumps behind its "
                                            "writers, and a schema change of ~s would wait for "
                                            "all of them: slow the writers down (dirty writes "
                                            "take no lock that holds them back) or raise "
                                            "dump_log_write_threshold, then run the operation "
                                            "again (or fraghash_frag:recover/0, which finishes "
                                            "or undoes it)", [Node, Q, Tab]));
        {_, false} ->
            timer:sleep(50),
            dumper_caught_up(Tab, Deadline)
    end.

%% Waits, before the change takes any lock, while a running node's dumper
%% has one dump running and none queued, up to `Deadline'. That is a
%% dumper keeping up with its writers, the common case: the commit would
%% wait for that dump under the change's locks, which hold writers back
%% meanwhile (0.1 to 0.3 s for a dump that rewrites a fragment's file of
%% 60,000 records), so the change had better begin once it is done. A
%% dumper with more queued is behind its writers, and the locks are what
%% lets it catch up (`dumper_caught_up/2'): the change goes on at once.
dump_done(Deadline) ->
    Busiest = lists:max([0 | [Q || {_N, Q} <- queued()]]),
    case Busiest =:= 1 andalso erlang:monotonic_time(millisecond) < Deadline of
        true -> timer:sleep(5), dump_done(Deadline);
        false -> ok
    end.

%% @doc Before a fence takes its locks: a schema commit waits for the log
%% dump under way, so when this node's dumper keeps up (nothing queued),
%% its log is dumped now (up to ?FRESH_LOG_MS), which leaves the next dump
%% due only after `dump_log_write_threshold' more writes, mostly after the
%% switch; then a dump under way on any node may finish (up to 0.5 s, see
%% `dump_done/1'). A dumper that is behind is not waited for here: the
%% schema change's own wait and refusal deal with it.
-spec fresh_log() -> ok.
fresh_log() ->
    case dumps_queued() of
        0 ->
            {Pid, Ref} = spawn_monitor(fun() -> exit({dumped, mnesia:dump_log()}) end),
            receive
                {'DOWN', Ref, process, Pid, _} -> ok
            after ?FRESH_LOG_MS ->
                    demonitor(Ref, [flush])
            end;
        _ ->
            ok
    end,
    dump_done(erlang:monotonic_time(millisecond) + ?DUMP_DONE_MS).

%% `{Node, Dumps}' for each running node that answered: how many log dumps
%% its dumper has queued or running (`dumps_queued/0').
queued() ->
    Nodes = mnesia:system_info(running_db_nodes),
    [{N, Q} || {N, {ok, Q}} <- lists:zip(Nodes, erpc:multicall(Nodes, ?MODULE, dumps_queued, [],
                                                                5000))].

%% @doc How many log dumps Mnesia's controller on this node has queued or
%% running. Read from the controller's state: Mnesia has no call for it.
-spec dumps_queued() -> non_neg_integer().
dumps_queued() ->
    State = sys:get_state(mnesia_controller, 5000),
    lists:max([0 | [length([W || W <- L, is_tuple(W), element(1, W) =:= dump_log])
                    || L <- tuple_to_list(State), is_list(L)]]).

%% The table still holds the state and the count the caller read.
expect(Tab, State, N) ->
    case hash(Tab) of
        {_Mod, State, N} ->
            ok;
        {_Mod, _Other, N2} ->
            mnesia:abort(fraghash_error:new(changed_underneath,
                                            "~s changed while the operation ran (~b fragments, "
                                            "then ~b): run it again", [Tab, N, N2]))
    end.

%% The ops that create fragment `N + 1' of `T' and give `T' `N + 1'
%% fragments under the same hash state `State' (so no key routes to the
%% new one). Mnesia's own add_frag (`mnesia_frag:make_add_frag/2') is not
%% called: it would write-lock the fragments to split for the whole schema
%% change, ask the hash module for moves that are dropped anyway, and, for
%% a table on a storage backend, put a bare node where Mnesia 4.21.3
%% expects `{{Alias, Module}, Nodes}' (the new fragment's `create_table'
%% then fails). The new fragment is placed
%% as Mnesia places it: its copies in the base table's order (ram, disc,
%% disc_only, then each backend alias), each on the next node of `Nodes'.
hidden_fragment(T, State, N, Nodes) ->
    New = fraghash_tab:frag_name(T, N + 1),
    Def = mnesia_schema:cs2list(mnesia_lib:val({T, cstruct})),
    Kinds = [ram_copies, disc_copies, disc_only_copies
             | [Alias || {{Alias, _Mod}, _Nodes} <- mnesia_lib:val({T, external_copies})]],
    Counts = [{Kind, length(copies(Def, Kind))} || Kind <- Kinds],
    Placed = place(T, Counts, [node_of(Node) || Node <- Nodes]),
    NewDef = [{name, New}, {frag_properties, [{base_table, T}]} | Placed]
        ++ [Prop || {Key, _} = Prop <- Def,
                    not lists:member(Key, [name, frag_properties | Kinds])],
    [{op, change_table_frag, {add_frag, Nodes}, tab_def(T, State, N + 1)}
     | mnesia_schema:make_create_table(mnesia_schema:list2cs(NewDef))].

copies(Def, Kind) ->
    case lists:keyfind(Kind, 1, Def) of
        {Kind, Nodes} -> Nodes;
        false -> []
    end.

%% `[{Kind, Nodes}]': each kind's copies on the next nodes of `Pool'.
place(_T, [], _Pool) ->
    [];
place(T, [{Kind, Count} | Rest], Pool) when length(Pool) >= Count ->
    {Mine, Pool2} = lists:split(Count, Pool),
    Running = mnesia_lib:val({current, db_nodes}),
    [mnesia:abort({not_active, T, Node}) || Node <- Mine, not lists:member(Node, Running)],
    [{Kind, Mine} || Count > 0] ++ place(T, Rest, Pool2);
place(T, _Counts, Pool) ->
    mnesia:abort(fraghash_error:new(too_few_nodes,
                                    "~s keeps more copies of each fragment than the ~b nodes "
                                    "given for the new one: give as many nodes as a fragment "
                                    "has copies", [T, length(Pool)])).

%% `{add_frag, Nodes}' takes nodes or a `frag_dist' (`[{Node, Count}]').
node_of({Node, _Count}) -> Node;
node_of(Node) -> Node.

%% The table definition of `Tab' (a new version) with hash state `State',
%% `N' fragments and hash module `Mod'.
tab_def(Tab, State, N, Mod) ->
    Def = tab_def(Tab, State, N),
    {frag_properties, Props} = lists:keyfind(frag_properties, 1, Def),
    lists:keystore(frag_properties, 1, Def,
                   {frag_properties, lists:keystore(hash_module, 1, Props, {hash_module, Mod})}).

%% The table definition of `Tab' (a new version) with hash state `State'
%% and `N' fragments.
tab_def(Tab, State, N) ->
    Cs = mnesia_schema:incr_version(mnesia_lib:val({Tab, cstruct})),
    mnesia_schema:ensure_active(Cs),
    TabDef = mnesia_schema:vsn_cs2list(Cs),
    {frag_properties, Props} = lists:keyfind(frag_properties, 1, TabDef),
    Props2 = lists:keystore(n_fragments, 1,
                            lists:keystore(hash_state, 1, Props, {hash_state, State}),
                            {n_fragments, N}),
    lists:keystore(frag_properties, 1, TabDef,
                   {frag_properties, [P || P <- Props2, element(1, P) =/= next_n_to_split,
                                           element(1, P) =/= n_doubles]}).
