%% @doc EUnit tests of damage to a `redb_copies' node's files: acknowledged
%% writes in the log (a peer node killed with kill -9 before a flush), then
%% one byte flipped in the middle of the log, or both log files deleted.
%% Mnesia's start must be refused with the file and what to do, the files
%% left as they were; `fraghash_redb_copies:repair_log/0' must then say
%% what it drops, and Mnesia start with every write before the damage.
%% And a commit that cannot reach the database's process stops Mnesia.
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_damage_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, start_peer/3, start_redb_peer/3, wait_down/1,
                                wait_mnesia_stopped/2]).

-define(T, 120).
-define(WRITES, 3000).

damage_test_() ->
    [{timeout, ?T, {"a byte flipped in the middle of the log: start refused, repair drops "
                    "only from the damage on", fun flipped/0}},
     {timeout, ?T, {"both log files deleted: start refused, repair goes on without them",
                    fun deleted/0}},
     {timeout, ?T, {"the database's process unreachable at a commit: Mnesia stops on the "
                    "node, the write not acknowledged; killed, it is opened again", fun writer_gone/0}}].

flipped() ->
    {Node, Dir, Log} = written("flip"),
    {ok, Bytes} = file:read_file(Log),
    %% A byte in the body of a record near the middle.
    At = byte_size(Bytes) div 2,
    <<Head:At/binary, B, Tail/binary>> = Bytes,
    ok = file:write_file(Log, <<Head/binary, (B bxor 16#55), Tail/binary>>),
    {Node2, Path} = restart(Node, Dir),
    ?assertMatch({error, _}, rpc:call(Node2, mnesia, start, [])),
    ok = wait_mnesia_stopped(Node2, 100),
    {error, {fraghash_redb, log_damaged, Path, Msg}} =
        rpc:call(Node2, fraghash_redb_db, check_file, [Path]),
    ?assertMatch({match, _}, re:run(Msg, "damaged at offset [0-9]+, with [0-9]+ whole")),
    %% Refused: the log is left as it was.
    ?assertEqual(byte_size(Bytes), filelib:file_size(Log)),
    {ok, [Dropped]} = rpc:call(Node2, fraghash_redb_copies, repair_log, []),
    {match, [Off, N]} = re:run(Dropped, "cut at offset ([0-9]+): [0-9]+ bytes dropped, "
                                        "([0-9]+) whole", [{capture, all_but_first, list}]),
    ?assert(list_to_integer(Off) =< At),
    ok = rpc:call(Node2, mnesia, start, []),
    ok = rpc:call(Node2, mnesia, wait_for_tables, [[d], 30000]),
    Held = rpc:call(Node2, mnesia, table_info, [d, size]),
    %% Every write before the damaged record is kept, in order: a prefix.
    Keys = lists:sort([K || {d, K, _} <- rpc:call(Node2, mnesia, dirty_match_object,
                                                  [{d, '_', '_'}])]),
    ?assertEqual(lists:seq(1, Held), Keys),
    ?assert(Held < ?WRITES andalso Held > 0),
    ?assert(?WRITES - Held >= list_to_integer(N)),
    stop(Node2).

deleted() ->
    {Node, Dir, Log} = written("deleted"),
    ok = file:delete(Log),
    ok = file:delete(Log ++ "2"),
    {Node2, Path} = restart(Node, Dir),
    ?assertMatch({error, _}, rpc:call(Node2, mnesia, start, [])),
    ok = wait_mnesia_stopped(Node2, 100),
    ?assertMatch({error, {fraghash_redb, log_missing, Path, _}},
                 rpc:call(Node2, fraghash_redb_db, check_file, [Path])),
    ?assertNot(filelib:is_file(Log)),
    {ok, Dropped} = rpc:call(Node2, fraghash_redb_copies, repair_log, []),
    ?assertEqual(2, length(Dropped)),
    ok = rpc:call(Node2, mnesia, start, []),
    ok = rpc:call(Node2, mnesia, wait_for_tables, [[d], 30000]),
    %% And the next start needs no repair.
    stopped = rpc:call(Node2, mnesia, stop, []),
    ok = rpc:call(Node2, mnesia, start, []),
    stop(Node2).

%% Mnesia catches what a backend raises while it applies a commit and
%% acknowledges the transaction: the write to a database whose process
%% cannot be reached (here unregistered, as between a crash and its
%% restart) must stop Mnesia on the node before the caller is answered.
writer_gone() ->
    Name = list_to_atom("fhdmg_gone_" ++ os:getpid()),
    Dir = filename:join(scratch(), atom_to_list(Name)),
    {_, Node} = start_redb_peer(Name, Dir, []),
    {atomic, ok} = rpc:call(Node, mnesia, create_table, [d, [{redb_copies, [Node]}]]),
    {atomic, ok} = rpc:call(Node, mnesia, transaction, [fun() -> mnesia:write({d, 1, kept}) end]),
    Writer = rpc:call(Node, erlang, whereis, [fraghash_redb_db]),
    %% The database closed under the committing process, as its process's
    %% end closes it (fraghash_redb_nif:open/2), before a restart opens it
    %% again: the commit's own write is refused.
    ok = rpc:call(Node, fraghash_redb_nif, close, [rpc:call(Node, fraghash_redb_db, handle, [])]),
    Answer = rpc:call(Node, mnesia, transaction, [fun() -> mnesia:write({d, 2, lost}) end]),
    ?assertNotEqual({atomic, ok}, Answer),
    ok = wait_mnesia_stopped(Node, 100),
    %% Mnesia's stop ends the process, which closes the file: the next
    %% start opens it once that is done.
    ok = wait_gone(Node, Writer, 300),
    ok = rpc:call(Node, mnesia, start, []),
    ok = rpc:call(Node, mnesia, wait_for_tables, [[d], 30000]),
    ?assertEqual([{d, 1, kept}], rpc:call(Node, mnesia, dirty_read, [d, 1])),
    %% Its process killed, the database is closed with it and opened again
    %% by the restarted process: a write meanwhile waits for it.
    Writer2 = rpc:call(Node, erlang, whereis, [fraghash_redb_db]),
    true = rpc:call(Node, erlang, exit, [Writer2, kill]),
    ?assertEqual({atomic, ok}, rpc:call(Node, mnesia, transaction,
                                        [fun() -> mnesia:write({d, 3, new}) end])),
    ?assertEqual([{d, 3, new}], rpc:call(Node, mnesia, dirty_read, [d, 3])),
    ?assertNotEqual(Writer2, rpc:call(Node, erlang, whereis, [fraghash_redb_db])),
    stop(Node).

%% A peer whose redb_copies table `d' got ?WRITES acknowledged writes that
%% are in the log only (no flush: the memtable is large and the flush
%% timer long), then killed with kill -9.
written(Case) ->
    Name = list_to_atom("fhdmg_" ++ Case ++ "_" ++ os:getpid()),
    Dir = filename:join(scratch(), atom_to_list(Name)),
    {_, Node} = start_redb_peer(Name, Dir, no_flush_env()),
    {atomic, ok} = rpc:call(Node, mnesia, create_table, [d, [{redb_copies, [Node]}]]),
    [{atomic, ok} = rpc:call(Node, mnesia, transaction, [fun() -> mnesia:write({d, K, K}) end])
     || K <- lists:seq(1, ?WRITES)],
    Log = filename:join(Dir, "fraghash.redb.log"),
    ?assert(filelib:file_size(Log) + filelib:file_size(Log ++ "2") > ?WRITES * 20),
    _ = os:cmd("kill -9 " ++ rpc:call(Node, os, getpid, [])),
    wait_down(Node),
    {Node, Dir, Log}.

%% The peer again, Mnesia not started.
restart(Node, Dir) ->
    [Name, _] = string:split(atom_to_list(Node), "@"),
    {_, Node} = start_peer(list_to_atom(Name), Dir, []),
    ok = no_flush(Node),
    ok = rpc:call(Node, logger, set_primary_config, [level, none]),
    {Node, filename:join(Dir, "fraghash.redb")}.

no_flush(Node) ->
    _ = rpc:call(Node, application, load, [fraghash]),
    [ok = rpc:call(Node, application, set_env, [fraghash, K, V]) || {K, V} <- no_flush_env()],
    ok.

%% No flush for an hour, nor before 1 GiB of memtable.
no_flush_env() ->
    [{redb_sync_ms, 3600000}, {redb_memtable_bytes, 1 bsl 30}].

wait_gone(Node, Pid, Tries) ->
    case rpc:call(Node, erlang, is_process_alive, [Pid]) of
        false -> ok;
        true when Tries > 0 -> timer:sleep(100), wait_gone(Node, Pid, Tries - 1)
    end.

stop(Node) ->
    _ = rpc:call(Node, mnesia, stop, []),
    _ = rpc:call(Node, erlang, halt, []),
    ok.
