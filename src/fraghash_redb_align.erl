%% @doc Lets a node that missed a change of `redb_copies' copies start.
%%
%% Mnesia 4.21.3 merges a starting node's schema with the running nodes'
%% node by node (`mnesia_schema:merge_storage_type/5'). A node listed with
%% an external backend's copy on one side and with no copy, or another
%% type, on the other has no case there: `change_storage_type/3' has no
%% clause for `{ext, Alias, Mod}', and the start stops with `Failed to merge
%% schema: {aborted,function_clause}'. A node misses such a change when it
%% is down, or killed, while a copy of a `redb_copies' table is added,
%% deleted or has its type changed: a move, a drain, a rebalance, growth.
%%
%% {@link align/0} runs while Mnesia starts, in Mnesia's transaction
%% manager, after the node's own schema is read and its log replayed (which
%% may hold schema changes) and before Mnesia merges the schema: Mnesia
%% asks the backend for its temporary file suffixes then
%% (`mnesia_schema:purge_tmp_files/0'), which is where it is called. It
%% asks a node running Mnesia (one of the schema's other nodes) for its
%% table definitions, one call with a time limit. For each table of the
%% same cookie whose holders differ there in a `redb_copies' copy, and
%% whose definition there is the newer, the node takes the running
%% nodes' definition: the one the cluster has used since. The merge then
%% finds nothing to join for that table. The tables' records are not
%% touched: a copy the node no longer holds stays in its database until a
%% copy of that table is made there again (which clears it), and a copy it
%% now holds is loaded from a running replica, as Mnesia loads any table a
%% node holds on joining. Each table taken is logged as a warning.
%%
%% Only a newer definition is taken (Mnesia's version of it is greater):
%% where this node's is the newer (the running nodes missed a change it
%% made, or the node that missed it started first), nothing is changed,
%% Mnesia's merge fails as before, and the error logged says to start this
%% node first. Without a running node nothing is changed; the nodes that
%% start later take this node's definition where it is newer.
%%
%% It reads Mnesia 4.21's own state (`mnesia_gvar', here and on the node
%% asked) and writes a table's definition through
%% `mnesia_schema:insert_cstruct/3', as Mnesia's own log replay does; it
%% does nothing while Mnesia runs.
-module(fraghash_redb_align).

-export([align/0, taken/0, definitions/0, conflicts/2]).

%% How long a running node has to answer, per call.
-define(ASK_MS, 10000).

%% @doc Takes the running nodes' definition of every table whose
%% `redb_copies' holders differ from this node's, while Mnesia starts on
%% this node, called in Mnesia's transaction manager; elsewhere, and once
%% Mnesia runs, nothing. `ok' whatever it finds (a node it cannot ask is
%% passed over).
-spec align() -> ok.
align() ->
    case mnesia_lib:is_running() =:= starting andalso whereis(mnesia_tm) =:= self() of
        true ->
            Taken = case remote_cstructs(mnesia_lib:all_nodes() -- [node()]) of
                        {Peer, Remote} -> [T || Cs <- Remote, T <- take(Peer, Cs)];
                        none -> []
                    end,
            persistent_term:put({?MODULE, taken}, Taken);
        false ->
            ok
    end.

%% @doc The tables whose definition this node took from the running nodes
%% at its last start of Mnesia (`[]' before any).
-spec taken() -> [atom()].
taken() ->
    persistent_term:get({?MODULE, taken}, []).

%% The table definitions of the first node asked that runs Mnesia. Read
%% from its own tables of Mnesia's state ({@link definitions/0}), not from
%% its Mnesia processes: those may be waiting for this node's transaction
%% manager, which is here, waiting for the answer.
remote_cstructs([]) ->
    none;
remote_cstructs([N | Ns]) ->
    case rpc:call(N, ?MODULE, definitions, [], ?ASK_MS) of
        {running, Cstructs} when is_list(Cstructs) -> {N, Cstructs};
        _ -> remote_cstructs(Ns)
    end.

%% @doc `{running, Definitions}', this node's table definitions while its
%% Mnesia runs (read from `mnesia_gvar', calling no Mnesia process), else
%% `not_running'. Asked by a starting node ({@link align/0}).
-spec definitions() -> {running, [tuple()]} | not_running.
definitions() ->
    case mnesia_lib:is_running() of
        yes ->
            try
                Tabs = ets:lookup_element(mnesia_gvar, {schema, tables}, 2),
                {running, [Cs || T <- Tabs, {ok, Cs} <- [local_cstruct(T)]]}
            catch
                error:badarg -> not_running
            end;
        _ ->
            not_running
    end.

take(Peer, Remote) ->
    Tab = field(name, Remote),
    case local_cstruct(Tab) of
        {ok, Local} when Tab =/= schema -> take(Peer, Tab, Local, Remote);
        _ -> []
    end.

%% Only a table whose holders differ in a `redb_copies' copy is looked at
%% further (most tables, at most starts, have none).
take(Peer, Tab, Local, Remote) ->
    case conflicts(Local, Remote) of
        [_ | _] = Nodes ->
            case field(cookie, Local) =:= field(cookie, Remote) of
                true -> take(Peer, Tab, Local, Remote, Nodes,
                             field(version, Remote) > field(version, Local));
                false -> []
            end;
        [] ->
            []
    end.

take(Peer, Tab, Local, Remote, Nodes, true) ->
    logger:warning("fraghash: the schema of ~0tp on this node lists the redb_copies copies "
                   "of ~0p as ~0tp, the running nodes as ~0tp: this node missed their change "
                   "(it was down), and takes the definition of ~0p (Mnesia could not merge it)",
                   [Tab, Nodes, holders(Nodes, Local), holders(Nodes, Remote), Peer]),
    adopt(Tab, Remote),
    [Tab];
take(Peer, Tab, Local, Remote, Nodes, false) ->
    logger:error("fraghash: the schema of ~0tp on this node lists the redb_copies copies of "
                 "~0p as ~0tp, the running nodes (~0p) as ~0tp, and this node's definition is "
                 "the newer: they missed a change this node made. Mnesia cannot merge the two "
                 "and will not start here. Stop Mnesia on the running nodes, start it here "
                 "first, then on them (they take this node's definition)",
                 [Tab, Nodes, holders(Nodes, Local), Peer, holders(Nodes, Remote)]),
    [].

%% @doc The nodes for which two definitions of a table give different
%% storage types, one of them a `redb_copies' copy: the ones Mnesia 4.21
%% cannot merge (see the module's doc).
-spec conflicts(tuple(), tuple()) -> [node()].
conflicts(Local, Remote) ->
    Nodes = lists:usort(mnesia_lib:cs_to_nodes(Local) ++ mnesia_lib:cs_to_nodes(Remote)),
    [N || N <- Nodes,
          {L, R} <- [{storage(N, Local), storage(N, Remote)}],
          L =/= R, is_redb(L) orelse is_redb(R)].

adopt(Tab, Remote) ->
    _ = mnesia_schema:insert_cstruct(undefined, Remote, true),
    case lists:member(node(), mnesia_lib:cs_to_nodes(Remote)) of
        true -> ok;
        false -> mnesia_lib:del({schema, local_tables}, Tab)
    end.

local_cstruct(Tab) ->
    try ets:lookup_element(mnesia_gvar, {Tab, cstruct}, 2) of
        Cs -> {ok, Cs}
    catch
        error:badarg -> none
    end.

holders(Nodes, Cs) ->
    [{N, case storage(N, Cs) of
             {ext, Alias, _Mod} -> Alias;
             Type -> Type
         end} || N <- Nodes].

storage(Node, Cs) ->
    mnesia_lib:cs_to_storage_type(Node, Cs).

is_redb({ext, _Alias, fraghash_redb_copies}) -> true;
is_redb(_) -> false.

field(Key, Cs) ->
    proplists:get_value(Key, mnesia_schema:cs2list(Cs)).
