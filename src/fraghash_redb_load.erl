%% @doc How a `redb_copies' table is copied to another node: the sender and
%% receiver sides of Mnesia's standard loading protocol, which
%% {@link fraghash_redb_copies}' callbacks hand over to here (Mnesia's
%% loader copies a table for `add_table_copy', `move_table_copy' and a
%% node that loads a table from another at start).
%%
%% == Rows as stored ==
%% To a `redb_copies' receiver the sender sends each chunk as the rows its
%% database stores, `{fraghash_rows, [{RowKey, Value}]}' read in key order
%% ({@link fraghash_redb_nif:chunk/5}), and the receiver writes them as they
%% are, one redb write a chunk, made by the receiving process as a bulk
%% write that gives way to the node's other writers
%% ({@link fraghash_redb_db:write_bulk/1}): no record is decoded on one side and
%% encoded again on the other (a `bag''s rows and their order keys alike).
%% To another storage type (a copy changed to `disc_copies' elsewhere) it
%% sends records. The receiver's indexes are built by Mnesia after the
%% load (fraghash_redb_index: a loaded copy's indexes are marked not built).
%%
%% == Writers first ==
%% Both sides run at low process priority while chunks go: the node's
%% other work (the writers' locks and commits) goes first, so a copy under
%% load slows down rather than the writers. Both are back at normal
%% priority for the last step, which Mnesia runs with the table's writers
%% held.
%%
%% == The changes made during the copy ==
%% Mnesia's loader (4.21.3) keeps the changes committed to the table while
%% it is copied, as table events in an ordered ets table of the receiving
%% process, and applies them one backend call each in that last step, with
%% the writers held: a few thousand calls after a copy of some seconds
%% under load. {@link received/4} applies the plain ones at their head
%% first (a record written, a key deleted, in a `set' or `ordered_set'),
%% in order, a few thousand to a redb write, and takes them out of that
%% ets table; Mnesia applies the rest as before, in order. The copy's
%% indexes are built after both, from its records. Where the events are
%% not kept so (another Mnesia), nothing is done here.
%%
%% == Filled aside ==
%% The receiver fills a redb table of its own beside the local copy
%% ({@link begin_aside/2}), and once every chunk has come that table takes
%% the local copy's place in one synced commit ({@link received/4}).
%% Until then the local copy is as it was: a node killed while it loads,
%% or whose load fails when its source goes down, keeps the copy it had,
%% as a `disc_copies' table keeps its files until the loader's last step.
%% Mnesia may later load that copy from this node's disc (its holders all
%% went down, this one last): it must not be a part-filled one. The table
%% filled aside is tagged `{Tab, loading}': a kill leaves it behind, and
%% it is dropped at the next load of `Tab' on the node. The changes made
%% during the copy are applied after the swap, to the copy put in place,
%% as logged writes: a kill among them leaves a copy complete up to the
%% copy's end and some of them (newer than the copy it replaced, which
%% had none of them), which the node never served.
%%
%% == Short last step ==
%% The swap is a synced commit of every write not yet committed, and it
%% runs in the last step, while the table's writers wait. So after its
%% last rows a `redb_copies' sender sends the marker `fraghash_rows_done'
%% and waits; the receiver syncs the rows written so far and answers; only
%% then does the sender end the copy and Mnesia take the last step. And
%% the changes made during the copy (thousands after a copy of seconds
%% under writers, on as many pages) go after the swap, into the log, not
%% into that synced commit: measured on a move of 1,000,000 records under
%% 2,000 writes/s, the swap took 0.15 to 0.20 s of the last step with
%% them in it.
-module(fraghash_redb_load).

-export([rows_sender/1, records_sender/2, sender_handle/4, receiving/1, receive_chunk/3,
         received/4, begin_aside/2, load_failed/1]).

%% The marker a rows sender sends after its last rows, and the receiver's
%% answer once they are synced.
-define(ROWS_DONE, fraghash_rows_done).
-define(ROWS_SYNCED, fraghash_rows_synced).
%% Rows read per chunk (as many as select's chunks).
-define(CHUNK, (fraghash_redb_select:chunk())).
%% The process dictionary key under which Mnesia's loader keeps the ets
%% table of the changes made during the copy (mnesia_loader 4.21.3).
-define(CHANGES_KEY, mnesia_table_receiver_subscr_cache).

%% @doc The sender's chunk functions for a `redb_copies' receiver: the
%% rows of redb table `Name' (see Rows as stored), at low priority, and
%% after them the marker `fraghash_rows_done' (see Short last step).
-spec rows_sender(binary()) -> {standard, fun(), fun()}.
rows_sender(Name) ->
    process_flag(priority, low),
    {standard, fun() -> rows_sent(rows(Name, edge)) end, rows_more(Name)}.

rows_more(Name) ->
    fun(paused) -> paused;
       (Start) -> rows_sent(rows(Name, Start))
    end.

%% After the last rows, the marker; then the sender rests (`paused': no
%% chunk, not the end) until the receiver answers it.
rows_sent('$end_of_table') -> {?ROWS_DONE, paused};
rows_sent(Chunk) -> Chunk.

%% @doc The sender's chunk functions for a receiver of another storage
%% type: `Init()' and `More(Cont)' (the backend's select), at low priority.
-spec records_sender(fun(), fun()) -> {standard, fun(), fun()}.
records_sender(Init, More) ->
    process_flag(priority, low),
    {standard, fun() -> sent(Init()) end, fun(Cont) -> sent(More(Cont)) end}.

%% @doc The sender's chunk function and state after message `Msg' from
%% the receiver, its state `Cont' (either sender's; rows of redb table
%% `Name', or records read by `More'): the end, once the receiver synced
%% the rows; else as they were.
-spec sender_handle(term(), binary(), term(), fun()) -> {fun(), term()}.
sender_handle(?ROWS_SYNCED, _Name, paused, _More) ->
    process_flag(priority, normal),
    {fun(_) -> '$end_of_table' end, '$end_of_table'};
sender_handle(_Msg, Name, Cont, _More) when Cont =:= done; Cont =:= paused;
                                             element(1, Cont) =:= 'after' ->
    {rows_more(Name), Cont};
sender_handle(_Msg, _Name, Cont, More) ->
    {fun(C) -> sent(More(C)) end, Cont}.

%% Up to a chunk of the stored rows of redb table `Name' from `Start', and
%% where the next chunk starts; `'$end_of_table'' past the last.
rows(_Name, done) ->
    '$end_of_table';
rows(Name, Start) ->
    case fraghash_redb_nif:check(
           fraghash_redb_nif:chunk(fraghash_redb_db:handle(), Name, Start, forward, ?CHUNK)) of
        {ok, [], _} -> '$end_of_table';
        {ok, Rows, done} -> {{fraghash_rows, Rows}, done};
        {ok, Rows, more} -> {{fraghash_rows, Rows}, {'after', element(1, lists:last(Rows))}}
    end.

%% The sender's next chunk; after the last, the last step follows.
sent('$end_of_table') ->
    process_flag(priority, normal),
    '$end_of_table';
sent(Chunk) ->
    Chunk.

%% @doc The receiver's first message: `Size' records to come; the receiver
%% goes to low priority.
-spec receiving(term()) -> term().
receiving(Size) ->
    process_flag(priority, low),
    Size.

%% @doc Writes one chunk to redb table `Name' (`RowKey' gives a record's
%% row key), one redb write, and says what to answer the sender: `more',
%% or, after the sender's last rows, that they are synced.
-spec receive_chunk({fraghash_rows, [{binary(), binary()}]} | [tuple()] | ?ROWS_DONE,
                    binary(), fun((tuple()) -> binary())) -> more | {more, {more, ?ROWS_SYNCED}}.
receive_chunk({fraghash_rows, Rows}, Name, _RowKey) ->
    ok = fraghash_redb_db:write_bulk([{put, Name, K, V} || {K, V} <- Rows]),
    more;
receive_chunk(?ROWS_DONE, _Name, _RowKey) ->
    ok = fraghash_redb_nif:check(fraghash_redb_nif:sync(fraghash_redb_db:handle())),
    {more, {more, ?ROWS_SYNCED}};
receive_chunk(Records, Name, RowKey) ->
    ok = fraghash_redb_db:write_bulk([{put, Name, RowKey(R), term_to_binary(R)} || R <- Records]),
    more.

%% @doc The chunks have all come: the receiver back at normal priority;
%% redb table `Aside' replaces `Name', the local copy, in one synced
%% commit that also marks the copy's indexes not built (it comes without
%% index rows: Mnesia builds them after the load); then, when `Plain'
%% (`Tab' a `set' or `ordered_set'), the plain changes made during the
%% copy are applied to it (see The changes made during the copy).
-spec received(atom(), boolean(), {binary(), binary()}, fun((tuple()) -> binary())) -> ok.
received(Tab, Plain, {Name, Aside}, RowKey) ->
    process_flag(priority, normal),
    %% Logged, then committed with the swap (a flush between the two
    %% leaves the indexes to build again: the price is a build).
    ok = fraghash_redb_db:write_or_raise(fraghash_redb_index:not_built_ops(Tab)),
    ok = fraghash_redb_nif:check(fraghash_redb_nif:replace_table(fraghash_redb_db:handle(),
                                                                 Name, Aside)),
    Changes = get(?CHANGES_KEY),
    case Plain andalso Changes =/= undefined andalso ets:info(Changes, type) =:= ordered_set of
        true ->
            RecName = mnesia_lib:val({Tab, record_name}),
            catch_up(Changes, Tab, Name, RowKey, RecName, ets:first(Changes));
        false ->
            ok
    end.

%% @doc Makes redb table `Aside' (the copy of `Tab' filled aside) afresh
%% and empty, for the load of `Tab' the calling process runs.
-spec begin_aside(atom(), binary()) -> ok.
begin_aside(Tab, Aside) ->
    ok = fraghash_redb_db:drop_table(Aside),
    fraghash_redb_nif:check(fraghash_redb_nif:create_table(fraghash_redb_db:handle(), Aside,
                                                          term_to_binary({Tab, loading}))).

%% @doc Whether the calling process is Mnesia's loader of `Tab': a table
%% deleted there is a load that failed (Mnesia's loader, 4.21.3, deletes
%% an external table whose load fails, as it deletes a `disc_copies'
%% table's ets table and keeps its files), before the swap or after it
%% (the source went down while Mnesia ended the copy: the copy put in
%% place is complete up to the copy's end, as after a kill, see Filled
%% aside).
%% The loader keeps the table and its source under these process
%% dictionary keys. (A copy whose `add_table_copy' is undone after the
%% load stays in the database too, listed nowhere, until a copy of the
%% table is loaded there again or recovery forgets it.)
-spec load_failed(atom()) -> boolean().
load_failed(Tab) ->
    case {get(mnesia_table_receiver), get(mnesia_table_sender_node)} of
        {{Tab, _, _}, _} -> true;
        {_, {Tab, _}} -> true;
        _ -> false
    end.

%% Applies the plain changes from `Id' on, in writes of up to 8 chunks.
catch_up(Changes, Tab, Name, RowKey, RecName, Id) ->
    case plain(Changes, Tab, Id, 8 * ?CHUNK, []) of
        {[], _} ->
            ok;
        {Events, Next} ->
            ok = fraghash_redb_commit:change(
                   Tab, fun(_) -> lists:append([ops(E, Name, RowKey, RecName) || {_, E} <- Events])
                        end),
            [true = ets:delete(Changes, EId) || {EId, _} <- Events],
            case Next of
                stop -> ok;
                _ -> catch_up(Changes, Tab, Name, RowKey, RecName, Next)
            end
    end.

%% Up to `N' plain changes from `Id', oldest first, and the id after them
%% (`stop' at the first change that is not plain, or at the end).
plain(_Changes, _Tab, '$end_of_table', _N, Acc) ->
    {lists:reverse(Acc), stop};
plain(_Changes, _Tab, Id, 0, Acc) ->
    {lists:reverse(Acc), Id};
plain(Changes, Tab, Id, N, Acc) ->
    case ets:lookup(Changes, Id) of
        [{Id, {mnesia_table_event, {write, Rec, _}}}] when element(1, Rec) =:= Tab ->
            plain(Changes, Tab, ets:next(Changes, Id), N - 1, [{Id, {write, Rec}} | Acc]);
        [{Id, {mnesia_table_event, {delete, {Tab, Key}, _}}}] ->
            plain(Changes, Tab, ets:next(Changes, Id), N - 1, [{Id, {delete, Key}} | Acc]);
        _ ->
            {lists:reverse(Acc), stop}
    end.

%% The redb ops of a plain change, as the backend's insert/3 and delete/3
%% write them (the record under the table's record name, as Mnesia's
%% loader passes it).
ops({write, Rec}, Name, RowKey, RecName) ->
    Obj = setelement(1, Rec, RecName),
    [{put, Name, RowKey(Obj), term_to_binary(Obj)}];
ops({delete, Key}, Name, _RowKey, _RecName) ->
    case fraghash_redb_nif:key_bin(Key) of
        {ok, K} -> [{delete, Name, K}];
        %% A key that cannot be stored is in no table.
        none -> []
    end.
