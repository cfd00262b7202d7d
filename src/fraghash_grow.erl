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
%% last round are compared between donor and copy; any difference aborts
%% the switch, those keys are copied again and the switch retried.
%% Otherwise the hash state becomes `To' and every moved key reads from
%% fragment N+1, which holds exactly what its donor held.</li>
%% <li>`cleaning': each moved key is deleted from its donor, in batches; a
%% donor record that changed after its copy (a writer that routed with
%% `From' and waited for the switch's locks) replaces the copy when the
%% copy is unchanged, else the copy, written since the switch, wins. The
%% journal entry goes once that is durable.</li>
%% </ol>
%% Recovery: before the switch committed (`From' still the table's state)
%% the hidden fragment is dropped, with the copies in it: the donors were
%% never changed. After it (`To' the state), cleaning runs again; it is
%% idempotent. Which of the two holds is read from the table, by comparing
%% its state with the entry's `From' and `To'.
%%
%% Limits of this path: `set' and `ordered_set' tables without foreign-key
%% tables; a racing delete (a writer that routed a moved key with `From'
%% and deleted it from its donor after the switch) is seen only while the
%% operation runs, as in `fraghash_frag'.
-module(fraghash_grow).

-export([add_frag/2, add_frag/3, eligible/1, recover/2]).

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
    case fraghash_grow_schema:add_hidden(Tab, Nodes) of
        {atomic, ok} ->
            ok = durable(Tab, N + 1),
            copy_and_switch(Tab, Entry);
        Aborted ->
            ok = fraghash_journal:delete(Tab),
            Aborted
    end.

%% @doc Whether this path grows `Tab': a `set' or `ordered_set' table with
%% no `disc_only_copies' fragment and no foreign-key table (the others take
%% `fraghash_frag''s).
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
            %% add_hidden did not commit: nothing changed.
            fraghash_journal:delete(Tab);
        {_, From, N1} when N1 =:= N + 1 ->
            rollback(Tab, Entry);
        {_, To, N1} when N1 =:= N + 1 ->
            clean(Tab, Entry, none);
        {_, _, N1} ->
            %% Changed by something else since (a plain change_table_frag
            %% let through): the entry cannot say what to do.
            {error, {fraghash, unexpected_layout,
                     lists:flatten(
                       io_lib:format("~s has ~b fragments and a hash state that its add from ~b "
                                     "fragments neither started from nor ended with: check it "
                                     "with fraghash_frag:stale_copies/1", [Tab, N1, N]))}}
    end.

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
        Moved = settle(Tab, Watcher, Route, Moves, New, copy(Route, New, Keys, #{}), ?ROUNDS),
        switch(Tab, Entry, Watcher, Route, Moves, New, Moved)
    after
        fraghash_frag_watch:stop(Watcher)
    end.

%% Copy rounds over the keys writers touched since the last round, until
%% a round finds none or `Rounds' are done.
settle(_Tab, _Watcher, _Route, _Moves, _New, Moved, 0) ->
    Moved;
settle(Tab, Watcher, Route, Moves, New, Moved, Rounds) ->
    case touched(Watcher, Moves) of
        [] -> Moved;
        Keys -> settle(Tab, Watcher, Route, Moves, New, copy(Route, New, Keys, Moved),
                       Rounds - 1)
    end.

%% Copies each key's records from where `Route' puts it to `New', in
%% transactions of ?BATCH keys. `Moved' keeps, per key, the records of the
%% last copy made into `New', sorted (`[]' for a key found deleted, whose
%% copy is removed): what `New' holds there until a writer writes it.
copy(Route, New, Keys, Moved) ->
    copy_batches(Route, New, lists:usort(Keys), Moved).

copy_batches(_Route, _New, [], Moved) ->
    Moved;
copy_batches(Route, New, Keys, Moved) ->
    {Batch, Rest} = lists:split(min(?BATCH, length(Keys)), Keys),
    {atomic, Copied} = mnesia:transaction(fun() -> [copy_key(Route, New, K) || K <- Batch] end),
    copy_batches(Route, New, Rest, remember(Copied, Moved)).

%% One key's copy, in the caller's activity: `{Key, Records}'.
copy_key(Route, New, K) ->
    Recs = mnesia:read(Route(K), K, read),
    ok = mnesia:delete(New, K, write),
    [ok = mnesia:write(New, R, write) || R <- Recs],
    {K, lists:sort(Recs)}.

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
    Check = fun() ->
                    step(Tab, grow_switch_locked),
                    case touched(Watcher, Moves) of
                        [] ->
                            ok;
                        Keys ->
                            Planned = [{K, lists:sort(mnesia:dirty_read(Route(K), K))}
                                       || K <- Keys],
                            ok = fraghash_journal:write_from_other_process(
                                   Tab, Entry#{phase => switching,
                                               moved => remember(Planned, Moved)}),
                            fix(New, Planned)
                    end
            end,
    case fraghash_grow_schema:switch(Tab, From, To, Donors ++ [New], Check) of
        {atomic, ok} ->
            step(Tab, grow_switched),
            ok = durable(Tab, N + 1),
            ok = clean(Tab, fraghash_journal:read(Tab), Watcher),
            {atomic, ok};
        Aborted ->
            ok = drop_hidden(Tab, Route, New),
            Aborted
    end.

%% Writes each key's planned records into `New' (nothing else there under
%% the key), from a process of its own in a `sync_dirty' activity: applied
%% on every replica of `New' when it returns.
fix(New, Planned) ->
    {Pid, Ref} = spawn_monitor(
                   fun() ->
                           exit({fixed, mnesia:activity(
                                          sync_dirty,
                                          fun() ->
                                                  [begin
                                                       ok = mnesia:delete(New, K, write),
                                                       [ok = mnesia:write(New, R, write)
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

%% Deletes each moved key from its donor. Which of the two copies is the
%% key's value: `New''s, unless it is still the last copy this operation
%% made (no writer wrote it since the switch), in which case the donor's,
%% which a writer that routed with `From' may have changed after the
%% switch. (A writer that writes, after the switch, exactly the records of
%% the last copy is taken for none; its value was the donor's too, unless a
%% writer routed with `From' changed that later still.) A donor
%% that no longer holds the key was cleaned already, or a writer that
%% routed with `From' deleted it there after the switch: only the watcher,
%% while the operation runs, tells the second, and then the copy goes too.
clean(Tab, #{n := N, from := From, moved := Moved, donors := Donors} = Entry, Watcher) ->
    ok = fraghash_journal:write(Tab, Entry#{phase => cleaning}),
    step(Tab, grow_clean),
    Route = router(Tab, From),
    New = frag_name(Tab, N + 1),
    %% Those writers have committed once the donors' locks are had.
    {atomic, ok} = mnesia:transaction(
                     fun() -> [mnesia:lock({table, D}, write) || D <- Donors], ok end),
    Deleted = case Watcher of
                  none -> #{};
                  _ -> maps:from_list([{K, true}
                                       || {delete, {_, K}, _}
                                              <- fraghash_frag_watch:take(Watcher, ?WATCH_MS)])
              end,
    {atomic, ok} =
        fraghash_tab:batches(
          fun(K) ->
                  Donor = Route(K),
                  There = lists:sort(mnesia:read(New, K, write)),
                  Here = lists:sort(mnesia:read(Donor, K, write)),
                  Ours = There =:= maps:get(K, Moved),
                  if
                      Ours, Here =/= [], Here =/= There ->
                          ok = mnesia:delete(New, K, write),
                          [ok = mnesia:write(New, R, write) || R <- Here];
                      Ours, Here =:= [], There =/= [] ->
                          case is_map_key(K, Deleted) of
                              true -> ok = mnesia:delete(New, K, write);
                              false -> ok
                          end;
                      true ->
                          ok
                  end,
                  ok = mnesia:delete(Donor, K, write)
          end, maps:keys(Moved)),
    ok = durable(Tab, N + 1),
    step(Tab, grow_done),
    fraghash_journal:delete(Tab).

%%% Rolling back

rollback(Tab, #{n := N, from := From}) ->
    step(Tab, grow_rollback),
    ok = drop_hidden(Tab, router(Tab, From), frag_name(Tab, N + 1)).

%% Drops the hidden fragment (with whatever copies it holds) and the
%% journal entry.
drop_hidden(Tab, _Route, _New) ->
    {_Mod, From, _N} = hash(Tab),
    {atomic, ok} = fraghash_grow_schema:drop_last(Tab, From, From, [], fun() -> ok end),
    {_, _, N} = hash(Tab),
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
