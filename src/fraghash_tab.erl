%% @doc What the safe growth path (`fraghash_frag', `fraghash_grow',
%% `fraghash_grow_copy' and the modules below them) reads and writes of a
%% fragmented table, below all
%% of them: its hash module and state, where a key lives now, fragment
%% names, ordinary transactions in batches, durability, misplaced records,
%% and the step hook the kill -9 tests log. Calls nothing of theirs, so
%% every arrow of the growth path points down to here.
-module(fraghash_tab).

-export([hash/1, inspect_hash/1, frag_name/2, fragments/1, orphans/0, foreign_key/1,
         batches/3, by_layout/2, fold_layouts/3, chunks/1, chunks/2, durable/2, dump_log/0,
         transactions/1,
         select/3, fold/4, fold/5, reader_node/1, misplaced/1, misplaced/2, move_misplaced/1,
         step/2, set_step_hook/1, records/1, records_on/3]).

-define(BATCH, 500).
%% Results a chunk of fold/4 holds (one request to a dets server).
-define(CHUNK, 500).

%% @doc A fragmented table's hash module, hash state and fragment count, as
%% its `frag_properties' give them on this node.
-spec hash(atom()) -> {module(), term(), pos_integer()}.
hash(Tab) ->
    Props = mnesia:table_info(Tab, frag_properties),
    {hash_module, Mod} = lists:keyfind(hash_module, 1, Props),
    {hash_state, S} = lists:keyfind(hash_state, 1, Props),
    {n_fragments, N} = lists:keyfind(n_fragments, 1, Props),
    {Mod, S, N}.

%% @doc As {@link hash/1}, for inspecting any table: `{none, none, 1}'
%% for a table that is not fragmented (one fragment of its own), `{error,
%% {fraghash, no_such_table, Text}}' for one this node's schema lacks.
-spec inspect_hash(atom()) -> {module() | none, term(), pos_integer()} |
                              {error, {fraghash, no_such_table, string()}}.
inspect_hash(Tab) ->
    case lists:member(Tab, mnesia:system_info(tables)) of
        false ->
            {error, fraghash_error:new(no_such_table,
                                       "no table ~s in this node's schema", [Tab])};
        true ->
            case mnesia:table_info(Tab, frag_properties) of
                [] -> {none, none, 1};
                _ -> hash(Tab)
            end
    end.

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

%% Why every transaction of the growth path writes fragments of one
%% layout only. Mnesia commits a transaction whose written tables all have
%% the same `where_to_commit' list (the nodes and storage it commits each
%% to, in that order) with its symmetric protocol, and any other with its
%% asymmetric one. In Mnesia 4.21.3 a node taking part in the asymmetric
%% protocol logs the transaction when it votes, marked "abort unless told
%% otherwise", and learns the outcome a message later. A dump of its log
%% in between (one that writing past `dump_log_write_threshold' starts,
%% on a busy node) waits about 110 ms for the outcome, then takes the
%% transaction for aborted and leaves it out of the table files; the log
%% is then deleted. The transaction still commits, in RAM only: after the
%% next restart of that node its writes are gone. The symmetric protocol
%% logs at the commit itself, so nothing of the kind can happen to it.

%% The commit layout of table `Tab': the `{Node, Storage}' list Mnesia
%% commits it to.
layout(Tab) ->
    mnesia:table_info(Tab, where_to_commit).

%% @doc Runs `F' over `Items' in `mnesia:sync_transaction/1's of up to 500
%% items (each returns once every replica applied it), where `Frag(Item)'
%% is the one fragment `F(Item)' writes: items are grouped by its layout,
%% so that no transaction writes fragments of two layouts (see above). The
%% first transaction that aborts stops the rest and is returned.
-spec batches(fun((term()) -> atom()), fun((term()) -> term()), [term()]) ->
          {atomic, ok} | {aborted, term()}.
batches(Frag, F, Items) ->
    Groups = maps:groups_from_list(fun(I) -> layout(Frag(I)) end, Items),
    each_batch(F, lists:append([chunks(G) || G <- maps:values(Groups)])).

each_batch(_F, []) ->
    {atomic, ok};
each_batch(F, [Batch | Rest]) ->
    case mnesia:sync_transaction(fun() -> lists:foreach(F, Batch) end) of
        {atomic, ok} -> each_batch(F, Rest);
        Aborted -> Aborted
    end.

%% @doc Runs `F(Mine)' in one `mnesia:sync_transaction/1' per layout among
%% the fragments `Frags' (see above), where `Mine(Frag)' says whether this
%% transaction is the one that writes fragment `Frag': `F' writes a
%% fragment only where `Mine' holds, so that each transaction writes one
%% layout, and the transactions together write them all. Fragments of one
%% layout only (a table on one node, or on the same nodes throughout) take
%% a single transaction. `Mine' aborts the transaction for a fragment of a
%% layout none of `Frags' has (its replicas changed, or a node stopped,
%% since). Returns the results of `F' in the order run, or the first abort.
-spec by_layout([atom()], fun((fun((atom()) -> boolean())) -> R)) ->
          {atomic, [R]} | {aborted, term()}.
by_layout(Frags, F) ->
    case fold_layouts(Frags, fun(Mine, Done) -> [F(Mine) | Done] end, []) of
        {atomic, Done} -> {atomic, lists:reverse(Done)};
        Aborted -> Aborted
    end.

%% @doc As {@link by_layout/2}, each transaction given what the one before
%% returned: `F(Mine, Acc)' returns the next `Acc', from `Acc0'. For a
%% caller whose transactions must know what the earlier ones wrote (the
%% sources they read can change between two of them). A transaction that
%% Mnesia restarts runs `F' again with the same `Acc'.
-spec fold_layouts([atom()], fun((fun((atom()) -> boolean()), A) -> A), A) ->
          {atomic, A} | {aborted, term()}.
fold_layouts(Frags, F, Acc0) ->
    Layouts = lists:usort([layout(T) || T <- Frags]),
    fold_layouts(Layouts, Layouts, F, Acc0).

fold_layouts(_All, [], _F, Acc) ->
    {atomic, Acc};
fold_layouts(All, [L | Rest], F, Acc) ->
    Mine = fun(T) ->
                   case layout(T) of
                       L ->
                           true;
                       Other ->
                           lists:member(Other, All)
                               orelse mnesia:abort({fraghash, layout_changed, T}),
                           false
                   end
           end,
    case mnesia:sync_transaction(fun() -> F(Mine, Acc) end) of
        {atomic, Acc2} -> fold_layouts(All, Rest, F, Acc2);
        Aborted -> Aborted
    end.

%% @doc Every fragment table of the tables that `Frags' are fragments of:
%% numbers 1 to one past their fragment count (a hidden fragment an
%% operation is filling), those that exist, and `Frags' themselves.
-spec fragments([atom()]) -> [atom()].
fragments(Frags) ->
    Tables = mnesia:system_info(tables),
    Bases = lists:usort([B || F <- Frags, B <- [base_of(F)]]),
    lists:usort(Frags ++ [T || B <- Bases, {_Mod, _S, N} <- [hash(B)],
                               I <- lists:seq(1, N + 1), T <- [frag_name(B, I)],
                               lists:member(T, Tables)]).

%% The base table of fragment `F' (itself for a base table).
base_of(F) ->
    case base_table(F) of
        none -> F;
        Base -> Base
    end.

%% @doc `Items' in batches of 500, the size of the batches of records the
%% growth path copies.
-spec chunks([T]) -> [[T]].
chunks(Items) ->
    chunks(Items, ?BATCH).

%% @doc `Items' in batches of `Size', in order; the last may be shorter.
%% Linear in the items: each batch is taken off the front without
%% measuring what is left (`length/1' of the rest for every batch made it
%% quadratic: 62 s for 4,000,000 items).
-spec chunks([T], pos_integer()) -> [[T]].
chunks(Items, Size) when is_integer(Size), Size >= 1 ->
    chunks(Items, Size, []).

chunks([], _Size, Batches) ->
    lists:reverse(Batches);
chunks(Items, Size, Batches) ->
    {Batch, Rest} = take(Items, Size, []),
    chunks(Rest, Size, [Batch | Batches]).

%% Up to `N' items off the front of a list, and the rest.
take([Item | Rest], N, Taken) when N > 0 ->
    take(Rest, N - 1, [Item | Taken]);
take(Rest, _N, Taken) ->
    {lists:reverse(Taken), Rest}.

%% @doc `{Node, Counter, Pid}' of each transaction that `Nodes' coordinate;
%% a node that does not answer has none (it is down, or apart: then nothing
%% is durable across the cluster and the caller's next sync fails).
-spec transactions([node()]) -> [{node(), non_neg_integer(), pid()}].
transactions(Nodes) ->
    lists:append([[{N, C, P} || {C, P, _Status} <- Ts]
                  || {N, {ok, Ts}} <- lists:zip(Nodes, erpc:multicall(Nodes, mnesia, system_info,
                                                                       [transactions], 5000))]).

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

%% @doc What match specification `Spec' selects of fragment `Frag''s
%% records, keeping only the results for which `Keep(Result)' holds (see
%% {@link fold/4}, which reads them).
-spec select(atom(), ets:match_spec(), fun((term()) -> boolean())) -> [term()].
select(Frag, Spec, Keep) ->
    lists:append(lists:reverse(
                   fold(Frag, Spec, fun(Chunk, Acc) -> [[R || R <- Chunk, Keep(R)] | Acc] end,
                        []))).

%% @doc Folds `Fun(Chunk, Acc)' over what match specification `Spec'
%% selects of fragment `Frag''s records, in chunks of about 500 results, on
%% a node holding an active replica of it (this one when it does), in
%% memory of one chunk, by a process of its own that reads the next chunk
%% only once `Fun' is done with the one before (so `Fun' may run
%% transactions, and write or delete in `Frag' itself). Every record there
%% when the fold began and not written since is seen, at least once; one
%% written meanwhile may or may not be (the growth path's watch, started
%% before, covers those).
%%
%% How each storage is read:
%% <ul>
%% <li>`disc_only_copies': dets slot by slot (`dets:slot/2', a request
%% each), the table not fixed. A fixed dets table serves one request at a
%% time and makes each of a process other than the fixer wait 1 ms, so a
%% fold under `safe_fixtable' held the fragment's writers to under 1,000
%% writes a second for as long as it read. Unfixed, dets's linear hashing
%% only ever moves a record from its slot to a higher one as the table
%% grows (a dets table never shrinks), so a walk up the slots meets every
%% record that stays, a moved one perhaps twice.</li>
%% <li>Others: `select' in chunks, the table fixed (`safe_fixtable') from
%% before the first chunk to after the last (ets and redb_copies make no
%% writer wait for that), each record once.</li>
%% </ul>
-spec fold(atom(), ets:match_spec(), fun(([term()], A) -> A), A) -> A.
fold(Frag, Spec, Fun, Acc0) ->
    fold(Frag, Spec, fun(Chunk) -> Chunk end, Fun, Acc0).

%% @doc As {@link fold/4}, each chunk first given to `AtReader' in the
%% reader, on the node it reads: `Fun' gets what `AtReader(Chunk)' returns.
%% A fold that writes or deletes in `Frag' itself can do it there, next to
%% the data. Raises `{fraghash, select_failed, Why}' when `AtReader' fails.
-spec fold(atom(), ets:match_spec(), fun(([term()]) -> R), fun((R, A) -> A), A) -> A.
fold(Frag, Spec, AtReader, Fun, Acc0) ->
    Node = reader_node(Frag),
    Owner = self(),
    {Pid, Ref} = spawn_monitor(Node, fun() -> read_chunks(Owner, Frag, Spec, AtReader) end),
    fold_chunks(Pid, Ref, Fun, Acc0).

%% @doc The node reads of fragment `Frag' go to (this one when it holds an
%% active replica); raises `{fraghash, no_active_replica, Frag}' when none
%% is active.
-spec reader_node(atom()) -> node().
reader_node(Frag) ->
    case mnesia:table_info(Frag, where_to_read) of
        nowhere -> error({fraghash, no_active_replica, Frag});
        Node -> Node
    end.

fold_chunks(Pid, Ref, Fun, Acc) ->
    receive
        {Pid, chunk, Chunk} ->
            Acc2 = Fun(Chunk, Acc),
            Pid ! {self(), next},
            fold_chunks(Pid, Ref, Fun, Acc2);
        {'DOWN', Ref, process, Pid, done} ->
            Acc;
        {'DOWN', Ref, process, Pid, Why} ->
            error({fraghash, select_failed, Why})
    end.

%% The reader of fold/5, on a node holding `Frag': sends each chunk, then
%% waits for the owner to ask for the next.
read_chunks(Owner, Frag, Spec, AtReader) ->
    OwnerRef = monitor(process, Owner),
    case mnesia_lib:val({Frag, storage_type}) of
        disc_only_copies ->
            send_slots(Owner, OwnerRef, {Frag, ets:match_spec_compile(Spec), AtReader}, 0);
        Storage ->
            mnesia_lib:db_fixtable(Storage, Frag, true),
            try
                send_chunks(Owner, OwnerRef, {Storage, Spec, AtReader},
                            mnesia_lib:db_select_init(Storage, Frag, Spec, ?CHUNK))
            after
                mnesia_lib:db_fixtable(Storage, Frag, false)
            end
    end,
    exit(done).

send_chunks(_Owner, _OwnerRef, _Read, '$end_of_table') ->
    ok;
send_chunks(_Owner, _OwnerRef, _Read, {error, Reason}) ->
    exit({select_failed, Reason});
send_chunks(Owner, OwnerRef, {Storage, Spec, AtReader} = Read, {Results, Cont}) ->
    case send_chunk(Owner, OwnerRef, AtReader(Results)) of
        next -> send_chunks(Owner, OwnerRef, Read, mnesia_lib:db_select_cont(Storage, Cont, Spec));
        stop -> ok
    end.

%% A dets fragment's slots from `Slot' on, read until a chunk's worth of
%% results (or the last slot) is gathered, then sent.
send_slots(Owner, OwnerRef, {Frag, Compiled, AtReader} = Read, Slot) ->
    case read_slots(Frag, Compiled, Slot, [], 0) of
        {done, []} ->
            ok;
        {done, Results} ->
            _ = send_chunk(Owner, OwnerRef, AtReader(Results)),
            ok;
        {Next, Results} ->
            case send_chunk(Owner, OwnerRef, AtReader(Results)) of
                next -> send_slots(Owner, OwnerRef, Read, Next);
                stop -> ok
            end
    end.

%% `Count' is the length of `Acc', kept rather than measured at each slot.
read_slots(_Frag, _Compiled, Slot, Acc, Count) when Count >= ?CHUNK ->
    {Slot, Acc};
read_slots(Frag, Compiled, Slot, Acc, Count) ->
    case dets:slot(Frag, Slot) of
        '$end_of_table' ->
            {done, Acc};
        {error, Reason} ->
            exit({select_failed, Reason});
        Objects ->
            Results = ets:match_spec_run(Objects, Compiled),
            read_slots(Frag, Compiled, Slot + 1, Results ++ Acc, Count + length(Results))
    end.

%% Sends a chunk to the owner: `next' once it asks for the next one,
%% `stop' if it ended.
send_chunk(Owner, OwnerRef, Chunk) ->
    Owner ! {self(), chunk, Chunk},
    receive
        {Owner, next} -> next;
        {'DOWN', OwnerRef, process, Owner, _} -> stop
    end.

%% @doc The records of fragment `F', counted on a node holding an active
%% copy (`mnesia:table_info(F, size)' counts 0 on a node holding none); 0
%% when no copy is active.
-spec records(atom()) -> non_neg_integer().
records(F) ->
    case mnesia:table_info(F, active_replicas) of
        [] ->
            0;
        Active ->
            records_on(case lists:member(node(), Active) of
                           true -> node();
                           false -> hd(Active)
                       end, F, infinity)
    end.

%% @doc The records `Node''s copy of `F' holds, as Mnesia counts them
%% there (its storage's count, while a copy loads too); 0 for none or a
%% node that does not answer within `Timeout'.
-spec records_on(node(), atom(), timeout()) -> non_neg_integer().
records_on(Node, F, Timeout) ->
    case rpc:call(Node, mnesia, table_info, [F, size], Timeout) of
        Size when is_integer(Size) -> Size;
        _ -> 0
    end.

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
%% already; then deletes it from `From'. Ordinary transactions, each
%% writing fragments of one layout: first the copies, then the deletes,
%% so a stop in between leaves a record in both, which a later call
%% finds misplaced again and only deletes.
-spec move_misplaced([{atom(), atom(), term()}]) -> {atomic, ok} | {aborted, term()}.
move_misplaced(Items) ->
    Copied = batches(fun({_From, To, _K}) -> To end,
                     fun({From, To, K}) ->
                             case mnesia:read(To, K, write) of
                                 [] -> [ok = mnesia:write(To, R, write)
                                        || R <- mnesia:read(From, K, read)];
                                 _ -> ok
                             end
                     end, Items),
    case Copied of
        {atomic, ok} ->
            batches(fun({From, _To, _K}) -> From end,
                    fun({From, _To, K}) -> mnesia:delete(From, K, write) end, Items);
        Aborted ->
            Aborted
    end.

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
