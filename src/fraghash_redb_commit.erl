%% @doc How a change Mnesia commits reaches a node's `redb_copies'
%% database ({@link fraghash_redb_copies}), so that nothing is
%% acknowledged that the node does not hold.
%%
%% == A full disc ==
%% The database keeps room allocated ahead of its log
%% (`redb_log_reserve_bytes', default 4 MiB a file). Once the file system
%% cannot give that room, or a flush to redb fails for want of it, the
%% database says it has no room, and {@link room/1}, called in the
%% transaction for every write and counter update, aborts it with
%% `{fraghash_redb, disk_full, Tab, Text}' before anything commits; the
%% writes already past that check fit in the room reserved. Each refusal
%% asks the database to flush, which tries for room again, so writes are
%% taken again once room is made. Deletes are not checked (Mnesia gives
%% the backend no hook for them in the transaction); they take the reserve
%% too.
%%
%% == Fail-stop ==
%% Mnesia applies a committed transaction to a table of this type by
%% calling the backend once per record, catches whatever that raises and
%% reports the transaction committed. So a change that fails anyway (an
%% I/O error, the reserve used up, the database closed) is not raised: it
%% stops Mnesia on the node, as Mnesia stops when `disc_copies' cannot
%% write its log, and ends the committing process before it returns.
%% Nothing is then acknowledged on this node that the node does not hold;
%% at its next start the node loads the table from a replica that holds
%% the change, or, alone, keeps what its own disc holds (the change never
%% returned). A change to a table this node no longer holds (deleted or
%% moved meanwhile) has nothing to keep and is dropped.
%%
%% == Mnesia's log replay ==
%% At start Mnesia replays its own log into the table between
%% `load_table(_, Tab, startup, _)' and `close_table/2'; the database
%% already holds every change that returned, with its index rows, so those
%% writes are dropped, to the table's indexes too ({@link replaying/1}; see
%% the durability section of {@link fraghash_redb_copies}). A write the
%% replay makes outside those calls, to a table the database does not hold
%% (its copy deleted since), is dropped too: stopping Mnesia for it would
%% stop the node at every start. The copy is then loaded as Mnesia decides
%% (from a replica on another node, which Mnesia prefers while one runs).
-module(fraghash_redb_commit).

-export([room/1, change/2, commit/2, fail_stop/3, replaying/1, replayed/2]).

%% @doc `ok' while the node's database has room; otherwise aborts the
%% transaction with `{fraghash_redb, disk_full, Tab, Text}'.
-spec room(atom() | tuple()) -> ok.
room(Tab) ->
    case fraghash_redb_db:has_room() of
        true ->
            ok;
        false ->
            Text = io_lib:format("the disc holding ~ts is full: writes to ~0p are refused "
                                 "until room is made", [fraghash_redb_db:path(), Tab]),
            mnesia:abort({fraghash_redb, disk_full, Tab, unicode:characters_to_binary(Text)})
    end.

%% @doc A change Mnesia is committing to `Tab': `OpsOf(Indexes)', given
%% the table's indexes (fraghash_redb_index:of_table/1), is the record's
%% writes and its index rows', one redb write (none for a bag key without
%% rows), as commit/2 writes it. Rows that cannot be stored stop Mnesia
%% (fail-stop).
-spec change(atom() | tuple(), fun(([term()]) -> [fraghash_redb_nif:op()])) -> ok.
change(Tab, OpsOf) ->
    try OpsOf(fraghash_redb_index:of_table(Tab)) of
        [] -> ok;
        Ops -> commit(Tab, Ops)
    catch
        error:{fraghash_redb, Kind, Msg} -> fail_stop(Tab, Kind, Msg)
    end.

%% @doc Writes `Ops', a change Mnesia is committing to `Tab', or stops
%% Mnesia on this node (see Fail-stop above).
-spec commit(atom() | tuple(), [fraghash_redb_nif:op()]) -> ok.
commit(Tab, Ops) ->
    try fraghash_redb_db:write(Ops) of
        ok -> ok;
        {error, {no_such_table, _}} = E ->
            %% Kept nowhere here: a table this node no longer holds, or,
            %% while Mnesia starts, its log replay into one whose copy
            %% the database no longer holds (see Mnesia's log replay).
            still_here(Tab) andalso mnesia_lib:is_running() =/= starting
                andalso fail_stop(Tab, E),
            ok;
        {error, {Kind, Msg}} -> fail_stop(Tab, Kind, Msg)
    catch
        %% The database's process gone (crashed, or stopping with Mnesia),
        %% or any other failure: Mnesia would catch it and acknowledge.
        Class:Reason ->
            fail_stop(Tab, write_failed,
                      unicode:characters_to_binary(io_lib:format("~p:~0tp", [Class, Reason])))
    end.

still_here(Tab) ->
    try mnesia_lib:val({Tab, storage_type}) of
        {ext, _, fraghash_redb_copies} -> true;
        _ -> false
    catch _:_ -> false
    end.

fail_stop(Tab, {error, {Kind, Msg}}) ->
    fail_stop(Tab, Kind, Msg).

%% @doc Stops Mnesia on this node and ends the calling process: a change
%% to `Tab' that Mnesia commits could not be kept (`Kind', `Msg').
-spec fail_stop(atom() | tuple(), atom(), binary()) -> no_return().
fail_stop(Tab, Kind, Msg) ->
    Format = "redb_copies could not keep a committed write to ~0p in ~ts (~p: ~ts): "
             "stopping Mnesia on this node, which acknowledges nothing it does not hold; "
             "make room or repair, then start it again",
    Args = [Tab, fraghash_redb_db:path(), Kind, Msg],
    logger:error(Format, Args),
    _ = spawn(fun() -> mnesia_lib:report_fatal(Format ++ "~n", Args) end),
    exit(self(), kill).

%% @doc Whether Mnesia's log replay at start is writing to `Tab'. The table of
%% replays lives with the database; Mnesia also opens and closes tables
%% while the database is not open (a fallback being installed at start).
-spec replaying(atom() | tuple()) -> boolean().
replaying(Tab) ->
    ets:whereis(fraghash_redb_replay) =/= undefined andalso
        ets:member(fraghash_redb_replay, Tab).

%% @doc Notes that Mnesia's log replay into `Tab' begins (`true') or ends.
-spec replayed(atom() | tuple(), boolean()) -> ok.
replayed(Tab, Replaying) ->
    case {ets:whereis(fraghash_redb_replay), Replaying} of
        {undefined, _} -> ok;
        {_, true} -> true = ets:insert(fraghash_redb_replay, {Tab}), ok;
        {_, false} -> true = ets:delete(fraghash_redb_replay, Tab), ok
    end.
