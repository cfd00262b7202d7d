%% @doc The runner of the growth path: `add_frag' (and a relieve, an add
%% whose target state names one donor) and `del_frag' of a fragmented
%% table, whose records move in ordinary, batched transactions while
%% writers keep going; no schema change carries a record
%% (`fraghash_grow_schema').
%%
%% Both operations are the same skeleton over the phases of the pure
%% state machine `fraghash_grow_machine': the first phase goes to the
%% journal (`fraghash_journal') with the operation's plan (per table of
%% the group: the state `from', the target state `to', the fragments), and
%% each later phase is written there, durably on every node holding the
%% journal, before any of its effects. Recovery ({@link recover/2}) asks
%% the machine what the journal's phase and the table's schema call for,
%% and runs that action. The effects, per phase:
%% <ul>
%% <li>`creating' (add): fragment N+1 is created with the state kept, so
%% no key routes to it.</li>
%% <li>`copying': a fence is begun (`fraghash_grow_fence'), the sources (an
%% add's donors, a del's last fragment) are watched, and every record of
%% theirs that the target state places elsewhere is copied there, hidden
%% (the old state still routes its key to its source), in chunks, with
%% rounds of copies of what writers touched (`fraghash_grow_copy').</li>
%% <li>`switching': the fence write-locks the sources, the last writes are
%% copied, made durable, and the hash state becomes the target (a schema
%% change); the fence ends once every running node routes with it. From
%% then on no writer reaches a moved record in its source: the copies are
%% the records.</li>
%% <li>`cleaning' (add): the moved records are deleted from the donors, in
%% chunks, found by the list of what the copy moved (`fraghash_grow_moved')
%% or, without a whole list, by reading the donors again; the entry
%% goes.</li>
%% <li>`dropping' (del): the last fragment, which no key routes to any
%% more, is deleted; the entry goes.</li>
%% </ul>
%% An undo (a refused switch, or recovery before it) removes the hidden
%% copies: an add drops its hidden fragment, a del deletes from its
%% destinations every record the old state places in the last fragment.
%% The argument, phase by phase and node by node, is in
%% docs/mnesia-disc-safety.md.
%%
%% A table and its foreign-key tables move together (`fraghash_grow_group'):
%% each phase applies to each, and their states switch in one schema
%% change. Every storage type takes this path: the copies are ordinary
%% writes (into a new fragment whose only copy is a dets file, one write
%% of each chunk into the file: `fraghash_grow_copy'), made durable on
%% every kind of disc copy by `fraghash_durable'.
-module(fraghash_grow).

-export([add_frag/3, del_frag/1, rehash/3, recover/2]).

-import(fraghash_tab, [hash/1, frag_name/2, step/2]).

%% The journal entries this version writes and recovers.
-define(VERSION, 2).
%% How often the cleaning writes its deletes out (syncing/2). Writers of
%% a source can wait while a write-back runs, the longer the more it has
%% to write (a dets file of 1 GB under 4 writers and a deleter, 90 s:
%% their longest write 165 ms with one a second, 79 ms with one every
%% 250 ms, 72 ms with none); a short interval keeps each one small.
-define(SYNC_MS, 250).
%% The share of the cleaning's time it leaves to the writers of dets
%% sources, in percent of each chunk's time (cleaning_pause/2).
-define(CLEAN_PAUSE_PERCENT, 100).

%%% Starting

%% @doc Adds a fragment to `Tab' (and to each of its foreign-key tables) on
%% `Nodes' (as `mnesia:change_table_frag(Tab, {add_frag, Nodes})' places
%% it); `{Tab, Frag}' for `Relieve' makes `mnesia_frag_slots' give the new
%% fragment half of fragment `Frag''s slots and nothing else
%% (`fraghash_frag:relieve/3'). Returns once the new layout and every moved
%% record are durable where they are held.
-spec add_frag(atom(), [node()], none | {atom(), pos_integer()}) ->
          {atomic, ok} | {aborted, term()}.
add_frag(Tab, Nodes, Relieve) ->
    begin_op(Tab, add, fun(P) -> planned_add(P, Relieve) end, #{nodes => Nodes}).

%% @doc Removes the last fragment of `Tab' (which has two or more) and of
%% each of its foreign-key tables. Returns once the new layout is durable
%% where it is held.
-spec del_frag(atom()) -> {atomic, ok} | {aborted, term()}.
del_frag(Tab) ->
    begin_op(Tab, del, fun planned_del/1, #{}).

%% @doc Replaces `Tab''s hash module by `Mod', whose state is
%% `Mod:init_state(Tab, InitArg)' grown to the table's fragment count (as
%% Mnesia makes it for a new table), moving every record the new module
%% places elsewhere. A table with foreign-key tables is refused. Returns
%% once the new module and every moved record are durable where they are
%% held.
-spec rehash(atom(), module(), term()) -> {atomic, ok} | {aborted, term()}.
rehash(Tab, Mod, InitArg) ->
    case fraghash_grow_schema:foreigners(Tab) of
        [] ->
            begin_op(Tab, rehash, fun(P) -> planned_rehash(P, Mod, InitArg) end, #{});
        [F | _] ->
            {aborted, fraghash_error:new(rehash_foreign_keys,
                                         "~s has foreign-key tables (~s among them), "
                                         "whose placement follows its hash module: "
                                         "copy them into tables of the module wanted",
                                         [Tab, F])}
    end.

begin_op(Tab, Op, Plan, Run) ->
    case fraghash_grow_group:parts(Tab) of
        {ok, Parts0} ->
            Parts = [Plan(P) || P <- Parts0],
            Entry = #{op => Op, version => ?VERSION, n => maps:get(n, hd(Parts)),
                      parts => Parts, phase => fraghash_grow_machine:first_phase(Op),
                      node => node(), started => erlang:system_time(millisecond)},
            case first_entry(Tab, Entry) of
                ok -> run(Tab, Entry, Run);
                Refused -> Refused
            end;
        Refused ->
            Refused
    end.

%% An add's part: its target state, its donors and its new fragment.
planned_add(#{tab := T, mod := Mod, from := From, n := N} = Part, Relieve) ->
    {To, Iter, _Lock} = try put(fraghash_relieve, Relieve), Mod:add_frag(From)
                        after erase(fraghash_relieve)
                        end,
    Part#{to => To, sources => [frag_name(T, I) || I <- lists:usort(Iter)],
          dests => [frag_name(T, N + 1)]}.

%% A del's part: its target state, its last fragment and the fragments
%% that receive its records.
planned_del(#{tab := T, mod := Mod, from := From, n := N} = Part) ->
    {To, _Iter, Lock} = Mod:del_frag(From),
    Part#{to => To, sources => [frag_name(T, N)],
          dests => [frag_name(T, I) || I <- lists:usort(Lock), I =/= N]}.

%% A rehash's part: its new module and state, every fragment a source and
%% a destination.
planned_rehash(#{tab := T, n := N} = Part, Mod, InitArg) ->
    To = lists:foldl(fun(_, S) -> element(1, Mod:add_frag(S)) end, Mod:init_state(T, InitArg),
                     lists:seq(2, N)),
    Frags = [frag_name(T, I) || I <- lists:seq(1, N)],
    Part#{to => To, mod_to => Mod, sources => Frags, dests => Frags}.

%% The journal's first entry: one that cannot be written refuses the
%% operation, nothing done. A node holding a copy of one of the group's
%% fragments where Mnesia does not run (down, stopped, or apart in a
%% partition) refuses it too: on the side of a partition that is later
%% thrown away, a schema change would come back with that side's schema
%% when its nodes rejoin.
first_entry(Tab, #{parts := Parts} = Entry) ->
    Frags = [frag_name(T, I) || #{tab := T, n := N} <- Parts, I <- lists:seq(1, N)],
    case fraghash_durable:holders_not_running(Frags) of
        [] -> write_first_entry(Tab, Entry);
        Down -> {aborted, fraghash_error:new(holders_not_running,
                                             "~s has copies on ~0p, where Mnesia is not running "
                                             "with this node: start Mnesia there (or move those "
                                             "copies), then run the operation again",
                                             [Tab, Down])}
    end.

write_first_entry(Tab, Entry) ->
    try fraghash_journal:write(Tab, Entry)
    catch
        _:Why ->
            {aborted, fraghash_error:new(journal_write_failed,
                                         "could not write ~s's journal entry (~0tP): ~s, then run "
                                         "the operation again",
                                         [Tab, Why, 20, fraghash_durable:advice(Why)])}
    end.

%%% Running

%% Runs the entry's phase, then each next one, writing it to the journal
%% first. `Run' carries the nodes of a new fragment; the fence and the
%% watch of the sources, which live from `copying' to the end of
%% `switching', are kept in the process dictionary, so that whatever ends
%% the run ends them too.
run(Tab, #{op := Op} = Entry, Run) ->
    ok = fraghash_grow_progress:start(Tab, Op, maps:get(started, Entry,
                                                        erlang:system_time(millisecond))),
    try
        run_phases(Tab, Entry, Run)
    after
        [fraghash_frag_watch:stop(W) || W <- [erase(fraghash_grow_watch)], W =/= undefined],
        [fraghash_grow_fence:stop(F) || F <- [erase(fraghash_grow_fence)], F =/= undefined],
        ok = fraghash_grow_moved:close(fraghash_grow_moved:take()),
        fraghash_grow_progress:stop(Tab)
    end.

run_phases(Tab, #{op := Op, phase := Phase, parts := Parts} = Entry, Run) ->
    ok = fraghash_grow_progress:phase(Tab, Phase, to_scan(Phase, Parts)),
    case phase(Phase, Tab, Entry, Run) of
        next ->
            Next = fraghash_grow_machine:next_phase(Op, Phase),
            ok = fraghash_journal:set_phase(Tab, Entry, Next),
            run_phases(Tab, Entry#{phase => Next}, Run);
        done ->
            {atomic, ok};
        {aborted, _} = Aborted ->
            Aborted
    end.

%% What a phase reads, for its progress: a cleaning from the list of what
%% the copy moved, its items; a copy or a cleaning that reads the sources,
%% their records.
to_scan(cleaning, Parts) ->
    case fraghash_grow_moved:count() of
        0 -> to_scan(copying, Parts);
        Listed -> Listed
    end;
to_scan(copying, Parts) ->
    lists:sum([mnesia:table_info(S, size) || S <- frags(Parts, sources)]);
to_scan(_Phase, _Parts) ->
    0.

phase(creating, Tab, #{n := N, parts := Parts} = Entry, #{nodes := Nodes}) ->
    step(Tab, grow_create),
    %% A table of a new fragment's name left by a kill, and files an
    %% earlier table of that name left, would become its contents.
    [ok = clear_name(D) || #{dests := [D]} <- Parts],
    case fraghash_grow_schema:add_hidden(Tab, Nodes, changes(Parts, from)) of
        {atomic, ok} ->
            ok = durable(Entry, N + 1),
            next;
        Aborted ->
            ok = fraghash_journal:delete(Tab),
            Aborted
    end;
phase(copying, Tab, #{op := Op, parts := Parts} = Entry, _Run) ->
    %% The watch first: the fence's start then waits for every transaction
    %% that ran when the watch began, whose change it may have missed (its
    %% event came before) but which the copy's reads see (it is applied).
    Watch = fraghash_frag_watch:start(frags(Parts, sources)),
    put(fraghash_grow_watch, Watch),
    [ok = fraghash_grow_moved:open(Tab)
     || lists:member(cleaning, fraghash_grow_machine:phases(Op))],
    put(fraghash_grow_fence, fraghash_grow_fence:start()),
    step(Tab, op_step(Op, grow_copy, grow_del_copy)),
    ok = fraghash_grow_copy:copy_all(where(Op, Parts), Watch, progress(Tab)),
    ok = durable(Entry, hidden_count(Entry)),
    next;
phase(switching, Tab, #{op := Op, parts := Parts} = Entry, _Run) ->
    step(Tab, op_step(Op, grow_switch, grow_del_switch)),
    Sources = frags(Parts, sources),
    ok = fraghash_grow_schema:fresh_log(),
    ok = fraghash_grow_fence:hold(get(fraghash_grow_fence), Sources),
    step(Tab, op_step(Op, grow_switch_locked, grow_del_switch_locked)),
    ok = fraghash_grow_copy:last_copy(where(Op, Parts), get(fraghash_grow_watch)),
    ok = durable(Entry, hidden_count(Entry)),
    step(Tab, op_step(Op, grow_switch_synced, grow_del_switch_synced)),
    case fraghash_grow_schema:switch(Tab, switch_changes(Parts), Sources) of
        {atomic, ok} ->
            step(Tab, op_step(Op, grow_switched, grow_del_switched)),
            #{tab := Tab, to := To} = hd(Parts),
            ok = fraghash_grow_fence:release(erase(fraghash_grow_fence), Tab, To),
            ok = fraghash_frag_watch:stop(erase(fraghash_grow_watch)),
            next;
        Aborted ->
            fraghash_grow_fence:stop(erase(fraghash_grow_fence)),
            ok = undo(Tab, Entry),
            Aborted
    end;
phase(cleaning, Tab, #{op := Op, parts := Parts} = Entry, _Run) ->
    step(Tab, grow_clean),
    Moved = fraghash_grow_moved:take(),
    try fraghash_grow_copy:clean(where(Op, Parts), syncing(Tab, frags(Parts, sources)), Moved)
    after fraghash_grow_moved:close(Moved)
    end,
    ok = durable(Entry, hidden_count(Entry)),
    step(Tab, grow_done),
    ok = fraghash_journal:delete(Tab),
    done;
phase(dropping, Tab, #{parts := Parts} = Entry, _Run) ->
    step(Tab, grow_del_drop),
    {atomic, ok} = fraghash_grow_schema:drop_last(Tab, changes(Parts, to, to),
                                                  frags(Parts, sources), fun() -> ok end),
    step(Tab, grow_del_dropped),
    ok = finish(Tab, Entry),
    done.

%% What the copy and cleaning tell of each chunk.
progress(Tab) ->
    fun(Read, Written) -> fraghash_grow_progress:chunk(Tab, Read, Written) end.

%% The cleaning's progress, which also has the deletes so far written out
%% on the sources every 250 ms (?SYNC_MS, fraghash_durable:write_back/1,
%% one write-back at a time), so that the sync ending the phase, which
%% holds the sources' writers, finds the last moment's deletes to write
%% out, not all of them (dets writes a file's changes out at a sync, and
%% its writers wait meanwhile: 0.76 s at the end of cleaning 243,136
%% records of 1 KB from a 936 MB file, measured). Not `dets:sync/1' each
%% time: each writes the file's free lists, which grow with every
%% delete, while its writers wait. After each chunk it pauses
%% (cleaning_pause/2).
syncing(Tab, Sources) ->
    Progress = progress(Tab),
    Pause = cleaning_pause(Sources),
    Last = atomics:new(2, [{signed, true}]),
    Start = erlang:monotonic_time(millisecond),
    ok = atomics:put(Last, 1, Start),
    ok = atomics:put(Last, 2, Start),
    fun(Read, Deleted) ->
            Now = erlang:monotonic_time(millisecond),
            case Now - atomics:get(Last, 1) >= ?SYNC_MS of
                true -> ok = write_back(Sources), ok = atomics:put(Last, 1, Now);
                false -> ok
            end,
            ok = Progress(Read, Deleted),
            ok = timer:sleep(Pause(Now - atomics:get(Last, 2))),
            atomics:put(Last, 2, erlang:monotonic_time(millisecond))
    end.

%% How long the cleaning pauses after a chunk that took `Ms': a share of
%% it, `{fraghash, clean_pause_percent, P}' (an integer from 0 to 1000,
%% default 100), when a source has a `disc_only_copies' copy; else none.
%% A donor's deletes and its writers meet in one dets server and on the
%% same cores. Measured on a dets file of 253 MB under 4 writers at 2,000
%% writes/s, 90% of them on it: while it was cleaned they kept 37% of
%% their rate with no pause, 66% with 100 (the cleaning 1.4 times as long,
%% its deletes cheaper uncontended), 73% with 200 (2.5 times as long).
%% `redb_copies' and the in-memory types keep their writers' rate
%% without one.
cleaning_pause(Sources) ->
    case lists:any(fun(S) -> mnesia:table_info(S, disc_only_copies) =/= [] end, Sources) of
        true ->
            Percent = pause_percent(),
            fun(Ms) -> max(0, Ms) * Percent div 100 end;
        false ->
            fun(_) -> 0 end
    end.

pause_percent() ->
    case application:get_env(fraghash, clean_pause_percent, ?CLEAN_PAUSE_PERCENT) of
        P when is_integer(P), P >= 0, P =< 1000 ->
            P;
        Other ->
            logger:warning("fraghash: clean_pause_percent ~0tp is not an integer from 0 to "
                           "1000; the cleaning pauses ~b% of each chunk's time",
                           [Other, ?CLEAN_PAUSE_PERCENT]),
            ?CLEAN_PAUSE_PERCENT
    end.

%% Starts a write-back of `Sources' unless the last one still runs.
write_back(Sources) ->
    Running = case get({?MODULE, write_back}) of
                  undefined -> false;
                  Pid -> is_process_alive(Pid)
              end,
    Running orelse put({?MODULE, write_back}, fraghash_durable:write_back(Sources)),
    ok.

%% The step names of a del are its own; a rehash's are an add's.
op_step(del, _Add, Del) -> Del;
op_step(_Op, Add, _Del) -> Add.

%% The fragment count while the copies are hidden: an add's N+1, a del's N.
hidden_count(#{op := add, n := N}) -> N + 1;
hidden_count(#{n := N}) -> N.

%%% Recovering

%% @doc Finishes or undoes the operation of journal entry `Entry' on `Tab',
%% as the state machine decides from the entry's phase and the table's
%% schema (`fraghash_grow_machine:recovery/3').
-spec recover(atom(), map()) -> ok | {error, term()}.
recover(Tab, #{op := Op, phase := Phase, n := N, parts := [Part | _]} = Entry) ->
    step(Tab, op_step(Op, grow_recover, grow_del_recover)),
    {Mod, State, Count} = hash(Tab),
    Observed = case Part of
                   #{mod_to := ModTo, mod := ModFrom, from := From, to := To} ->
                       fraghash_grow_machine:observe(Op, {N, {ModFrom, From}, {ModTo, To}},
                                                     {{Mod, State}, Count});
                   #{from := From, to := To} ->
                       fraghash_grow_machine:observe(Op, {N, From, To}, {State, Count})
               end,
    case fraghash_grow_machine:recovery(Op, Phase, Observed) of
        forget ->
            [ok = clear_name(D) || Op =:= add, #{dests := [D]} <- maps:get(parts, Entry)],
            fraghash_journal:delete(Tab);
        rollback ->
            undo(Tab, Entry);
        clean ->
            again(Tab, Entry, cleaning);
        drop ->
            again(Tab, Entry, dropping);
        finish ->
            finish(Tab, Entry);
        unexpected ->
            unexpected_layout(Tab, Op, N, Count)
    end.

%% Runs the operation again from `Phase', after the switch.
again(Tab, Entry, Phase) ->
    ok = fraghash_journal:set_phase(Tab, Entry, Phase),
    {atomic, ok} = run(Tab, Entry#{phase => Phase}, #{}),
    ok.

%% A table changed by something else since its journal entry was written
%% (a plain change_table_frag let through): the entry cannot say what to
%% do.
unexpected_layout(Tab, Op, N, N1) ->
    {error, fraghash_error:new(unexpected_layout,
                               "~s has ~b fragments and a hash state that its ~s from ~b fragments "
                               "neither started from nor ended with: check it with "
                               "fraghash_frag:stale_copies/1", [Tab, N1, Op, N])}.

%%% Undoing and finishing

%% Removes the hidden copies and the journal entry: an add drops its hidden
%% fragments (with whatever copies they hold); a del deletes its copies
%% from the fragments that received them.
undo(Tab, #{op := add, parts := Parts} = Entry) ->
    step(Tab, grow_rollback),
    {_, _, N} = hash(Tab),
    {atomic, ok} = fraghash_grow_schema:drop_last(Tab, changes(Parts, from, from), [],
                                                  fun() -> ok end),
    ok = fraghash_tab:dump_log(),
    [ok = clear_name(frag_name(T, N)) || #{tab := T} <- Parts],
    ok = durable(Entry, N - 1),
    fraghash_journal:delete(Tab);
undo(Tab, #{op := Op, parts := Parts} = Entry) when Op =:= del; Op =:= rehash ->
    step(Tab, op_step(Op, grow_rollback, grow_del_rollback)),
    ok = fraghash_grow_copy:remove_hidden(where(Op, Parts)),
    ok = durable(Entry, hidden_count(Entry)),
    fraghash_journal:delete(Tab).

%% A del's last fragments are gone: their delete_table is dumped from the
%% log now, so that it is never replayed after a fragment of that number
%% exists again; a table a kill left for one (see
%% `fraghash_grow_schema:drop_orphan/1') and its files go.
finish(Tab, #{n := N, parts := Parts} = Entry) ->
    ok = fraghash_tab:dump_log(),
    [ok = clear_name(L) || L <- frags(Parts, sources)],
    ok = durable(Entry, N - 1),
    step(Tab, grow_del_done),
    fraghash_journal:delete(Tab).

%%% The parts

%% `{Table, State}' per part, the state under `Key'.
changes(Parts, Key) ->
    [{T, maps:get(Key, P)} || #{tab := T} = P <- Parts].

%% `{Table, Held, Next}' per part: the states under `HeldKey' (the one the
%% table must hold) and `NextKey' (the one it gets).
changes(Parts, HeldKey, NextKey) ->
    [{T, maps:get(HeldKey, P), maps:get(NextKey, P)} || #{tab := T} = P <- Parts].

%% `{Table, From, To, Module}' per part: the states it holds and gets, and
%% the hash module it gets.
switch_changes(Parts) ->
    [{T, From, To, maps:get(mod_to, P, Mod)} || #{tab := T, mod := Mod, from := From, to := To} = P <- Parts].

%% The fragments the parts name under `Key'.
frags(Parts, Key) ->
    lists:append([maps:get(Key, P) || P <- Parts]).

%% Each source fragment of operation `Op' with its table's routes
%% (`fraghash_grow_copy'); an add's destination, its new fragment, is
%% hidden until the switch.
where(Op, Parts) ->
    maps:from_list([{S, route(P, Op =:= add)} || P <- Parts, S <- maps:get(sources, P)]).

route(#{tab := T, mod := Mod, pos := Pos, from := From, to := To, dests := Dests} = P, Hidden) ->
    Place = fun(M, State) -> fun(V) -> frag_name(T, M:key_to_frag_number(State, V)) end end,
    #{pos => Pos, to => Place(maps:get(mod_to, P, Mod), To), from => Place(Mod, From),
      dests => Dests, by_key => Pos =:= 2, hidden => Hidden}.

%% What was committed to fragments 1..N of the parts (those that exist)
%% and to the journal, durable where they are held.
durable(#{parts := Parts}, N) ->
    fraghash_tab:durable([T || #{tab := T} <- Parts], N).

%% No table and no file of fragment name `Frag' left.
clear_name(Frag) ->
    ok = fraghash_grow_schema:drop_orphan(Frag),
    fraghash_frag_recovery:remove_leftover_files(Frag).
