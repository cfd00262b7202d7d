%% @doc `del_frag' of a fragmented table whose records move in ordinary,
%% batched transactions while writers keep going; the schema changes carry
%% no record (`fraghash_grow_schema'). The twin of `fraghash_grow''s add,
%% with the journal phases (op `grow_del') below, each reached only once
%% the one before is durable:
%%
%% <ol>
%% <li>`copying': the target state `To' (the hash module's `del_frag' of
%% the table's state `From') is in the journal. Every record of the last
%% fragment is copied to the fragment `To' sends it to, in transactions of
%% 500 (a hidden copy: `From' still routes the key to the last fragment,
%% so reads by key do not see it). Writers go on with `From'; their
%% changes to the last fragment are watched and the keys copied again, in
%% rounds.</li>
%% <li>`switching': the copies are synced, the records as copied are in the
%% journal. Then `switch', under write locks on the last fragment and the
%% fragments receiving copies: the keys writers touched since the last
%% round get one last copy (named in the journal first, made by a
%% `sync_dirty' activity of another process), and the state becomes `To':
%% every moved key reads from its copy, and no key routes to the last
%% fragment any more.</li>
%% <li>`cleaning': writers that routed with `From' and waited for the
%% switch's locks wrote into the last fragment; once its lock is had they
%% have committed, and their changes are reconciled into the copies as an
%% add reconciles a donor's (`fraghash_grow:reconcile/6'). Then `drop_last'
%% deletes the last fragment, which no key routes to, and the log is
%% dumped so that its delete is never replayed after a fragment of that
%% number exists again.</li>
%% </ol>
%% So a writer racing the del writes into a fragment that still exists, and
%% nothing of it is lost. Recovery: before the switch committed (`From' the
%% state) every hidden copy is removed; after it (`To' with the last
%% fragment still there) cleaning runs again, then the drop; with the last
%% fragment gone only the journal entry is left. Which holds is read from
%% the table.
-module(fraghash_grow_del).

-export([del_frag/1, recover/2]).

-import(fraghash_tab, [hash/1, frag_name/2, durable/2, step/2]).

-define(WATCH_MS, 60000).

%% @doc Removes the last fragment of `Tab' (which has two or more), moving
%% its records in ordinary transactions. Returns once the new layout is
%% durable where it is held.
-spec del_frag(atom()) -> {atomic, ok} | {aborted, term()}.
del_frag(Tab) ->
    {Mod, From, N} = hash(Tab),
    {To, _Iter, Lock} = Mod:del_frag(From),
    Last = frag_name(Tab, N),
    Dests = [frag_name(Tab, I) || I <- lists:usort(Lock), I =/= N],
    Entry = #{op => grow_del, n => N, from => From, to => To, dests => Dests},
    case fraghash_grow:first_entry(Tab, Entry#{phase => copying}) of
        ok -> copy_and_switch(Tab, Last, Entry);
        Refused -> Refused
    end.

%% @doc Finishes or undoes the `grow_del' of journal entry `Entry'.
-spec recover(atom(), map()) -> ok | {error, term()}.
recover(Tab, #{op := grow_del, n := N, from := From, to := To} = Entry) ->
    step(Tab, grow_del_recover),
    case hash(Tab) of
        {_, From, N} ->
            rollback(Tab, Entry);
        {_, To, N} ->
            clean_and_drop(Tab, Entry);
        {_, To, N1} when N1 =:= N - 1 ->
            finish(Tab, N);
        {_, _, N1} ->
            fraghash_grow:unexpected_layout(Tab, del, N, N1)
    end.

%%% Copying and switching

copy_and_switch(Tab, Last, #{n := N, from := From, to := To, dests := Dests} = Entry) ->
    Source = fun(_) -> Last end,
    Dest = fraghash_grow:router(Tab, To),
    All = fun(_) -> true end,
    Watcher = fraghash_frag_watch:start([Last]),
    try
        step(Tab, grow_del_copy),
        Copied = fraghash_grow:copy(Source, Dest, mnesia:dirty_all_keys(Last), #{}),
        Moved = fraghash_grow:settle(Watcher, Source, Dest, All, Copied),
        ok = durable(Tab, N),
        ok = fraghash_journal:write(Tab, Entry#{phase => switching, moved => Moved}),
        step(Tab, grow_del_switch),
        Check = fraghash_grow:last_copy(Tab, Entry, grow_del_switch_locked, Watcher, Source,
                                        Dest, All, Moved),
        case fraghash_grow_schema:switch(Tab, From, To, Dests ++ [Last], Check) of
            {atomic, ok} ->
                step(Tab, grow_del_switched),
                ok = durable(Tab, N),
                ok = clean_and_drop(Tab, fraghash_journal:read(Tab)),
                {atomic, ok};
            Aborted ->
                ok = rollback(Tab, Entry),
                Aborted
        end
    after
        fraghash_frag_watch:stop(Watcher)
    end.

%%% Cleaning and dropping

%% Reconciles what writers that routed with `From' did to the last fragment
%% after the switch, then drops it.
clean_and_drop(Tab, #{n := N, to := To, moved := Moved} = Entry) ->
    ok = fraghash_journal:write(Tab, Entry#{phase => cleaning}),
    step(Tab, grow_del_clean),
    Last = frag_name(Tab, N),
    %% Writers queued behind the switch have committed once this lock is had.
    {atomic, ok} = mnesia:transaction(fun() -> _ = mnesia:lock({table, Last}, write), ok end),
    Keys = mnesia:dirty_all_keys(Last) ++ fraghash_grow:not_done(Tab, Moved),
    ok = fraghash_grow:reconcile(Tab, fun(_) -> Last end, fraghash_grow:router(Tab, To), Keys,
                                 Moved, false),
    ok = durable(Tab, N),
    step(Tab, grow_del_drop),
    {atomic, ok} = fraghash_grow_schema:drop_last(Tab, To, To, [Last], fun() -> ok end),
    step(Tab, grow_del_dropped),
    finish(Tab, N).

%% The last fragment is gone: its delete_table is dumped from the log now,
%% so that it is never replayed after a fragment of that number exists
%% again; a table a kill left for it (see
%% `fraghash_grow_schema:drop_orphan/1') and its files go.
finish(Tab, N) ->
    dumped = mnesia:dump_log(),
    ok = fraghash_grow_schema:drop_orphan(frag_name(Tab, N)),
    ok = fraghash_frag_recovery:remove_leftover_files(frag_name(Tab, N)),
    ok = durable(Tab, N - 1),
    step(Tab, grow_del_done),
    fraghash_journal:delete(Tab).

%%% Rolling back

%% Removes the hidden copies: in each receiving fragment, every key that
%% `From' routes to the last fragment (the safe path leaves no other record
%% where its key does not route).
rollback(Tab, #{n := N, from := From, dests := Dests}) ->
    step(Tab, grow_del_rollback),
    Last = frag_name(Tab, N),
    Route = fraghash_grow:router(Tab, From),
    Hidden = [{D, K} || D <- Dests, K <- mnesia:dirty_all_keys(D), Route(K) =:= Last],
    {atomic, ok} = fraghash_tab:batches(fun({D, K}) -> mnesia:delete(D, K, write) end, Hidden),
    ok = durable(Tab, N),
    fraghash_journal:delete(Tab).
