%% @doc Crash-safe `add_frag' and `del_frag' for fragmented tables of every
%% storage type (`disc_copies', `disc_only_copies', `ram_copies' and the
%% `redb_copies' backend), with any hash module (`mnesia_frag_hash'
%% included), and the recovery that finishes or undoes an operation a
%% crash interrupted. The safety argument, step by step, is in
%% docs/mnesia-disc-safety.md.
%%
%% This module is the facade: one operation per table at a time,
%% cluster-wide, recovery of an interrupted one first, and answers that
%% say what to do. The add and the del are `fraghash_grow''s: their
%% records move in ordinary, batched
%% transactions while writers keep going, and no schema change carries a
%% record (Mnesia 4.21.3 does not always bring to disc the record moves of
%% `mnesia:change_table_frag/2''s schema transaction). Both write their
%% phases to a journal (`fraghash_journal') that {@link recover/0} reads
%% after a crash.
%%
%% With Mnesia not running on this node, every call that reads a table
%% answers `{fraghash, mnesia_not_running, Text}' in its own error form:
%% `{aborted, _}' for the operations, `{error, _}' for recovery and the
%% inspections, raised by those that have no error form (`hash/1',
%% `stale_copies/1', `loadable_tables/0').
-module(fraghash_frag).

-export([add_frag/2, relieve/3, del_frag/1, change_hash_module/2, change_hash_module/3,
         recover/0, recover/1, loadable_tables/0, check_replicas/1, repair_replicas/1,
         stale_copies/1, repair/1,
         hash/1, frag_name/2, disc_bytes/1, set_step_hook/1]).
-export([distribution/1, info/1, operations/0, set_progress_hook/1]).
-export([move_replica/3, drain/2, rebalance/1, rebalance/2]).



%%% API

%% @doc Adds a fragment to `Tab' on `Nodes', as
%% `mnesia:change_table_frag(Tab, {add_frag, Nodes})' does, crash-safely.
%% Returns only once the new layout is on disc. Finishes or undoes an
%% interrupted operation on `Tab' first.
%% `Nodes' is a list of nodes, or a `frag_dist' as Mnesia takes it
%% (`[{Node, Count}]'); anything else is refused (`bad_nodes').
-spec add_frag(atom(), [node()] | [{node(), integer()}]) -> {atomic, ok} | {aborted, term()}.
add_frag(Tab, Nodes) ->
    with_nodes(Nodes, fun() -> operation(Tab, fun() -> fraghash_grow:add_frag(Tab, Nodes, none) end)
                      end).

%% @doc `mnesia_frag_slots' only: adds a fragment on `Nodes' that takes half
%% of one fragment's slots and nothing else, so that fragment halves and
%% only it is scanned; `Which' is a fragment number or `largest' (the one
%% with the most records, as `mnesia:table_info(F, size)' counts them on
%% every storage type). `Nodes' as for {@link add_frag/2}. Crash-safe as
%% {@link add_frag/2}.
-spec relieve(atom(), [node()] | [{node(), integer()}], pos_integer() | largest) ->
          {atomic, ok} | {aborted, term()}.
relieve(Tab, Nodes, Which) ->
    with_nodes(Nodes, fun() -> operation(Tab, fun() -> do_relieve(Tab, Nodes, Which) end) end).

do_relieve(Tab, Nodes, Which) ->
    case {hash(Tab), Which} of
        {{mnesia_frag_slots, _, _}, largest} ->
            fraghash_grow:add_frag(Tab, Nodes, {Tab, largest(Tab)});
        {{mnesia_frag_slots, _, N}, F} when is_integer(F), F >= 1, F =< N ->
            fraghash_grow:add_frag(Tab, Nodes, {Tab, F});
        {{mnesia_frag_slots, _, N}, _} ->
            {aborted, fraghash_error:new(no_such_fragment,
                                         "~s has fragments 1..~b: name one of them "
                                         "or largest", [Tab, N])};
        {{Mod, _, _}, _} ->
            {aborted, fraghash_error:new(relieve_needs_slots,
                                         "~s uses ~s; only mnesia_frag_slots can "
                                         "relieve one fragment: use add_frag/2",
                                         [Tab, Mod])}
    end.

%% @doc Removes the last fragment of `Tab', as
%% `mnesia:change_table_frag(Tab, del_frag)' does, crash-safely. Returns
%% only once the new layout is on disc.
-spec del_frag(atom()) -> {atomic, ok} | {aborted, term()}.
del_frag(Tab) ->
    operation(Tab, fun() -> do_del_frag(Tab) end).

%% @doc {@link change_hash_module/3} with Mnesia's default initial state
%% (`undefined', as a table created without `hash_state' gets).
-spec change_hash_module(atom(), module()) -> {atomic, ok} | {aborted, term()}.
change_hash_module(Tab, Mod) ->
    change_hash_module(Tab, Mod, undefined).

%% @doc Moves `Tab' to hash module `Mod' (for example from
%% `mnesia_frag_hash' to `mnesia_frag_slots'), online and crash-safely, as
%% an operation of the growth path: the new state is
%% `Mod:init_state(Tab, InitArg)' grown to the table's fragment count, as
%% Mnesia builds it for a new table (for fraghash's modules `InitArg' is
%% the options list, see `fraghash_mnesia'); every record the new module
%% places in another fragment is copied there while writers go on, the
%% module and state switch at once, and the copies left behind are
%% deleted. A table with foreign-key tables is refused
%% (`rehash_foreign_keys'), as is a module without the five
%% `mnesia_frag_hash' callbacks (`bad_hash_module').
-spec change_hash_module(atom(), module(), term()) -> {atomic, ok} | {aborted, term()}.
change_hash_module(Tab, Mod, InitArg) ->
    Callbacks = [{init_state, 2}, {add_frag, 1}, {del_frag, 1}, {key_to_frag_number, 2},
                 {match_spec_to_frag_numbers, 2}],
    case is_atom(Mod) andalso code:ensure_loaded(Mod) =:= {module, Mod} andalso
        lists:all(fun({F, A}) -> erlang:function_exported(Mod, F, A) end, Callbacks) of
        true ->
            operation(Tab, fun() -> fraghash_grow:rehash(Tab, Mod, InitArg) end);
        false ->
            {aborted, fraghash_error:new(bad_hash_module,
                                         "~0tp is not a loadable module with the five "
                                         "mnesia_frag_hash callbacks: name one "
                                         "(mnesia_frag_slots, say)", [Mod])}
    end.

%% @doc The tables to wait for after `mnesia:start()', before {@link
%% recover/0}: every table but a fragment table beyond its table's count.
%% Such a table is left when a node is killed just after a change that
%% deleted it, before Mnesia dumped its log: at the next start the table is
%% in the schema again, and on a cluster no node may load it, so waiting
%% for it would never end. `recover/0' deletes it.
-spec loadable_tables() -> [atom()].
loadable_tables() ->
    when_running(fun loadable/0, fun raise/1).

loadable() ->
    Orphans = [Frag || {_Base, Frag} <- fraghash_tab:orphans()],
    [T || T <- mnesia:system_info(tables), not lists:member(T, Orphans)].

%% @doc Finishes or undoes every operation a crash interrupted. Call it once
%% after `mnesia:start()' and `mnesia:wait_for_tables(loadable_tables(), T)'
%% (see {@link loadable_tables/0}), before using fragmented disc tables
%% grown or shrunk by this module. Idempotent, and
%% safe to interrupt: a crash during recovery is recovered the same way.
%% Then compares the copies of every fragmented table ({@link
%% check_replicas/1}, which reads every record of each fragment held by two
%% running nodes or more): `{error, [{Tab, Error}]}' lists each table whose
%% recovery failed or whose copies differ
%% (`{error, {fraghash, replicas_differ, Text}}').
-spec recover() -> ok | {error, term()}.
recover() ->
    when_running(fun recover_checked/0, fun(Reason) -> {error, Reason} end).

recover_checked() ->
    case catch fraghash_durable:check_log() of
        ok -> recover_all();
        {'EXIT', {{fraghash, restart_mnesia, _} = Reason, _}} -> {error, Reason}
    end.

recover_all() ->
    case fraghash_journal:ensure() of
        ok ->
            Recovered = [{T, recover(T)} || T <- fraghash_journal:pending()],
            ok = fraghash_grow_moved:sweep(),
            %% Every table with no operation left, those just recovered
            %% included: a partition's heal can bring back a fragment table
            %% beyond the count of a table whose entry names another
            %% operation (one started on one side after the other side's
            %% add had created that fragment).
            Swept = [{T, global:trans(lock(T), fun() -> fraghash_frag_recovery:sweep(T) end)}
                     || T <- fraghash_frag_recovery:fragmented(),
                        proplists:get_value(T, Recovered, ok) =:= ok],
            %% Then the copies of each table so recovered, compared.
            Checked = [{T, check_replicas(T)} || {T, ok} <- Swept],
            case [TR || {_T, R} = TR <- Recovered ++ Swept ++ Checked, R =/= ok] of
                [] -> ok;
                Bad -> {error, Bad}
            end;
        Error ->
            Error
    end.

%% @doc Finishes or undoes the interrupted operation on `Tab', if any. Holds
%% the table's cluster-wide lock, as every operation does: recovery started
%% on two nodes at once (after both restarted), or on one node while the
%% other runs an operation, takes turns, and the later one finds the entry
%% gone.
-spec recover(atom()) -> ok | {error, term()}.
recover(Tab) ->
    when_running(fun() -> global:trans(lock(Tab), fun() -> recover_locked(Tab) end) end,
                 fun(Reason) -> {error, Reason} end).

%% The lock of `Tab''s operations and recovery, cluster-wide.
lock(Tab) ->
    {{?MODULE, Tab}, self()}.

recover_locked(Tab) ->
    try
        ok = fraghash_durable:check_log(),
        ok = fraghash_journal:ensure(),
        case fraghash_journal:read(Tab) of
            none -> ok;
            stale -> fraghash_journal:delete(Tab);
            #{version := 2, op := Op} = Entry when Op =:= add; Op =:= del; Op =:= rehash ->
                fraghash_grow:recover(Tab, Entry);
            #{version := 2, op := move} = Entry ->
                fraghash_move:recover(Tab, Entry);
            #{op := Op} -> {error, unknown_entry(Tab, Op)}
        end
    catch
        %% A step that failed (a full disc, Mnesia stopping): the entry
        %% stays, and the reason says what to do before the next try.
        error:Reason:Stack -> {error, interrupted(Tab, Reason, Stack)};
        exit:{aborted, Reason} -> {error, element(2, answer(Tab, {aborted, Reason}))}
    end.

%% @doc Whether the copies of each fragment of `Tab' held by nodes where
%% Mnesia runs with this one hold the same records: `ok', or `{error,
%% {fraghash, replicas_differ, Text}}' naming each fragment that differs,
%% its nodes and their record counts, and what to do. Copies differ after
%% the heal of a partition that a write crossed (see
%% docs/mnesia-disc-safety.md). Reads every record of each fragment on each
%% running node holding it (the holders of a fragment in parallel, under a
%% read lock on the fragment, which its writers wait for), under the
%% table's lock, which operations wait for: O(records of the table) per
%% copy, about as long as reading the table once. {@link recover/0} runs it
%% on every fragmented table, and {@link repair_replicas/1} makes copies
%% that differ agree. See {@link fraghash_frag_info:replicas/1} for
%% the counts and digests themselves.
-spec check_replicas(atom()) -> ok | {error, {fraghash, atom(), string()}}.
check_replicas(Tab) ->
    when_running(fun() ->
                         global:trans(lock(Tab), fun() -> fraghash_replicas:running(Tab) end)
                 end, fun(Reason) -> {error, Reason} end).

%% @doc Makes the copies of each fragment of `Tab' held by nodes where
%% Mnesia runs with this one agree, key by key, where {@link
%% check_replicas/1} finds them differing: a record one copy lacks is
%% written to every copy; a `set' key held with different records keeps
%% the one most copies hold; a `bag' key keeps every record any copy
%% holds. `{ok, Settled}' lists each key rewritten (`fragment', `key',
%% `copies' as each held it, `kept'), after which the copies agree; `{error,
%% Reason}' otherwise. Copies come apart when Mnesia resolves a
%% transaction whose coordinating node was cut off or killed differently on
%% two participants (docs/mnesia-cluster.md); no write acknowledged by
%% {@link fraghash_durable:tables/1} is among such differences, so none is
%% undone. Under the table's lock; see {@link fraghash_replicas:repair/1}
%% for the cost.
-spec repair_replicas(atom()) -> {ok, [map()]} | {error, term()}.
repair_replicas(Tab) ->
    when_running(fun() -> global:trans(lock(Tab), fun() -> fraghash_replicas:repair(Tab) end) end,
                 fun(Reason) -> {error, Reason} end).

%% @doc How many records sit in a fragment other than the one
%% `key_to_frag_number' names (0 for a healthy table).
-spec stale_copies(atom()) -> non_neg_integer().
stale_copies(Tab) ->
    when_running(fun() -> length(fraghash_tab:misplaced(Tab)) end, fun raise/1).

%% @doc Removes stale copies: a misplaced record whose key is also in its
%% right fragment is deleted; one that is not is moved there. Returns how
%% many records it fixed. For tables hit by plain `change_table_frag'; the
%% safe path never leaves any behind.
-spec repair(atom()) -> {atomic, non_neg_integer()} | {aborted, term()}.
repair(Tab) ->
    when_running(fun() ->
                         Bad = fraghash_tab:misplaced(Tab),
                         case fraghash_tab:move_misplaced(Bad) of
                             {atomic, ok} -> {atomic, length(Bad)};
                             Aborted -> Aborted
                         end
                 end, fun(Reason) -> {aborted, Reason} end).

%% @doc A fragmented table's hash module, hash state and fragment count, as
%% its `frag_properties' give them on this node.
-spec hash(atom()) -> {module(), term(), pos_integer()}.
hash(Tab) -> when_running(fun() -> fraghash_tab:hash(Tab) end, fun raise/1).

%% @doc The name of fragment `N' of `Tab' (Mnesia's naming).
-spec frag_name(atom(), pos_integer()) -> atom().
frag_name(Tab, N) -> fraghash_tab:frag_name(Tab, N).

%% @doc Installs `Fun(Tab, Step)', called at each step of an operation or a
%% recovery (`undefined' removes it): for tracing, and for the kill -9 tests,
%% which log the steps to know where a kill landed.
-spec set_step_hook(fun((atom(), atom()) -> any()) | undefined) -> ok.
set_step_hook(Fun) -> fraghash_tab:set_step_hook(Fun).

%%% Moving replicas (fraghash_move)

%% @doc Moves the copy of fragment table `Frag' (`Tab_fragN', or `Tab'
%% itself for fragment 1) on node `From' to node `To' of its table's node
%% pool, of the same storage type, online: the new copy is loaded (Mnesia
%% copies it while writers go on), active and durable before the old one
%% is deleted. The same-numbered fragments of the table's foreign-key
%% tables that `From' holds and `To' does not go along. Journaled and
%% crash-safe as {@link add_frag/2}, serialized with the table's other
%% operations. Refused (`{aborted, {fraghash, Reason, Text}}') for a node
%% not in the pool (`node_not_in_pool'), `From' holding no copy
%% (`not_held'), `To' holding one (`already_held'), a node where Mnesia
%% does not run (`holders_not_running'; any other node of the schema:
%% `nodes_not_running'). See docs/mnesia-cluster.md.
-spec move_replica(atom(), node(), node()) -> {atomic, ok} | {aborted, term()}.
move_replica(Frag, From, To) ->
    when_running(fun() ->
                         case fraghash_move:base(Frag) of
                             {ok, Tab} ->
                                 operation(Tab, fun() ->
                                                        fraghash_move:move_replica(Tab, Frag,
                                                                                   From, To)
                                                end);
                             Refused ->
                                 Refused
                         end
                 end, fun(Reason) -> {aborted, Reason} end).

%% @doc Moves every copy `Node' holds of a fragment of `Tab' (and of its
%% foreign-key tables) onto the other nodes of `Tab''s node pool, each
%% fragment keeping its number of copies of each storage type, one move
%% ({@link move_replica/3}) at a time, each to a node of least load that
%% holds none. `{atomic, Moves}' (`{Fragment, Node, To}' each): `Node'
%% then holds nothing of the table (it stays in the pool:
%% `mnesia:change_table_frag(Tab, {del_node, Node})' keeps new fragments
%% off it). Refused when no other pool node can take a copy (`no_room').
-spec drain(atom(), node()) -> {atomic, [{atom(), node(), node()}]} | {aborted, term()}.
drain(Tab, Node) ->
    operation(Tab, fun() -> fraghash_move:drain(Tab, Node) end).

%% @doc {@link rebalance/2} with no option.
-spec rebalance(atom()) -> {atomic, map()} | {aborted, term()}.
rebalance(Tab) ->
    rebalance(Tab, []).

%% @doc Moves copies of `Tab''s fragments between the nodes of its node
%% pool until each holds a share of the records (`mnesia:table_info(F,
%% size)' of each fragment it holds, foreign-key tables counted with
%% their master) within 10% of the mean, moving few records (a greedy
%% plan: see `fraghash_move_plan'), each fragment keeping its copies.
%% With `[dry_run]' only plans. `{atomic, Plan}': `moves'
%% (`{Fragment, From, To}', in order), `loads_before', `loads_after'
%% (`{Node, Records}'), `mean', `within' (whether the plan reaches the
%% band: fragments too few or too uneven may not), `done'.
-spec rebalance(atom(), [dry_run]) -> {atomic, map()} | {aborted, term()}.
rebalance(Tab, Opts) ->
    operation(Tab, fun() -> fraghash_move:rebalance(Tab, Opts) end).

%%% del_frag

do_del_frag(Tab) ->
    case hash(Tab) of
        {_, _, 1} ->
            {aborted, fraghash_error:new(last_fragment,
                                         "~s has one fragment, which a table keeps: "
                                         "there is none to remove", [Tab])};
        _ ->
            fraghash_grow:del_frag(Tab)
    end.

%% A journal entry of an operation this code does not know (one written by
%% an earlier version of fraghash): left as it is, with what to do.
unknown_entry(Tab, Op) ->
    fraghash_error:new(unknown_journal_entry,
                       "~s's journal entry names an operation (~0tp) that this "
                       "version of fraghash cannot finish: finish it with the "
                       "version that began it, then upgrade", [Tab, Op]).

%%% Internals

%% The fragment with the most records (the highest-numbered of those
%% tied). Records, not bytes: every storage type counts them alike, where
%% bytes are a dets file's size (which never shrinks, so the fragment
%% relieved last would stay the largest), an ets table's memory, or a
%% storage backend's own figure (`disc_bytes/1' found no file of a
%% `redb_copies' fragment, so every one weighed 0 and the last was taken).
%% Each is counted on a node holding it: Mnesia counts 0 records for a
%% table with no copy on the node asked (`fraghash_tab:records/1').
largest(Tab) ->
    {_, _, N} = hash(Tab),
    {_, F} = lists:max([{fraghash_tab:records(frag_name(Tab, F)), F}
                        || F <- lists:seq(1, N)]),
    F.

%% @doc The bytes a fragment's files take in Mnesia's directory on this
%% node (.DAT for disc_only_copies, .DCD plus .DCL for disc_copies).
-spec disc_bytes(atom()) -> non_neg_integer().
disc_bytes(Frag) ->
    Dir = mnesia:system_info(directory),
    lists:sum([filelib:file_size(filename:join(Dir, atom_to_list(Frag) ++ Ext))
               || Ext <- [".DAT", ".DCD", ".DCL"]]).

%% Runs `Call' once `Nodes' is a list of nodes or a `frag_dist'
%% (`[{Node, Count}]'); refuses anything else (a bare node, say) with a
%% reason, before anything is locked or written.
with_nodes(Nodes, Call) ->
    case nodes_or_dist(Nodes) of
        true ->
            Call();
        false ->
            {aborted, fraghash_error:new(bad_nodes,
                                         "the nodes for the new fragment must be a list of "
                                         "nodes (or a frag_dist, [{Node, Count}]), not ~0tp: "
                                         "write [~0tp]", [Nodes, Nodes])}
    end.

nodes_or_dist([]) -> true;
nodes_or_dist([Node | Rest]) -> node_or_dist(Node) andalso nodes_or_dist(Rest);
nodes_or_dist(_) -> false.

node_or_dist(Node) when is_atom(Node) -> true;
node_or_dist({Node, Count}) when is_atom(Node), is_integer(Count) -> true;
node_or_dist(_) -> false.

%% Runs `Call' when Mnesia runs on this node; else answers `Refuse' of
%% `{fraghash, mnesia_not_running, Text}', in the form of the caller's
%% other errors. (Without this, one call said `no_exists', others raised
%% Mnesia's `node_not_running' from deep inside.)
when_running(Call, Refuse) ->
    case mnesia:system_info(is_running) of
        yes ->
            Call();
        State ->
            Refuse(fraghash_error:new(mnesia_not_running,
                                      "Mnesia is not running on ~s (~s): start it "
                                      "(mnesia:start/0), wait for its tables, then call again",
                                      [node(), State]))
    end.

%% The error raised by a call whose answer has no error form of its own.
raise(Reason) ->
    error(Reason).

%% Operation `Op' on `Tab': alone on the table cluster-wide, after the
%% recovery of any interrupted one.
operation(Tab, Op) ->
    serialized(Tab, fun() -> with_recovery(Tab, Op) end).

with_recovery(Tab, Op) ->
    case recover_locked(Tab) of
        ok -> Op();
        {error, {fraghash, _, _} = Reason} -> {aborted, Reason};
        {error, Reason} -> answer(Tab, {aborted, {fraghash, recovery_failed, Reason}})
    end.

%% One safe operation per table at a time, cluster-wide; a table that does
%% not exist or is not fragmented is refused with a reason.
serialized(Tab, Fun) ->
    when_running(fun() -> serialized_running(Tab, Fun) end,
                 fun(Reason) -> {aborted, Reason} end).

serialized_running(Tab, Fun) ->
    case catch mnesia:table_info(Tab, frag_properties) of
        {'EXIT', _} ->
            {aborted, {no_exists, Tab}};
        [] ->
            {aborted, fraghash_error:new(not_fragmented,
                                         "~p is not a fragmented table", [Tab])};
        _ ->
            global:trans(lock(Tab),
                         fun() ->
                                 try
                                     ok = fraghash_durable:check_log(),
                                     answer(Tab, Fun())
                                 catch
                                     exit:Reason:Stack ->
                                         %% Mnesia's own abort is answered;
                                         %% so is a call into Mnesia while
                                         %% it stopped (a full disc stops
                                         %% it), whatever it raised for a
                                         %% table gone with it; any other
                                         %% exit goes on.
                                         case {mnesia:system_info(is_running), Reason} of
                                             {yes, {aborted, _}} -> answer(Tab, Reason);
                                             {yes, _} -> erlang:raise(exit, Reason, Stack);
                                             _ -> {aborted, interrupted(Tab, Reason, Stack)}
                                         end;
                                     error:Reason:Stack ->
                                         %% A step failed part way (a write or
                                         %% a sync that failed: a full disc, a
                                         %% node gone): its journal entry, if
                                         %% it wrote one, stays for recovery.
                                         {aborted, interrupted(Tab, Reason, Stack)}
                                 end
                         end)
    end.

%% An operation's answer, with Mnesia's own reasons for a full disc or for
%% stopping (which a full disc makes it do) turned into one line that says
%% what to do.
answer(Tab, {aborted, Reason} = Aborted) ->
    case {Reason, failure(Reason)} of
        {{fraghash, _, _}, _} -> Aborted;
        {_, none} -> Aborted;
        {_, Failure} -> {aborted, failed(Tab, Failure, "")}
    end;
answer(_Tab, Answer) ->
    Answer.

interrupted(Tab, Reason, [{M, F, A, _} | _]) ->
    Where = io_lib:format(" in ~s:~s/~b", [M, F, case A of _ when is_list(A) -> length(A);
                                                         _ -> A
                                                      end]),
    case {failure(Reason), mnesia:system_info(is_running)} of
        {none, yes} -> failed(Tab, {other, Reason}, Where);
        {none, _} -> failed(Tab, {mnesia_stopped, node()}, Where);
        {Failure, _} -> failed(Tab, Failure, Where)
    end.

failed(_Tab, {as_is, Reason}, _Where) ->
    Reason;
failed(Tab, {disc_full, File}, Where) ->
    fraghash_error:new(disc_full,
                       "a disc is full (~ts)~s while ~s changed: make room on it, "
                       "restart Mnesia if it stopped, then fraghash_frag:recover/0 "
                       "finishes or undoes the operation", [File, Where, Tab]);
failed(Tab, {io_error, File, Posix}, Where) ->
    fraghash_error:new(io_error,
                       "~ts: ~s~s while ~s changed: fix it, restart Mnesia if it "
                       "stopped, then fraghash_frag:recover/0 finishes or undoes the "
                       "operation", [File, file:format_error(Posix), Where, Tab]);
failed(Tab, {mnesia_stopped, Node}, Where) ->
    fraghash_error:new(mnesia_stopped,
                       "Mnesia stopped on ~s~s while ~s changed (its log says why; a "
                       "full disc stops it): fix the cause, start it, then "
                       "fraghash_frag:recover/0 finishes or undoes the operation",
                       [Node, Where, Tab]);
failed(Tab, {other, Reason}, Where) ->
    fraghash_error:new(interrupted,
                       "the operation on ~s stopped part way (~0tP~s): fix the cause, "
                       "then fraghash_frag:recover/0 finishes or undoes what it began",
                       [Tab, Reason, 14, Where]).

%% The first failure of a disc or of Mnesia found in an error term: `{disc_full,
%% File}', `{io_error, File, Posix}', `{mnesia_stopped, Node}', or `none'.
failure({fraghash, restart_mnesia, _} = Reason) ->
    {as_is, Reason};
failure({fraghash, orphan_not_loadable, _} = Reason) ->
    {as_is, Reason};
failure({fraghash, overloaded, _} = Reason) ->
    {as_is, Reason};
failure({fraghash, transactions_running, _} = Reason) ->
    {as_is, Reason};
failure({file_error, File, {Pos, Posix}}) when is_integer(Pos), is_atom(Posix) ->
    %% dets names the position too.
    failure({file_error, File, Posix});
failure({file_error, File, enospc}) ->
    {disc_full, text(File)};
failure({file_error, File, Posix}) when is_atom(Posix) ->
    {io_error, text(File), Posix};
failure({node_not_running, Node}) when is_atom(Node) ->
    {mnesia_stopped, Node};
failure(T) when is_tuple(T) ->
    failure(tuple_to_list(T));
failure(M) when is_map(M) ->
    failure(maps:to_list(M));
failure([H | T]) ->
    case failure(H) of
        none -> failure(T);
        Found -> Found
    end;
failure(_) ->
    none.

text(A) when is_atom(A) -> atom_to_list(A);
text(S) -> try unicode:characters_to_list(S) catch _:_ -> io_lib:format("~0tp", [S]) end.

%%% What a table looks like (fraghash_frag_info)

%% @doc Records and bytes per fragment, and how even they are: see
%% {@link fraghash_frag_info:distribution/1}.
%% `{error, {fraghash, mnesia_not_running, Text}}' when Mnesia is not
%% running here.
-spec distribution(atom()) -> map() | {error, {fraghash, atom(), string()}}.
distribution(Tab) ->
    when_running(fun() -> fraghash_frag_info:distribution(Tab) end,
                 fun(Reason) -> {error, Reason} end).

%% @doc A fragmented table's hash module, fragment count and hash state:
%% see {@link fraghash_frag_info:info/1}.
%% `{error, {fraghash, mnesia_not_running, Text}}' when Mnesia is not
%% running here.
-spec info(atom()) -> map() | {error, {fraghash, atom(), string()}}.
info(Tab) ->
    when_running(fun() -> fraghash_frag_info:info(Tab) end, fun(Reason) -> {error, Reason} end).

%% @doc The growth operations pending or under way, with their progress:
%% see {@link fraghash_frag_info:operations/0}.
%% `{error, {fraghash, mnesia_not_running, Text}}' when Mnesia is not
%% running here.
-spec operations() -> [map()] | {error, {fraghash, atom(), string()}}.
operations() ->
    when_running(fun fraghash_frag_info:operations/0, fun(Reason) -> {error, Reason} end).

%% @doc Installs `Fun(Report)', called in an operation's process with its
%% progress (a map, as {@link operations/0} gives them) at each phase and
%% at most once a second while it runs; `undefined' removes it. The same
%% is told to `logger' every 10 s (level `notice') and at each phase
%% (`info').
-spec set_progress_hook(fun((map()) -> any()) | undefined) -> ok.
set_progress_hook(Fun) -> fraghash_grow_progress:set_hook(Fun).
