%% @doc The schema changes of the growth path, and every call it makes into
%% Mnesia's internals (`mnesia_schema', `mnesia_frag', `mnesia_lib'). None
%% of them moves a record: records move in ordinary transactions
%% (`fraghash_grow'), because Mnesia 4.21.3 may not bring to disc the
%% record operations of a schema transaction (see
%% `repro/mnesia-frag-disc-bug.md'). Each change is one schema transaction
%% of Mnesia's own kind (`{op, change_table_frag, _, TabDef}' and
%% `create_table'/`delete_table' ops), so Mnesia logs, replicates and
%% replays it as it does `mnesia:change_table_frag/2':
%% <ul>
%% <li>{@link add_hidden/2}: fragment `N + 1' is created and the hash state
%% is kept, so no key routes to it (the hash modules name fragments
%% `1..N' only, for reads and for scans): a hidden fragment to copy the
%% moving records into.</li>
%% <li>{@link switch/5}: the hash state is replaced, under write locks on
%% the fragments named, after a check that runs under those locks; the
%% routing of every key changes at once.</li>
%% <li>{@link drop_last/5}: the last fragment is deleted and the hash state
%% replaced in one change (a del_frag whose records were copied
%% beforehand, or a hidden fragment given up).</li>
%% </ul>
%% Each takes the state it expects to replace and aborts with
%% `{fraghash, changed_underneath, Text}' when the table holds another
%% (a change made meanwhile by a call that bypassed the growth path).
%% Tables with foreign-key tables are refused
%% (`foreign_key_tables_not_supported').
-module(fraghash_grow_schema).

-export([add_hidden/2, switch/5, drop_last/5, drop_orphan/1, hash/1]).

%% @doc The table's hash module, hash state and fragment count as Mnesia
%% holds them on this node: `{Mod, State, N}'.
-spec hash(atom()) -> {module(), term(), pos_integer()}.
hash(Tab) ->
    fraghash_tab:hash(Tab).

%% @doc Creates fragment `N + 1' of `Tab' on `Nodes' (as
%% `mnesia:change_table_frag(Tab, {add_frag, Nodes})' places it) and keeps
%% the hash state `State', which must be the table's: no key routes to the
%% new fragment and no record moves.
-spec add_hidden(atom(), [node()]) -> {atomic, ok} | {aborted, term()}.
add_hidden(Tab, Nodes) ->
    {_Mod, State, N} = hash(Tab),
    transaction(
      Tab,
      fun(TidTs) ->
              ok = expect(Tab, State, N),
              %% Mnesia builds the new fragment's table (its nodes, storage
              %% and properties); the hash modules are told to name no
              %% fragment to scan, and whatever record moves Mnesia's
              %% default module asks for are left out, as is its new state.
              Ops = try
                        put(fraghash_hidden_add, Tab),
                        put(fraghash_safe_path, Tab),
                        mnesia_frag:change_table_frag(Tab, {add_frag, Nodes})
                    after
                        erase(fraghash_hidden_add),
                        erase(fraghash_safe_path)
                    end,
              [TabOps] = single_table(Tab, Ops),
              Kept = [keep_state(Op, State) || Op <- TabOps, element(2, Op) =/= rec],
              mnesia_schema:insert_schema_ops(TidTs, Kept)
      end).

%% @doc Replaces `Tab''s hash state `From' by `To' (same fragment count),
%% holding write locks on the fragments `Frags' while `Check()' runs; a
%% `Check' that aborts aborts the change.
-spec switch(atom(), term(), term(), [atom()], fun(() -> ok)) ->
          {atomic, ok} | {aborted, term()}.
switch(Tab, From, To, Frags, Check) ->
    {_Mod, _State, N} = hash(Tab),
    transaction(
      Tab,
      fun(TidTs) ->
              ok = expect(Tab, From, N),
              [_ = mnesia_schema:get_tid_ts_and_lock(F, write) || F <- Frags],
              ok = Check(),
              TabDef = tab_def(Tab, To, N),
              mnesia_schema:insert_schema_ops(
                TidTs, [{op, change_table_frag, {fraghash, switch}, TabDef}])
      end).

%% @doc Deletes the last fragment of `Tab' and replaces its hash state
%% `From' by `To' (which names one fragment fewer, or is `From' itself for
%% a fragment no key routes to), holding write locks on `Frags' and the
%% last fragment while `Check()' runs.
-spec drop_last(atom(), term(), term(), [atom()], fun(() -> ok)) ->
          {atomic, ok} | {aborted, term()}.
drop_last(Tab, From, To, Frags, Check) ->
    {_Mod, _State, N} = hash(Tab),
    Last = fraghash_tab:frag_name(Tab, N),
    case N > 1 of
        false ->
            {aborted, {fraghash, last_fragment,
                       lists:flatten(io_lib:format("~s has one fragment, which a table keeps",
                                                   [Tab]))}};
        true ->
            transaction(
              Tab,
              fun(TidTs) ->
                      ok = expect(Tab, From, N),
                      [_ = mnesia_schema:get_tid_ts_and_lock(F, write)
                       || F <- lists:usort([Last | Frags])],
                      ok = Check(),
                      [DropOp] = mnesia_schema:make_delete_table(Last, single_frag),
                      TabDef = tab_def(Tab, To, N - 1),
                      mnesia_schema:insert_schema_ops(
                        TidTs, [{op, change_table_frag, {fraghash, drop_last}, TabDef}, DropOp])
              end)
    end.

%% @doc Deletes the table `Frag' when it exists: a fragment table beyond
%% its table's count, as Mnesia can leave one when a kill lands between
%% the schema change that removed it and the next dump of the log.
-spec drop_orphan(atom()) -> ok.
drop_orphan(Frag) ->
    case lists:member(Frag, mnesia:system_info(tables)) of
        false ->
            ok;
        true ->
            {atomic, ok} =
                mnesia_schema:schema_transaction(
                  fun() ->
                          TidTs = mnesia_schema:get_tid_ts_and_lock(schema, write),
                          mnesia_schema:insert_schema_ops(
                            TidTs, mnesia_schema:make_delete_table(Frag, single_frag)),
                          ok
                  end),
            ok
    end.

%%% Internals

%% One schema transaction holding the schema and `Tab' write-locked.
transaction(Tab, Fun) ->
    mnesia_schema:schema_transaction(
      fun() ->
              TidTs = mnesia_schema:get_tid_ts_and_lock(schema, write),
              _ = mnesia_schema:get_tid_ts_and_lock(Tab, write),
              Fun(TidTs),
              ok
      end).

%% The table still holds the state and the count the caller read.
expect(Tab, State, N) ->
    case hash(Tab) of
        {_Mod, State, N} ->
            ok;
        {_Mod, _Other, N2} ->
            mnesia:abort({fraghash, changed_underneath,
                          lists:flatten(
                            io_lib:format("~s changed while the operation ran (~b fragments, "
                                          "then ~b): run it again", [Tab, N, N2]))})
    end.

%% A foreign-key master's change would have to change its foreigners too.
single_table(Tab, [_] = Ops) ->
    _ = Tab,
    Ops;
single_table(Tab, _) ->
    mnesia:abort({fraghash, foreign_key_tables_not_supported, Tab}).

%% Mnesia's base-table op of an add, with the hash state put back.
keep_state({op, change_table_frag, Change, TabDef}, State) ->
    {frag_properties, Props} = lists:keyfind(frag_properties, 1, TabDef),
    Props2 = lists:keystore(hash_state, 1, Props, {hash_state, State}),
    {op, change_table_frag, Change,
     lists:keystore(frag_properties, 1, TabDef, {frag_properties, Props2})};
keep_state(Op, _State) ->
    Op.

%% The table definition of `Tab' (a new version) with hash state `State'
%% and `N' fragments.
tab_def(Tab, State, N) ->
    Cs = mnesia_schema:incr_version(mnesia_lib:val({Tab, cstruct})),
    mnesia_schema:ensure_active(Cs),
    TabDef = mnesia_schema:vsn_cs2list(Cs),
    {frag_properties, Props} = lists:keyfind(frag_properties, 1, TabDef),
    Props2 = lists:keystore(n_fragments, 1,
                            lists:keystore(hash_state, 1, Props, {hash_state, State}),
                            {n_fragments, N}),
    lists:keystore(frag_properties, 1, TabDef,
                   {frag_properties, [P || P <- Props2, element(1, P) =/= next_n_to_split,
                                           element(1, P) =/= n_doubles]}).
