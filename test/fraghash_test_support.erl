%% @doc What the EUnit modules of test/ share: the scratch directory, the
%% slow tier's switch, a Mnesia of their own, peer nodes (started, for
%% `redb_copies' too, recorded for scripts/test-mnesia.sh to kill, waited
%% for), quiet output, fragmented
%% tables made and filled, and two helpers on hash states.
-module(fraghash_test_support).

-export([scratch/0, slow_tier/1, start_mnesia/1, stop_mnesia/1, quiet_overload/0, report/2,
         start_peer/2, start_peer/3, start_redb_peer/3, record_peer/1, wait_down/1, kill_nodes/1,
         start_trio/2, create_frag/4, fill/3, grow/3, wait_mnesia_stopped/2, inline_kind/1,
         start_journaled/1, frag_contents/1, frag_read/2, log/2, logged/0]).

%% @doc The scratch directory scripts/test-mnesia.sh made
%% (`FRAGHASH_TEST_DIR').
scratch() ->
    case os:getenv("FRAGHASH_TEST_DIR") of
        false -> error(no_fraghash_test_dir);
        D -> D
    end.

%% @doc `Tests' in the slow tier (kill -9 of VMs, two-node kills):
%% they run only when `FRAGHASH_SLOW_TESTS=1' (scripts/test.sh sets it);
%% otherwise none, so that the fast tier stays near a minute.
slow_tier(Tests) ->
    case os:getenv("FRAGHASH_SLOW_TESTS") of
        "1" -> Tests;
        _ -> []
    end.

%% @doc Starts Mnesia on a fresh disc schema in `Name' under the scratch
%% directory, quiet; returns the directory. For a module's setup.
start_mnesia(Name) ->
    quiet_overload(),
    Dir = filename:join(scratch(), Name),
    ok = application:set_env(mnesia, dir, Dir),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    Dir.

%% @doc As {@link start_mnesia/1}, with the growth path's journal made.
start_journaled(Name) ->
    Dir = start_mnesia(Name),
    ok = fraghash_journal:ensure(),
    Dir.

%% @doc A fragmented `{Tab, Key, Val}' table as a scan through `mnesia_frag'
%% gives it, sorted.
frag_contents(Tab) ->
    lists:sort(mnesia:activity(async_dirty,
                               fun() -> mnesia:match_object({Tab, '_', '_'}) end, [],
                               mnesia_frag)).

%% @doc `Key''s records in the fragmented `Tab', read through `mnesia_frag'.
frag_read(Tab, K) ->
    mnesia:activity(async_dirty, fun() -> mnesia:read({Tab, K}) end, [], mnesia_frag).

%% @doc Stops the Mnesia `start_mnesia/1' started. For a module's cleanup.
stop_mnesia(_Dir) ->
    stopped = mnesia:stop(),
    ok.

%% @doc Creates `Tab' (attributes `key', `val') fragmented with `Props'
%% (`frag_properties') on this node, hash module `Mod', `N' fragments.
create_frag(Tab, Mod, N, Props) ->
    {atomic, ok} = mnesia:create_table(
                     Tab, [{attributes, [key, val]},
                           {frag_properties, [{n_fragments, N}, {hash_module, Mod},
                                              {node_pool, [node()]} | Props]}]),
    ok.

%% @doc Writes `{Tab, K, Val(K)}' for every `K' in `Keys' through
%% mnesia_frag, in one transaction.
fill(Tab, Keys, Val) ->
    mnesia:activity(transaction,
                    fun() -> lists:foreach(fun(K) -> ok = mnesia:write({Tab, K, Val(K)}) end, Keys) end,
                    [], mnesia_frag).

%% @doc Drops warnings the tests cause on purpose and that say nothing about
%% the result: Mnesia's "Mnesia is overloaded" when bulk writes outrun its
%% log dumper, global's "prevent overlapping partitions" when a peer
%% node is killed with kill -9, and Mnesia's `inconsistent_database' error
%% when a test cuts two nodes apart. Call it on every node (peers
%% included).
quiet_overload() ->
    _ = logger:add_primary_filter(fraghash_quiet_overload,
                                  {fun drop_overload/2, []}),
    ok.

drop_overload(#{msg := {Format, _}}, _) when is_list(Format) ->
    Expected = ["Mnesia is overloaded", "prevent overlapping partitions",
                "inconsistent_database"],
    case lists:any(fun(E) -> string:find(Format, E) =/= nomatch end, Expected) of
        true -> stop;
        false -> ignore
    end;
drop_overload(_Event, _) ->
    ignore.

%% @doc Figures printed along the way (distributions, timings, per-case
%% lines) appear only with FRAGHASH_TEST_VERBOSE=1: by default the suite
%% prints its result alone.
report(Format, Args) ->
    case os:getenv("FRAGHASH_TEST_VERBOSE") of
        "1" -> io:format(user, Format, Args);
        _ -> ok
    end.

%% @doc A peer node `Name@localhost' with its Mnesia directory `Dir', the
%% application's and the tests' code, quiet, its Mnesia's core files in the
%% scratch directory, and recorded.
start_peer(Name, Dir) ->
    start_peer(Name, Dir, []).

%% @doc As {@link start_peer/2}, with `Args' added to the node's command
%% line (`["-kernel", Param, Value]').
start_peer(Name, Dir, Args) ->
    ok = filelib:ensure_path(Dir),
    %% rebar3 builds the test modules apart from the application's.
    Paths = lists:usort([filename:dirname(code:which(M)) || M <- [?MODULE, fraghash_frag]]),
    {ok, Peer, Node} = peer:start(#{name => Name, host => "localhost",
                                    args => ["-pa" | Paths] ++
                                            ["-mnesia", "dir", "\"" ++ Dir ++ "\"" | Args]}),
    ok = rpc:call(Node, ?MODULE, quiet_overload, []),
    %% The core file of a Mnesia that stops on purpose goes to the scratch
    %% directory, not the current one.
    ok = rpc:call(Node, application, set_env, [mnesia, core_dir, scratch()]),
    record_peer(Node),
    {Peer, Node}.

%% @doc A peer as {@link start_peer/2} for `redb_copies' tables: `Env'
%% (`[{Key, Value}]') set in its fraghash application, a disc schema of its
%% own, Mnesia started and the backend registered.
start_redb_peer(Name, Dir, Env) ->
    {Peer, Node} = start_peer(Name, Dir),
    _ = rpc:call(Node, application, load, [fraghash]),
    [ok = rpc:call(Node, application, set_env, [fraghash, K, V]) || {K, V} <- Env],
    ok = rpc:call(Node, mnesia, create_schema, [[Node]]),
    ok = rpc:call(Node, mnesia, start, []),
    {atomic, ok} = rpc:call(Node, fraghash_redb_copies, register, []),
    {Peer, Node}.

%% @doc Records a peer's OS pid, so scripts/test-mnesia.sh kills it if a
%% test leaves it running.
record_peer(Node) ->
    OsPid = rpc:call(Node, os, getpid, []),
    ok = file:write_file(filename:join(scratch(), "peer.pids"), [OsPid, "\n"], [append]).

%% @doc Returns once `Node' is disconnected (after a kill -9).
wait_down(Node) ->
    case lists:member(Node, nodes()) of
        true -> timer:sleep(50), wait_down(Node);
        false -> ok
    end.

%% @doc Returns `ok' once Mnesia on `Node' has stopped, tried `Tries'
%% times 100 ms apart. A start that failed, or a stop Mnesia made itself,
%% says `is_running' is `no' while its event manager may still be
%% registered, and its transaction manager for seconds more; a start
%% before those are gone fails.
wait_mnesia_stopped(Node, Tries) ->
    Apps = rpc:call(Node, application, which_applications, []),
    State = {rpc:call(Node, mnesia, system_info, [is_running]),
             rpc:call(Node, erlang, whereis, [mnesia_event]),
             rpc:call(Node, erlang, whereis, [mnesia_sup]),
             rpc:call(Node, erlang, whereis, [mnesia_tm]),
             not is_list(Apps) orelse lists:keymember(mnesia, 1, Apps)},
    case State of
        {no, undefined, undefined, undefined, false} -> ok;
        _ when Tries > 0 -> timer:sleep(100), wait_mnesia_stopped(Node, Tries - 1);
        _ -> {still_running, State}
    end.

%% @doc A logger handler (`logger:add_handler(Id, fraghash_test_support,
%% #{config => self()})'): sends each event's message to the test process
%% as `{logged, Msg}'.
log(#{msg := Msg}, #{config := To}) ->
    To ! {logged, Msg},
    ok.

%% @doc The messages the handler log/2 sent this process so far.
logged() ->
    receive {logged, M} -> [M | logged()]
    after 0 -> []
    end.

%% @doc Three peer nodes `a', `b', `c' for the case `Id' (unique within a
%% run: it names their directories and nodes), started with `Args' as
%% {@link start_peer/3}; one disc schema, Mnesia running on all three.
start_trio(Id, Args) ->
    Dir = filename:join(scratch(), "trio_" ++ Id),
    Nodes = [begin
                 Name = list_to_atom(lists:concat(["fh3", L, "_", erlang:phash2(Id)])),
                 {_, N} = start_peer(Name, filename:join(Dir, atom_to_list(L)), Args),
                 N
             end || L <- [a, b, c]],
    ok = rpc:call(hd(Nodes), mnesia, create_schema, [Nodes]),
    [ok = rpc:call(N, mnesia, start, []) || N <- Nodes],
    Nodes.

%% @doc kill -9 of each of `Nodes' (peers this node reaches), one after
%% the other, each waited for until disconnected.
kill_nodes(Nodes) ->
    [begin os:cmd("kill -9 " ++ rpc:call(N, os, getpid, [])), wait_down(N) end || N <- Nodes],
    ok.

%% @doc Hash module `Mod''s state `S' after `K' more `add_frag's.
grow(_Mod, S, 0) -> S;
grow(Mod, S, K) -> {S2, _, _} = Mod:add_frag(S), grow(Mod, S2, K - 1).

%% @doc Where a fraghash hash state's lookup lives: the `Kind' byte of its
%% head (see include/fraghash.hrl).
inline_kind(<<"fh", 1, _:8, _:128, _:32, Kind:8, _/binary>>) -> Kind.
