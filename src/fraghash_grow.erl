%% @doc `add_frag' of a fragmented table whose records move in ordinary,
%% batched transactions while writers keep going; the schema changes carry
%% no record (`fraghash_grow_schema'). Written as a state machine: the
%% phases below are the journal's (`fraghash_journal', op `grow_add'), each
%% reached only once the one before is durable, and {@link recover/2} goes
%% on from the phase the journal names.
%%
%% <ol>
%% <li>`creating': the target state `To' (the hash module's `add_frag' of
%% the table's state `From') and its donors are in the journal. Then
%% `add_hidden': fragment N+1 exists, no key routes to it.</li>
%% <li>`copying': every record of a donor that `To' sends to fragment N+1
%% is copied there, in transactions of 500 that read-lock it where it
%% lives. Writers go on with `From': their writes and deletes on the donors
%% are watched (`fraghash_frag_watch') and the keys they touch copied
%% again, in rounds, until a round finds none or a bound of rounds is
%% reached. Reads never see the copies: no key routes to fragment N+1, and
%% scans through `mnesia_frag' ask the hash module, which names fragments
%% 1..N.</li>
%% <li>`switching': the copies are synced on every node holding fragment
%% N+1, and the records as copied are in the journal. Then `switch', under
%% write locks on the donors and fragment N+1: the keys written since the
%% last round are copied once more (named in the journal first, made by a
%% `sync_dirty' activity of another process), and the hash state becomes
%% `To': every moved key reads from fragment N+1, which holds exactly what
%% its donor held.</li>
%% <li>`cleaning': each key the donors hold that `To' sends to fragment N+1,
%% and each moved key past the progress mark that its donor no longer
%% holds, is reconciled and deleted from its donor, in batches, after
%% {@link reconcile/6}: a donor record that changed (or went) after its
%% copy (a writer that routed with `From' and waited for the switch's
%% locks) replaces the copy when the copy is unchanged, else the copy,
%% written since the switch, wins. The journal entry goes once that is
%% durable.</li>
%% </ol>
%% Recovery: before the switch committed (`From' still the table's state)
%% the hidden fragment is dropped, with the copies in it: the donors were
%% never changed. After it (`To' the state), cleaning runs again; it is
%% idempotent. Which of the two holds is read from the table, by comparing
%% its state with the entry's `From' and `To'.
%%
%% Limits of this path (see {@link eligible/1}): `set' and `ordered_set'
%% tables without `disc_only_copies' fragments or foreign-key tables. The
%% del is `fraghash_grow_del''s, which shares the copying and the
%% reconciling here.
-module(fraghash_grow).

-export([add_frag/2, add_frag/3, eligible/1, recover/2]).
%% Shared with fraghash_grow_del.
-export([first_entry/2, router/2, copy/4, settle/5, last_copy/8, not_done/2, reconcile/6,
         unexpected_layout/4]).

-import(fraghash_tab, [hash/1, frag_name/2, durable/2, step/2]).

-define(BATCH, 500).
%% Copy rounds before the switch.
-define(ROUNDS, 8).
-define(WATCH_MS, 60000).

%% @doc Adds a fragment to `Tab' on `Nodes' (as
%% `mnesia:change_table_frag(Tab, {add_frag, Nodes})' places it), moving
%% records in ordinary transactions. Returns once the new layout and every
%% moved record are durable where they are held.
-spec add_frag(atom(), [node()]) -> {atomic, ok} | {aborted, term()}.
add_frag(Tab, Nodes) ->
    add_frag(Tab, Nodes, none).

%% @doc As {@link add_frag/2}; `{Tab, Frag}' for `Relieve' makes
%% `mnesia_frag_slots' give the new fragment half of fragment `Frag''s
%% slots and nothing else (`fraghash_frag:relieve/3').
-spec add_frag(atom(), [node()], none | {atom(), pos_integer()}) ->
          {atomic, ok} | {aborted, term()}.
add_frag(Tab, Nodes, Relieve) ->
    {Mod, From, N} = hash(Tab),
    {To, Iter, _Lock} = try put(fraghash_relieve, Relieve), Mod:add_frag(From)
                        after erase(fraghash_relieve)
                        end,
    Donors = [frag_name(Tab, I) || I <- lists:usort(Iter)],
    Entry = #{op => grow_add, n => N, from => From, to => To, donors => Donors},
    case first_entry(Tab, Entry#{phase => creating}) of
        ok -> create(Tab, Nodes, Entry);
        Refused -> Refused
    end.

%% The journal's first entry: one that cannot be written refuses the
%% operation, nothing done (an entry left half written names a change that
%% did not happen, which recovery sees and removes).
first_entry(Tab, Entry) ->
    try fraghash_journal:write(Tab, Entry)
    catch
        _:Why ->
            {aborted, {fraghash, journal_write_failed,
                       lists:flatten(
                         io_lib:format("could not write ~s's journal entry (~0tp): make room on "
                                       "the disc of every node holding the journal, then run "
                                       "the operation again", [Tab, Why]))}}
    end.

create(Tab, Nodes, #{n := N} = Entry) ->
    step(Tab, grow_create),
    %% A table of the new fragment's name left by a kill, and files an
    %% earlier table of that name left, would become its contents.
    ok = clear_name(frag_name(Tab, N + 1)),
    case fraghash_grow_schema:add_hidden(Tab, Nodes) of
        {atomic, ok} ->
            ok = durable(Tab, N + 1),
            copy_and_switch(Tab, Entry);
        Aborted ->
            ok = fraghash_journal:delete(Tab),
            Aborted
    end.

%% @doc Whether this path (and `fraghash_grow_del' for a del) takes `Tab':
%% a `set' or `ordered_set' table with no `disc_only_copies' fragment and no
%% foreign-key table (the others take `fraghash_frag''s).
-spec eligible(atom()) -> boolean().
eligible(Tab) ->
    {_Mod, _State, N} = hash(Tab),
    Frags = [frag_name(Tab, I) || I <- lists:seq(1, N)],
    mnesia:table_info(Tab, type) =/= bag
        andalso lists:member(lists:keyfind(foreign_key, 1,
                                           mnesia:table_info(Tab, frag_properties)),
                             [false, {foreign_key, undefined}])
        andalso mnesia_frag:lookup_foreigners(Tab) =:= []
        andalso lists:all(fun(F) -> mnesia:table_info(F, disc_only_copies) =:= [] end, Frags).

%% @doc Finishes or undoes the `grow_add' of journal entry `Entry'.
-spec recover(atom(), map()) -> ok | {error, term()}.
recover(Tab, #{op := grow_add, n := N, from := From, to := To} = Entry) ->
    step(Tab, grow_recover),
    case hash(Tab) of
        {_, From, N} ->
            %% add_hidden did not commit, or its fragment was dropped.
            ok = clear_name(frag_name(Tab, N + 1)),
            fraghash_journal:delete(Tab);
        {_, From, N1} when N1 =:= N + 1 ->
            rollback(Tab);
        {_, To, N1} when N1 =:= N + 1 ->
            clean(Tab, Entry);
        {_, _, N1} ->
            unexpected_layout(Tab, add, N, N1)
    end.

%% @private A table changed by something else since its journal entry was
%% written (a plain change_table_frag let through): the entry cannot say
%% what to do.
unexpected_layout(Tab, Op, N, N1) ->
    {error, {fraghash, unexpected_layout,
             lists:flatten(
               io_lib:format("~s has ~b fragments and a hash state that its ~s from ~b fragments "
                             "neither started from nor ended with: check it with "
                             "fraghash_frag:stale_copies/1", [Tab, N1, Op, N]))}}.

%%% Copying

copy_and_switch(Tab, #{n := N, from := From, to := To, donors := Donors} = Entry) ->
    New = frag_name(Tab, N + 1),
    Route = router(Tab, From),
    Moves = moves(Tab, To, New),
    Watcher = fraghash_frag_watch:start(Donors),
    try
        ok = fraghash_journal:write(Tab, Entry#{phase => copying}),
        step(Tab, grow_copy),
        Keys = [K || D <- Donors, K <- mnesia:dirty_all_keys(D), Moves(K)],
        Moved = settle(Watcher, Route, into(New), Moves, copy(Route, into(New), Keys, #{})),
        switch(Tab, Entry, Watcher, Route, Moves, New, Moved)
    after
        fraghash_frag_watch:stop(Watcher)
    end.

%% @private Copy rounds from `Source(Key)' to `Dest(Key)' over the moving
%% keys writers touched since the last round, until a round finds none or
%% ?ROUNDS are done.
settle(Watcher, Source, Dest, Moves, Moved) ->
    settle(Watcher, Source, Dest, Moves, Moved, ?ROUNDS).

settle(_Watcher, _Source, _Dest, _Moves, Moved, 0) ->
    Moved;
settle(Watcher, Source, Dest, Moves, Moved, Rounds) ->
    case touched(Watcher, Moves) of
        [] -> Moved;
        Keys -> settle(Watcher, Source, Dest, Moves, copy(Source, Dest, Keys, Moved), Rounds - 1)
    end.

%% Copies each key's records from the fragment `Source(Key)' names to the
%% one `Dest(Key)' names (nothing else left there under the key), in
%% transactions of ?BATCH keys. `Moved' keeps, per key, the records of the
%% last copy made, sorted (`[]' for a key found deleted, whose copy is
%% removed): what the destination holds there until a writer writes it.
copy(Source, Dest, Keys, Moved) ->
    copy_batches(Source, Dest, lists:usort(Keys), Moved).

copy_batches(_Source, _Dest, [], Moved) ->
    Moved;
copy_batches(Source, Dest, Keys, Moved) ->
    {Batch, Rest} = lists:split(min(?BATCH, length(Keys)), Keys),
    {atomic, Copied} = mnesia:transaction(fun() -> [copy_key(Source, Dest, K) || K <- Batch] end),
    copy_batches(Source, Dest, Rest, remember(Copied, Moved)).

%% One key's copy, in the caller's activity: `{Key, Records}'.
copy_key(Source, Dest, K) ->
    Recs = mnesia:read(Source(K), K, read),
    D = Dest(K),
    ok = mnesia:delete(D, K, write),
    [ok = mnesia:write(D, R, write) || R <- Recs],
    {K, lists:sort(Recs)}.

%% Every key to fragment `New'.
into(New) ->
    fun(_) -> New end.

remember(Copied, Moved) ->
    maps:merge(Moved, maps:from_list(Copied)).

%% The moving keys that writers wrote or deleted on the donors since the
%% last call.
touched(Watcher, Moves) ->
    lists:usort([K || E <- fraghash_frag_watch:take(Watcher, ?WATCH_MS),
                      K <- [event_key(E)], Moves(K)]).

event_key({write, Rec, _}) -> element(2, Rec);
event_key({delete_object, Rec, _}) -> element(2, Rec);
event_key({delete, {_Frag, K}, _}) -> K.

%%% Switching

%% The switch, under write locks on the donors and `New'. Writers are held
%% off those fragments while it holds them, so the keys they touched since
%% the last round (all seen by then) are copied once more, in a dirty
%% activity of another process (no lock, not a part of the schema change,
%% which carries no record), after the journal names those copies.
switch(Tab, #{n := N, from := From, to := To, donors := Donors} = Entry, Watcher, Route,
       Moves, New, Moved) ->
    ok = durable(Tab, N + 1),
    ok = fraghash_journal:write(Tab, Entry#{phase => switching, moved => Moved}),
    step(Tab, grow_switch),
    Check = last_copy(Tab, Entry, grow_switch_locked, Watcher, Route, into(New), Moves, Moved),
    case fraghash_grow_schema:switch(Tab, From, To, Donors ++ [New], Check) of
        {atomic, ok} ->
            step(Tab, grow_switched),
            ok = durable(Tab, N + 1),
            ok = clean(Tab, fraghash_journal:read(Tab)),
            {atomic, ok};
        Aborted ->
            ok = drop_hidden(Tab),
            Aborted
    end.

%% @private The check a switch runs under its locks, which hold writers
%% off the fragments involved: the moving keys they touched since the last
%% round (all seen by then) are copied from `Source(Key)' to `Dest(Key)'
%% once more, after the journal entry `Entry' (phase `switching') names
%% those copies.
last_copy(Tab, Entry, Step, Watcher, Source, Dest, Moves, Moved) ->
    fun() ->
            step(Tab, Step),
            case touched(Watcher, Moves) of
                [] ->
                    ok;
                Keys ->
                    Planned = [{K, lists:sort(mnesia:dirty_read(Source(K), K))} || K <- Keys],
                    ok = fraghash_journal:write_from_other_process(
                           Tab, Entry#{phase => switching, moved => remember(Planned, Moved)}),
                    fix(Dest, Planned)
            end
    end.

%% Writes each key's planned records into the fragment `Dest(Key)' names
%% (nothing else there under the key), from a process of its own in a
%% `sync_dirty' activity: applied on every replica when it returns.
fix(Dest, Planned) ->
    {Pid, Ref} = spawn_monitor(
                   fun() ->
                           exit({fixed, mnesia:activity(
                                          sync_dirty,
                                          fun() ->
                                                  [begin
                                                       D = Dest(K),
                                                       ok = mnesia:delete(D, K, write),
                                                       [ok = mnesia:write(D, R, write)
                                                        || R <- Recs]
                                                   end || {K, Recs} <- Planned],
                                                  ok
                                          end)})
                   end),
    receive
        {'DOWN', Ref, process, Pid, {fixed, ok}} -> ok;
        {'DOWN', Ref, process, Pid, Why} -> mnesia:abort({fraghash, copy_failed, Why})
    end.

%%% Cleaning

%% Deletes each moved key from its donor, after reconciling the two copies
%% (see {@link reconcile/6}). Once the donors' table locks are had, every
%% writer that routed with `From' and queued behind the switch has
%% committed. The keys: those the donors hold that `To' sends to `New' (the
%% moved ones not cleaned yet, and keys such a writer inserted), and the
%% moved keys past the progress mark that a donor no longer holds (such a
%% writer deleted them).
clean(Tab, #{n := N, from := From, to := To, moved := Moved, donors := Donors} = Entry) ->
    ok = fraghash_journal:write(Tab, Entry#{phase => cleaning}),
    step(Tab, grow_clean),
    New = frag_name(Tab, N + 1),
    Moves = moves(Tab, To, New),
    {atomic, ok} = mnesia:transaction(
                     fun() -> [mnesia:lock({table, D}, write) || D <- Donors], ok end),
    Keys = [K || D <- Donors, K <- mnesia:dirty_all_keys(D), Moves(K)]
        ++ not_done(Tab, Moved),
    ok = reconcile(Tab, router(Tab, From), into(New), Keys, Moved, true),
    ok = durable(Tab, N + 1),
    step(Tab, grow_done),
    fraghash_journal:delete(Tab).

%% @private The moved keys past the operation's progress mark.
not_done(Tab, Moved) ->
    case fraghash_journal:progress(Tab) of
        none -> maps:keys(Moved);
        {done_to, Mark} -> [K || K <- maps:keys(Moved), K > Mark]
    end.

%% @private After a switch, for each key, in term order: which of the old
%% fragment's records (`Old(Key)') and the new one's (`New(Key)') is the
%% key's value. The new one's, unless it is still the last copy this
%% operation made (`Moved'; none for a key it never copied): then no writer
%% wrote it since the switch, and the old fragment's is the value, which a
%% writer that routed with the old state may have changed, or deleted,
%% after the switch. (A writer that writes, after the switch, exactly the
%% records of the last copy is taken for none; its value was the old
%% fragment's too, unless a writer routed with the old state changed that
%% later still.) With `DeleteOld', the key then leaves the old fragment.
%% Each batch of 500 keys commits with the journal's progress mark, so that
%% a key whose old copy this removed is never taken, after a crash, for one
%% a writer deleted.
reconcile(Tab, Old, New, Keys, Moved, DeleteOld) ->
    {atomic, ok} =
        fraghash_tab:batches(
          fun({last, K}) ->
                  fraghash_journal:write_progress(Tab, K);
             (K) ->
                  {O, D} = {Old(K), New(K)},
                  There = lists:sort(mnesia:read(D, K, write)),
                  Here = lists:sort(mnesia:read(O, K, write)),
                  case There =:= maps:get(K, Moved, []) andalso Here =/= There of
                      true ->
                          ok = mnesia:delete(D, K, write),
                          [ok = mnesia:write(D, R, write) || R <- Here];
                      false ->
                          ok
                  end,
                  case DeleteOld of
                      true -> ok = mnesia:delete(O, K, write);
                      false -> ok
                  end
          end, with_marks(lists:usort(Keys))),
    ok.

%% Keys in batches of fraghash_tab:batches/2's size, each batch ending with
%% its progress mark.
with_marks([]) ->
    [];
with_marks(Keys) ->
    {Batch, Rest} = lists:split(min(499, length(Keys)), Keys),
    Batch ++ [{last, lists:last(Batch)} | with_marks(Rest)].

%%% Rolling back

rollback(Tab) ->
    step(Tab, grow_rollback),
    ok = drop_hidden(Tab).

%% No table and no file of fragment name `Frag' left.
clear_name(Frag) ->
    ok = fraghash_grow_schema:drop_orphan(Frag),
    fraghash_frag_recovery:remove_leftover_files(Frag).

%% Drops the hidden fragment (with whatever copies it holds) and the
%% journal entry.
drop_hidden(Tab) ->
    {_Mod, From, _N} = hash(Tab),
    {atomic, ok} = fraghash_grow_schema:drop_last(Tab, From, From, [], fun() -> ok end),
    {_, _, N} = hash(Tab),
    dumped = mnesia:dump_log(),
    ok = clear_name(frag_name(Tab, N + 1)),
    ok = durable(Tab, N),
    fraghash_journal:delete(Tab).

%%% Where keys go

%% The fragment of a key under hash state `State' (of `Tab''s module).
router(Tab, State) ->
    {Mod, _, _} = hash(Tab),
    fun(K) -> frag_name(Tab, Mod:key_to_frag_number(State, K)) end.

%% Whether `State' sends a key to fragment `New'.
moves(Tab, State, New) ->
    Route = router(Tab, State),
    fun(K) -> Route(K) =:= New end.
