%% @doc A Mnesia storage backend on redb: tables of type `redb_copies'
%% kept on disc in one redb database per node (`fraghash.redb' in Mnesia's
%% directory), one redb table per Mnesia table (and per index).
%%
%% ```
%% {atomic, ok} = fraghash_redb_copies:register(),   % once per schema
%% {atomic, ok} = mnesia:create_table(t, [{redb_copies, [node()]},
%%                                        {type, ordered_set}]).
%% '''
%%
%% == What it stores ==
%% Each record is stored under the order key of its key
%% ({@link fraghash_redb_nif:order_key/1}: bytes whose order is Erlang's
%% term order), its value the whole record as `term_to_binary/1'. Both
%% `set' and `ordered_set' tables are stored so: `first/next/prev/last'
%% walk an `ordered_set' in term order, and a `set' in the same order
%% (which a `set' does not promise). Keys equal under `==' (`1' and `1.0')
%% are one key, as in an ets `ordered_set' -- in a `set' too, where ets
%% would keep two records. Pids, ports, references and funs cannot be keys
%% (their order does not survive a restart), nor can keys whose order key
%% passes 64 KiB: writing one aborts the transaction with
%% `{fraghash_redb, unsupported_key | key_too_large, Tab, Key}'. A `bag'
%% stores one row per record, its key's rows a contiguous range
%% ({@link fraghash_redb_bag}).
%%
%% == Durability ==
%% Mnesia applies a committed transaction to a table of this type by
%% calling {@link insert/3}, {@link delete/3} or {@link match_delete/3}
%% once per record, in the committing process, before the transaction
%% returns; it later drops its own log records without asking the backend.
%% So the line is here: each of those calls returns only once its change is
%% visible to reads and kept should the VM die. With the default
%% `redb_durability' of `logged', the change is in the database's log
%% (written to the operating system, not synced) and its memtable when the
%% call returns, and the next open replays what redb had not synced; the
%% node's writer ({@link fraghash_redb_db}) has the memtable flushed to
%% redb with a sync within `redb_sync_ms' (default 1000 ms) of a write,
%% and {@link sync/0} commits it at once. With `immediate', each call returns once its change is synced,
%% and concurrent committers share syncs (group commit). So when
%% `mnesia:transaction/1' (or a dirty write) returns on a node that holds
%% a `redb_copies' replica, every change it made to that replica survives
%% a kill -9 of that node; `mnesia:sync_log/0' is not needed for it (that
%% is stronger than `disc_copies', whose commit waits in `disk_log''s
%% cache until a sync). Against a crash of the operating system or a power
%% cut, `logged' keeps what was written before the last sync, as
%% `disc_copies' keeps what was written before the last `sync_log()';
%% `immediate' keeps every write that returned. A committer pays one log
%% write (`logged') or one sync (`immediate') per record, so a transaction
%% of N records costs N of them; grouping one transaction's records into
%% one redb transaction would need Mnesia to say where a commit ends, which
%% the backend interface does not.
%%
%% At start, Mnesia replays the transactions still in its own log
%% (`LATEST.LOG') into tables of this type. After a kill -9 that log can
%% lack a delete redb holds (`disk_log' caches writes, up to 64 KiB for up
%% to two seconds): replaying it would bring the deleted record back (and
%% count counters twice). So the backend ignores the replay: between
%% `load_table(_, Tab, startup, _)' and the `close_table/2' that ends it,
%% writes to `Tab' are dropped. The price: a kill between two records of
%% one transaction leaves the first applied and not the second (the
%% transaction never returned, so nobody was told it committed). An
%% index's rows are written with their record, in the same redb write
%% ({@link fraghash_redb_index}): whole after a kill, so an index is
%% built once, not at every start.
%% A write that the database cannot keep is never acknowledged: while the
%% disc is full, writes abort in their transaction with `{fraghash_redb,
%% disk_full, Tab, Text}'; a committed change that fails all the same (an
%% I/O error) stops Mnesia on the node (see {@link fraghash_redb_commit}).
%% Replicas on other nodes follow Mnesia's protocol: with
%% `mnesia:sync_transaction/1' every replica has applied (and so synced)
%% the transaction when it returns.
%%
%% == Reads ==
%% Readers call the NIF directly (dirty I/O schedulers), concurrently.
%% `lookup' is a look in the memtable and then one B-tree search (the
%% tables of the last committed state stay open between commits, so a read
%% does not search redb's table of tables first); in a `bag', one range
%% scan. `first/last/next/prev' are one search each, merged with the
%% memtable's changes. `select' ({@link fraghash_redb_select}) compiles the match spec
%% with `ets:match_spec_compile/1'; when every clause's head binds the key
%% to a ground term it reads only those keys; when every clause binds a
%% leading part of the key (`{user, 42, '_'}', `[$a | '_']') it reads only
%% the range of keys starting so; otherwise it scans the table, in chunks
%% of {@link chunk/0} records whose values the NIF decodes. `info(T, size)' is redb's count, kept in
%% the table's root, O(1). `info(T, memory)' is the bytes the records take in
%% the file (keys and values, without page overhead), not Erlang memory:
%% it walks the table's pages, O(table). `slot/3' walks to
%% the slot, O(slot).
%%
%% == Loading, replication ==
%% A node loading a table from another receives it through Mnesia's
%% standard protocol ({@link fraghash_redb_load}): the receiver writes
%% each chunk of stored rows as one redb write into a table aside, which
%% replaces its copy in one commit once complete; a load cut short leaves
%% the copy it had.
%%
%% A `bag' index or an index plugin is refused at `create_table' with
%% `{fraghash_redb, index_not_supported, Text}'.
%%
%% == Several nodes ==
%% {@link register/0} opens the database on every node running Mnesia
%% with the schema, and a node that did not open it (it joined later, or
%% its database was closed) opens it when a replica is made there: by
%% `create_table', `add_table_copy', `change_table_copy_type' run on any
%% node, or `move_table_copy'. A node whose database cannot be opened
%% makes the schema change abort.
-module(fraghash_redb_copies).
-behaviour(mnesia_backend_type).

-export([register/0, register/1, sync/0, chunk/0, forget/1, repair_log/0]).

%% Backend management
-export([init_backend/0, add_aliases/1, remove_aliases/1]).
%% Schema level
-export([semantics/2, check_definition/4, create_table/3, load_table/4, close_table/2,
         sync_close_table/2, delete_table/2, info/3, real_suffixes/0, tmp_suffixes/0]).
%% Table loading from another node
-export([sender_init/4, sender_handle_info/5, receiver_first_message/4, receive_data/5,
         receive_done/4]).
%% Records
-export([insert/3, delete/3, match_delete/3, lookup/3, first/2, last/2, next/3, prev/3,
         select/1, select/3, select/4, repair_continuation/2, slot/3, update_counter/4,
         fixtable/3, validate_key/6, validate_record/6, index_is_consistent/3,
         is_index_consistent/2]).

%% Records read per chunk by select and loading (fraghash_redb_select owns the figure).
-define(CHUNK, (fraghash_redb_select:chunk())).
-define(ALIAS, redb_copies).

%%% Convenience

%% @doc Registers the backend as `redb_copies' in the schema (once per
%% schema; `{atomic, ok}' also when it is there already).
-spec register() -> {atomic, ok} | {aborted, term()}.
register() ->
    register(?ALIAS).

%% @doc Registers the backend under alias `Alias'. On a node that joined
%% a schema holding the alias already (`extra_db_nodes'), Mnesia does not
%% start the backend: this call does, and returns `{atomic, ok}'.
-spec register(atom()) -> {atomic, ok} | {aborted, term()}.
register(Alias) ->
    Here = case mnesia:add_backend_type(Alias, ?MODULE) of
               {aborted, {backend_type_already_exists, _}} -> {atomic, ok};
               Other -> Other
           end,
    case Here of
        {atomic, ok} -> fraghash_redb_admin:start_everywhere(Alias);
        _ -> Here
    end.

%% @doc Syncs the node's database: every write that returned survives a
%% crash of the operating system or a power cut too (with the default
%% `redb_durability' of `logged', writes are synced within `redb_sync_ms'
%% anyway; with `immediate', this changes nothing). Writes from other
%% processes go on meanwhile, into a fresh memtable. With {@link forget/1},
%% one of the two hooks by which the growth path reaches a backend's
%% storage: its durability step (`fraghash_durable') calls `sync/0' of
%% every external backend holding copies on the node that exports it, and
%% recovery `forget/1' of every backend of the schema that exports it.
-spec sync() -> ok.
sync() ->
    ok = fraghash_redb_nif:check(fraghash_redb_nif:sync(fraghash_redb_db:handle())).

%% @doc Opens this node's database with its log repaired, with Mnesia
%% stopped on this node, and says what it dropped. For a node whose Mnesia
%% refuses to start because the log beside `fraghash.redb' is damaged
%% (`log_damaged': whole logged writes follow bytes that fail their
%% check) or missing (`log_missing'): the damaged part of that file and
%% everything after it are dropped, a missing file is made anew. Keep a
%% copy of the files first; where another node holds the tables, deleting
%% this node's copies there and adding them again loses nothing instead.
%% `{ok, []}' when the log was whole.
-spec repair_log() -> {ok, [binary()]} | {error, term()}.
repair_log() ->
    case mnesia:system_info(is_running) of
        no -> fraghash_redb_db:repair_log(fraghash_redb_db:path());
        _ -> {error, {fraghash_redb, mnesia_running,
                      <<"stop Mnesia on this node first (mnesia:stop())">>}}
    end.

%% @doc Records read per chunk by `select' and table loading.
chunk() -> ?CHUNK.

%%% Backend management

%% @private The table of index states is kept: an index built once is
%% kept with its records ({@link fraghash_redb_index}), not rebuilt.
%%
%% A missing `fraghash.redb' on a node whose schema says it holds tables of
%% this type is refused rather than created empty: their records would be
%% gone without a word.
init_backend() ->
    case fraghash_redb_admin:open_db([]) of
        ok -> ok;
        {error, _} = E -> E
    end.

%% @private
add_aliases(Aliases) ->
    fraghash_redb_admin:start_local(Aliases).

%% @private
remove_aliases(Aliases) ->
    fraghash_redb_db:remove_aliases(Aliases).

%%% Schema level

%% @private Storage is disc_only_copies: Mnesia keeps no ets copy, and
%% replays its log into the table at start only.
semantics(_Alias, storage) -> disc_only_copies;
semantics(_Alias, types) -> [set, ordered_set, bag];
semantics(_Alias, index_types) -> [ordered];
semantics(_Alias, _) -> undefined.

%% @private
check_definition(_Alias, Tab, _Nodes, Props) ->
    Unsupported = [I || I <- proplists:get_value(index, Props, []), not ordered_index(I)],
    case {proplists:get_value(type, Props, set), Unsupported} of
        {_, [_ | _]} ->
            Text = io_lib:format("~0p: redb_copies keeps ordered indexes on attributes only; "
                                 "index ~0p is not supported (give the attribute alone, or "
                                 "{Attribute, ordered})", [Tab, Unsupported]),
            {error, {fraghash_redb, index_not_supported, unicode:characters_to_binary(Text)}};
        {bag, []} ->
            fraghash_redb_bag:can_digest();
        _ ->
            ok
    end.

%% An index this backend keeps: on an attribute's position (an index
%% plugin's is a tuple), of type `ordered' (a `bag' index would need a row
%% per record and value; it returned one record of several).
ordered_index(Pos) when is_integer(Pos) -> true;
ordered_index({Pos, ordered}) when is_integer(Pos) -> true;
ordered_index(_) -> false.

%% @private Mnesia may call it more than once for a table (while preparing
%% the schema change and when dumping it): a table already there is fine.
create_table(_Alias, Tab, _Props) ->
    ok = fraghash_redb_admin:need_db(Tab),
    ensure_table(Tab).

%% @private A copy loaded from another node is filled aside and replaces
%% the local one when complete (fraghash_redb_load: a load cut short keeps
%% the local copy as it was). Mnesia's log replay at start opens the table
%% with reason `startup' and closes it when done: its writes are ignored
%% meanwhile (see the module documentation). A copy a kill left aside
%% goes when the table is loaded from this node's disc.
load_table(_Alias, Tab, {net_load, _}, _Cs) ->
    ok = fraghash_redb_admin:need_db(Tab),
    fraghash_redb_commit:replayed(Tab, false),
    ok = ensure_table(Tab),
    fraghash_redb_load:begin_aside(Tab, name({Tab, loading}));
load_table(_Alias, Tab, startup, _Cs) ->
    fraghash_redb_commit:replayed(Tab, true),
    ok = ensure_table(Tab),
    fraghash_redb_db:drop_table(name({Tab, loading}));
load_table(_Alias, Tab, _Reason, _Cs) ->
    ok = fraghash_redb_admin:need_db(Tab),
    fraghash_redb_commit:replayed(Tab, false),
    ok = ensure_table(Tab),
    fraghash_redb_db:drop_table(name({Tab, loading})).

%% @private The database stays open for the node's other tables.
close_table(_Alias, Tab) ->
    fraghash_redb_commit:replayed(Tab, false).

%% @private
sync_close_table(_Alias, _Tab) -> ok.

%% @doc Deletes this node's stored copy of table `Tab' and of its
%% indexes, when the database is open here: for a table Mnesia no longer
%% has whose deletion a kill cut short, so that a new table of the same
%% name starts empty. Mnesia's own tables are never passed here.
-spec forget(atom()) -> ok.
forget(Tab) ->
    case fraghash_redb_db:is_open() of
        false ->
            ok;
        true ->
            {ok, Stored} = fraghash_redb_nif:check(fraghash_redb_nif:tables(fraghash_redb_db:handle())),
            [ok = delete_table(?ALIAS, Tag) || {_Name, Props} <- Stored, Props =/= <<>>,
                                                Tag <- [binary_to_term(Props)],
                                                stored_for(Tag) =:= Tab],
            ok
    end.

%% The table a stored table belongs to: itself, or the table it indexes.
stored_for(Tab) when is_atom(Tab) -> Tab;
stored_for(Tag) when is_tuple(Tag) -> element(1, Tag).

%% @private Mnesia's loader deletes the table when a load from another
%% node fails: only the copy filled aside goes then, and the local copy
%% stays (as a `disc_copies' table's file stays).
delete_table(_Alias, Tab) ->
    ok = fraghash_redb_admin:need_db(Tab),
    case is_atom(Tab) andalso fraghash_redb_load:load_failed(Tab) of
        true ->
            fraghash_redb_db:drop_table(name({Tab, loading}));
        false ->
            ok = fraghash_redb_db:write_or_raise(fraghash_redb_index:delete(Tab)),
            fraghash_redb_db:drop_table(name(Tab))
    end.

%% @private
info(_Alias, Tab, size) ->
    {ok, N} = fraghash_redb_nif:check(fraghash_redb_nif:size(fraghash_redb_db:handle(), name(Tab))),
    N;
info(_Alias, Tab, memory) ->
    {ok, Bytes} = fraghash_redb_nif:check(fraghash_redb_nif:stored_bytes(fraghash_redb_db:handle(), name(Tab))),
    Bytes;
info(_Alias, _Tab, _Item) ->
    undefined.

%% @private `mnesia:delete_schema/1' removes files with these suffixes.
%% The database and its log (fraghash_redb_db).
real_suffixes() -> [".redb", ".redb.log", ".redb.log2"].

%% @private None. Mnesia asks for them once while it starts, after it has
%% replayed its log and before it merges the node's schema with the
%% running nodes': the one moment to align the schema where Mnesia could
%% not merge it ({@link fraghash_redb_align}).
tmp_suffixes() ->
    fraghash_redb_align:align(),
    [].

%%% Loading a table from another node

%% @private The protocol is fraghash_redb_load's: to a `redb_copies' copy
%% the rows go as stored, to another storage type as records.
sender_init(_Alias, Tab, {ext, _, ?MODULE}, _Pid) ->
    fraghash_redb_load:rows_sender(name(Tab));
sender_init(Alias, Tab, _RemoteStorage, _Pid) ->
    fraghash_redb_load:records_sender(fun() -> select(Alias, Tab, [{'_', [], ['$_']}], ?CHUNK) end,
                                      fun select/1).

%% @private The receiver's answer to the rows' end (fraghash_redb_load).
sender_handle_info(Msg, _Alias, Tab, _ReceiverPid, Cont) ->
    fraghash_redb_load:sender_handle(Msg, name(Tab), Cont, fun select/1).

%% @private
receiver_first_message(_Pid, {first, Size}, _Alias, _Tab) ->
    {fraghash_redb_load:receiving(Size), no_state}.

%% @private One chunk, one redb write, to the copy filled aside; the
%% rows' end synced.
receive_data(Data, _Alias, Tab, _Sender, State) ->
    {fraghash_redb_load:receive_chunk(Data, name({Tab, loading}), row_key_fun(Tab)), State}.

%% @private The copy filled aside in place of the local one, and the
%% changes made during the copy caught up on.
receive_done(_Alias, Tab, _Sender, _State) ->
    fraghash_redb_load:received(Tab, not fraghash_redb_bag:is_bag(Tab),
                                {name(Tab), name({Tab, loading})}, row_key_fun(Tab)).

%%% Records

%% @private A write to an index this backend keeps comes from Mnesia's
%% own index upkeep and is dropped (fraghash_redb_index: the record's
%% write wrote its rows); so for delete/3 and match_delete/3.
insert(_Alias, Tab, Obj) ->
    case replaying_or_kept(Tab) of
        true -> ok;
        false -> fraghash_redb_commit:change(Tab, fun(Ixs) ->
                                     %% A record of a bag replaces none.
                                     Old = [R || Ixs =/= [], not fraghash_redb_bag:is_bag(Tab),
                                                 R <- lookup(?ALIAS, Tab, element(2, Obj))],
                                     [{put, name(Tab), (row_key_fun(Tab))(Obj), term_to_binary(Obj)}
                                      | fraghash_redb_index:insert_ops(Ixs, Obj, Old)]
                             end)
    end.

%% @private
delete(_Alias, Tab, Key) ->
    case {replaying_or_kept(Tab), fraghash_redb_nif:key_bin(Key)} of
        {false, {ok, K}} ->
            fraghash_redb_commit:change(Tab, fun(Ixs) ->
                                Ops = case fraghash_redb_bag:is_bag(Tab) of
                                          false -> [{delete, name(Tab), K}];
                                          true -> fraghash_redb_bag:delete_ops(name(Tab), K)
                                      end,
                                Ops ++ remove_index_ops(Tab, Ixs, indexed_records(Tab, Ixs, Key))
                        end);
        _ ->
            ok
    end.

%% @private A pattern that matches every record clears the table in one
%% transaction; another scans for the matching keys and deletes them in
%% transactions of up to chunk/0 keys. In a `bag', Mnesia's
%% `delete_object' comes here with the record as the pattern: a pattern
%% without wildcards deletes its one row.
match_delete(_Alias, Tab, Pat) ->
    case {replaying_or_kept(Tab), fraghash_redb_select:wild(Pat, keypos(Tab))} of
        {true, _} ->
            ok;
        {false, true} ->
            fraghash_redb_commit:change(Tab, fun(Ixs) -> [{clear, name(Tab)} | fraghash_redb_index:clear_ops(Ixs)] end);
        {false, false} when is_tuple(Pat), tuple_size(Pat) >= 2 ->
            case fraghash_redb_bag:is_bag(Tab) andalso fraghash_redb_select:ground(Pat)
                andalso fraghash_redb_nif:key_bin(element(2, Pat)) =/= none of
                true -> delete_rows(Tab, [Pat]);
                false -> delete_matching(select(?ALIAS, Tab, [{Pat, [], ['$_']}], ?CHUNK), Tab)
            end;
        {false, false} ->
            delete_matching(select(?ALIAS, Tab, [{Pat, [], ['$_']}], ?CHUNK), Tab)
    end.

delete_matching('$end_of_table', _Tab) ->
    ok;
delete_matching({Recs, Cont}, Tab) ->
    ok = delete_rows(Tab, Recs),
    delete_matching(select(Cont), Tab).

%% Deletes the rows of records `Recs' (none of the key's other records in
%% a bag) and the index rows no record left holds.
delete_rows(Tab, Recs) ->
    RowKey = row_key_fun(Tab),
    fraghash_redb_commit:change(Tab, fun(Ixs) -> [{delete, name(Tab), RowKey(R)} || R <- Recs]
                                ++ remove_index_ops(Tab, Ixs, Recs) end).

remove_index_ops(Tab, Ixs, Gone) ->
    fraghash_redb_index:remove_ops(Ixs, Gone, fun(K) -> lookup(?ALIAS, Tab, K) end,
                                   row_key_fun(Tab)).

%% The records of `Key' when `Tab' has indexes to keep (else not read).
indexed_records(Tab, Ixs, Key) -> [R || Ixs =/= [], R <- lookup(?ALIAS, Tab, Key)].

%% A replay into a table drops its index writes too, never an index build.
replaying_or_kept(Tab) ->
    fraghash_redb_commit:replaying(stored_for(Tab)) andalso not fraghash_redb_index:building(Tab)
        orelse fraghash_redb_index:ignores(Tab).

%% @private
lookup(_Alias, Tab, Key) ->
    case {fraghash_redb_nif:key_bin(Key), fraghash_redb_bag:is_bag(Tab)} of
        {{ok, K}, true} ->
            fraghash_redb_bag:lookup(name(Tab), K);
        {{ok, K}, false} ->
            case fraghash_redb_nif:check(fraghash_redb_nif:read(fraghash_redb_db:handle(), name(Tab), K)) of
                {ok, V} -> [binary_to_term(V)];
                not_found -> []
            end;
        {none, _} ->
            []
    end.

%% @private
first(_Alias, Tab) ->
    key_of(Tab, fraghash_redb_nif:first(fraghash_redb_db:handle(), name(Tab))).

%% @private
last(_Alias, Tab) ->
    key_of(Tab, fraghash_redb_nif:last(fraghash_redb_db:handle(), name(Tab))).

%% @private
next(_Alias, Tab, Key) ->
    case fraghash_redb_bag:is_bag(Tab) of
        false -> key_of(Tab, fraghash_redb_nif:next(fraghash_redb_db:handle(), name(Tab), order_key(Key)));
        true -> key_of(Tab, fraghash_redb_bag:next(name(Tab), order_key(Key)))
    end.

%% @private
prev(_Alias, Tab, Key) ->
    key_of(Tab, fraghash_redb_nif:prev(fraghash_redb_db:handle(), name(Tab), order_key(Key))).

%% @private Each read sees every write made before it: nothing to fix.
fixtable(_Alias, _Tab, _Bool) -> true.

%% @private
slot(_Alias, Tab, Pos) when is_integer(Pos), Pos >= 0 ->
    fraghash_redb_select:slot(name(Tab), Pos);
slot(_Alias, _Tab, _Pos) ->
    erlang:error(badarg).

%% @private Raises `badarg' (an `error', which Mnesia catches to write the
%% record itself) when there is no record or no integer in position 3 (it
%% can be indexed: its row changes in the same write, fraghash_redb_index).
update_counter(Alias, Tab, Key, Incr) when is_integer(Incr) ->
    case {fraghash_redb_commit:replaying(Tab), fraghash_redb_nif:key_bin(Key)} of
        {true, _} ->
            %% The replay's increment is in the table already.
            case lookup(Alias, Tab, Key) of
                [Rec] when is_integer(element(3, Rec)) -> element(3, Rec);
                _ -> erlang:error(badarg)
            end;
        {false, {ok, K}} ->
            Ixs = fraghash_redb_index:of_table(Tab),
            Also = fun(Old, New) -> fraghash_redb_index:counter_ops(Ixs, Old, New) end,
            case fraghash_redb_db:update_counter(name(Tab), K, Incr, 3, Also) of
                {ok, New} -> New;
                {error, badarg} -> erlang:error(badarg);
                {error, {Kind, Msg}} -> fraghash_redb_commit:fail_stop(Tab, Kind, Msg)
            end;
        {false, none} ->
            erlang:error(badarg)
    end.

%% @private Called in the transaction for counter updates: refused while
%% the disc is full, as writes are.
validate_key(_Alias, Tab, RecName, Arity, Type, _Key) ->
    ok = fraghash_redb_commit:room(Tab),
    {RecName, Arity, Type}.

%% @private Called in the transaction for each write: a key that cannot be
%% stored aborts it there, not later while Mnesia commits (where a failure
%% would only be logged).
validate_record(_Alias, Tab, RecName, Arity, Type, Obj) ->
    Key = element(2, Obj),
    try fraghash_redb_nif:order_key(Key) of
        _ -> ok
    catch
        error:{fraghash_redb, Reason, _} -> mnesia:abort({fraghash_redb, Reason, Tab, Key})
    end,
    case fraghash_redb_index:check(Tab, Obj) of
        ok -> ok = fraghash_redb_commit:room(Tab), {RecName, Arity, Type};
        {error, Why, Value} -> mnesia:abort({fraghash_redb, Why, Tab, Value})
    end.

%% @private Mnesia begins (`false') or ends (`true') building index
%% `Tag' from its table (fraghash_redb_index).
index_is_consistent(_Alias, Tag, Bool) when is_boolean(Bool) ->
    ok = fraghash_redb_admin:need_db(stored_for(Tag)),
    ok = fraghash_redb_db:write_or_raise(fraghash_redb_index:built_ops(Tag, Bool)),
    fraghash_redb_index:consistent(Tag, Bool).

%% @private `true' for an index built once and kept since with its
%% records: Mnesia does not build it again.
is_index_consistent(_Alias, Tag) ->
    ok = fraghash_redb_admin:need_db(stored_for(Tag)),
    fraghash_redb_index:built(Tag).

%%% Select (fraghash_redb_select)

%% @private
select(Alias, Tab, MS) ->
    case select(Alias, Tab, MS, infinity) of
        '$end_of_table' -> [];
        {Matches, _} -> Matches
    end.

%% @private Up to `Limit' matches in key order, and a continuation.
select(_Alias, Tab, MS, Limit) ->
    fraghash_redb_select:select(name(Tab), keypos(Tab), fraghash_redb_bag:is_bag(Tab), MS, Limit).

%% @private
select(Cont) ->
    fraghash_redb_select:select(Cont).

%% @private
repair_continuation(Cont, MS) ->
    fraghash_redb_select:repair_continuation(Cont, MS).

%%% Helpers

%% The redb table of Mnesia table `Tab' (an atom) or of one of its indexes
%% or checkpoint retainers (a tuple tag).
name(Tab) when is_atom(Tab) ->
    <<"m:", (atom_to_binary(Tab, utf8))/binary>>;
name(Tag) ->
    <<"x:", (binary:encode_hex(term_to_binary(Tag)))/binary>>.

%% Index rows are `{{IndexValue, Key}}': the key is the whole row's first
%% element. Everything else is a record keyed in position 2.
keypos({_, index, _}) -> 1;
keypos(_) -> 2.

%% An index table made or opened is kept from now on (fraghash_redb_index).
ensure_table(Tab) ->
    case fraghash_redb_nif:create_table(fraghash_redb_db:handle(), name(Tab),
                                        term_to_binary(Tab)) of
        ok -> fraghash_redb_index:open(Tab, name(Tab));
        {error, {table_exists, _}} -> fraghash_redb_index:open(Tab, name(Tab));
        Error -> fraghash_redb_nif:check(Error)
    end.

%% The row key of each record of `Tab' (fraghash_redb_bag:row_key/3).
row_key_fun(Tab) ->
    IsBag = fraghash_redb_bag:is_bag(Tab),
    Pos = keypos(Tab),
    fun(Obj) -> fraghash_redb_bag:row_key(IsBag, Pos, Obj) end.

order_key(Key) ->
    fraghash_redb_nif:order_key(Key).

%% A key that cannot be stored cannot be in the table either.
key_of(Tab, {ok, _K, V}) -> element(keypos(Tab), binary_to_term(V));
key_of(_Tab, '$end_of_table') -> '$end_of_table';
key_of(_Tab, Error) -> fraghash_redb_nif:check(Error).
