%% @doc Crash-safe `add_frag' and `del_frag' for fragmented `disc_copies'
%% and `disc_only_copies' tables, with any hash module (`mnesia_frag_hash'
%% included), and the recovery that finishes or undoes an operation a
%% crash interrupted. The safety argument, step by step, is in
%% docs/mnesia-disc-safety.md.
%%
%% The add and the del of a `set' or `ordered_set' table without
%% `disc_only_copies' fragments or foreign keys are `fraghash_grow''s and
%% `fraghash_grow_del''s: their records move in ordinary transactions and
%% no schema change carries a record. Those of `disc_only_copies' and `bag'
%% tables are this module's, in short:
%%
%% Mnesia 4.21.3 (OTP 25) does not always bring to disc the record moves
%% that `mnesia:change_table_frag/2' makes inside its schema transaction: a
%% fragment that Mnesia dumps from RAM while it applies the schema change
%% (`mnesia_dumper:open_disc_copies') skips them. Such a dump can only
%% happen to a fragment that existed before the operation, never to the
%% one an `add_frag' creates, and what it skips are the writes into and
%% the deletes from existing fragments. So:
%% <ul>
%% <li>`del_frag' first copies every record that will move into the
%% fragment it moves to, in ordinary transactions (hidden copies: the hash
%% module still routes those keys to their old fragment), then runs the
%% schema change, which checks under its table locks that each of its
%% moves writes exactly the copy already there. The moves are then no-ops
%% whether or not they reach disc.</li>
%% <li>`add_frag' runs the schema change; its writes into the new fragment
%% reach disc before the change commits, and its deletes from the old
%% fragments, which may not, are redone by ordinary transactions after.</li>
%% </ul>
%% Both write, under the schema transaction's table locks and before it
%% commits, a journal entry (`fraghash_journal') with the exact records
%% moved; {@link recover/0} uses it after a crash. Each step that rewrites
%% `disc_only_copies' fragments first snapshots them (`fraghash_snapshot':
%% dets drops the records of a slot it was rewriting when the VM dies),
%% and writers that race an `add_frag' are watched (`fraghash_frag_watch')
%% so that their writes and deletes end up where the key now lives.
-module(fraghash_frag).

-export([add_frag/2, relieve/3, del_frag/1, recover/0, recover/1, loadable_tables/0,
         stale_copies/1, repair/1,
         hash/1, frag_name/2, disc_bytes/1, set_step_hook/1]).
-export([distribution/1, info/1]).

-import(fraghash_tab, [batches/2, durable/2, step/2]).

-include("fraghash.hrl").
%% Copy rounds a del_frag makes before it gives up (application
%% environment `del_frag_attempts').
-define(MAX_ATTEMPTS, 20).
-define(SAFE_PATH_KEY, fraghash_safe_path).
-define(SCHEMA_TID_KEY, fraghash_schema_tid).

%%% API

%% @doc Adds a fragment to `Tab' on `Nodes', as
%% `mnesia:change_table_frag(Tab, {add_frag, Nodes})' does, crash-safely.
%% Returns only once the new layout is on disc. Finishes or undoes an
%% interrupted operation on `Tab' first.
-spec add_frag(atom(), [node()]) -> {atomic, ok} | {aborted, term()}.
add_frag(Tab, Nodes) ->
    serialized(Tab, fun() -> with_recovery(Tab, fun() -> do_add_frag(Tab, Nodes, none) end) end).

%% @doc `mnesia_frag_slots' only: adds a fragment on `Nodes' that takes half
%% of one fragment's slots and nothing else, so that fragment halves and
%% only it is scanned; `Which' is a fragment number or `largest' (the one
%% with the most bytes on disc on this node). Crash-safe as {@link add_frag/2}.
-spec relieve(atom(), [node()], pos_integer() | largest) -> {atomic, ok} | {aborted, term()}.
relieve(Tab, Nodes, Which) ->
    serialized(Tab, fun() -> with_recovery(Tab, fun() -> do_relieve(Tab, Nodes, Which) end) end).

do_relieve(Tab, Nodes, Which) ->
    case {hash(Tab), Which} of
        {{mnesia_frag_slots, _, _}, largest} ->
            do_add_frag(Tab, Nodes, {Tab, largest(Tab)});
        {{mnesia_frag_slots, _, N}, F} when is_integer(F), F >= 1, F =< N ->
            do_add_frag(Tab, Nodes, {Tab, F});
        {{mnesia_frag_slots, _, N}, _} ->
            {aborted, {fraghash, no_such_fragment,
                       lists:flatten(io_lib:format("~s has fragments 1..~b: name one of them "
                                                   "or largest", [Tab, N]))}};
        {{Mod, _, _}, _} ->
            {aborted, {fraghash, relieve_needs_slots,
                       lists:flatten(io_lib:format("~s uses ~s; only mnesia_frag_slots can "
                                                   "relieve one fragment: use add_frag/2",
                                                   [Tab, Mod]))}}
    end.

%% @doc Removes the last fragment of `Tab', as
%% `mnesia:change_table_frag(Tab, del_frag)' does, crash-safely. Returns
%% only once the new layout is on disc.
-spec del_frag(atom()) -> {atomic, ok} | {aborted, term()}.
del_frag(Tab) ->
    serialized(Tab, fun() -> with_recovery(Tab, fun() -> do_del_frag(Tab) end) end).

%% @doc The tables to wait for after `mnesia:start()', before {@link
%% recover/0}: every table but a fragment table beyond its table's count.
%% Such a table is left when a node is killed just after a change that
%% deleted it, before Mnesia dumped its log: at the next start the table is
%% in the schema again, and on a cluster no node may load it, so waiting
%% for it would never end. `recover/0' deletes it.
-spec loadable_tables() -> [atom()].
loadable_tables() ->
    Orphans = [Frag || {_Base, Frag} <- fraghash_tab:orphans()],
    [T || T <- mnesia:system_info(tables), not lists:member(T, Orphans)].

%% @doc Finishes or undoes every operation a crash interrupted. Call it once
%% after `mnesia:start()' and `mnesia:wait_for_tables(loadable_tables(), T)'
%% (see {@link loadable_tables/0}), before using fragmented disc tables
%% grown or shrunk by this module. Idempotent, and
%% safe to interrupt: a crash during recovery is recovered the same way.
-spec recover() -> ok | {error, term()}.
recover() ->
    case catch fraghash_durable:check_log() of
        ok -> recover_all();
        {'EXIT', {{fraghash, restart_mnesia, _} = Reason, _}} -> {error, Reason}
    end.

recover_all() ->
    case fraghash_journal:ensure() of
        ok ->
            Pending = fraghash_journal:pending(),
            Results = [{T, recover(T)} || T <- Pending]
                ++ [{T, global:trans(lock(T), fun() -> fraghash_frag_recovery:sweep(T) end)}
                    || T <- fraghash_frag_recovery:fragmented(), not lists:member(T, Pending)],
            case [TR || {_T, R} = TR <- Results, R =/= ok] of
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
    global:trans(lock(Tab), fun() -> recover_locked(Tab) end).

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
            #{op := grow_add} = Entry -> fraghash_grow:recover(Tab, Entry);
            #{op := grow_del} = Entry -> fraghash_grow_del:recover(Tab, Entry);
            Entry -> fraghash_frag_recovery:recover(Tab, Entry)
        end
    catch
        %% A step that failed (a full disc, Mnesia stopping): the entry
        %% stays, and the reason says what to do before the next try.
        error:Reason:Stack -> {error, interrupted(Tab, Reason, Stack)};
        exit:{aborted, Reason} -> {error, element(2, answer(Tab, {aborted, Reason}))}
    end.

%% @doc How many records sit in a fragment other than the one
%% `key_to_frag_number' names (0 for a healthy table).
-spec stale_copies(atom()) -> non_neg_integer().
stale_copies(Tab) ->
    length(fraghash_tab:misplaced(Tab)).

%% @doc Removes stale copies: a misplaced record whose key is also in its
%% right fragment is deleted; one that is not is moved there. Returns how
%% many records it fixed. For tables hit by plain `change_table_frag'; the
%% safe path never leaves any behind.
-spec repair(atom()) -> {atomic, non_neg_integer()} | {aborted, term()}.
repair(Tab) ->
    Bad = fraghash_tab:misplaced(Tab),
    case fraghash_tab:move_misplaced(Bad) of
        {atomic, ok} -> {atomic, length(Bad)};
        Aborted -> Aborted
    end.

%% @doc A fragmented table's hash module, hash state and fragment count, as
%% its `frag_properties' give them on this node.
-spec hash(atom()) -> {module(), term(), pos_integer()}.
hash(Tab) -> fraghash_tab:hash(Tab).

%% @doc The name of fragment `N' of `Tab' (Mnesia's naming).
-spec frag_name(atom(), pos_integer()) -> atom().
frag_name(Tab, N) -> fraghash_tab:frag_name(Tab, N).

%% @doc Installs `Fun(Tab, Step)', called at each step of an operation or a
%% recovery (`undefined' removes it): for tracing, and for the kill -9 tests,
%% which log the steps to know where a kill landed.
-spec set_step_hook(fun((atom(), atom()) -> any()) | undefined) -> ok.
set_step_hook(Fun) -> fraghash_tab:set_step_hook(Fun).

%%% add_frag

do_add_frag(Tab, Nodes, Relieve) ->
    case fraghash_grow:eligible(Tab) of
        true -> fraghash_grow:add_frag(Tab, Nodes, Relieve);
        false -> do_add_in_schema(Tab, Nodes, Relieve)
    end.

%% The add of tables fraghash_grow does not take: the schema change moves
%% the records, and what it may not bring to disc is redone after.
do_add_in_schema(Tab, Nodes, Relieve) ->
    {Mod, S, N} = hash(Tab),
    New = frag_name(Tab, N + 1),
    ok = fraghash_frag_recovery:remove_leftover_files(New),
    ok = fraghash_snapshot:discard(Tab),
    Donors = donors(Tab, Mod, S, Relieve),
    %% Writers racing the change are watched until its follow-up is done.
    Watcher = fraghash_frag_watch:start(Donors),
    try add_watched(Tab, Nodes, Relieve, N, New, Donors, Watcher)
    after fraghash_frag_watch:stop(Watcher)
    end.

add_watched(Tab, Nodes, Relieve, N, New, Donors, Watcher) ->
    step(Tab, add_schema),
    Journal =
        fun(Moves) ->
                ok = fraghash_frag_watch:mark(Watcher, get(?SCHEMA_TID_KEY)),
                check_only_moves_to(New, Moves),
                %% The donors' disc_only_copies files are about to be
                %% rewritten: copied first, under the change's locks.
                step(Tab, add_snapshot),
                ok = fraghash_snapshot:take(Tab, Donors),
                Entry = #{op => add, n => N, moves => moves(Moves), donors => Donors},
                ok = fraghash_journal:write_from_other_process(Tab, Entry),
                step(Tab, add_journaled)
        end,
    case schema_change(Tab, {add_frag, Nodes}, Relieve, Journal) of
        {atomic, ok} ->
            step(Tab, add_committed),
            Entry = fraghash_journal:read(Tab),
            fraghash_frag_recovery:finish_add(Tab, Entry, {after_commit, Watcher}),
            {atomic, ok};
        Aborted ->
            %% Nothing was applied; the journal entry (if written) names an
            %% operation that did not happen, and recovery would only
            %% rewrite the records it holds with the same values.
            ok = fraghash_journal:delete(Tab),
            ok = fraghash_snapshot:discard(Tab),
            Aborted
    end.

%% The fragments an add_frag scans (the hash module's `IterFrags', as
%% Mnesia will ask for them): only there can a key change fragment.
donors(Tab, Mod, S, Relieve) ->
    put(fraghash_relieve, Relieve),
    try Mod:add_frag(S) of
        {_NewState, Iter, _Lock} -> [frag_name(Tab, I) || I <- Iter]
    after
        erase(fraghash_relieve)
    end.

%% The moves of an add_frag: each record written into the new fragment and
%% deleted from the one it left. Anything else (a move between old
%% fragments) would be a write into an old fragment, which Mnesia may not
%% bring to disc: refused.
check_only_moves_to(New, Moves) ->
    case [M || {{F, _}, _, write} = M <- Moves, F =/= New] of
        [] -> ok;
        [Bad | _] -> mnesia:abort({fraghash, add_frag_moves_between_old_fragments, Bad})
    end.

%% [{Key, From, To, Record}] of the record ops of a split or a merge.
moves(Ops) ->
    From = maps:from_list([{K, F} || {{F, K}, _, delete} <- Ops]),
    [{K, maps:get(K, From, none), To, Rec} || {{To, K}, [Rec], write} <- Ops].

%%% del_frag

do_del_frag(Tab) ->
    case {hash(Tab), fraghash_grow:eligible(Tab)} of
        {{_, _, 1}, _} ->
            {aborted, {fraghash, last_fragment,
                       lists:flatten(io_lib:format("~s has one fragment, which a table keeps: "
                                                   "there is none to remove", [Tab]))}};
        {_, true} ->
            fraghash_grow_del:del_frag(Tab);
        {{Mod, S, N}, false} ->
            %% Hidden copies first, then Mnesia's change, whose moves must
            %% rewrite exactly those copies.
            Attempts = application:get_env(fraghash, del_frag_attempts, ?MAX_ATTEMPTS),
            del_attempts(Tab, Mod, S, N, [], Attempts)
    end.

del_attempts(Tab, _Mod, _S, _N, Prev, 0) ->
    %% Given up: the table stays as it was, without the hidden copies.
    ok = fraghash_frag_recovery:undo_copies(Tab, Prev),
    ok = fraghash_journal:delete(Tab),
    ok = fraghash_snapshot:discard(Tab),
    {aborted, {fraghash, del_frag_not_settled,
               "records kept changing in the fragments to merge; retry when writes are lighter"}};
del_attempts(Tab, Mod, S, N, Prev, Attempts) ->
    step(Tab, del_copy),
    Copies = planned_copies(Tab, Mod, S),
    %% The journal names every hidden copy before it is written, so that a
    %% crash leaves none unaccounted for.
    ok = fraghash_journal:write(Tab, #{op => del, n => N, phase => copying,
                                     copies => lists:usort(Copies ++ Prev)}),
    Dests = lists:usort([T || {_K, _F, T} <- Copies ++ Prev]),
    case copy_hidden(Tab, Copies, Prev, Dests) of
        ok ->
            ok = durable(Tab, N),
            ok = fraghash_snapshot:discard(Tab),
            del_verified(Tab, Mod, S, N, Copies, Prev, Dests, Attempts);
        {aborted, _} = Aborted ->
            %% Nothing copied by this attempt (its transaction aborted).
            ok = fraghash_frag_recovery:undo_copies(Tab, Prev),
            ok = fraghash_journal:delete(Tab),
            Aborted
    end.

del_verified(Tab, Mod, S, N, Copies, Prev, Dests, Attempts) ->
    step(Tab, del_schema),
    Verify =
        fun(Moves) ->
                verify_hidden_copies(Moves, Copies),
                %% Mnesia's moves rewrite the records already there.
                ok = fraghash_snapshot:take(Tab, Dests),
                Entry = #{op => del, n => N, phase => verified, copies => moves(Moves)},
                ok = fraghash_journal:write_from_other_process(Tab, Entry),
                step(Tab, del_verified)
        end,
    case schema_change(Tab, del_frag, none, Verify) of
        {atomic, ok} ->
            step(Tab, del_committed),
            %% The rewritten fragments' files are consistent once flushed;
            %% their snapshot goes before writers can delete anything.
            ok = durable(Tab, N - 1),
            ok = fraghash_snapshot:discard(Tab),
            %% Dump the log now, so that the removed fragment's
            %% delete_table is never replayed at a restart after a fragment
            %% of the same number exists again.
            dumped = mnesia:dump_log(),
            fraghash_frag_recovery:finish_del(Tab, fraghash_journal:read(Tab)),
            {atomic, ok};
        {aborted, {fraghash, hidden_copies_changed, _}} ->
            %% A writer changed a record after it was copied: copy again.
            del_attempts(Tab, Mod, S, N, lists:usort(Copies ++ Prev), Attempts - 1);
        Aborted ->
            ok = fraghash_frag_recovery:undo_copies(Tab, lists:usort(Copies ++ Prev)),
            ok = fraghash_journal:delete(Tab),
            ok = fraghash_snapshot:discard(Tab),
            Aborted
    end.

%% [{Key, From, To}]: every record the del_frag will move, as the hash
%% module's del_frag says (computed here, outside Mnesia, on the same state).
planned_copies(Tab, Mod, S) ->
    {S2, Iter, _Lock} = Mod:del_frag(S),
    [{K, frag_name(Tab, F), frag_name(Tab, To)}
     || F <- lists:usort(Iter),
        {K, To} <- [{K, Mod:key_to_frag_number(S2, K)}
                    || K <- mnesia:dirty_all_keys(frag_name(Tab, F))],
        To =/= F].

%% Copies each planned record to where it will live; for a key copied by an
%% earlier attempt and since deleted by a writer, removes the copy. Into
%% disc_only_copies fragments, in one transaction that locks them and
%% snapshots them first (see fraghash_snapshot), which may abort (a
%% snapshot that cannot be written); otherwise in batches.
copy_hidden(Tab, Copies, Prev, Dests) ->
    Planned = maps:from_list([{{K, T}, F} || {K, F, T} <- Copies]),
    Gone = [C || {K, _F, T} = C <- Prev, not maps:is_key({K, T}, Planned)],
    %% What the destination holds under the key goes first: a bag's write
    %% adds to it, where the copy must be exactly the source's records.
    Copy = fun({K, F, T}) ->
                   ok = mnesia:delete(T, K, write),
                   lists:foreach(fun(R) -> ok = mnesia:write(T, R, write) end,
                                 mnesia:read(F, K, read))
           end,
    Remove = fun({K, _F, T}) -> mnesia:delete(T, K, write) end,
    Result = case fraghash_snapshot:local_dets(Dests) of
                 [_ | _] ->
                     mnesia:transaction(
                       fun() ->
                               [mnesia:lock({table, T}, write) || T <- Dests],
                               step(Tab, del_snapshot),
                               ok = fraghash_snapshot:take(Tab, Dests),
                               lists:foreach(Copy, Copies),
                               lists:foreach(Remove, Gone)
                       end);
                 [] ->
                     {atomic, ok} = batches(Copy, Copies),
                     batches(Remove, Gone)
             end,
    case Result of
        {atomic, ok} -> ok;
        Aborted -> Aborted
    end.

%% Inside the schema transaction, under its write locks on every fragment
%% involved: the moves write, under each key, exactly the records already
%% there (one for a set; for a bag, one move per record), and there is no
%% other hidden copy.
verify_hidden_copies(Moves, Copies) ->
    Moved = lists:foldl(fun({{T, K}, [Rec], write}, Acc) ->
                                maps:update_with({K, T}, fun(Rs) -> [Rec | Rs] end, [Rec], Acc);
                           (_, Acc) ->
                                Acc
                        end, #{}, Moves),
    Planned = lists:usort([{K, T} || {K, _F, T} <- Copies]),
    Same = [ok || {{K, T}, Recs} <- maps:to_list(Moved),
                  lists:sort(mnesia:dirty_read(T, K)) =:= lists:sort(Recs)],
    case lists:sort(maps:keys(Moved)) =:= Planned andalso length(Same) =:= map_size(Moved) of
        true -> ok;
        false -> mnesia:abort({fraghash, hidden_copies_changed, map_size(Moved)})
    end.

%%% The schema transaction

%% Mnesia's own change_table_frag (mnesia_schema:change_table_frag/2 runs
%% exactly these calls), with `Check(RecordOps)' run after Mnesia has taken
%% its table locks and computed the moves, before anything is applied.
%% `?SAFE_PATH_KEY' tells the fraghash hash modules, called in this process,
%% that the change is made by this module (plain change_table_frag on a disc
%% table is refused; see fraghash_mnesia); `fraghash_relieve', when
%% `Relieve' is `{Tab, Frag}', makes mnesia_frag_slots split Frag.
schema_change(Tab, Change, Relieve, Check) ->
    case schema_transaction(Tab, Change, Relieve, Check) of
        %% A step of `Check' that raised (Mnesia gives the error and its
        %% stack): nothing was applied.
        {aborted, {Reason, [{M, F, A, _} | _] = Stack}} when is_atom(M), is_atom(F),
                                                             (is_list(A) orelse is_integer(A)) ->
            {aborted, {fraghash, interrupted, interrupted(Tab, Reason, Stack)}};
        Result ->
            Result
    end.

schema_transaction(Tab, Change, Relieve, Check) ->
    mnesia_schema:schema_transaction(
      fun() ->
              TidTs = mnesia_schema:get_tid_ts_and_lock(schema, write),
              %% ({Module, Tid, Store}: the transaction's id is what its
              %% table events carry.)
              put(?SCHEMA_TID_KEY, element(2, TidTs)),
              put(?SAFE_PATH_KEY, Tab),
              put(fraghash_relieve, Relieve),
              OpLists = try mnesia_frag:change_table_frag(Tab, Change)
                        after erase(?SAFE_PATH_KEY), erase(fraghash_relieve)
                        end,
              Ops = case OpLists of
                        [TabOps] -> TabOps;
                        _ -> mnesia:abort({fraghash, foreign_key_tables_not_supported, Tab})
                    end,
              ok = Check([Item || {op, rec, _, Item} <- Ops]),
              [mnesia_schema:insert_schema_ops(TidTs, Op) || Op <- OpLists],
              ok
      end).

%%% Internals

%% The fragment with the most bytes on disc on this node.
largest(Tab) ->
    {_, _, N} = hash(Tab),
    {_, F} = lists:max([{disc_bytes(frag_name(Tab, F)), F} || F <- lists:seq(1, N)]),
    F.

%% @doc The bytes a fragment's files take in Mnesia's directory on this
%% node (.DAT for disc_only_copies, .DCD plus .DCL for disc_copies).
-spec disc_bytes(atom()) -> non_neg_integer().
disc_bytes(Frag) ->
    Dir = mnesia:system_info(directory),
    lists:sum([filelib:file_size(filename:join(Dir, atom_to_list(Frag) ++ Ext))
               || Ext <- [".DAT", ".DCD", ".DCL"]]).

with_recovery(Tab, Op) ->
    case recover_locked(Tab) of
        ok -> Op();
        {error, {fraghash, _, _} = Reason} -> {aborted, Reason};
        {error, Reason} -> answer(Tab, {aborted, {fraghash, recovery_failed, Reason}})
    end.

%% One safe operation per table at a time, cluster-wide; a table that does
%% not exist or is not fragmented is refused with a reason.
serialized(Tab, Fun) ->
    case catch mnesia:table_info(Tab, frag_properties) of
        {'EXIT', _} ->
            {aborted, {no_exists, Tab}};
        [] ->
            {aborted, {fraghash, not_fragmented,
                       lists:flatten(io_lib:format("~p is not a fragmented table", [Tab]))}};
        _ ->
            global:trans(lock(Tab),
                         fun() ->
                                 try
                                     ok = fraghash_durable:check_log(),
                                     answer(Tab, Fun())
                                 catch
                                     exit:{aborted, Reason} ->
                                         answer(Tab, {aborted, Reason});
                                     exit:Reason:Stack ->
                                         %% A call into Mnesia while it
                                         %% stopped (a full disc stops it)
                                         %% is answered; any other exit goes on.
                                         case mnesia:system_info(is_running) of
                                             yes -> erlang:raise(exit, Reason, Stack);
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
    {fraghash, disc_full,
     lists:flatten(io_lib:format("a disc is full (~ts)~s while ~s changed: make room on it, "
                                 "restart Mnesia if it stopped, then fraghash_frag:recover/0 "
                                 "finishes or undoes the operation", [File, Where, Tab]))};
failed(Tab, {io_error, File, Posix}, Where) ->
    {fraghash, io_error,
     lists:flatten(io_lib:format("~ts: ~s~s while ~s changed: fix it, restart Mnesia if it "
                                 "stopped, then fraghash_frag:recover/0 finishes or undoes the "
                                 "operation", [File, file:format_error(Posix), Where, Tab]))};
failed(Tab, {mnesia_stopped, Node}, Where) ->
    {fraghash, mnesia_stopped,
     lists:flatten(io_lib:format("Mnesia stopped on ~s~s while ~s changed (its log says why; a "
                                 "full disc stops it): fix the cause, start it, then "
                                 "fraghash_frag:recover/0 finishes or undoes the operation",
                                 [Node, Where, Tab]))};
failed(Tab, {other, Reason}, Where) ->
    {fraghash, interrupted,
     lists:flatten(io_lib:format("the operation on ~s stopped part way (~0tP~s): fix the cause, "
                                 "then fraghash_frag:recover/0 finishes or undoes what it began",
                                 [Tab, Reason, 14, Where]))}.

%% The first failure of a disc or of Mnesia found in an error term: `{disc_full,
%% File}', `{io_error, File, Posix}', `{mnesia_stopped, Node}', or `none'.
failure({fraghash, restart_mnesia, _} = Reason) ->
    {as_is, Reason};
failure({fraghash, orphan_not_loadable, _} = Reason) ->
    {as_is, Reason};
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
-spec distribution(atom()) -> map() | {error, {fraghash, no_such_table, string()}}.
distribution(Tab) -> fraghash_frag_info:distribution(Tab).

%% @doc A fragmented table's hash module, fragment count and hash state:
%% see {@link fraghash_frag_info:info/1}.
-spec info(atom()) -> map() | {error, {fraghash, no_such_table, string()}}.
info(Tab) -> fraghash_frag_info:info(Tab).
