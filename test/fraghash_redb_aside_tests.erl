%% @doc A `redb_copies' copy that a node loads from another is filled
%% aside and replaces the node's copy only once complete
%% (fraghash_redb_load): a load cut short, by a kill -9 of the loading
%% node or of its source, leaves the copy the node had, whole. Mnesia may
%% load that copy from the node's disc later (the node was the last of its
%% holders up, or the load is forced, as here): a part-filled copy there
%% lost records.
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_aside_tests).

-include_lib("eunit/include/eunit.hrl").

-define(T, 180).
%% Records both copies hold before B stops.
-define(OLD, 20000).
%% Records A holds when B loads from it (written over the old ones, and more).
-define(NEW, 150000).

aside_test_() ->
    [{timeout, ?T, {"the loading node killed mid-load: its disc keeps the copy it had",
                    fun() -> cut(receiver) end}},
     {timeout, ?T, {"the source killed mid-load: the loading node keeps the copy it had",
                    fun() -> cut(source) end}}].

%% A and B hold `as_t' (?OLD records). B's Mnesia stops; A writes ?NEW
%% records over them. B starts and loads from A; once the copy aside has
%% rows, `Killed' (B, or A) is killed. B's disc copy must then be the ?OLD
%% records, as they were, and the copy aside gone once B loads the table.
cut(Killed) ->
    Id = os:getpid(),
    Dir = filename:join(fraghash_test_support:scratch(), "aside_" ++ atom_to_list(Killed) ++ Id),
    Names = [{L, list_to_atom(lists:concat(["fhas", Killed, L, "_", Id]))} || L <- [a, b]],
    [A, B] = Nodes = [element(2, fraghash_test_support:start_peer(N, filename:join(Dir, L)))
                      || {L, N} <- Names],
    ok = rpc:call(A, mnesia, create_schema, [Nodes]),
    [ok = rpc:call(N, mnesia, start, []) || N <- Nodes],
    {atomic, ok} = rpc:call(A, fraghash_redb_copies, register, []),
    {atomic, ok} = rpc:call(A, mnesia, create_table, [as_t, [{redb_copies, Nodes}]]),
    write(A, 1, ?OLD, old),
    Old = [{as_t, K, old} || K <- lists:seq(1, ?OLD)],
    stopped = rpc:call(B, mnesia, stop, []),
    write(A, 1, ?NEW, new),
    ok = rpc:call(B, mnesia, start, []),
    Partial = wait_aside(B, 6000),
    fraghash_test_support:report("~p killed with ~b of ~b rows aside~n", [Killed, Partial, ?NEW]),
    ?assert(Partial > 0 andalso Partial < ?NEW),
    case Killed of
        receiver ->
            fraghash_test_support:kill_nodes([B]),
            stopped = rpc:call(A, mnesia, stop, []),
            {_, B} = fraghash_test_rejoin:restart_peer(proplists:get_value(b, Names),
                                                       filename:join(Dir, "b"), []),
            ok = rpc:call(B, mnesia, start, []);
        source ->
            %% B saw A go down: restarted, it loads its own copy (the
            %% last one up). Forcing the load on the running B instead
            %% can wait for ever: Mnesia drops the request while its
            %% failed load from A is still queued.
            fraghash_test_support:kill_nodes([A]),
            stopped = rpc:call(B, mnesia, stop, []),
            ok = rpc:call(B, mnesia, start, [])
    end,
    %% After a kill of B, B waits for A (A was up when B last had the
    %% table): loaded by force from B's own disc.
    case Killed of
        receiver -> ?assertEqual(yes, force_load(B, as_t));
        source -> ?assertEqual(ok, rpc:call(B, mnesia, wait_for_tables, [[as_t], 60000]))
    end,
    ?assertEqual(Old, lists:sort(rpc:call(B, fraghash_redb_copies, select,
                                          [redb_copies, as_t, [{'_', [], ['$_']}]]))),
    ?assertEqual(0, aside_rows(B)),
    fraghash_test_support:kill_nodes([N || N <- Nodes, lists:member(N, nodes())]).

%% mnesia:force_load_table/1 on `Node', or, when it has not returned in
%% 60 s, what Mnesia's loading processes there are doing.
force_load(Node, Tab) ->
    case rpc:call(Node, mnesia, force_load_table, [Tab], 60000) of
        {badrpc, timeout} ->
            Procs = [mnesia_controller, mnesia_late_loader, mnesia_tm, fraghash_redb_db],
            {force_load_hung,
             [{P, rpc:call(Node, erlang, process_info,
                           [rpc:call(Node, erlang, whereis, [P]), [current_stacktrace,
                                                                  message_queue_len]])}
              || P <- Procs],
             rpc:call(Node, mnesia, system_info, [running_db_nodes]),
             rpc:call(Node, mnesia, table_info, [Tab, load_reason])};
        Answer ->
            Answer
    end.

write(Node, From, To, V) ->
    [{atomic, ok} = rpc:call(Node, mnesia, transaction,
                             [fun() -> [mnesia:write({as_t, K, V})
                                        || K <- lists:seq(S, min(S + 4999, To))], ok
                              end])
     || S <- lists:seq(From, To, 5000)],
    ok.

%% The rows in B's copy of `as_t' filled aside, once there are some.
wait_aside(B, Tries) ->
    case aside_rows(B) of
        N when N > 0; Tries =:= 0 -> N;
        _ -> timer:sleep(5), wait_aside(B, Tries - 1)
    end.

%% The rows of the table tagged `{as_t, loading}' in B's database; 0 when
%% there is none.
aside_rows(B) ->
    case rpc:call(B, fraghash_redb_db, is_open, []) of
        true ->
            Db = rpc:call(B, fraghash_redb_db, handle, []),
            {ok, Tables} = rpc:call(B, fraghash_redb_nif, tables, [Db]),
            lists:sum([N || {Name, Props} <- Tables, Props =/= <<>>,
                            binary_to_term(Props) =:= {as_t, loading},
                            {ok, N} <- [rpc:call(B, fraghash_redb_nif, size, [Db, Name])]]);
        _ ->
            0
    end.
