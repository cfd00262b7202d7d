%% @doc Moving fragment replicas between nodes: one move
%% ({@link move_replica/4}), a drain of a node ({@link drain/2}) and a
%% rebalance of a table's records over its node pool ({@link rebalance/2};
%% plans by `fraghash_move_plan'), each move an operation of the growth
%% path's state machine (`fraghash_grow_machine', op `move'), journaled in
%% `fraghash_journal' and finished or undone by {@link recover/2}.
%%
%% A move takes the copies of one fragment number of a table's group (the
%% table and its foreign-key tables, `fraghash_grow_group': they move
%% together) from node `From' to node `To', each of its storage type. Its
%% journal entry names the replicas (`#{frag, from, to, type}'); each
%% phase is written to the journal, durably on every node holding it,
%% before its effects:
%% <ul>
%% <li>`copying': `mnesia:add_table_copy/3' gives `To' a copy of each
%% fragment, one schema transaction each. Mnesia's loader on `To' takes
%% the fragment's records from an active replica while writers go on: it
%% subscribes `To' to the fragment's commits and adds `To' to the nodes
%% written, under a read lock held for that moment only, then streams the
%% records; the schema change commits once the copy is loaded. Then each
%% new copy is awaited among the fragment's active replicas, and made
%% durable on every node holding it (`fraghash_durable').</li>
%% <li>`dropping': `mnesia:del_table_copy/2' deletes the copy on `From'
%% (it write-locks the fragment for the moment of its commit); what
%% Mnesia or a backend left of it there goes; synced; the entry goes.</li>
%% </ul>
%% So a fragment never has fewer copies than before: the old copy goes
%% only once the new one is complete, active and on disc, which the
%% journal's `dropping' says. Recovery undoes a move in `copying' (deletes
%% the new copies: the old ones hold every record) and finishes one in
%% `dropping'. A deleted copy that a restart's schema merge brings back,
%% listed on a node that never loads it, is deleted again without waiting
%% for it (`fraghash_grow_schema:drop_unloaded_copy/2'), and one listed
%% again before the entry goes, again (`came_back/2'); a node that
%% missed a `redb_copies' move takes the running nodes' definition at its
%% start (fraghash_redb_align), as Mnesia cannot merge it. The
%% argument is in docs/mnesia-disc-safety.md, Moving replicas.
-module(fraghash_move).

-export([base/1, move_replica/4, drain/2, rebalance/2, recover/2, copies/1]).

-import(fraghash_tab, [frag_name/2, step/2, records/1]).

%% The journal entries this version writes and recovers.
-define(VERSION, 2).
%% How long a new copy may take to be active.
-define(ACTIVE_MS, 60000).
%% How long a copy about to be deleted may take to be active before it is
%% taken for one that will not be loaded.
-define(UNLOADED_MS, 5000).
%% How many times a move deletes again copies that came back before it
%% leaves them to the next recovery (`came_back/2').
-define(BACK_TRIES, 5).

%%% What is moved

%% @doc The table whose operations a move of fragment `Frag' is serialized
%% with: the master of the table `Frag' is a fragment of (itself when it
%% has no foreign key). `{ok, Tab}', or a refusal.
-spec base(atom()) -> {ok, atom()} | {aborted, term()}.
base(Frag) ->
    case catch mnesia:table_info(Frag, frag_properties) of
        {'EXIT', _} ->
            {aborted, {no_exists, Frag}};
        [] ->
            refuse(not_fragmented, "~s is not a fragment of a fragmented table", [Frag]);
        Props ->
            Base = proplists:get_value(base_table, Props, Frag),
            case fraghash_tab:foreign_key(Base) of
                none -> {ok, Base};
                {Master, _} -> {ok, Master}
            end
    end.

%% @doc Each node holding a copy of table `T', with the copy's storage
%% type (an external backend's by its alias: `redb_copies').
-spec copies(atom()) -> [{node(), atom()}].
copies(T) ->
    [{N, Type} || Type <- [disc_copies, disc_only_copies, ram_copies],
                  N <- mnesia:table_info(T, Type)]
        ++ [{N, Alias} || {{Alias, _Mod}, Ns} <- mnesia:table_info(T, external_copies),
                          N <- Ns].

%%% One move

%% @doc Moves the copy of fragment `Frag' on `From' to `To', with the
%% fragments of that number of `Tab''s foreign-key tables that `From'
%% holds and `To' does not (`Tab' is `Frag''s {@link base/1}). Refuses a
%% node not in the pool, `From' not holding `Frag', `To' holding it, and
%% a node where Mnesia does not run.
-spec move_replica(atom(), atom(), node(), node()) -> {atomic, ok} | {aborted, term()}.
move_replica(Tab, Frag, From, To) ->
    Copies = copies(Frag),
    Pool = pool(Tab),
    case {lists:keyfind(From, 1, Copies), lists:keyfind(To, 1, Copies)} of
        _ when From =:= To ->
            refuse(same_node, "~s is both the node to move ~s from and to: name two nodes",
                   [From, Frag]);
        _ when not is_atom(To) ->
            refuse(bad_node, "~0tp is not a node", [To]);
        {false, _} ->
            refuse(not_held, "~s holds no copy of ~s (its copies: ~0p): name a node that "
                   "holds one", [From, Frag, Copies]);
        {_, {To, Type}} ->
            refuse(already_held, "~s holds a copy of ~s already (~s): move it to a node that "
                   "holds none", [To, Frag, Type]);
        {{From, _}, false} ->
            case lists:member(To, Pool) of
                true ->
                    run_move(Tab, replicas(Tab, Frag, From, To));
                false ->
                    refuse(node_not_in_pool, "~s is not in ~s's node pool ~0p: add it first "
                           "(mnesia:change_table_frag(~s, {add_node, ~s}))",
                           [To, Tab, Pool, Tab, To])
            end
    end.

%% The replicas one move takes: `Frag''s, and when `Frag' is a fragment of
%% `Tab', the same-numbered fragment of each foreign-key table that `From'
%% holds and `To' does not.
replicas(Tab, Frag, From, To) ->
    Group = case frag_number(Frag) of
                {Tab, I} -> [frag_name(T, I) || T <- group(Tab)];
                _ -> [Frag]
            end,
    [#{frag => F, from => From, to => To, type => Type}
     || F <- Group, Cs <- [copies(F)], {_, Type} <- [lists:keyfind(From, 1, Cs)],
        not lists:keymember(To, 1, Cs)].

%% Runs a move of `Replicas' (one fragment number, one pair of nodes):
%% refused while a node holding one of them, or `To', does not run Mnesia
%% with this node, and while any other node of the schema does not: a
%% node that misses a move's schema changes brings, at its next start,
%% the copy the move deleted back into every node's schema (Mnesia 4.21.3
%% merges two schemas by joining the holders each lists), listed on a node
%% that never loads it; for a copy of an external backend (`redb_copies')
%% Mnesia cannot merge the two at all (`change_storage_type/3' has no case
%% for it), and the node takes the running nodes' definition instead
%% (fraghash_redb_align). Else journaled and run.
run_move(_Tab, []) ->
    {atomic, ok};
run_move(Tab, [#{from := From, to := To} | _] = Replicas) ->
    Frags = [F || #{frag := F} <- Replicas],
    Running = mnesia:system_info(running_db_nodes),
    Holders = lists:usort([From, To | lists:append([[H || {H, _} <- copies(F)] || F <- Frags])]),
    Others = lists:usort(mnesia:system_info(db_nodes)) -- Holders,
    case {Holders -- Running, Others -- Running} of
        {[], [_ | _] = Down} ->
            refuse(nodes_not_running, "Mnesia is not running with this node on ~0p: a node "
                   "that misses a move's schema changes brings the deleted copy back into the "
                   "schema at its next start (Mnesia 4.21.3), so ~s's move of ~0p waits: start "
                   "Mnesia there, then move again", [Down, Tab, Frags]);
        {[], []} ->
            Entry = #{op => move, version => ?VERSION, phase => copying, replicas => Replicas,
                      node => node(), started => erlang:system_time(millisecond)},
            case write_first(Tab, Entry) of
                ok -> run(Tab, Entry);
                Refused -> Refused
            end;
        {Down, _} ->
            refuse(holders_not_running, "Mnesia is not running with this node on ~0p, which "
                   "~s's move of ~0p needs: start it there, then move again", [Down, Tab, Frags])
    end.

write_first(Tab, Entry) ->
    try fraghash_journal:write(Tab, Entry)
    catch
        _:Why ->
            refuse(journal_write_failed, "could not write ~s's journal entry (~0tP): ~s, then "
                   "move again", [Tab, Why, 20, fraghash_durable:advice(Why)])
    end.

run(Tab, #{started := Started} = Entry) ->
    ok = fraghash_grow_progress:start(Tab, move, Started),
    try
        run_phases(Tab, Entry)
    after
        fraghash_grow_progress:stop(Tab)
    end.

run_phases(Tab, #{phase := Phase} = Entry) ->
    ok = fraghash_grow_progress:phase(Tab, Phase, 0),
    case phase(Phase, Tab, Entry) of
        next ->
            Next = fraghash_grow_machine:next_phase(move, Phase),
            ok = fraghash_journal:set_phase(Tab, Entry, Next),
            run_phases(Tab, Entry#{phase => Next});
        done ->
            {atomic, ok};
        {aborted, _} = Aborted ->
            Aborted
    end.

phase(copying, Tab, #{replicas := Replicas} = Entry) ->
    step(Tab, move_copy),
    %% Files or a backend's table a copy of that name left on `To' would
    %% become the new copy's contents.
    [ok = forget_on(To, F) || #{frag := F, to := To} <- Replicas],
    ok = fraghash_grow_progress:phase(Tab, copying,
                                      lists:sum([records(F) || #{frag := F} <- Replicas])),
    case add_copies(Tab, Replicas, []) of
        ok ->
            step(Tab, move_copied),
            ok = complete(Replicas),
            next;
        {aborted, Reason, Added} ->
            ok = undo(Tab, Entry, Added),
            #{to := To} = hd(Replicas),
            refuse(copy_failed, "Mnesia could not add a copy on ~s (~0tP): the move is "
                   "undone, nothing lost; move again once ~s and every node holding the "
                   "fragment run Mnesia with this node, their tables loaded",
                   [To, Reason, 20, To])
    end;
phase(dropping, Tab, #{replicas := Replicas} = Entry) ->
    step(Tab, move_drop),
    [ok = drop_old(R) || R <- Replicas],
    step(Tab, move_dropped),
    ok = finish(Tab, Entry),
    done.

add_copies(_Tab, [], _Added) ->
    ok;
add_copies(Tab, [#{frag := F, to := To, type := Type} = R | Rest], Added) ->
    case add_copy(Tab, F, To, Type) of
        {atomic, ok} -> add_copies(Tab, Rest, [R | Added]);
        {aborted, Reason} -> {aborted, Reason, Added}
    end.

%% `mnesia:add_table_copy(F, To, Type)', in a process linked to this one
%% (so that it dies with the operation, as a call made here would), while
%% this one counts the records the new copy holds once a second for the
%% operation's progress: a long load shows whether it advances.
add_copy(Tab, F, To, Type) ->
    Self = self(),
    Adder = spawn_link(fun() -> Self ! {self(), added, mnesia:add_table_copy(F, To, Type)} end),
    await_copy(Tab, F, To, Adder, 0).

await_copy(Tab, F, To, Adder, Counted) ->
    receive
        {Adder, added, Result} ->
            _ = count_loaded(Tab, F, To, Counted),
            Result
    after 1000 ->
            await_copy(Tab, F, To, Adder, count_loaded(Tab, F, To, Counted))
    end.

%% Reports the records `To''s copy of `F' gained since `Counted' (as
%% Mnesia counts them there while it loads the copy: 0 before the copy
%% exists); what it holds now.
count_loaded(Tab, F, To, Counted) ->
    Now = fraghash_tab:records_on(To, F, 5000),
    fraghash_grow_progress:chunk(Tab, 0, max(0, Now - Counted)),
    max(Now, Counted).

%% The old copy of replica `R' goes.
drop_old(#{frag := F, from := From}) ->
    drop_copy(F, From).

%% `Node''s copy of `F' goes, once every other copy of `F' (a move's new
%% one among them) is active and what `F' holds is durable where it is
%% held.
drop_copy(F, Node) ->
    ok = complete(F, [Node]),
    del_copy(F, Node).

%% Deletes `Node''s copy of `F' (gone already is done). A copy the schema
%% lists on a running node that is not active a few seconds on is one a
%% restart's schema merge brought back after its delete (see
%% `fraghash_grow_schema:drop_unloaded_copy/2'), deleted so.
del_copy(F, Node) ->
    case lists:keymember(Node, 1, copies(F)) of
        false ->
            ok;
        true ->
            Running = lists:member(Node, mnesia:system_info(running_db_nodes)),
            Loaded = Running andalso
                active(F, [], erlang:monotonic_time(millisecond) + ?UNLOADED_MS) =:= ok,
            Deleted = case Running andalso not Loaded of
                          true ->
                              logger:warning("fraghash: the copy of ~s on ~s, listed but not "
                                             "loaded there, is deleted from the schema", [F, Node]),
                              fraghash_grow_schema:drop_unloaded_copy(F, Node);
                          false ->
                              mnesia:del_table_copy(F, Node)
                      end,
            case Deleted of
                {atomic, ok} -> ok;
                {aborted, {no_exists, F, Node}} -> ok;
                {aborted, Reason} -> error({fraghash, drop_failed, F, Node, Reason})
            end
    end.

%% Each new copy is active (loaded, read and written), with every other
%% copy of its fragment (Mnesia deletes a copy only then), and what the
%% fragment holds is durable on every node holding a copy.
complete(Replicas) ->
    [ok = complete(F, []) || #{frag := F} <- Replicas],
    ok.

%% Every copy of `F' but those on `Except' is active, and what `F' holds
%% is durable where it is held.
complete(F, Except) ->
    ok = case active(F, Except, erlang:monotonic_time(millisecond) + ?ACTIVE_MS) of
             ok -> ok;
             {not_active, Loading} -> error({fraghash, copy_not_active, not_active(F, Loading)})
         end,
    fraghash_durable:tables([F]).

not_active(F, Loading) ->
    lists:flatten(io_lib:format("the copies of ~s on ~0p were not active after ~b s: restart "
                                "Mnesia there (or wait for its tables), then "
                                "fraghash_frag:recover/0", [F, Loading, ?ACTIVE_MS div 1000])).

%% `ok' once every copy of `F' but those on `Except' is active, or
%% `{not_active, Nodes}' at `Deadline'.
active(F, Except, Deadline) ->
    case [N || {N, _} <- copies(F)] -- (Except ++ mnesia:table_info(F, active_replicas)) of
        [] ->
            ok;
        Loading ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true ->
                    {not_active, Loading};
                false ->
                    timer:sleep(100),
                    active(F, Except, Deadline)
            end
    end.

%% The old copies are gone: what was left of them on `From' goes, what
%% the fragments hold is synced where they are held, the entry goes.
finish(Tab, #{replicas := Replicas}) ->
    ok = settle(Replicas, [{F, From} || #{frag := F, from := From} <- Replicas], ?BACK_TRIES),
    step(Tab, move_done),
    fraghash_journal:delete(Tab).

%% Deletes the new copies `Added' (the old ones hold every record), what
%% they left on `To', and the entry.
undo(Tab, #{replicas := Replicas}, Added) ->
    step(Tab, move_rollback),
    [ok = drop_copy(F, To) || #{frag := F, to := To} <- Added],
    ok = settle(Replicas, [{F, To} || #{frag := F, to := To} <- Replicas], ?BACK_TRIES),
    fraghash_journal:delete(Tab).

%% The copies of `Gone' (`{Frag, Node}' each) deleted for good, before
%% the entry goes: what they left on their nodes goes, what the
%% fragments hold and the schema are durable on every node, every node
%% runs, and a copy listed again meanwhile (`came_back/2') is deleted
%% again and all of it done again.
settle(Replicas, Gone, Tries) ->
    [ok = forget_on(Node, F) || {F, Node} <- Gone],
    ok = schema_durable(Replicas),
    ok = schema_everywhere(Replicas),
    case came_back(Gone, Tries) of
        [] ->
            ok;
        Back ->
            [ok = drop_copy(F, Node) || {F, Node} <- Back],
            settle(Replicas, Gone, Tries - 1)
    end.

%% The copies of `Gone' (`{Frag, Node}' each, deleted by the move) that
%% the schema lists again, once every node runs and the schema is durable
%% on each: a node killed before its disc kept the delete, and started
%% again since, brings its copy back into the schema (Mnesia's merge), and
%% once the entry is gone no recovery would delete it; checked after the
%% schema is durable everywhere, an empty answer stays true, since a
%% restart then finds the delete on the node's disc. After `Tries'
%% deletes again, the entry stays for `recover/0'.
came_back(Gone, Tries) ->
    case [FN || {F, Node} = FN <- Gone, lists:keymember(Node, 1, copies(F))] of
        [] ->
            [];
        Back when Tries > 0 ->
            logger:warning("fraghash: ~0p, deleted by a move, listed again (a node that had "
                           "not kept the delete restarted): deleted again", [Back]),
            Back;
        Back ->
            error(fraghash_error:new(copies_back,
                                     "the copies ~0p deleted by a move came back ~b times: "
                                     "once their nodes stay up, fraghash_frag:recover/0 "
                                     "finishes the move", [Back, ?BACK_TRIES]))
    end.

%% What the fragments hold, and the schema (every copy deleted), durable on
%% every disc node: a node whose disc had not kept a `del_table_copy' when
%% it was killed brings the deleted copy back into the schema at its
%% restart (see `fraghash_grow_schema:drop_unloaded_copy/2'), and once the
%% entry is gone no recovery would delete it again.
schema_durable(Replicas) ->
    fraghash_durable:tables([schema | [F || #{frag := F} <- Replicas]]).

%% Every node of the schema runs Mnesia with this one, so every node has
%% the move's schema changes and, with `schema_durable/1' before, keeps
%% them. A node down since the move began, or killed during it, may not
%% (a kill after a `del_table_copy' committed, before the node's disc kept
%% it): at its start it would list the deleted copy again, on a node that
%% never loads it, and only the entry lets recovery delete it. So the
%% entry stays until every node runs.
schema_everywhere(Replicas) ->
    case mnesia:system_info(db_nodes) -- mnesia:system_info(running_db_nodes) of
        [] ->
            ok;
        Down ->
            error(fraghash_error:new(nodes_not_running,
                                     "Mnesia is not running with this node on ~0p, which may "
                                     "have missed the move of ~0p: start Mnesia there, then "
                                     "fraghash_frag:recover/0 finishes the move",
                                     [Down, [F || #{frag := F} <- Replicas]]))
    end.

%% What a table named `F' left on `Node', which holds no copy of it: its
%% files in Mnesia's directory, its table in a backend's store. A node
%% that does not answer keeps them, and they go before it gets a copy.
forget_on(Node, F) ->
    case lists:keymember(Node, 1, copies(F)) of
        true -> ok;
        false -> _ = rpc:call(Node, fraghash_frag_recovery, remove_local_leftovers, [F]), ok
    end.

%%% Recovering

%% @doc Finishes or undoes the move of journal entry `Entry' on `Tab', as
%% the state machine decides for each replica from the entry's phase and
%% the fragment's copies (`fraghash_grow_machine:recovery/3').
-spec recover(atom(), map()) -> ok | {error, term()}.
recover(Tab, #{phase := Phase, replicas := Replicas} = Entry) ->
    step(Tab, move_recover),
    Decided = [{R, fraghash_grow_machine:recovery(
                     move, Phase, fraghash_grow_machine:observe(move, {From, To, Type},
                                                                copies(F)))}
               || #{frag := F, from := From, to := To, type := Type} = R <- Replicas],
    Actions = lists:usort([A || {_, A} <- Decided]),
    case {Actions -- [forget, rollback], Actions -- [drop, finish]} of
        {[], _} ->
            %% Undo: each new copy that exists goes.
            undo(Tab, Entry, [R || {R, rollback} <- Decided]);
        {_, []} ->
            %% Forward: each old copy still there goes.
            [ok = drop_old(R) || {R, drop} <- Decided],
            step(Tab, move_dropped),
            finish(Tab, Entry);
        _ ->
            %% A copy the move neither started from nor makes, or replicas
            %% that disagree: the entry cannot say what to do.
            [{#{frag := F}, _} | _] = [D || {_, A} = D <- Decided, A =:= unexpected] ++ Decided,
            #{from := From, to := To} = hd(Replicas),
            {error, fraghash_error:new(unexpected_copies,
                                       "~s's move from ~s to ~s (~s) found ~s with copies ~0p, "
                                       "which it neither started from nor makes: check the "
                                       "table's copies, then delete its journal entry "
                                       "(fraghash_journal:delete(~s))",
                                       [Tab, From, To, Phase, F, copies(F), Tab])}
    end.

%%% Drain and rebalance

%% @doc Moves every copy `Node' holds of a fragment of `Tab' or of its
%% foreign-key tables onto the other nodes of `Tab''s node pool, each to
%% one of least load that holds none (`fraghash_move_plan:drain/3'), one
%% move at a time. `{atomic, Moves}' (`{Fragment, Node, To}' each), or the
%% first refusal (the moves before it are done).
-spec drain(atom(), node()) -> {atomic, [{atom(), node(), node()}]} | {aborted, term()}.
drain(Tab, Node) ->
    case lists:member(Node, mnesia:system_info(running_db_nodes)) of
        false ->
            refuse(node_not_running, "Mnesia is not running with this node on ~s: its copies "
                   "can only be moved while it runs (start it, then drain it)", [Node]);
        true ->
            drain_tables(Tab, group(Tab), Node, [])
    end.

%% The table's own fragments first, each taking its foreign-key
%% fragments along; then what a foreign-key table still has on `Node'.
drain_tables(_Tab, [], _Node, Done) ->
    {atomic, Done};
drain_tables(Tab, [T | Ts], Node, Done) ->
    Pool = pool(Tab),
    case fraghash_move_plan:drain(units(Tab, T), Pool, Node) of
        {ok, Plan} ->
            case run_plan(Tab, T, Plan, Done) of
                {atomic, Done2} -> drain_tables(Tab, Ts, Node, Done2);
                Aborted -> Aborted
            end;
        {error, {no_room, I}} ->
            refuse(no_room, "every other node of ~s's pool ~0p holds a copy of ~s already: "
                   "add a node to the pool (mnesia:change_table_frag(~s, {add_node, Node})), "
                   "then drain ~s", [Tab, Pool, frag_name(T, I), Tab, Node])
    end.

%% @doc Plans the moves that bring each node of `Tab''s pool within 10% of
%% the mean of the records held (`fraghash_move_plan:rebalance/2', the
%% table's group counted together), and runs them unless `Opts' holds
%% `dry_run'. `{atomic, Plan}': `moves' (`{Fragment, From, To}', in
%% order), `loads_before' and `loads_after' (`{Node, Records}' each),
%% `mean',
%% `within' (whether every node ends within 10%), `done' (whether the moves
%% ran); or the first refusal (the moves before it are done).
-spec rebalance(atom(), [dry_run]) -> {atomic, map()} | {aborted, term()}.
rebalance(Tab, Opts) ->
    Pool = pool(Tab),
    Units = units(Tab, Tab),
    Plan = fraghash_move_plan:rebalance(Units, Pool),
    After = lists:foldl(fun({I, From, To}, Us) ->
                                [case U of
                                     #{unit := I, copies := C} ->
                                         {From, Type} = lists:keyfind(From, 1, C),
                                         U#{copies := [{To, Type} | lists:keydelete(From, 1, C)]};
                                     _ ->
                                         U
                                 end || U <- Us]
                        end, Units, Plan),
    Report = #{moves => [{frag_name(Tab, I), From, To} || {I, From, To} <- Plan],
               loads_before => fraghash_move_plan:loads(Units, Pool),
               loads_after => fraghash_move_plan:loads(After, Pool),
               mean => fraghash_move_plan:mean(Units, Pool),
               within => fraghash_move_plan:within(After, Pool, 0.1)},
    case lists:member(dry_run, Opts) of
        true ->
            {atomic, Report#{done => false}};
        false ->
            case run_plan(Tab, Tab, Plan, []) of
                {atomic, _} -> {atomic, Report#{done => true}};
                Aborted -> Aborted
            end
    end.

%% Runs the moves of a plan for the fragments of `T', one after another.
run_plan(_Tab, _T, [], Done) ->
    {atomic, Done};
run_plan(Tab, T, [{I, From, To} | Rest], Done) ->
    Frag = frag_name(T, I),
    case run_move(Tab, replicas(Tab, Frag, From, To)) of
        {atomic, ok} -> run_plan(Tab, T, Rest, Done ++ [{Frag, From, To}]);
        Aborted -> Aborted
    end.

%% The planner's units of table `T' of `Tab''s group: per fragment number,
%% its records (with the same-numbered fragments of the foreign-key tables
%% when `T' is `Tab', which move with it) and `T''s fragment's copies.
units(Tab, T) ->
    {_, _, N} = fraghash_tab:hash(T),
    Along = case T of
                Tab -> group(Tab);
                _ -> [T]
            end,
    [#{unit => I, copies => copies(frag_name(T, I)),
       records => lists:sum([records(frag_name(G, I)) || G <- Along])}
     || I <- lists:seq(1, N)].

%% `Tab' and its foreign-key tables.
group(Tab) ->
    [Tab | lists:sort(fraghash_grow_schema:foreigners(Tab))].

pool(Tab) ->
    proplists:get_value(node_pool, mnesia:table_info(Tab, frag_properties), []).

%% `{Base, I}' for fragment `I' of `Base', or `none'.
frag_number(Frag) ->
    Props = mnesia:table_info(Frag, frag_properties),
    Base = proplists:get_value(base_table, Props, Frag),
    {_, _, N} = fraghash_tab:hash(Base),
    case [I || I <- lists:seq(1, N), frag_name(Base, I) =:= Frag] of
        [I] -> {Base, I};
        [] -> none
    end.

refuse(Reason, Format, Args) ->
    {aborted, fraghash_error:new(Reason, Format, Args)}.
