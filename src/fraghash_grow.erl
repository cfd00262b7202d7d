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
%% <li>`cleaning': each key the donors hold that `To' sends to fragment N+1
%% (the moved ones, and those the donors' watch saw written since the last
%% copy; after a kill, read from the donors whole), and each moved key past
%% the progress mark that its donor no longer holds, is reconciled and
%% deleted from its donor, in batches, after
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
%% A table and its foreign-key tables grow together (`fraghash_grow_group'):
%% each step above applies to each of them, and their states switch in one
%% schema change. The copying and reconciling are `fraghash_grow_copy''s,
%% shared with the del (`fraghash_grow_del'). Every storage type takes
%% this path: the copies are ordinary writes, and `fraghash_durable' makes
%% them durable on every kind of disc copy (Mnesia's log, dets files, the
%% node's redb database).
-module(fraghash_grow).

-export([add_frag/2, add_frag/3, recover/2]).
%% Shared with fraghash_grow_del.
-export([first_entry/2, unexpected_layout/4, changes/3, frags/2, durable/2, clear_name/1]).

-import(fraghash_tab, [hash/1, frag_name/2, step/2]).


%% @doc Adds a fragment to `Tab' (and to each of its foreign-key tables) on
%% `Nodes' (as `mnesia:change_table_frag(Tab, {add_frag, Nodes})' places
%% it), moving records in ordinary transactions. Returns once the new
%% layout and every moved record are durable where they are held.
-spec add_frag(atom(), [node()]) -> {atomic, ok} | {aborted, term()}.
add_frag(Tab, Nodes) ->
    add_frag(Tab, Nodes, none).

%% @doc As {@link add_frag/2}; `{Tab, Frag}' for `Relieve' makes
%% `mnesia_frag_slots' give the new fragment half of fragment `Frag''s
%% slots and nothing else (`fraghash_frag:relieve/3').
-spec add_frag(atom(), [node()], none | {atom(), pos_integer()}) ->
          {atomic, ok} | {aborted, term()}.
add_frag(Tab, Nodes, Relieve) ->
    case fraghash_grow_group:parts(Tab) of
        {ok, Parts0} ->
            Parts = [planned(P, Relieve) || P <- Parts0],
            Entry = #{op => grow_add, n => maps:get(n, hd(Parts)), parts => Parts},
            case first_entry(Tab, Entry#{phase => creating}) of
                ok -> create(Tab, Nodes, Entry);
                Refused -> Refused
            end;
        Refused ->
            Refused
    end.

%% A part with its target state, its donors and its new fragment.
planned(#{tab := T, mod := Mod, from := From, n := N} = Part, Relieve) ->
    {To, Iter, _Lock} = try put(fraghash_relieve, Relieve), Mod:add_frag(From)
                        after erase(fraghash_relieve)
                        end,
    Part#{to => To, donors => [frag_name(T, I) || I <- lists:usort(Iter)],
          new => frag_name(T, N + 1)}.

%% @private The journal's first entry: one that cannot be written refuses
%% the operation, nothing done (an entry left half written names a change
%% that did not happen, which recovery sees and removes).
%% A node holding a disc copy of one of the group's fragments where Mnesia
%% does not run (down, stopped, or apart in a partition) refuses it too:
%% on the side of a partition that is later thrown away, a schema change
%% would come back with that side's schema when its nodes rejoin.
first_entry(Tab, #{parts := Parts} = Entry) ->
    Frags = [frag_name(T, I) || #{tab := T, n := N} <- Parts, I <- lists:seq(1, N)],
    case fraghash_durable:holders_not_running(Frags) of
        [] -> write_first_entry(Tab, Entry);
        Down -> {aborted, {fraghash, holders_not_running,
                           lists:flatten(
                             io_lib:format("~s has copies on ~0p, where Mnesia is not running "
                                           "with this node: start Mnesia there (or move those "
                                           "copies), then run the operation again",
                                           [Tab, Down]))}}
    end.

write_first_entry(Tab, Entry) ->
    try fraghash_journal:write(Tab, Entry)
    catch
        _:Why ->
            {aborted, {fraghash, journal_write_failed,
                       lists:flatten(
                         io_lib:format("could not write ~s's journal entry (~0tP): ~s, then run "
                                       "the operation again",
                                       [Tab, Why, 20, fraghash_durable:advice(Why)]))}}
    end.

create(Tab, Nodes, #{n := N, parts := Parts} = Entry) ->
    step(Tab, grow_create),
    %% A table of a new fragment's name left by a kill, and files an
    %% earlier table of that name left, would become its contents.
    [ok = clear_name(New) || #{new := New} <- Parts],
    case fraghash_grow_schema:add_hidden(Tab, Nodes, [{T, F} || #{tab := T, from := F} <- Parts]) of
        {atomic, ok} ->
            ok = durable(Parts, N + 1),
            copy_and_switch(Tab, Entry);
        Aborted ->
            ok = fraghash_journal:delete(Tab),
            Aborted
    end.

%% @doc Finishes or undoes the `grow_add' of journal entry `Entry'.
-spec recover(atom(), map()) -> ok | {error, term()}.
recover(Tab, #{op := grow_add, n := N, parts := [#{from := From, to := To} | _]} = Entry) ->
    step(Tab, grow_recover),
    case hash(Tab) of
        {_, From, N} ->
            %% add_hidden did not commit, or its fragments were dropped.
            [ok = clear_name(New) || #{new := New} <- maps:get(parts, Entry)],
            fraghash_journal:delete(Tab);
        {_, From, N1} when N1 =:= N + 1 ->
            rollback(Tab, Entry);
        {_, To, N1} when N1 =:= N + 1 ->
            %% What writers did to the new fragments before the kill is
            %% not known here (see fraghash_grow_copy:reconcile/6), nor
            %% what they did to the donors.
            clean(Tab, Entry, [], none);
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

%%% Copying and switching

copy_and_switch(Tab, #{n := N, parts := Parts} = Entry) ->
    Where = where(Parts, donors, to),
    Donors = frags(Parts, donors),
    Watcher = fraghash_frag_watch:start(Donors),
    try
        ok = fraghash_journal:write(Tab, Entry#{phase => copying}),
        step(Tab, grow_copy),
        Moved = fraghash_grow_copy:settle(Watcher, Where,
                                          fraghash_grow_copy:copy(Where, moving(Parts), #{})),
        ok = durable(Parts, N + 1),
        ok = fraghash_journal:write(Tab, Entry#{phase => switching, moved => Moved}),
        step(Tab, grow_switch),
        New = frags(Parts, new),
        Check = fraghash_grow_copy:last_copy(Tab, grow_switch_locked, Watcher, Where, Moved, New),
        Switched = fraghash_grow_schema:switch(Tab, changes(Parts, from, to), Donors ++ New,
                                               Check),
        Dests = fraghash_grow_copy:dests_watch(),
        try Switched of
            {atomic, ok} ->
                step(Tab, grow_switched),
                ok = durable(Parts, N + 1),
                ok = clean(Tab, fraghash_journal:read(Tab), Dests, Watcher),
                {atomic, ok};
            Aborted ->
                ok = drop_hidden(Tab, Parts),
                Aborted
        after
            fraghash_frag_watch:stop(Dests)
        end
    after
        fraghash_frag_watch:stop(Watcher)
    end.

%% The items of the donors that the target states place in the new
%% fragments.
moving(Parts) ->
    lists:append([fraghash_grow_group:items(P, Ds, To, fun(F) -> F =:= New end)
                  || #{donors := Ds, to := To, new := New} = P <- Parts]).

%%% Cleaning

%% Deletes each moved record from its donor, after reconciling the two
%% copies (`fraghash_grow_copy:reconcile/6', with `Dests', the watch of the
%% new fragments since the switch). Once every transaction running when
%% cleaning began has ended (`fraghash_tab:transactions_ended/0') and the
%% donors' table locks are had, every writer that routed with the old
%% states has committed, those that asked for their locks late included.
%% The items: the moved ones past the progress mark (a donor may no longer
%% hold one: such a writer deleted it), and those of the donors that the
%% new states place in the new fragments (the moved ones not cleaned yet,
%% and records such a writer inserted). With `Donors', the watch of the
%% donors since before the first copy, the latter are the moved ones and
%% the items writers touched since the switch's last check, which the
%% watch holds by now (a commit's events reach it before its locks go);
%% without it (recovery) the donors are read whole.
clean(Tab, #{n := N, parts := Parts, moved := Moved} = Entry, Dests, Donors) ->
    ok = fraghash_journal:set_phase(Tab, Entry, cleaning),
    step(Tab, grow_clean),
    ok = fraghash_tab:transactions_ended(),
    {atomic, ok} = mnesia:transaction(
                     fun() -> [mnesia:lock({table, D}, write) || D <- frags(Parts, donors)], ok end),
    Where = where(Parts, donors, to),
    Inserted = case Donors of
                   none -> moving(Parts);
                   _ -> fraghash_grow_copy:touched(Donors, Where, Moved)
               end,
    Items = Inserted ++ fraghash_grow_copy:not_done(Tab, Moved),
    ok = fraghash_grow_copy:reconcile(Tab, Where, Items, Moved, true, Dests),
    ok = durable(Parts, N + 1),
    step(Tab, grow_done),
    fraghash_journal:delete(Tab).

%%% Rolling back

rollback(Tab, #{parts := Parts}) ->
    step(Tab, grow_rollback),
    ok = drop_hidden(Tab, Parts).

%% Drops the hidden fragments (with whatever copies they hold) and the
%% journal entry.
drop_hidden(Tab, Parts) ->
    {_, _, N} = hash(Tab),
    {atomic, ok} = fraghash_grow_schema:drop_last(Tab, changes(Parts, from, from), [], fun() -> ok end),
    ok = fraghash_tab:dump_log(),
    [ok = clear_name(frag_name(T, N)) || #{tab := T} <- Parts],
    ok = durable(Parts, N - 1),
    fraghash_journal:delete(Tab).

%%% The parts

%% @private `{Table, Held, Next}' per part: the states under `HeldKey'
%% (the one the table must hold) and `NextKey' (the one it gets).
changes(Parts, HeldKey, NextKey) ->
    [{T, maps:get(HeldKey, P), maps:get(NextKey, P)} || #{tab := T} = P <- Parts].

%% @private The fragments the parts name under `Key' (a list or one).
frags(Parts, Key) ->
    lists:append([case maps:get(Key, P) of
                      Fs when is_list(Fs) -> Fs;
                      F -> [F]
                  end || P <- Parts]).

%% Each source fragment (the parts' `Sources') with its table's placement
%% under its `State' state.
where(Parts, Sources, State) ->
    maps:from_list([{S, fraghash_grow_group:place(P, maps:get(State, P))}
                    || P <- Parts, S <- frags([P], Sources)]).

%% @private What was committed to fragments 1..N of the parts (those that
%% exist) and to the journal, durable where they are held.
durable(Parts, N) ->
    fraghash_tab:durable([T || #{tab := T} <- Parts], N).

%% @private No table and no file of fragment name `Frag' left.
clear_name(Frag) ->
    ok = fraghash_grow_schema:drop_orphan(Frag),
    fraghash_frag_recovery:remove_leftover_files(Frag).
