%% @doc Restarting a peer killed in a test, and the remedy for a node that
%% cannot start again: Mnesia 4.21.3 cannot merge a starting node's schema
%% with the running nodes' when one side lists a copy of an external
%% backend that the other does not (`Failed to merge schema'). The node
%% takes the running nodes' definition where theirs is the newer
%% (fraghash_redb_align); where its own is, it stops so. Such a node
%% rejoins afresh: taken out of the schema from a running node, its
%% directory emptied, joined again, given a copy of each table it held.
%% Used by the multi-node tortures and fraghash_redb_align_tests.
-module(fraghash_test_rejoin).

-include_lib("eunit/include/eunit.hrl").

-export([restart_peer/3, merge_failed/1, rejoin/5]).

%% @doc Starts the peer `Name' again (as fraghash_test_support:start_peer/3)
%% after a kill: a node's name stays registered with epmd for a moment, so
%% the start is tried again, every 100 ms, for 5 s.
restart_peer(Name, Dir, Args) ->
    restart_peer(Name, Dir, Args, 50).

restart_peer(Name, Dir, Args, Tries) ->
    try fraghash_test_support:start_peer(Name, Dir, Args)
    catch
        _:_ when Tries > 0 -> timer:sleep(100), restart_peer(Name, Dir, Args, Tries - 1)
    end.

%% @doc Whether Mnesia on `Node' stopped because it could not merge its
%% schema: read from the core files Mnesia wrote for `Node' in the scratch
%% directory (fraghash_test_support:start_peer/3 sends them there), which
%% are deleted, so that a later start is judged by its own.
merge_failed(Node) ->
    Dir = fraghash_test_support:scratch(),
    Prefix = "MnesiaCore." ++ atom_to_list(Node) ++ "_",
    Cores = [filename:join(Dir, F) || F <- element(2, file:list_dir(Dir)),
                                      lists:prefix(Prefix, F)],
    Merge = lists:any(fun merge_core/1, Cores),
    [ok = file:delete(F) || F <- Cores],
    Merge.

merge_core(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            case catch binary_to_term(Bin) of
                [{crashinfo, {Format, _}} | _] -> lists:prefix("Failed to merge schema", Format);
                _ -> false
            end;
        _ ->
            false
    end.

%% @doc Rejoins `Node' (peer `Name', Mnesia directory `Dir', command line
%% `Args') afresh through `Peer', a node running Mnesia: the tables `Node'
%% held by `Peer''s schema are listed, `Node' is killed (kill -9) and taken
%% out of the schema (its copies elsewhere stay), its directory emptied,
%% the node started again, Mnesia started there by `Start(Node)' on the
%% empty directory, the backend registered (Mnesia merges two schemas only
%% when their backend types agree), and `Node' joined to `Peer' with a disc
%% schema, a copy of each table it held, of the same type, and its place in
%% the node pools it was in. Returns the new `{PeerProcess, Node}'.
rejoin(Node, Peer, {Name, Dir}, Args, Start) ->
    Tabs = rpc:call(Peer, mnesia, system_info, [tables]) -- [schema],
    Copies = [{T, rpc:call(Peer, fraghash_move, copies, [T])} || T <- Tabs],
    Held = [{T, Type} || {T, Cs} <- Copies, {N, Type} <- Cs, N =:= Node],
    %% Taking a node out of the schema takes it out of every fragmented
    %% table's node pool too (mnesia_frag:remove_node/2): it goes back.
    Pools = [T || T <- Tabs,
                  lists:member(Node, proplists:get_value(
                                       node_pool,
                                       rpc:call(Peer, mnesia, table_info, [T, frag_properties]),
                                       []))],
    %% Afresh only when every copy it holds has another: out of the
    %% schema, a table's only copy would be gone.
    ?assertEqual({only_copies_on, Node, []},
                 {only_copies_on, Node,
                  [T || {T, Cs} <- Copies, lists:keymember(Node, 1, Cs),
                        [N || {N, _} <- Cs, N =/= Node] =:= []]}),
    case lists:member(Node, nodes()) of
        true -> fraghash_test_support:kill_nodes([Node]);
        false -> ok
    end,
    {atomic, ok} = rpc:call(Peer, mnesia, del_table_copy, [schema, Node]),
    ok = file:del_dir_r(Dir),
    {_, Node} = New = restart_peer(Name, Dir, Args),
    ok = Start(Node),
    {atomic, ok} = rpc:call(Node, fraghash_redb_copies, register, []),
    {ok, [Peer]} = rpc:call(Node, mnesia, change_config, [extra_db_nodes, [Peer]]),
    {atomic, ok} = rpc:call(Peer, mnesia, change_table_copy_type, [schema, Node, disc_copies]),
    [ok = done(T, rpc:call(Peer, mnesia, add_table_copy, [T, Node, Type], 300000))
     || {T, Type} <- Held],
    [ok = done(T, rpc:call(Peer, mnesia, change_table_frag, [T, {add_node, Node}]))
     || T <- Pools],
    New.

%% A table listed above may have been deleted since by a recovery running
%% on another node (an interrupted add's hidden fragment, dropped when
%% the add is undone): nothing to put back there.
done(_T, {atomic, ok}) -> ok;
done(T, {aborted, {no_exists, T}}) -> ok;
done(T, Other) -> {T, Other}.
