%% @doc Finishing and undoing the operations of `fraghash_frag' from their
%% journal entry (`fraghash_journal'). Every function here is idempotent
%% and removes the journal entry last, so a crash in the middle of it is
%% recovered by running it again. Which branch runs is decided by the
%% fragment count Mnesia restored, compared with the one in the entry; why
%% each branch is right is argued in docs/mnesia-disc-safety.md.
-module(fraghash_frag_recovery).

-export([recover/2, finish_add/2, finish_add/3, finish_del/2, undo_copies/2,
         remove_leftover_files/1, remove_local_leftovers/1, fragmented/0, sweep/1]).

-import(fraghash_tab, [batches/2, durable/2, step/2, frag_name/2, hash/1]).

%% Extensions of the files Mnesia keeps per table in its directory.
-define(FILE_EXTS, [".DCD", ".DCL", ".DAT", ".TMP", ".DMP"]).

%% @doc Finishes or undoes the operation an entry names, from the fragment
%% count Mnesia has now.
-spec recover(atom(), map()) -> ok | {error, term()}.
recover(Tab, Entry) ->
    step(Tab, recover),
    %% First what dets may have dropped from the disc_only_copies files of
    %% the interrupted step (see fraghash_snapshot); the snapshot goes once
    %% the branch below has made everything durable.
    case fraghash_snapshot:restore(Tab, Entry) of
        {ok, _Back} ->
            case protect(Tab) of
                ok -> recover_branch(Tab, Entry);
                {error, _} = Error -> Error
            end;
        {error, Reason} ->
            {error, {fraghash, snapshot_unreadable, Reason}}
    end.

%% Recovery's own writes (records written back, copies deleted) rewrite
%% disc_only_copies fragments too: once what the interrupted step's
%% snapshot holds is back and flushed, a fresh snapshot of every fragment
%% of the table (and of a fragment table left beyond the count) covers
%% them, until the branch below is durable and removes it.
protect(Tab) ->
    {_Mod, _S, C} = hash(Tab),
    ok = durable(Tab, C + 1),
    ok = fraghash_snapshot:discard(Tab),
    Tables = mnesia:system_info(tables),
    Frags = [F || I <- lists:seq(1, C + 1), F <- [frag_name(Tab, I)], lists:member(F, Tables)],
    case mnesia:transaction(fun() ->
                                    [mnesia:lock({table, F}, write) || F <- Frags],
                                    fraghash_snapshot:take(Tab, Frags)
                            end) of
        {atomic, ok} -> ok;
        {aborted, Reason} -> {error, Reason}
    end.

recover_branch(Tab, Entry) ->
    {_Mod, _S, C} = hash(Tab),
    case Entry of
        #{op := add, n := N} when C =:= N + 1 -> finish_add(Tab, Entry);
        #{op := add, n := N} when C =:= N -> rollback(Tab, Entry, N, frag_name(Tab, N + 1));
        #{op := del, n := N, phase := copying} when C =:= N ->
            undo_copies(Tab, maps:get(copies, Entry)),
            ok = fraghash_snapshot:discard(Tab),
            fraghash_journal:delete(Tab);
        #{op := del, n := N, phase := verified} when C =:= N - 1 -> finish_del(Tab, Entry);
        #{op := del, n := N, phase := verified} when C =:= N ->
            rollback(Tab, Entry, N, none);
        _ ->
            {error, {fraghash, journal_does_not_match_table,
                     #{table => Tab, n_fragments => C,
                       entry => maps:without([moves, copies], Entry)}}}
    end.

%% @doc After a committed add_frag, at recovery: each moved record's copy
%% left in the old fragment (Mnesia's delete, which may not have reached
%% disc) goes, by an ordinary transaction. Its copy in the new fragment is
%% checked first: where that is missing (Mnesia's dumper stopped part way
%% through the commit, by a full disc), the old fragment's copy is the last
%% one, and it is moved there instead of deleted.
-spec finish_add(atom(), map()) -> ok.
finish_add(Tab, Entry) ->
    finish_add(Tab, Entry, recovery).

%% @doc {@link finish_add/2}, `after_commit' when called right after the
%% change committed, in the same run: then Mnesia has already deleted each
%% moved key from its old fragment in memory, so a record found there was
%% written after the commit, by a writer that had routed the key with the
%% hash state before the change and waited for the change's locks
%% (Mnesia's routing race, seen in the kill -9 test). That record is the
%% key's latest value: it goes to the new fragment (if the new fragment
%% still holds the moved record) instead of being deleted. At recovery
%% (`recovery'), what the old fragment holds on disc cannot be told from
%% what the change left there, and is deleted.
-spec finish_add(atom(), map(), {after_commit, pid()} | recovery) -> ok.
finish_add(Tab, #{op := add, n := N, moves := Moves} = Entry, When) ->
    step(Tab, add_cleanup),
    %% First flush what the schema change wrote into disc_only_copies
    %% fragments (dets's delayed-write cache), then delete.
    ok = durable(Tab, N + 1),
    %% Right after the commit, the donors' files are consistent again and
    %% writers are back: the snapshot goes now, so that a later restore
    %% cannot undo their deletes. At recovery (no writers yet) it stays
    %% until the cleanup below is durable too.
    ok = case When of
             {after_commit, _} -> fraghash_snapshot:discard(Tab);
             recovery -> ok
         end,
    Left = [M || {_K, From, _To, _Rec} = M <- Moves, From =/= none],
    ok = case When of
             {after_commit, _} -> settle_moved(Tab, Left);
             recovery -> move_stale(Tab, [{K, From} || {K, From, _To, _Rec} <- Left])
         end,
    %% Entries written before the donors were journaled name them by moves.
    Donors = maps:get(donors, Entry, lists:usort([F || {_K, F, _To, _Rec} <- Left])),
    ok = sweep(Tab, Donors, frag_name(Tab, N + 1), Moves, When),
    ok = durable(Tab, N + 1),
    ok = fraghash_snapshot:discard(Tab),
    step(Tab, add_done),
    fraghash_journal:delete(Tab).

%% Right after an add_frag's commit: for each moved key still routed away
%% from its old fragment, a record the old fragment holds in memory now
%% was written after the commit (see finish_add/3); it replaces the moved
%% record in the new fragment unless the new fragment changed too. The key
%% is deleted from the old fragment in every case: the delete also reaches
%% the copy Mnesia may have left on disc there.
settle_moved(Tab, Moves) ->
    {Mod, S, _N} = hash(Tab),
    Stale = [M || {K, From, _To, _Rec} = M <- Moves,
                  frag_name(Tab, Mod:key_to_frag_number(S, K)) =/= From],
    {atomic, ok} =
        batches(fun({K, From, To, Rec}) ->
                        case mnesia:read(From, K, write) of
                            [Later] when Later =/= Rec ->
                                case mnesia:read(To, K, write) of
                                    [Rec] -> mnesia:write(To, Later, write);
                                    _ -> ok
                                end;
                            _ ->
                                ok
                        end,
                        mnesia:delete(From, K, write)
                end, Stale),
    ok.

%% A key that a writer inserted into a donor of the add after routing it
%% with the hash state from before the change (Mnesia's routing race: the
%% writer waited for the change's locks) is in no move: it sits in the
%% donor, where lookups no longer go. Under table locks on the donors,
%% which such writers (older transactions) get first, every key of a donor
%% that the hash module now routes elsewhere is moved there, unless the
%% fragment it is routed to holds the key already (written there since, by
%% a writer that routed it right).
%%
%% Right after the commit, the same lock (with the new fragment's) settles
%% what the watched racing writers did (see fraghash_frag_watch): a moved
%% key whose last racing change was a delete is deleted from the new
%% fragment, and a racing write found in a donor replaces the moved record
%% there if that is unchanged. At recovery nothing was watched, and what
%% a donor holds may be an older copy: the destination's record is kept.
sweep(Tab, Donors, New, Moves, When) ->
    Moved = case When of
                {after_commit, _} -> maps:from_list([{K, R} || {K, _F, _T, R} <- Moves]);
                recovery -> #{}
            end,
    {atomic, Away} =
        mnesia:transaction(
          fun() ->
                  [mnesia:lock({table, From}, write) || From <- Donors],
                  case When of
                      {after_commit, Watcher} ->
                          mnesia:lock({table, New}, write),
                          Events = fraghash_frag_watch:racing(Watcher, 5000),
                          _ = fraghash_frag_watch:undo_racing_deletes(Events, Moved, New);
                      recovery ->
                          ok
                  end,
                  fraghash_tab:misplaced(Tab, Donors)
          end),
    {atomic, ok} = fraghash_tab:move_misplaced(Away, Moved),
    ok.

%% @doc After a committed del_frag: the merged records were already in
%% place (copied before the change); a record moved between two remaining
%% fragments leaves a stale copy to delete; the removed fragment's table
%% and files must be gone.
-spec finish_del(atom(), map()) -> ok.
finish_del(Tab, #{op := del, n := N, copies := Moves}) ->
    step(Tab, del_cleanup),
    ok = delete_stale(Tab, [{K, From} || {K, From, _To, _Rec} <- Moves, From =/= none]),
    ok = drop_orphan(frag_name(Tab, N)),
    ok = remove_leftover_files(frag_name(Tab, N)),
    ok = durable(Tab, N - 1),
    ok = fraghash_snapshot:discard(Tab),
    step(Tab, del_done),
    fraghash_journal:delete(Tab).

%% @doc Deletes the hidden copies of a del_frag that did not happen: each
%% copy whose key the hash module still routes to its old fragment.
-spec undo_copies(atom(), [{term(), atom(), atom()}]) -> ok.
undo_copies(Tab, Copies) ->
    {Mod, S, N} = hash(Tab),
    Hidden = [{K, T} || {K, _F, T} <- Copies,
                        frag_name(Tab, Mod:key_to_frag_number(S, K)) =/= T],
    {atomic, ok} = batches(fun({K, T}) -> mnesia:delete(T, K, write) end, Hidden),
    durable(Tab, N).

%% An operation whose schema change did not commit: the journal holds, for
%% every record it would have moved, the value it had under the change's
%% locks, which no writer changed since. Each key goes back to its old
%% fragment with that value, even over what the old fragment holds on disc
%% (Mnesia can bring back an older value there: seen in the kill -9 test
%% on a fragment deleted and created again), unless the fragment it would
%% have moved to holds a different value, which can only have been written
%% after the change (if Mnesia released the change's locks and then lost
%% its decision, see the docs). Its copy elsewhere, and a fragment table the
%% change left behind, go.
rollback(Tab, #{n := N} = Entry, N, Orphan) ->
    step(Tab, rollback),
    Moves = maps:get(moves, Entry, maps:get(copies, Entry, [])),
    Last = frag_name(Tab, N),
    Tables = mnesia:system_info(tables),
    Back = [{K, case From of none -> Last; _ -> From end, To, Rec}
            || {K, From, To, Rec} <- Moves],
    {atomic, ok} =
        batches(fun({K, From, To, Rec}) ->
                        There = case lists:member(To, Tables) of
                                    true -> mnesia:read(To, K, write);
                                    false -> []
                                end,
                        case There of
                            [Newer] when Newer =/= Rec -> mnesia:write(From, Newer, write);
                            _ -> mnesia:write(From, Rec, write)
                        end,
                        case There of
                            [] -> ok;
                            _ -> mnesia:delete(To, K, write)
                        end
                end, Back),
    case Orphan of
        none -> ok;
        _ -> ok = drop_orphan(Orphan), ok = remove_leftover_files(Orphan)
    end,
    ok = durable(Tab, N),
    ok = fraghash_snapshot:discard(Tab),
    fraghash_journal:delete(Tab).

%% Moves each {Key, Fragment} that the hash module routes elsewhere to
%% where it routes, unless that fragment holds the key already; deletes it
%% from Fragment in either case (fraghash_tab:move_misplaced/1).
move_stale(Tab, Items) ->
    {Mod, S, _N} = hash(Tab),
    Stale = [{F, To, K} || {K, F} <- Items,
                           To <- [frag_name(Tab, Mod:key_to_frag_number(S, K))], To =/= F],
    {atomic, ok} = fraghash_tab:move_misplaced(Stale),
    ok.

%% Deletes each {Key, Fragment} still there that the hash module routes
%% elsewhere.
delete_stale(Tab, Items) ->
    {Mod, S, _N} = hash(Tab),
    Stale = [{K, F} || {K, F} <- Items, frag_name(Tab, Mod:key_to_frag_number(S, K)) =/= F],
    {atomic, ok} = batches(fun({K, F}) -> mnesia:delete(F, K, write) end, Stale),
    ok.

%% Removes a fragment table that is no longer (or not yet) one of its
%% table's fragments, if Mnesia still has it.
drop_orphan(Frag) ->
    fraghash_grow_schema:drop_orphan(Frag).

%% @doc The fragmented tables (each base table, foreign-key tables
%% included), in Mnesia's schema on this node.
-spec fragmented() -> [atom()].
fragmented() ->
    [T || T <- mnesia:system_info(tables), T =/= schema,
          lists:keymember(n_fragments, 1, mnesia:table_info(T, frag_properties))].

%% @doc Drops the fragment tables of `Tab' beyond its fragment count that
%% no journal entry accounts for, once every record they hold is also,
%% with the same value, in the fragment its key routes to; otherwise
%% leaves them and says so. Such a table is left when a schema change
%% reaches one side of a partition only: healing keeps one side's data but
%% Mnesia merges the two schemas by table version, so the kept side can
%% get the other side's fragment count while still holding a fragment that
%% count no longer names. Run by `fraghash_frag:recover/0' under the
%% table's lock, for tables with no journal entry.
-spec sweep(atom()) -> ok | {error, term()}.
sweep(Tab) ->
    Orphans = [F || {Base, F} <- fraghash_tab:orphans(), Base =:= Tab],
    try
        sweep(Tab, Orphans)
    catch
        %% An orphan loaded nowhere that no running node holds.
        error:{fraghash, _, _} = Reason -> {error, Reason}
    end.

sweep(_Tab, []) ->
    ok;
sweep(Tab, [Orphan | Rest]) ->
    ok = fraghash_grow_schema:load_somewhere(Orphan),
    Elsewhere = [K || {_From, To, K} <- fraghash_tab:misplaced(Tab, [Orphan]),
                      not held(mnesia:dirty_read(Orphan, K), mnesia:dirty_read(To, K))],
    case Elsewhere of
        [] ->
            ok = drop_orphan(Orphan),
            ok = remove_leftover_files(Orphan),
            sweep(Tab, Rest);
        [K | _] ->
            {error, {fraghash, orphan_holds_records,
                     lists:flatten(
                       io_lib:format("~s, beyond ~s's fragment count, holds ~b record(s) that "
                                     "are not where their keys route (~0tp among them): copy "
                                     "what must stay into ~s, then delete the table",
                                     [Orphan, Tab, length(Elsewhere), K, Tab]))}}
    end.

%% Every one of `Records' is among `There' (all of a bag key's records).
held(Records, There) ->
    lists:all(fun(R) -> lists:member(R, There) end, Records).

%% @doc Deletes what a table named `Frag' left on every running node of
%% the cluster, when Mnesia has no such table: its files in Mnesia's
%% directory and its tables in the node's `redb_copies' database. A
%% fragment created again under the same number must start from nothing
%% (Mnesia would otherwise read, or dump over, the old files, and the
%% backend would open the old records as the new table's). A node that is
%% down keeps its leftovers, but no fragment can be created with a copy on
%% a node that is down, and this runs again before the next one is.
-spec remove_leftover_files(atom()) -> ok.
remove_leftover_files(Frag) ->
    case lists:member(Frag, mnesia:system_info(tables)) of
        true ->
            ok;
        false ->
            [_ = rpc:call(Node, ?MODULE, remove_local_leftovers, [Frag])
             || Node <- mnesia:system_info(running_db_nodes)],
            ok
    end.

%% @doc {@link remove_leftover_files/1} on this node.
-spec remove_local_leftovers(atom()) -> ok.
remove_local_leftovers(Frag) ->
    Dir = mnesia:system_info(directory),
    [_ = file:delete(filename:join(Dir, atom_to_list(Frag) ++ Ext)) || Ext <- ?FILE_EXTS],
    fraghash_redb_copies:forget(Frag).
