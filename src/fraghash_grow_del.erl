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
%% nothing of it is lost. A table and its foreign-key tables shrink
%% together (`fraghash_grow_group'), each step applying to each. Recovery: before the switch committed (`From' the
%% state) every hidden copy is removed; after it (`To' with the last
%% fragment still there) cleaning runs again, then the drop; with the last
%% fragment gone only the journal entry is left. Which holds is read from
%% the table.
-module(fraghash_grow_del).

-export([del_frag/1, recover/2]).

-import(fraghash_tab, [hash/1, frag_name/2, step/2]).
-import(fraghash_grow, [changes/3, frags/2, durable/2]).

%% @doc Removes the last fragment of `Tab' (which has two or more) and of
%% each of its foreign-key tables, moving their records in ordinary
%% transactions. Returns once the new layout is durable where it is held.
-spec del_frag(atom()) -> {atomic, ok} | {aborted, term()}.
del_frag(Tab) ->
    case fraghash_grow_group:parts(Tab) of
        {ok, Parts0} ->
            Parts = [planned(P) || P <- Parts0],
            Entry = #{op => grow_del, n => maps:get(n, hd(Parts)), parts => Parts},
            case fraghash_grow:first_entry(Tab, Entry#{phase => copying}) of
                ok -> copy_and_switch(Tab, Entry);
                Refused -> Refused
            end;
        Refused ->
            Refused
    end.

%% A part with its target state, its last fragment and the fragments that
%% receive its records.
planned(#{tab := T, mod := Mod, from := From, n := N} = Part) ->
    {To, _Iter, Lock} = Mod:del_frag(From),
    Part#{to => To, last => frag_name(T, N),
          dests => [frag_name(T, I) || I <- lists:usort(Lock), I =/= N]}.

%% @doc Finishes or undoes the `grow_del' of journal entry `Entry'.
-spec recover(atom(), map()) -> ok | {error, term()}.
recover(Tab, #{op := grow_del, n := N, parts := [#{from := From, to := To} | _] = Parts} = Entry) ->
    step(Tab, grow_del_recover),
    case hash(Tab) of
        {_, From, N} ->
            rollback(Tab, Entry);
        {_, To, N} ->
            clean_and_drop(Tab, Entry, []);
        {_, To, N1} when N1 =:= N - 1 ->
            finish(Tab, Parts, N);
        {_, _, N1} ->
            fraghash_grow:unexpected_layout(Tab, del, N, N1)
    end.

%%% Copying and switching

copy_and_switch(Tab, #{n := N, parts := Parts} = Entry) ->
    Where = where(Parts),
    Lasts = frags(Parts, last),
    Watcher = fraghash_frag_watch:start(Lasts),
    try
        step(Tab, grow_del_copy),
        Items = fraghash_grow_group:all_items(Lasts),
        Moved = fraghash_grow_copy:settle(Watcher, Where,
                                          fraghash_grow_copy:copy(Where, Items, #{})),
        ok = durable(Parts, N),
        ok = fraghash_journal:write(Tab, Entry#{phase => switching, moved => Moved}),
        step(Tab, grow_del_switch),
        Check = fraghash_grow_copy:last_copy(Tab, grow_del_switch_locked, Watcher, Where,
                                             Moved, frags(Parts, dests)),
        Switched = fraghash_grow_schema:switch(Tab, changes(Parts, from, to),
                                               frags(Parts, dests) ++ Lasts, Check),
        Dests = fraghash_grow_copy:dests_watch(),
        try Switched of
            {atomic, ok} ->
                step(Tab, grow_del_switched),
                ok = durable(Parts, N),
                ok = clean_and_drop(Tab, fraghash_journal:read(Tab), Dests),
                {atomic, ok};
            Aborted ->
                ok = rollback(Tab, Entry),
                Aborted
        after
            fraghash_frag_watch:stop(Dests)
        end
    after
        fraghash_frag_watch:stop(Watcher)
    end.

%% Each last fragment with its table's placement under the target state.
where(Parts) ->
    maps:from_list([{L, fraghash_grow_group:place(P, To)} || #{last := L, to := To} = P <- Parts]).

%%% Cleaning and dropping

%% Reconciles what writers that routed with the old states did to the last
%% fragments after the switch (`Dests': the watch of the receiving
%% fragments since the switch, `[]' in recovery), then drops them.
clean_and_drop(Tab, #{n := N, parts := Parts, moved := Moved} = Entry, Dests) ->
    ok = fraghash_journal:set_phase(Tab, Entry, cleaning),
    step(Tab, grow_del_clean),
    Lasts = frags(Parts, last),
    %% Writers that routed with the old states have committed once the
    %% transactions running now have ended and these locks are had (see
    %% fraghash_grow:clean/3).
    ok = fraghash_tab:transactions_ended(),
    {atomic, ok} = mnesia:transaction(
                     fun() -> [mnesia:lock({table, L}, write) || L <- Lasts], ok end),
    Items = fraghash_grow_group:all_items(Lasts) ++ fraghash_grow_copy:not_done(Tab, Moved),
    ok = fraghash_grow_copy:reconcile(Tab, where(Parts), Items, Moved, false, Dests),
    ok = durable(Parts, N),
    step(Tab, grow_del_drop),
    {atomic, ok} = fraghash_grow_schema:drop_last(Tab, changes(Parts, to, to), Lasts, fun() -> ok end),
    step(Tab, grow_del_dropped),
    finish(Tab, Parts, N).

%% The last fragments are gone: their delete_table is dumped from the log
%% now, so that it is never replayed after a fragment of that number exists
%% again; a table a kill left for one (see
%% `fraghash_grow_schema:drop_orphan/1') and its files go.
finish(Tab, Parts, N) ->
    ok = fraghash_tab:dump_log(),
    [ok = fraghash_grow:clear_name(L) || L <- frags(Parts, last)],
    ok = durable(Parts, N - 1),
    step(Tab, grow_del_done),
    fraghash_journal:delete(Tab).

%%% Rolling back

%% Removes the hidden copies: in each receiving fragment, every record that
%% the old state places in the last fragment (the safe path leaves no
%% other record where it is not placed).
rollback(Tab, #{n := N, parts := Parts}) ->
    step(Tab, grow_del_rollback),
    Hidden = lists:append([fraghash_grow_group:items(P, Ds, From, fun(F) -> F =:= L end)
                           || #{dests := Ds, from := From, last := L} = P <- Parts]),
    {atomic, ok} = fraghash_tab:batches(fun({D, _K}) -> D end,
                                        fun({D, K}) -> mnesia:delete(D, K, write) end, Hidden),
    ok = durable(Parts, N),
    fraghash_journal:delete(Tab).
