%% @doc Kill -9 of one of two Mnesia nodes in the middle of a crash-safe
%% `add_frag' or `del_frag' (`fraghash_frag') on a table with `disc_copies'
%% on both. Two nodes, A and B, are started with `peer' (OS processes); the
%% operation runs on A; a step hook on A kills, at one step, either A itself
%% (kill -9 of its own OS pid: the node running the operation) or B (the
%% other node) and lets A go on. The killed node is restarted, both nodes
%% recover (`fraghash_frag:recover/0'), and then both must agree: the same
%% fragment count, the same keys in every fragment on both nodes, every
%% record once, in its fragment, with its value; no journal entry left; and
%% the operation runs again.
%%
%% In the slow tier: it runs only with `FRAGHASH_SLOW_TESTS=1' (as
%% scripts/test.sh sets it). Needs a distributed node (`-sname') and
%% `FRAGHASH_TEST_DIR'.
-module(fraghash_two_node_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, report/2, start_peer/2, start_peer/3, wait_down/1]).

-export([read_all/2, frag_keys/1, call_then_kill/2, read/2, delete_in_order/3,
         change_durably/2]).
%% Shared with the other multi-node tests.
-export([pair/2, frag_table/6, check_both/4, kill/1]).

-define(RECORDS, 2000).
-define(T, 300).

two_node_test_() ->
    fraghash_test_support:slow_tier(
      [two_node_tests(),
       {timeout, ?T, {"a fragment number used again: the old fragment's records in the "
                      "other node's log stay out of the new one", fun reused_number/0}},
       {timeout, ?T, {"keys deleted while an add copies stay deleted (fragments on two "
                      "nodes, one transaction per layout)", fun deleted_while_copying/0}},
       {timeout, ?T, {"Mnesia stopped on a node that holds nothing of the table: add, "
                      "relieve and del go on; one that holds a copy is named in the refusal",
                      fun stopped_elsewhere/0}}]).

two_node_tests() ->
    {timeout, ?T * 4,
     {"kill -9 one of two nodes during add_frag/del_frag",
      fun() ->
              [case_(Mod, Op, Step, Victim, Copies)
               || {Mod, Op, Step, Copies} <- [{mnesia_frag_slots, add, grow_copy, 2},
                                              {mnesia_frag_slots, add, grow_switch_locked, 2},
                                              {mnesia_frag_slots, add, grow_switched, 2},
                                              {mnesia_frag_slots, add, grow_clean, 2},
                                              {mnesia_frag_slots, del, grow_del_copy, 2},
                                              {mnesia_frag_slots, del, grow_del_switch_locked, 2},
                                              {mnesia_frag_slots, del, grow_del_dropped, 2},
                                              {mnesia_frag_hash, add, grow_switch_locked, 2},
                                              {mnesia_frag_hash, del, grow_del_switch_locked, 2},
                                              %% One disc copy per fragment,
                                              %% spread over both nodes; the
                                              %% kill right after the call
                                              %% returns.
                                              {mnesia_frag_slots, add, returned, 1},
                                              {mnesia_frag_slots, del, returned, 1},
                                              {mnesia_frag_hash, add, returned, 1}],
                  Victim <- [self, other]],
              ok
      end}}.

%% `Step' `returned' kills right after the operation returns, from the
%% test process, instead of from a hook inside it.
case_(Mod, Op, Step, Victim, Copies) ->
    Id = lists:concat([Mod, "_", Op, "_", Step, "_", Victim, "_", Copies, "_", os:getpid()]),
    #{dir := Dir, name := Name, a := A, b := B, pa := PA, pb := PB} = pair(Id, []),
    Tab = list_to_atom("two_" ++ atom_to_list(Mod)),
    ok = frag_table(A, B, Tab, Mod, Copies, ?RECORDS),
    {atomic, ok} = rpc:call(A, fraghash_frag, add_frag, [Tab, [A, B]]),
    %% The hook: at Step, kill -9 this node (A) or B, once.
    OsB = rpc:call(B, os, getpid, []),
    Kill = case Victim of
               self -> "kill -9 " ++ rpc:call(A, os, getpid, []);
               other -> "kill -9 " ++ OsB
           end,
    ok = rpc:call(A, fraghash_frag, set_step_hook,
                  [fun(T, S) when T =:= Tab, S =:= Step ->
                           fraghash_frag:set_step_hook(undefined),
                           os:cmd(Kill);
                      (_, _) -> ok
                   end]),
    Call = case Op of
               add -> fun() -> fraghash_frag:add_frag(Tab, [A, B]) end;
               del -> fun() -> fraghash_frag:del_frag(Tab) end
           end,
    Result = case Step of
                 returned ->
                     %% The kill goes out on A the moment the call returns,
                     %% through a shell started beforehand.
                     rpc:call(A, ?MODULE, call_then_kill, [Call, Kill], 60000);
                 _ ->
                     rpc:call(A, erlang, apply, [Call, []], 60000)
             end,
    {Dead, DeadName, DeadDir, Alive} =
        case Victim of
            self -> {A, Name(a), filename:join(Dir, "a"), B};
            other -> {B, Name(b), filename:join(Dir, "b"), A}
        end,
    wait_down(Dead),
    %% The dead node's peer controller goes too (its node is gone).
    _ = (catch peer:stop(case Victim of self -> PA; other -> PB end)),
    {_, Dead} = start_peer(DeadName, DeadDir),
    ok = rpc:call(Dead, mnesia, start, []),
    [?assertEqual({N, ok}, {N, rpc:call(N, mnesia, wait_for_tables,
                                         [rpc:call(N, mnesia, system_info, [tables]), 30000])})
     || N <- [A, B]],
    [ok = rpc:call(N, fraghash_frag, recover, []) || N <- [Dead, Alive]],
    Where = {Mod, Op, Step, Victim, Copies, Result},
    report("two nodes: ~w ~w at ~w, killed ~w: returned ~0p~n",
              [Mod, Op, Step, Victim, Result]),
    check_both(Tab, A, B, Where),
    %% The operation runs again, and the nodes still agree.
    {atomic, ok} = rpc:call(Alive, fraghash_frag, case Op of add -> add_frag; del -> del_frag end,
                            case Op of add -> [Tab, [A, B]]; del -> [Tab] end, 60000),
    check_both(Tab, A, B, {again, Where}),
    kill([A, B]).

%% Mnesia stopped on B, whose VM runs on, while A grows and shrinks a
%% table held on A alone (a table with copies on B is refused): the journal (a copy on every disc node) is made
%% durable where Mnesia runs, and B loads it from A when it starts.
stopped_elsewhere() ->
    #{a := A, b := B} = pair("stopped_" ++ os:getpid(), []),
    Tab = two_stopped,
    {atomic, ok} =
        rpc:call(A, mnesia, create_table,
                 [Tab, [{attributes, [key, val]},
                        {frag_properties, [{n_fragments, 3}, {hash_module, mnesia_frag_slots},
                                           {node_pool, [A]}, {n_disc_copies, 1}]}]]),
    ok = rpc:call(A, fraghash_test_support, fill, [Tab, lists:seq(1, 500), fun(K) -> K end]),
    ok = rpc:call(A, fraghash_frag, recover, []),
    %% A table with copies on B too is refused, naming B.
    Both = two_stopped_both,
    ok = frag_table(A, B, Both, mnesia_frag_slots, 1, 100),
    stopped = rpc:call(B, mnesia, stop, []),
    {aborted, {fraghash, holders_not_running, Text}} =
        rpc:call(A, fraghash_frag, add_frag, [Both, [A]], 60000),
    ?assertNotEqual(nomatch, string:find(Text, atom_to_list(B))),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, add_frag, [Tab, [A]], 60000)),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, relieve, [Tab, [A], 1], 60000)),
    ?assertEqual({atomic, ok}, rpc:call(A, fraghash_frag, del_frag, [Tab], 60000)),
    ok = rpc:call(B, mnesia, start, []),
    ok = rpc:call(B, mnesia, wait_for_tables, [[fraghash_journal], 30000]),
    ?assertEqual([], rpc:call(B, fraghash_journal, pending, [])),
    Read = fun() -> [mnesia:read(Tab, K) || K <- lists:seq(1, 500)] end,
    ?assertEqual([[{Tab, K, K}] || K <- lists:seq(1, 500)],
                 rpc:call(B, mnesia, activity, [async_dirty, Read, [], mnesia_frag])),
    kill([A, B]).

%% A fragment number used again, on two nodes: a del drops fragment 4,
%% whose one disc copy is on X, run from the other node Y, right after the
%% keys it held got new values (which X's log holds: no dump runs but the
%% ones asked for); the keys are deleted; an add from Y creates a fragment
%% 4 again, on X; X dumps its log, is killed -9 and restarted. A dump of a
%% running node skips the schema operations of its log, so old writes
%% still in X's log would land in the files of the table that has the name
%% now; they do not, because deleting a table makes Mnesia dump every
%% node's log as it commits. The deleted keys must stay deleted.
reused_number() ->
    %% No dump but the ones the test and the operations ask for.
    Quiet = ["-mnesia", "dump_log_write_threshold", "1000000"],
    #{dir := Dir, name := Name, a := A, b := B} = pair("reuse_" ++ os:getpid(), Quiet),
    Tab = two_reused,
    ok = frag_table(A, B, Tab, mnesia_frag_slots, 1, ?RECORDS),
    Last = fraghash_frag:frag_name(Tab, 4),
    [X] = rpc:call(A, mnesia, table_info, [Last, disc_copies]),
    [Y] = [A, B] -- [X],
    XName = case X of A -> Name(a); B -> Name(b) end,
    XDir = filename:join(Dir, case X of A -> "a"; B -> "b" end),
    %% Every node's log is dumped, then the last fragment's keys get new
    %% values, which X's log alone holds.
    [dumped = rpc:call(N, mnesia, dump_log, []) || N <- [A, B]],
    Keys = rpc:call(X, mnesia, dirty_all_keys, [Last]),
    ?assert(length(Keys) > 10),
    Put = fun(Fun) ->
                  ok = rpc:call(Y, ?MODULE, change_durably,
                                [Tab, fun() -> lists:foreach(Fun, Keys) end])
          end,
    Put(fun(K) -> mnesia:write({Tab, K, old}) end),
    {atomic, ok} = rpc:call(Y, fraghash_frag, del_frag, [Tab], 60000),
    Put(fun(K) -> mnesia:delete({Tab, K}) end),
    {atomic, ok} = rpc:call(Y, fraghash_frag, add_frag, [Tab, [X, Y]], 60000),
    ?assertEqual([X], rpc:call(Y, mnesia, table_info, [Last, disc_copies])),
    dumped = rpc:call(X, mnesia, dump_log, []),
    ok = kill([X]),
    {_, X} = start_peer(XName, XDir, Quiet),
    ok = rpc:call(X, mnesia, start, []),
    [?assertEqual({N, ok}, {N, rpc:call(N, mnesia, wait_for_tables,
                                         [rpc:call(N, fraghash_frag, loadable_tables, []), 30000])})
     || N <- [A, B]],
    [ok = rpc:call(N, fraghash_frag, recover, []) || N <- [X, Y]],
    Back = [K || K <- Keys, rpc:call(Y, ?MODULE, read, [Tab, K]) =/= []],
    report("two nodes: a reused fragment number: ~b of ~b deleted keys back~n",
           [length(Back), length(Keys)]),
    ?assertEqual([], Back),
    kill([A, B]).

%% An add, run on X, copies into a new fragment on Y from a donor on X,
%% one transaction per layout: each batch is read from the donor once per
%% layout, and a writer on Y deletes the moving keys, in order, all the
%% while (each delete acknowledged at the durability line). A key deleted
%% between two transactions of one batch must not be taken for one never
%% copied: its copy would stay in the new fragment. Every acknowledged
%% delete must hold once the add returned.
deleted_while_copying() ->
    #{a := A, b := B} = pair("copying_" ++ os:getpid(), []),
    Tab = two_copying,
    %% An add long enough for the writer to delete dozens of keys while
    %% it copies: the copy locks the donor whole, batch by batch, so the
    %% writer's deletes land between its transactions (74 to 122 here).
    Records = 32000,
    ok = frag_table(A, B, Tab, mnesia_frag_hash, 1, Records),
    {Mod, S, N} = rpc:call(A, fraghash_frag, hash, [Tab]),
    %% The donor (fragment 1, `mnesia_frag_hash''s next to split) on X, the
    %% new fragment on Y, the add run on X, the writer on Y.
    [X] = rpc:call(A, mnesia, table_info, [Tab, disc_copies]),
    [Y] = [A, B] -- [X],
    {S2, _, _} = Mod:add_frag(S),
    Moving = [K || K <- lists:seq(1, Records), Mod:key_to_frag_number(S2, K) =:= N + 1],
    Self = self(),
    Writer = spawn(Y, ?MODULE, delete_in_order, [Self, Tab, Moving]),
    ?assertEqual({atomic, ok}, rpc:call(X, fraghash_frag, add_frag, [Tab, [Y, X]], 60000)),
    Writer ! stop,
    Deleted = receive {deleted, Writer, Ks} -> Ks after 60000 -> error(writer_stuck) end,
    New = fraghash_frag:frag_name(Tab, N + 1),
    ?assertEqual([Y], rpc:call(X, mnesia, table_info, [New, disc_copies])),
    Back = [K || K <- Deleted, rpc:call(Y, mnesia, dirty_read, [New, K]) =/= []],
    report("two nodes: ~b keys deleted while an add copied, ~b back~n",
           [length(Deleted), length(Back)]),
    ?assert(length(Deleted) > 20),
    ?assertEqual([], Back),
    kill([A, B]).

%% @doc Run on a node: deletes `Keys' of `Tab' in order, each in a
%% `sync_transaction' made durable, until told to stop; then sends the keys
%% whose delete returned to `Parent'.
-spec delete_in_order(pid(), atom(), [term()]) -> ok.
delete_in_order(Parent, Tab, Keys) ->
    delete_in_order(Parent, Tab, Keys, []).

delete_in_order(Parent, Tab, Keys, Done) ->
    receive
        stop -> Parent ! {deleted, self(), Done}, ok
    after 0 ->
            case Keys of
                [] ->
                    receive stop -> Parent ! {deleted, self(), Done}, ok end;
                [K | Rest] ->
                    ok = change_durably(Tab, fun() -> mnesia:delete({Tab, K}) end),
                    delete_in_order(Parent, Tab, Rest, [K | Done])
            end
    end.

%% @doc Runs `Change' in a `mnesia_frag' `sync_transaction' on `Tab', then
%% makes every fragment of `Tab' durable where it is held: a change
%% acknowledged at the durability line.
-spec change_durably(atom(), fun(() -> term())) -> ok.
change_durably(Tab, Change) ->
    Frags = mnesia:activity(sync_transaction,
                            fun() -> Change(), mnesia:table_info(Tab, frag_names) end, [],
                            mnesia_frag),
    fraghash_durable:tables(Frags).

%% Kills the nodes `Nodes' with kill -9 and waits until they are down.
kill(Nodes) ->
    [begin os:cmd("kill -9 " ++ rpc:call(N, os, getpid, [])), wait_down(N) end || N <- Nodes],
    ok.

%% @doc `Key''s records in `Tab', read through `mnesia_frag'.
-spec read(atom(), term()) -> [tuple()].
read(Tab, Key) ->
    mnesia:activity(async_dirty, fun() -> mnesia:read(Tab, Key) end, [], mnesia_frag).

%% Two peer nodes for the case `Id', named `Name(a)' and `Name(b)' (their
%% Mnesia directories `a' and `b' under `Dir'), started with `Args', one
%% disc schema, Mnesia running on both.
pair(Id, Args) ->
    Dir = filename:join(scratch(), "two_" ++ Id),
    Name = fun(L) -> list_to_atom(lists:concat(["fh2", L, "_", erlang:phash2(Id)])) end,
    {PA, A} = start_peer(Name(a), filename:join(Dir, "a"), Args),
    {PB, B} = start_peer(Name(b), filename:join(Dir, "b"), Args),
    ok = rpc:call(A, mnesia, create_schema, [[A, B]]),
    [ok = rpc:call(N, mnesia, start, []) || N <- [A, B]],
    #{dir => Dir, name => Name, a => A, b => B, pa => PA, pb => PB}.

%% `Tab', 4 fragments of module `Mod' with `Copies' disc copies each over
%% A and B, holding `{Tab, I, I * 5}' for I in 1..`Records'; recovered.
frag_table(A, B, Tab, Mod, Copies, Records) ->
    {atomic, ok} =
        rpc:call(A, mnesia, create_table,
                 [Tab, [{attributes, [key, val]},
                        {frag_properties, [{n_fragments, 4}, {hash_module, Mod},
                                           {node_pool, [A, B]}, {n_disc_copies, Copies}]}]]),
    Fill = fun() -> [ok = mnesia:write({Tab, I, I * 5}) || I <- lists:seq(1, Records)], ok end,
    ok = rpc:call(A, mnesia, activity, [sync_dirty, Fill, [], mnesia_frag]),
    rpc:call(A, fraghash_frag, recover, []).

%% @doc Runs `Call', then at once the shell command `Kill' through a shell
%% started before the call; returns what `Call' returned.
-spec call_then_kill(fun(() -> term()), string()) -> term().
call_then_kill(Call, Kill) ->
    Shell = open_port({spawn, "sh"}, [binary]),
    Result = Call(),
    true = port_command(Shell, Kill ++ "\n"),
    timer:sleep(1000),
    Result.

check_both(Tab, A, B, Where) ->
    [JA, JB] = [rpc:call(N, fraghash_journal, pending, []) || N <- [A, B]],
    ?assertEqual({Where, [], []}, {Where, JA, JB}),
    {Mod, S, N} = rpc:call(A, fraghash_frag, hash, [Tab]),
    ?assertEqual({Where, N}, {Where, element(3, rpc:call(B, fraghash_frag, hash, [Tab]))}),
    KA = rpc:call(A, ?MODULE, frag_keys, [Tab]),
    KB = rpc:call(B, ?MODULE, frag_keys, [Tab]),
    ?assertEqual({Where, KA}, {Where, KB}),
    All = lists:append([[{K, F} || K <- Ks] || {F, Ks} <- KA]),
    ?assertEqual({Where, lists:seq(1, ?RECORDS)}, {Where, lists:sort([K || {K, _} <- All])}),
    ?assertEqual({Where, []}, {Where, [K || {K, F} <- All, Mod:key_to_frag_number(S, K) =/= F]}),
    ?assertEqual({Where, N}, {Where, length(KA)}),
    [?assertEqual({Where, ?RECORDS}, {Where, rpc:call(X, ?MODULE, read_all, [Tab, ?RECORDS])})
     || X <- [A, B]],
    ok.

%% @doc [{Fragment, SortedKeys}] of every fragment, as this node holds them.
-spec frag_keys(atom()) -> [{pos_integer(), [term()]}].
frag_keys(Tab) ->
    {_, _, N} = fraghash_frag:hash(Tab),
    [{F, lists:sort(mnesia:dirty_all_keys(fraghash_frag:frag_name(Tab, F)))}
     || F <- lists:seq(1, N)].

%% @doc How many of keys 1..Count read back with their value on this node.
-spec read_all(atom(), pos_integer()) -> non_neg_integer().
read_all(Tab, Count) ->
    mnesia:activity(async_dirty,
                    fun() ->
                            length([I || I <- lists:seq(1, Count),
                                         mnesia:read(Tab, I) =:= [{Tab, I, I * 5}]])
                    end, [], mnesia_frag).
