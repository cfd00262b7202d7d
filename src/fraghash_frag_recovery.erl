%% @doc What recovery does besides finishing an operation from its journal
%% entry (`fraghash_grow:recover/2'): the
%% fragment tables a partition or a kill left beyond their table's count
%% ({@link sweep/1}), and the files and `redb_copies' tables a fragment of
%% an earlier incarnation left ({@link remove_leftover_files/1}). Why each
%% is right is argued in docs/mnesia-disc-safety.md.
-module(fraghash_frag_recovery).

-export([remove_leftover_files/1, remove_local_leftovers/1, fragmented/0, sweep/1]).

%% Extensions of the files Mnesia keeps per table in its directory.
-define(FILE_EXTS, [".DCD", ".DCL", ".DAT", ".TMP", ".DMP"]).

%% Removes a fragment table that is no longer (or not yet) one of its
%% table's fragments, if Mnesia still has it.
drop_orphan(Frag) ->
    fraghash_grow_schema:drop_orphan(Frag).

%% @doc The fragmented tables (each base table, foreign-key tables
%% included), in Mnesia's schema on this node.
-spec fragmented() -> [atom()].
fragmented() ->
    [T || T <- mnesia:system_info(tables), T =/= schema,
          lists:keymember(n_fragments, 1, mnesia:table_info(T, frag_properties))].

%% @doc Drops the fragment tables of `Tab' beyond its fragment count that
%% no journal entry accounts for, once every record they hold is also,
%% with the same value, in the fragment its key routes to; otherwise
%% leaves them and says so. Such a table is left when a schema change
%% reaches one side of a partition only: healing keeps one side's data but
%% Mnesia merges the two schemas by table version, so the kept side can
%% get the other side's fragment count while still holding a fragment that
%% count no longer names. Run by `fraghash_frag:recover/0' under the
%% table's lock, for every table with no operation left to finish (those
%% it just finished or undid included).
-spec sweep(atom()) -> ok | {error, term()}.
sweep(Tab) ->
    sweep(Tab, 3).

%% A table that went while it was read or dropped (the recovery of another
%% node sweeps the same orphans, and a node's schema can name a table the
%% node it reads from has dropped already): the sweep starts again from
%% the schema as it is then, a few times.
sweep(Tab, Tries) ->
    Orphans = [F || {Base, F} <- fraghash_tab:orphans(), Base =:= Tab],
    try
        sweep_orphans(Tab, Orphans)
    catch
        %% An orphan loaded nowhere that no running node holds.
        error:{fraghash, _, _} = Reason ->
            {error, Reason};
        Class:Reason:Stack when Tries > 1 ->
            case gone(Reason) of
                true -> timer:sleep(200), sweep(Tab, Tries - 1);
                false -> erlang:raise(Class, Reason, Stack)
            end
    end.

gone({aborted, {no_exists, _}}) -> true;
gone({badmatch, {aborted, {no_exists, _}}}) -> true;
gone(_) -> false.

sweep_orphans(_Tab, []) ->
    ok;
sweep_orphans(Tab, [Orphan | Rest]) ->
    case sweep_one(Tab, Orphan) of
        ok -> sweep_orphans(Tab, Rest);
        Refused -> Refused
    end.

sweep_one(Tab, Orphan) ->
    ok = fraghash_grow_schema:load_somewhere(Orphan),
    Elsewhere = [K || {_From, To, K} <- fraghash_tab:misplaced(Tab, [Orphan]),
                      not held(mnesia:dirty_read(Orphan, K), mnesia:dirty_read(To, K))],
    case Elsewhere of
        [] ->
            ok = drop_orphan(Orphan),
            ok = remove_leftover_files(Orphan);
        [K | _] ->
            {error, fraghash_error:new(orphan_holds_records,
                                       "~s, beyond ~s's fragment count, holds ~b record(s) that "
                                       "are not where their keys route (~0tp among them): copy "
                                       "what must stay into ~s, then delete the table",
                                       [Orphan, Tab, length(Elsewhere), K, Tab])}
    end.

%% Every one of `Records' is among `There' (all of a bag key's records).
held(Records, There) ->
    lists:all(fun(R) -> lists:member(R, There) end, Records).

%% @doc Deletes what a table named `Frag' left on every running node of
%% the cluster, when Mnesia has no such table: its files in Mnesia's
%% directory and its tables in the node's `redb_copies' database. A
%% fragment created again under the same number must start from nothing
%% (Mnesia would otherwise read, or dump over, the old files, and the
%% backend would open the old records as the new table's). A node that is
%% down keeps its leftovers, but no fragment can be created with a copy on
%% a node that is down, and this runs again before the next one is.
-spec remove_leftover_files(atom()) -> ok.
remove_leftover_files(Frag) ->
    case lists:member(Frag, mnesia:system_info(tables)) of
        true ->
            ok;
        false ->
            [_ = rpc:call(Node, ?MODULE, remove_local_leftovers, [Frag])
             || Node <- mnesia:system_info(running_db_nodes)],
            ok
    end.

%% @doc {@link remove_leftover_files/1} on this node, unless this node's
%% own schema lists a copy of `Frag' here, once the schema changes it
%% takes part in have ended: the caller's view of the copies can lag this
%% node's (an `add_table_copy' whose coordinator was killed commits here
%% when this node learns its outcome, and holds its lock on the schema
%% until then). Where that cannot be known (Mnesia not running here), the
%% leftovers stay.
-spec remove_local_leftovers(atom()) -> ok.
remove_local_leftovers(Frag) ->
    case held_here(Frag) of
        false -> remove_local(Frag);
        _HeldOrUnknown -> ok
    end.

%% `true' when this node's schema lists a copy of `Frag' here, after a
%% read lock on the schema (granted once the schema transactions holding
%% it here have ended); `unknown' where the lock is not granted.
held_here(Frag) ->
    case mnesia:transaction(fun() -> mnesia:read_lock_table(schema) end, 3) of
        {atomic, _} -> lists:member(Frag, mnesia:system_info(local_tables));
        {aborted, _} -> unknown
    end.

remove_local(Frag) ->
    Dir = mnesia:system_info(directory),
    [_ = file:delete(filename:join(Dir, atom_to_list(Frag) ++ Ext)) || Ext <- ?FILE_EXTS],
    %% What an external backend keeps of the table outside Mnesia's files:
    %% through its module's forget/1, when it has one (`redb_copies' does).
    Backends = lists:usort([Mod || {_Alias, Mod} <- backend_modules()]),
    [ok = Mod:forget(Frag) || Mod <- Backends,
                              code:ensure_loaded(Mod) =:= {module, Mod},
                              erlang:function_exported(Mod, forget, 1)],
    ok.

%% The schema's external backend types, `{Alias, Module}'.
backend_modules() ->
    Props = mnesia:table_info(schema, user_properties),
    proplists:get_value(mnesia_backend_types, Props, []).
