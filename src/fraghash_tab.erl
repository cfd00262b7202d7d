%% @doc What the safe growth path (`fraghash_frag', `fraghash_grow',
%% `fraghash_grow_del' and the modules below them) reads and writes of a
%% fragmented table, below all
%% of them: its hash module and state, where a key lives now, fragment
%% names, ordinary transactions in batches, durability, misplaced records,
%% and the step hook the kill -9 tests log. Calls nothing of theirs, so
%% every arrow of the growth path points down to here.
-module(fraghash_tab).

-export([hash/1, frag_name/2, orphans/0, foreign_key/1, batches/2, durable/2,
         dump_log/0,
         misplaced/1,
         misplaced/2,
         move_misplaced/1, step/2, set_step_hook/1]).

-define(BATCH, 500).

%% @doc A fragmented table's hash module, hash state and fragment count, as
%% its `frag_properties' give them on this node.
-spec hash(atom()) -> {module(), term(), pos_integer()}.
hash(Tab) ->
    Props = mnesia:table_info(Tab, frag_properties),
    {hash_module, Mod} = lists:keyfind(hash_module, 1, Props),
    {hash_state, S} = lists:keyfind(hash_state, 1, Props),
    {n_fragments, N} = lists:keyfind(n_fragments, 1, Props),
    {Mod, S, N}.

%% @doc The name of fragment `N' of `Tab' (Mnesia's naming).
-spec frag_name(atom(), pos_integer()) -> atom().
frag_name(Tab, 1) -> Tab;
frag_name(Tab, N) -> list_to_atom(atom_to_list(Tab) ++ "_frag" ++ integer_to_list(N)).

%% @doc `{Base, Frag}' for each fragment table in this node's schema whose
%% number is beyond its base table's fragment count: what a kill can leave
%% just after a change that deleted it, or a schema change that reached
%% one side of a partition.
-spec orphans() -> [{atom(), atom()}].
orphans() ->
    [{Base, T} || T <- mnesia:system_info(tables), Base <- [base_table(T)], Base =/= none,
                  beyond_count(Base, T)].

%% The base table of fragment table `T' (`none' for a base table or a
%% table that is not fragmented).
base_table(T) ->
    case catch mnesia:table_info(T, frag_properties) of
        Props when is_list(Props) ->
            case lists:keyfind(base_table, 1, Props) of
                {base_table, Base} when Base =/= T -> Base;
                _ -> none
            end;
        _ ->
            none
    end.

beyond_count(Base, Frag) ->
    case catch hash(Base) of
        {_Mod, _State, N} ->
            Prefix = atom_to_list(Base) ++ "_frag",
            lists:prefix(Prefix, atom_to_list(Frag))
                andalso list_to_integer(lists:nthtail(length(Prefix), atom_to_list(Frag))) > N;
        _ ->
            false
    end.

%% Where each key of `Tab' lives now: a function from a key to the name
%% of its fragment under the hash state this node holds at the call.
router(Tab) ->
    {Mod, S, _N} = hash(Tab),
    fun(Key) -> frag_name(Tab, Mod:key_to_frag_number(S, Key)) end.

%% @doc The master and the position of the record field that places a
%% foreign-key table's records (`{foreign_key, {Master, Attr}}': each
%% record goes where its master's record for that field's value is), or
%% `none' for a table placed by its key.
-spec foreign_key(atom()) -> {atom(), pos_integer()} | none.
foreign_key(Tab) ->
    case lists:keyfind(foreign_key, 1, mnesia:table_info(Tab, frag_properties)) of
        {foreign_key, {Master, Attr}} when is_atom(Attr) ->
            {Master, 1 + index(Attr, mnesia:table_info(Tab, attributes))};
        {foreign_key, {Master, Pos}} when is_integer(Pos) ->
            {Master, Pos};
        _ ->
            none
    end.

index(X, [X | _]) -> 1;
index(X, [_ | T]) -> 1 + index(X, T).

%% @doc Runs `F' over `Items' in ordinary transactions of 500 items
%% (`mnesia:sync_transaction/1': each returns once every replica applied
%% it); the first that aborts stops the rest and is returned.
-spec batches(fun((term()) -> term()), [term()]) -> {atomic, ok} | {aborted, term()}.
batches(_F, []) ->
    {atomic, ok};
batches(F, Items) ->
    {Batch, Rest} = lists:split(min(?BATCH, length(Items)), Items),
    case mnesia:sync_transaction(fun() -> lists:foreach(F, Batch) end) of
        {atomic, ok} -> batches(F, Rest);
        Aborted -> Aborted
    end.

%% @doc Makes what was committed so far to fragments 1..N of `Tab' (or of
%% each table of a list; those that exist) and to the journal durable, on
%% every node holding a disc copy of one of them (see fraghash_durable).
-spec durable(atom() | [atom()], pos_integer()) -> ok.
durable(Tab, N) when is_atom(Tab) ->
    durable([Tab], N);
durable(Tabs, N) ->
    Tables = mnesia:system_info(tables),
    fraghash_durable:tables([F || T <- Tabs, I <- lists:seq(1, N), F <- [frag_name(T, I)],
                                  lists:member(F, Tables)]
                            ++ [fraghash_journal || lists:member(fraghash_journal, Tables)]).

%% @doc Dumps Mnesia's log into its tables' files (`mnesia:dump_log/0'),
%% from a process of its own: a dump that fails (a full disc) stops Mnesia,
%% whose disk_log process is then killed, and with it every process linked
%% to it, the one that asked for the dump included. Raises when the dump
%% fails.
-spec dump_log() -> ok.
dump_log() ->
    {Pid, Ref} = spawn_monitor(fun() -> exit({dump_log, mnesia:dump_log()}) end),
    receive
        {'DOWN', Ref, process, Pid, {dump_log, dumped}} -> ok;
        {'DOWN', Ref, process, Pid, {dump_log, Other}} -> error({dump_log_failed, Other});
        {'DOWN', Ref, process, Pid, Why} -> error({dump_log_failed, Why})
    end.

%% @doc `{From, To, Key}' for each record of `Tab' in a fragment other than
%% the one the hash module places it in (`To'), by its key or, for a
%% foreign-key table, by its foreign-key field.
-spec misplaced(atom()) -> [{atom(), atom(), term()}].
misplaced(Tab) ->
    {_Mod, _S, N} = hash(Tab),
    misplaced(Tab, [frag_name(Tab, F) || F <- lists:seq(1, N)]).

%% @doc As {@link misplaced/1}, for the records of the fragments `Frags' only.
-spec misplaced(atom(), [atom()]) -> [{atom(), atom(), term()}].
misplaced(Tab, Frags) ->
    Route = router(Tab),
    case foreign_key(Tab) of
        none ->
            lists:append([[{From, To, K} || K <- mnesia:dirty_all_keys(From),
                                            To <- [Route(K)], To =/= From]
                          || From <- Frags]);
        {_Master, Pos} ->
            Spec = [{'_', [], [{{{element, 2, '$_'}, {element, Pos, '$_'}}}]}],
            lists:append([[{From, To, K} || {K, Placed} <- mnesia:dirty_select(From, Spec),
                                            To <- [Route(Placed)], To =/= From]
                          || From <- Frags])
    end.

%% @doc Moves each misplaced `{From, To, Key}' (as {@link misplaced/2}
%% gives them) to its right fragment `To', unless `To' holds the key
%% already; deletes it from `From' in either case. Ordinary transactions.
-spec move_misplaced([{atom(), atom(), term()}]) -> {atomic, ok} | {aborted, term()}.
move_misplaced(Items) ->
    batches(fun({From, To, K}) ->
                    case mnesia:read(To, K, write) of
                        [] -> [mnesia:write(To, R, write) || R <- mnesia:read(From, K, write)];
                        _ -> ok
                    end,
                    mnesia:delete(From, K, write)
            end, Items).

%% @doc Calls the step hook, if any, with the table and the step's name.
-spec step(atom(), atom()) -> ok.
step(Tab, Step) ->
    case persistent_term:get({?MODULE, step_hook}, undefined) of
        undefined -> ok;
        Fun -> _ = Fun(Tab, Step), ok
    end.

%% @doc Installs `Fun(Tab, Step)', called at each step of an operation or a
%% recovery (`undefined' removes it): for tracing, and for the kill -9 tests,
%% which log the steps to know where a kill landed.
-spec set_step_hook(fun((atom(), atom()) -> any()) | undefined) -> ok.
set_step_hook(undefined) ->
    _ = persistent_term:erase({?MODULE, step_hook}),
    ok;
set_step_hook(Fun) when is_function(Fun, 2) ->
    persistent_term:put({?MODULE, step_hook}, Fun).
