%% @doc The indexes of `redb_copies' tables ({@link fraghash_redb_copies}),
%% kept by the backend in the same database write as their record.
%%
%% == Rows ==
%% An index on position `Pos' of table `Tab' is Mnesia's table
%% `{Tab, index, {Pos, ordered}}', stored as a redb table of `{{Value, Key}}'
%% rows (Mnesia's `ordered' index type): an index read reads the range of
%% its value.
%%
%% == Who writes them ==
%% Mnesia keeps an external backend's index by calls of its own: when it
%% commits a record it reads the records it replaces and then calls the
%% backend's `insert/3', `delete/3' or `match_delete/3' on the index table,
%% apart from the record's call (`mnesia_index:add_index/6' and its
%% siblings, called by `mnesia_tm' before the record's own write). A kill
%% between those calls would leave the index behind its table, so the
%% backend writes the index rows itself instead: the record's call reads
%% the records it replaces or removes, and hands the record's change and
%% its index rows' to {@link fraghash_redb_db:write/1} together, one redb
%% write, whole or not at all after a kill -9. Mnesia's own calls on an
%% index table the backend keeps are then dropped ({@link ignores/1}): they
%% would write the same rows a second time, apart again.
%%
%% The one time Mnesia's calls are taken is when Mnesia builds an index
%% from its table: at start, or by `add_table_index/2', when
%% `is_index_consistent/2' answered `false'. It then calls
%% `index_is_consistent(_, Tag, false)', clears the index, inserts a row
%% per record and calls `index_is_consistent(_, Tag, true)'; between the
%% two, its writes to that index go through ({@link consistent/2}).
%%
%% A counter can touch an indexed position: Mnesia's `dirty_update_counter'
%% takes any `set' or `ordered_set' of records of three, whose third
%% position, the counter, may be indexed. The backend's counter changes
%% that index's row in the counter's own write
%% ({@link fraghash_redb_db:update_counter/5}, {@link counter_ops/3}).
%%
%% == When Mnesia can skip the build ==
%% `true' is kept in the database once a build ended, and stays true while
%% every write to the table goes through the backend with its index rows.
%% The writes that do not: Mnesia's log replay at start (dropped, to the
%% table and to its indexes alike: the database holds both already, see
%% {@link fraghash_redb_commit}), and a copy loaded from another node
%% (`receive_data/5' writes records only): loading a copy marks every
%% index of the table not built ({@link not_built_ops/1}), so Mnesia builds
%% it once after the load. A kill during a build leaves it `false': built
%% again at the next start.
%%
%% Dirty writes to one key from two processes at once can leave a stale
%% index row (both read the same replaced record); Mnesia's own indexes
%% have the same race, and transactions lock the key.
-module(fraghash_redb_index).

-export([open/2, delete/1, of_table/1, ignores/1, building/1, consistent/2, built/1, built_ops/2,
         insert_ops/3, remove_ops/4, clear_ops/1, not_built_ops/1, check/2, counter_ops/3]).

%% The indexes this node keeps, one row {Tag, Pos, Name, Building} each
%% (Name: its redb table; Building: Mnesia is building it). An ordered_set,
%% so that a table's indexes are one range of tags {Tab, index, _}; made
%% and owned by the process that opens the database (fraghash_redb_db).
-define(REG, fraghash_redb_index).

%% @doc Notes that index table `Tag' exists in the database as redb table
%% `Name' (created or opened by Mnesia): from now on the backend keeps its
%% rows. Other tags (checkpoint retainers) are not indexes: ignored.
-spec open(term(), binary()) -> ok.
open({_Tab, index, {Pos, _Type}} = Tag, Name) when is_integer(Pos) ->
    _ = registry() =/= undefined andalso ets:insert_new(?REG, {Tag, Pos, Name, false}),
    ok;
open(_Tag, _Name) ->
    ok.

%% @doc Forgets index table `Tag', or every index of table `Tab' (an atom),
%% deleted from the database; returns the writes that delete its state.
-spec delete(atom() | tuple()) -> [fraghash_redb_nif:op()].
delete(Tab) when is_atom(Tab) ->
    [delete(Tag) || {_Pos, _Name, Tag} <- entries(Tab)],
    [];
delete(Tag) ->
    _ = registry() =/= undefined andalso ets:delete(?REG, Tag),
    [{delete, fraghash_redb_admin:info_table(), state_key(Tag)}].

%% @doc The indexes of table `Tab' this node keeps: `[{Pos, Name}]'.
-spec of_table(atom() | tuple()) -> [{pos_integer(), binary()}].
of_table(Tab) when is_atom(Tab) ->
    [{Pos, Name} || {Pos, Name, _Tag} <- entries(Tab)];
of_table(_Tag) ->
    [].

entries(Tab) ->
    case registry() of
        undefined -> [];
        _ -> ets:select(?REG, [{{{Tab, index, '_'}, '$1', '$2', '_'}, [],
                                [{{'$1', '$2', {element, 1, '$_'}}}]}])
    end.

%% @doc Whether Mnesia's own write to `Tag' is to be dropped: `Tag' is an
%% index this node keeps, and Mnesia is not building it.
-spec ignores(atom() | tuple()) -> boolean().
ignores({_, index, _} = Tag) ->
    registry() =/= undefined andalso
        case ets:lookup(?REG, Tag) of
            [{_, _, _, Building}] -> not Building;
            [] -> false
        end;
ignores(_Tab) ->
    false.

%% @doc Whether Mnesia is building index `Tag' on this node.
-spec building(atom() | tuple()) -> boolean().
building({_, index, _} = Tag) ->
    registry() =/= undefined andalso
        case ets:lookup(?REG, Tag) of
            [{_, _, _, Building}] -> Building;
            [] -> false
        end;
building(_Tab) ->
    false.

%% @doc Mnesia begins (`false') or ends (`true') building index `Tag'.
-spec consistent(tuple(), boolean()) -> ok.
consistent(Tag, Built) ->
    _ = registry() =/= undefined andalso ets:update_element(?REG, Tag, {4, not Built}),
    ok.

%% @doc Whether index `Tag' is built and kept since: the database says.
-spec built(tuple()) -> boolean().
built(Tag) ->
    Db = fraghash_redb_db:handle(),
    case fraghash_redb_nif:check(fraghash_redb_nif:get(Db, fraghash_redb_admin:info_table(),
                                                       state_key(Tag))) of
        {ok, V} -> binary_to_term(V);
        not_found -> false
    end.

%% @doc The writes that note in the database whether index `Tag' is built.
-spec built_ops(tuple(), boolean()) -> [fraghash_redb_nif:op()].
built_ops(Tag, Built) ->
    [{put, fraghash_redb_admin:info_table(), state_key(Tag), term_to_binary(Built)}].

%% The key, in the backend's table of index states, of whether index `Tag'
%% is built. Not the tag alone: a state written by a release that rebuilt
%% every index at start says nothing about an index kept so.
state_key(Tag) ->
    term_to_binary({kept_in_commit, Tag}).

%% @doc The writes that mark every index of table `Tab' stored in the
%% database not built, so that Mnesia builds them once (the table is
%% about to be filled without its index rows).
-spec not_built_ops(atom()) -> [fraghash_redb_nif:op()].
not_built_ops(Tab) ->
    {ok, Stored} = fraghash_redb_nif:check(fraghash_redb_nif:tables(fraghash_redb_db:handle())),
    [{put, fraghash_redb_admin:info_table(), state_key(Tag), term_to_binary(false)}
     || {_Name, Props} <- Stored, Props =/= <<>>,
        {T, index, _} = Tag <- [binary_to_term(Props)], T =:= Tab].

%% @doc The index writes of writing record `Obj' into a table with
%% indexes `Ixs', where it replaces the records `Old' (none in a `bag',
%% where records of one key live side by side).
-spec insert_ops([{pos_integer(), binary()}], tuple(), [tuple()]) -> [fraghash_redb_nif:op()].
insert_ops([], _Obj, _Old) ->
    [];
insert_ops(Ixs, Obj, Old) ->
    Key = element(2, Obj),
    %% Deletes first: an old value equal to the new one under == is the
    %% same row, put again after.
    [{delete, Name, row_key(element(Pos, O), element(2, O))}
     || {Pos, Name} <- Ixs, O <- Old, element(Pos, O) =/= element(Pos, Obj)] ++
        [{put, Name, row_key(element(Pos, Obj), Key), term_to_binary({{element(Pos, Obj), Key}})}
         || {Pos, Name} <- Ixs].

%% @doc The index writes of removing the records `Gone' from a table with
%% indexes `Ixs'. `Lookup' gives every record of a key, `RowKey' a
%% record's row key: a `bag' key's records that stay keep their values'
%% rows (Mnesia's `ordered' index has one row per value and key).
-spec remove_ops([{pos_integer(), binary()}], [tuple()], fun((term()) -> [tuple()]),
                 fun((tuple()) -> binary())) -> [fraghash_redb_nif:op()].
remove_ops([], _Gone, _Lookup, _RowKey) ->
    [];
remove_ops(Ixs, Gone, Lookup, RowKey) ->
    GoneRows = [RowKey(G) || G <- Gone],
    Keys = lists:usort([{fraghash_redb_nif:order_key(element(2, G)), element(2, G)} || G <- Gone]),
    Stay = [O || {_, K} <- Keys, O <- Lookup(K), not lists:member(RowKey(O), GoneRows)],
    Held = [{Name, row_key(element(Pos, O), element(2, O))} || {Pos, Name} <- Ixs, O <- Stay],
    lists:usort([{delete, Name, Row} || {Pos, Name} <- Ixs, G <- Gone,
                                        Row <- [row_key(element(Pos, G), element(2, G))],
                                        not lists:member({Name, Row}, Held)]).

%% @doc The writes that empty the indexes `Ixs' (their table is emptied).
-spec clear_ops([{pos_integer(), binary()}]) -> [fraghash_redb_nif:op()].
clear_ops(Ixs) ->
    [{clear, Name} || {_Pos, Name} <- Ixs].

%% @doc The index writes of a counter update: the record `Old' becomes
%% `New'. Position 3 of a record of three, the counter, can be indexed.
-spec counter_ops([{pos_integer(), binary()}], tuple(), tuple()) -> [fraghash_redb_nif:op()].
counter_ops(Ixs, Old, New) ->
    insert_ops([Ix || {3, _} = Ix <- Ixs], New, [Old]).

%% @doc `ok' when every indexed value of record `Obj' of table `Tab' can
%% be stored in an index row (its value and key as one order key); else
%% `{error, Reason, Value}' (`unsupported_key', `key_too_large'). Reads the
%% table's index positions from Mnesia's schema, known on every node, so
%% that a transaction run where no copy is refuses it too.
-spec check(atom(), tuple()) -> ok | {error, atom(), term()}.
check(Tab, Obj) ->
    Positions = try ets:lookup_element(mnesia_gvar, {Tab, index}, 2)
                catch error:badarg -> []
                end,
    check_values([P || P <- Positions, is_integer(P), P =< tuple_size(Obj)], Obj).

check_values([], _Obj) ->
    ok;
check_values([Pos | Rest], Obj) ->
    try row_key(element(Pos, Obj), element(2, Obj)) of
        _ -> check_values(Rest, Obj)
    catch
        error:{fraghash_redb, Reason, _} -> {error, Reason, element(Pos, Obj)}
    end.

%% An index row's key: the order key of the whole row's key, {Value, Key}.
row_key(Value, Key) ->
    fraghash_redb_nif:order_key({Value, Key}).

registry() ->
    ets:whereis(?REG).
