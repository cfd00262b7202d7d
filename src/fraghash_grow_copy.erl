%% @doc How the growth path moves records while writers keep going: copies
%% in ordinary transactions, rounds of copies of what writers touched, the
%% last copy under the switch's locks, and the reconciling of both copies
%% after the switch. Shared by the add (`fraghash_grow') and the del
%% (`fraghash_grow_del').
%%
%% Records are named by items `{Fragment, Key}' (see `fraghash_grow_group'):
%% the fragment they are taken from, their source. `Where' maps each source
%% fragment to its table's placement under the target state (a function
%% from a record to a fragment name): a record moves when it is placed
%% elsewhere than its source. `Moved' keeps, per item, the records of the
%% last copy made (sorted; `[]' for an item found without moving records,
%% whose copies are removed): what the destinations hold for it until a
%% writer writes there.
%%
%% Within one fragment a key has its records in one place: a copy replaces
%% everything a destination holds under the key. That is exact for `set'
%% and `ordered_set' tables, where a fragment holds one record per key, and
%% for `bag' tables placed by their key; `fraghash_grow_group' refuses
%% `bag' tables placed by a foreign key.
-module(fraghash_grow_copy).

-export([copy/3, settle/3, last_copy/6, dests_watch/0, reconcile/6, not_done/2, touched/3]).

-import(fraghash_tab, [step/2, chunks/1, chunks/2]).

%% Copy rounds before the switch.
-define(ROUNDS, 8).
%% Items per batch of reconciling: each batch costs three transactions and
%% two syncs whatever its size, and holds the write locks of its items'
%% keys (in their sources and destinations) for one transaction at a time.
-define(RECONCILE_BATCH, 2000).
-define(WATCH_MS, 60000).
%% Keys of one table in one transaction from which the transaction locks
%% the table whole (see lock_many/2).
-define(WHOLE, 64).

-type where() :: #{atom() => fun((tuple()) -> atom())}.
-type moved() :: #{fraghash_grow_group:item() => [tuple()]}.
-export_type([where/0, moved/0]).

%% @doc Copies the moving records of each item to where `Where' places
%% them, in transactions of 500 items that read-lock their sources; one
%% transaction per layout of the destinations (see `fraghash_tab:by_layout/2').
-spec copy(where(), [fraghash_grow_group:item()], moved()) -> moved().
copy(Where, Items, Moved) ->
    Frags = frags(Where),
    lists:foldl(fun(Batch, Acc) -> copy_batch(Where, Frags, Batch, Acc) end, Moved,
                chunks(lists:usort(Items))).

copy_batch(Where, Frags, Batch, Moved) ->
    %% Each layout's transaction reads the sources again, and a writer can
    %% change one in between: each must know what the ones before it
    %% copied (the item's last copy, which its destinations now hold), so
    %% it starts from their `Moved'. An item's copies are made, and
    %% reported, by the transaction of its destinations' layout; one whose
    %% source lost its moving records reports none, where it has no copy
    %% to remove. (Only a foreign-key record whose placing field a writer
    %% changed can have destinations of two layouts; each transaction then
    %% writes its own, the watcher reports that writer's change, and the
    %% next round copies the item again, to all of them.)
    {atomic, Moved2} =
        fraghash_tab:fold_layouts(
          Frags,
          fun(Mine, Acc) ->
                  ok = lock_many([S || {S, _K} <- Batch], read),
                  Reads = [{I, Recs, dests(Where, I, Recs, Acc)}
                           || {S, K} = I <- Batch,
                              Recs <- [moving(Where, I, mnesia:read(S, K, read))]],
                  ok = lock_many([D || {_I, _Recs, Ds} <- Reads, D <- Ds, Mine(D)], write),
                  Copied = [{I, Recs} || {I, Recs, Ds} <- Reads,
                                         put_copies(Where, I, Recs, Ds, Mine)],
                  maps:merge(Acc, maps:from_list(Copied))
          end, Moved),
    Moved2.

%% @doc Copy rounds over the items that writers touched since the last
%% round (`fraghash_frag_watch' watches every source), until a round finds
%% none or 8 rounds are done.
-spec settle(fraghash_frag_watch:watch(), where(), moved()) -> moved().
settle(Watcher, Where, Moved) ->
    rounds(Watcher, Where, Moved, ?ROUNDS).

rounds(_Watcher, _Where, Moved, 0) ->
    Moved;
rounds(Watcher, Where, Moved, Rounds) ->
    case touched(Watcher, Where, Moved) of
        [] -> Moved;
        Items -> rounds(Watcher, Where, copy(Where, Items, Moved), Rounds - 1)
    end.

%% @doc The check a switch runs under its locks, which hold writers off the
%% fragments involved: the items they touched since the last round (all
%% seen by then) are copied once more, after the journal (whose entry is
%% in phase `switching', with `Moved') names those copies. The copies are
%% made by a `sync_dirty' activity of another process (no lock, and not a
%% part of the schema change, which carries no record), and made durable
%% before the switch can commit. Then the destination fragments `Dests'
%% are watched for the caller (see {@link dests_watch/0}): from there on,
%% and until the switch commits, no writer can change a moved key there
%% (its writers route it to its source, whose locks the switch holds), so
%% whatever the watch sees of a moved key is a writer's change made after
%% the switch. What it reads and writes is O(items touched), not
%% O(`Moved'): the last copies go to a journal record of their own.
-spec last_copy(atom(), atom(), fraghash_frag_watch:watch(), where(), moved(), [atom()]) ->
          fun(() -> ok).
last_copy(Tab, Step, Watcher, Where, Moved, Dests) ->
    Owner = self(),
    fun() ->
            step(Tab, Step),
            %% A schema change that runs again runs this again, and the
            %% earlier tries' copies are in the journal only.
            Earlier = fraghash_journal:last_copies(Tab),
            Before = maps:merge(Moved, Earlier),
            case touched(Watcher, Where, Before) of
                [] ->
                    ok;
                Items ->
                    Planned = [{I, moving(Where, I, mnesia:dirty_read(S, K))}
                               || {S, K} = I <- Items],
                    ok = fraghash_journal:write_last_copies(
                           Tab, maps:merge(Earlier, maps:from_list(Planned))),
                    fix(Where, Planned, Before)
            end,
            Owner ! {?MODULE, dests_watch, fraghash_frag_watch:start_touched(Dests, Owner)},
            ok
    end.

%% @doc The watch of the destinations that the last check of a switch
%% started (`[]', which sees nothing, if none ran); stops those of earlier
%% tries of the schema change, which would take the last try's copies for
%% a writer's. Call it once the switch returned.
-spec dests_watch() -> fraghash_frag_watch:watch().
dests_watch() ->
    dests_watch([]).

dests_watch(Last) ->
    receive
        {?MODULE, dests_watch, Watch} ->
            ok = fraghash_frag_watch:stop(Last),
            dests_watch(Watch)
    after 0 ->
            Last
    end.

%% Makes the planned copies from a process of its own, in a `sync_dirty'
%% activity (applied on every replica when it returns), then durable on
%% every node holding one of the fragments written. Each dirty write is a
%% commit of its own, logged when applied, so the layouts of the
%% fragments written do not matter here.
fix(Where, Planned, Moved) ->
    Dests = lists:usort([D || {I, Recs} <- Planned, D <- dests(Where, I, Recs, Moved)]),
    {Pid, Ref} = spawn_monitor(
                   fun() ->
                           ok = mnesia:activity(
                                  sync_dirty,
                                  fun() ->
                                          [put_copies(Where, I, Recs,
                                                      dests(Where, I, Recs, Moved),
                                                      fun(_) -> true end)
                                           || {I, Recs} <- Planned],
                                          ok
                                  end),
                           exit({fixed, fraghash_durable:tables(Dests)})
                   end),
    receive
        {'DOWN', Ref, process, Pid, {fixed, ok}} -> ok;
        {'DOWN', Ref, process, Pid, Why} -> mnesia:abort({fraghash, copy_failed, Why})
    end.

%% @doc After a switch, for each item, in term order: which of the source's
%% moving records (`Here') and its destination's (`There') are the key's
%% value there. The destination's, when a writer changed it since the
%% switch: `Dests' (from {@link dests_watch/0}) saw it, or it is no longer
%% the last copy this operation made (`Moved'; none for an item it never
%% copied). Else the source's, which a writer that routed with the old
%% state may have changed, or deleted, after the switch. A change of the
%% destination since the switch is the later of the two: such a writer's
%% transaction began before the switch committed, the destination's after
%% it, so the destination's came after it in the writer's own order, or
%% ran beside it. Without the watch (recovery after a kill: `[]'), a
%% writer that wrote, after the switch, exactly the records of the last
%% copy (deleted a key that had none, say) is taken for none. With
%% `DeleteOld', the moving records then leave their source.
%%
%% Items go in batches of 2,000, each in three transactions, each begun once
%% the one before is durable: the destinations get their values; the
%% journal's progress mark moves past the batch; the sources lose their
%% moving records. A kill can cut any of them short, and on a storage
%% backend (`redb_copies') short means applied in part: Mnesia hands a
%% committed transaction to a backend record by record. Every state left
%% is one a later run reads right. A batch the mark has not reached yet
%% still has every record in its sources, so it is reconciled again from
%% them (a destination holds its old value or its new one, never nothing:
%% a set's value is overwritten, not deleted first). Items the mark has
%% reached (at or before it) have their destinations' values, made durable
%% by a run that watched them: a later run only removes what is left of
%% them in their sources, and one left without its records lost them to
%% this operation, never to a writer, so such an item is not taken again
%% (`not_done/2').
-spec reconcile(atom(), where(), [fraghash_grow_group:item()], moved(), boolean(),
                fraghash_frag_watch:watch()) -> ok.
reconcile(Tab, Where, Items, Moved, DeleteOld, Dests) ->
    Frags = frags(Where),
    {Done, ToDo} = lists:partition(done_with(fraghash_journal:progress(Tab)), lists:usort(Items)),
    case DeleteOld of
        true -> leave_sources(Where, Frags, Done);
        false -> ok
    end,
    lists:foreach(fun(Batch) ->
                          ok = reconcile_batch(Tab, Where, Frags, Batch, Moved, DeleteOld, Dests)
                  end,
                  chunks(ToDo, ?RECONCILE_BATCH)).

%% Whether an item is at or before the progress mark: its destinations got
%% their values in an earlier run, and durably, before the mark passed
%% it. They are not reconciled again: a run of recovery has no watch of the
%% destinations, and from the source's records and the last copy alone it
%% could take a writer's change since the switch for none (a key deleted
%% whose copy was empty). Only what is left of them in their sources goes.
done_with(none) -> fun(_) -> false end;
done_with({done_to, Mark}) -> fun(I) -> I =< Mark end.

%% Removes the moving records of `Items' from their sources, in batches,
%% durably (`Frags': every fragment of their tables).
leave_sources(Where, Frags, Items) ->
    lists:foreach(
      fun(Batch) ->
              Leave = fun(Mine) ->
                              Mines = [I || {S, _K} = I <- Batch, Mine(S)],
                              ok = lock_many([S || {S, _K} <- Mines], write),
                              [leave_source(Where, I) || I <- Mines]
                      end,
              {atomic, _} = fraghash_tab:by_layout(Frags, Leave),
              ok = fraghash_durable:tables(lists:usort([S || {S, _K} <- Batch]))
      end, chunks(Items, ?RECONCILE_BATCH)).

reconcile_batch(Tab, Where, Frags, Batch, Moved, DeleteOld, Dests) ->
    {atomic, _} = fraghash_tab:by_layout(
                    Frags, fun(Mine) -> settle_dests(Where, Batch, Moved, Mine, Dests) end),
    {atomic, ok} = mnesia:sync_transaction(
                     fun() -> fraghash_journal:write_progress(Tab, lists:last(Batch)) end),
    %% The journal is on every disc node: its sync covers the
    %% destinations' log records too.
    ok = fraghash_durable:tables([fraghash_journal]),
    case DeleteOld of
        false ->
            ok;
        true ->
            step(Tab, grow_marked),
            leave_sources(Where, Frags, Batch)
    end.

%% Gives each destination that `Mine' holds for, of each item of `Batch',
%% its value (see reconcile/6). Every destination is read, write-locked,
%% before the watch `Dests' is asked about them: a writer's commit to one
%% reached the watch before the lock was granted. The locks are the
%% tables' (see lock_many/2).
settle_dests(Where, Batch, Moved, Mine, Dests) ->
    ok = lock_many([S || {S, _K} <- Batch], write),
    Heres = [{I, Here, [D || D <- dests(Where, I, Here, Moved), Mine(D)]}
             || {S, K} = I <- Batch, Here <- [moving(Where, I, mnesia:read(S, K, write))]],
    ok = lock_many([D || {_I, _Here, Ds} <- Heres, D <- Ds], write),
    Read = [{I, Here, [{D, lists:sort(mnesia:read(D, K, write))} || D <- Ds]}
            || {{_S, K} = I, Here, Ds} <- Heres],
    Changed = fraghash_frag_watch:touched(
                Dests, [{D, K} || {{_S, K}, _Here, Theres} <- Read, {D, _} <- Theres], ?WATCH_MS),
    [settle(Where, I, Here, D, There, maps:get(I, Moved, []), lists:member({D, K}, Changed))
     || {{_S, K} = I, Here, Theres} <- Read, {D, There} <- Theres],
    ok.

%% Locks whole (`Kind': read or write), in the caller's transaction, each
%% table that `Tabs' names ?WHOLE times or more, once for each key the
%% transaction reads or writes there. A transaction of the copy or of
%% cleaning reads and writes hundreds or thousands of keys of a few
%% fragments: one lock request for such a table, where one a key costs a
%% round trip each to Mnesia's lock manager (on every node holding the
%% table), about half the time of copying and cleaning at 1,000,000
%% records. Writers of the table wait for the transaction then, a few tens
%% of milliseconds at most. A table with fewer keys in the transaction (a
%% del spreads its records over every fragment) keeps its keys' own
%% locks, and its writers keep going.
lock_many(Tabs, Kind) ->
    Counts = lists:foldl(fun(T, Acc) -> maps:update_with(T, fun(C) -> C + 1 end, 1, Acc) end,
                         #{}, Tabs),
    maps:foreach(fun(T, C) when C >= ?WHOLE -> mnesia:lock({table, T}, Kind);
                    (_T, _C) -> ok
                 end, Counts).

%% Gives destination `D' of item `I' its value from the source's records
%% `Here' placed there (`Due'), what `D' holds (`There', sorted) and the
%% last copy made there (`Last'). A `set' or `ordered_set' key has one
%% record, which a write replaces: `D''s own, when a writer changed `D'
%% since the switch (`Changed', or `D' holding other than the last copy),
%% else the source's. A `bag' key's records are written and deleted one
%% by one, and one writer's transaction can change both places: begun
%% before the switch, it routes its delete of the key with the old state
%% (the source), waits for the switch's locks, and routes its write after
%% the switch with the new one (`D', where the write adds to the copy the
%% delete meant to remove). So a bag's value is the source's changes since
%% the copy applied, then `D''s: the source's records, less those `D' lost
%% since the copy, plus those `D' gained. A writer that changed `D' and
%% then gave it back exactly the last copy's records is taken for none
%% there, as recovery takes every such writer (see reconcile/6).
settle(Where, {S, K}, Here, D, There, Copy, Changed) ->
    Place = maps:get(S, Where),
    Due = [R || R <- Here, Place(R) =:= D],
    Last = [R || R <- Copy, Place(R) =:= D],
    Type = mnesia:table_info(D, type),
    Value = case Type of
                bag -> ordsets:union(ordsets:subtract(Due, ordsets:subtract(Last, There)),
                                     ordsets:subtract(There, Last));
                _ when Changed; There =/= Last -> There;
                _ -> Due
            end,
    case Value of
        There ->
            ok;
        [] ->
            ok = mnesia:delete(D, K, write);
        _ ->
            %% A bag's records are replaced as a whole (bag fragments are
            %% never on a storage backend, so this commits whole); a set's
            %% one record is overwritten in place.
            [ok = mnesia:delete(D, K, write) || Type =:= bag],
            [ok = mnesia:write(D, R, write) || R <- Value],
            ok
    end.

%% Removes item `I''s moving records from its source.
leave_source(Where, {S, K} = I) ->
    All = mnesia:read(S, K, write),
    case moving(Where, I, All) of
        [] -> ok;
        Here when length(Here) =:= length(All) -> ok = mnesia:delete(S, K, write);
        Here -> [ok = mnesia:delete_object(S, R, write) || R <- Here], ok
    end.

%% @doc The items of `Moved' past the operation's progress mark.
-spec not_done(atom(), moved()) -> [fraghash_grow_group:item()].
not_done(Tab, Moved) ->
    case fraghash_journal:progress(Tab) of
        none -> maps:keys(Moved);
        {done_to, Mark} -> [I || I <- maps:keys(Moved), I > Mark]
    end.

%%% Internals

%% The records of `Recs' (read from item `I''s source) placed elsewhere,
%% sorted.
moving(Where, {S, _K}, Recs) ->
    Place = maps:get(S, Where),
    lists:sort([R || R <- Recs, Place(R) =/= S]).

%% The fragments item `I''s copies go to or were made in: those of its
%% moving records `Recs' and of its last copy.
dests(Where, {S, _K} = I, Recs, Moved) ->
    Place = maps:get(S, Where),
    lists:usort([Place(R) || R <- Recs ++ maps:get(I, Moved, [])]).

%% Writes item `I''s moving records `Recs' where they go, in those of its
%% destinations `Dests' (see dests/4: where they go, and where its earlier
%% copy is) that `Mine' holds for, replacing what that copy left there
%% (nothing else is there under the key), in the caller's activity. True
%% when this made the item's copy: it wrote one of its destinations, or it
%% has none.
put_copies(Where, {S, K}, Recs, Dests, Mine) ->
    Place = maps:get(S, Where),
    Written = [begin
                   ok = mnesia:delete(D, K, write),
                   [ok = mnesia:write(D, R, write) || R <- Recs, Place(R) =:= D],
                   D
               end || D <- Dests, Mine(D)],
    Written =/= [] orelse Dests =:= [].

%% Every fragment of the tables whose fragments `Where' moves records from.
frags(Where) ->
    fraghash_tab:fragments(maps:keys(Where)).

%% @doc The items that writers wrote or deleted on the sources since the
%% last call (`Watcher', started on them before the first copy) and that
%% concern the operation: a record written that moves, or an item copied
%% before (its copy must follow).
-spec touched(fraghash_frag_watch:watch(), where(), moved()) -> [fraghash_grow_group:item()].
touched(Watcher, Where, Moved) ->
    lists:usort([I || E <- fraghash_frag_watch:take(Watcher, ?WATCH_MS),
                      {S, _K} = I <- [fraghash_frag_watch:item(E)],
                      maps:is_key(I, Moved) orelse moves(Where, S, E)]).

moves(Where, S, {Op, Rec, _}) when Op =:= write; Op =:= delete_object ->
    (maps:get(S, Where))(Rec) =/= S;
moves(_Where, _S, {delete, _, _}) ->
    false.

