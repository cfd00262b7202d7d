%% @doc A full disc under `redb_copies' writers, in real Mnesia on a real
%% file system: a peer node keeps its Mnesia directory on a small `tmpfs'
%% mounted for the test, holds a `redb_copies' table of old values, and the
%% file system is filled to its last byte. Then 400 transactions each
%% overwrite one key with 8 KiB: every one must either return `{atomic, ok}' with
%% its value readable at once, or abort with `{fraghash_redb, disk_full,
%% Tab, Text}'; with room made again, writes are taken again; and after a
%% kill -9 and a restart every acknowledged value is there.
%%
%% Mounting a file system needs root (as CI runs); elsewhere the test
%% fails unless `FRAGHASH_SKIP_ENOSPC=1' is set, as
%% fraghash_enospc_tests does.
-module(fraghash_redb_full_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, report/2, start_peer/2, start_redb_peer/3,
                                wait_down/1, wait_mnesia_stopped/2]).

-define(KEYS, 2000).
-define(WRITES, 400).
-define(FS_SIZE, "24m").
-define(T, 120).

full_test_() ->
    case string:trim(os:cmd("id -u")) of
        "0" ->
            [{timeout, ?T, {"a full disc: each write is taken and readable, or refused with "
                            "disk_full; none lost", fun full/0}},
             {timeout, ?T, {"a transaction larger than the log's reserve on a full disc: "
                            "Mnesia stops on the node, the transaction is not acknowledged",
                            fun fail_stop/0}}];
        _ ->
            case os:getenv("FRAGHASH_SKIP_ENOSPC") of
                "1" -> [];
                _ -> [{"a full disc needs a small tmpfs, which only root can mount: run as "
                       "root, or set FRAGHASH_SKIP_ENOSPC=1 to leave this case out",
                       fun() -> ?assert(false) end}]
            end
    end.

full() ->
    mounted("full", fun run/3).

%% `Run(Mount, Name, Dir)' with a small tmpfs at `Mount' holding the
%% Mnesia directory `Dir' of peer `Name'.
mounted(Case, Run) ->
    Id = "redb_" ++ Case ++ "_" ++ os:getpid(),
    Mount = filename:join(scratch(), Id),
    ok = filelib:ensure_path(Mount),
    "" = os:cmd("mount -t tmpfs -o size=" ?FS_SIZE " tmpfs " ++ Mount ++ " 2>&1"),
    try Run(Mount, list_to_atom("fh" ++ Id), filename:join(Mount, "mnesia"))
    after _ = os:cmd("umount -l " ++ Mount)
    end.

%% A peer with table `f' of ?KEYS old values, synced, and its disc then
%% filled to the last byte.
full_node(Mount, Name, Dir, Env) ->
    {_, Node} = start_redb_peer(Name, Dir, Env),
    {atomic, ok} = rpc:call(Node, mnesia, create_table, [f, [{redb_copies, [Node]}]]),
    {atomic, ok} = rpc:call(Node, mnesia, transaction,
                            [fun() -> [mnesia:write({f, K, old}) || K <- lists:seq(1, ?KEYS)],
                                      ok
                             end]),
    ok = rpc:call(Node, fraghash_redb_copies, sync, []),
    Filler = filename:join(Mount, "filler"),
    ok = fraghash_enospc_tests:fill_at(Filler, f, full),
    {Node, Filler}.

run(Mount, Name, Dir) ->
    {Node, Filler} = full_node(Mount, Name, Dir, []),
    Acked = [write(Node, K, new(K)) || K <- lists:seq(1, ?WRITES)],
    Taken = [K || {K, ok} <- Acked],
    Refused = [K || {K, refused} <- Acked],
    report("full disc: ~b of ~b writes taken, ~b refused~n",
           [length(Taken), ?WRITES, length(Refused)]),
    ?assertEqual(?WRITES, length(Taken) + length(Refused)),
    ?assert(length(Refused) > 0),
    %% Room again: writes are taken again (a flush finds the room).
    ok = file:delete(Filler),
    ok = wait_taken(Node, ?WRITES + 1, 50),
    Acked2 = [write(Node, K, {again, K}) || K <- lists:seq(?WRITES + 2, ?WRITES + 50)],
    ?assertEqual([], [A || {_, A} <- Acked2, A =/= ok]),
    %% And after a kill -9, from the node's files alone.
    _ = os:cmd("kill -9 " ++ rpc:call(Node, os, getpid, [])),
    wait_down(Node),
    {_, Node2} = start_peer(Name, Dir),
    ok = rpc:call(Node2, mnesia, start, []),
    ok = rpc:call(Node2, mnesia, wait_for_tables, [[f], 30000]),
    Read = fun(K) -> rpc:call(Node2, mnesia, dirty_read, [f, K]) end,
    ?assertEqual([], [K || K <- Taken, Read(K) =/= [{f, K, new(K)}]]),
    ?assertEqual([], [K || K <- Refused, Read(K) =/= [{f, K, old}]]),
    ?assertEqual([], [K || {K, ok} <- Acked2, Read(K) =/= [{f, K, {again, K}}]]),
    rpc:call(Node2, erlang, halt, []).

%% A log reserve of 64 KiB, the disc full, and one transaction of 100
%% records of 8 KiB: every record passes the room check (the reserve is
%% whole), and committing them runs out of room. Mnesia must stop on the
%% node rather than acknowledge it; with room made, the node starts with
%% every earlier write, and whatever part of the transaction it holds.
fail_stop() ->
    mounted("stop", fun(Mount, Name, Dir) ->
        {Node, Filler} = full_node(Mount, Name, Dir, [{redb_log_reserve_bytes, 64 bsl 10}]),
        Big = fun() -> [mnesia:write({f, K, new(K)}) || K <- lists:seq(1, 100)], ok end,
        Answer = rpc:call(Node, mnesia, transaction, [Big]),
        report("a transaction past the reserve on a full disc: ~0p~n", [Answer]),
        ?assertNotEqual({atomic, ok}, Answer),
        ok = wait_mnesia_stopped(Node, 100),
        ok = file:delete(Filler),
        ok = rpc:call(Node, mnesia, start, []),
        ok = rpc:call(Node, mnesia, wait_for_tables, [[f], 30000]),
        Values = [rpc:call(Node, mnesia, dirty_read, [f, K]) || K <- lists:seq(1, ?KEYS)],
        ?assertEqual([], [{K, V} || {K, V} <- lists:zip(lists:seq(1, ?KEYS), Values),
                                    V =/= [{f, K, old}], V =/= [{f, K, new(K)}]]),
        rpc:call(Node, erlang, halt, [])
    end).

%% A value of 8 KiB: 400 of them pass the log's reserve (4 MiB a file,
%% asked for again at half) and the memtable's flush size (1 MiB).
new(K) ->
    {new, K, binary:copy(<<K:32>>, 2048)}.

%% One transaction writing `V' under `K': `ok' when acknowledged and
%% readable at once, `refused' when aborted for a full disc; anything else
%% fails the test.
write(Node, K, V) ->
    case rpc:call(Node, mnesia, transaction, [fun() -> mnesia:write({f, K, V}) end]) of
        {atomic, ok} ->
            ?assertEqual({K, [{f, K, V}]}, {K, rpc:call(Node, mnesia, dirty_read, [f, K])}),
            {K, ok};
        {aborted, {fraghash_redb, disk_full, f, Text}} when is_binary(Text) ->
            {K, refused};
        Other ->
            ?assertEqual({K, taken_or_refused}, {K, Other})
    end.

%% Writes to `K' until one is taken (the refusals end once a flush finds
%% room), at most `Tries' times 100 ms.
wait_taken(Node, K, Tries) ->
    case write(Node, K, {again, K}) of
        {K, ok} -> ok;
        {K, refused} when Tries > 0 -> timer:sleep(100), wait_taken(Node, K, Tries - 1)
    end.
