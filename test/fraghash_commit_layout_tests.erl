%% @doc Why the growth path writes fragments of one commit layout per
%% transaction, and that it does, on three nodes (A, B and C, `peer' OS
%% processes).
%%
%% Mnesia 4.21.3 commits a transaction whose written tables have different
%% `where_to_commit' lists with its asymmetric protocol. Each node taking
%% part in it logs the transaction when it votes, presumed aborted, and
%% learns the outcome once every other node voted. A dump of its log in
%% between (`mnesia_dumper' waits some 110 ms for an outcome, then takes
%% the transaction for aborted) leaves the transaction out of the table
%% files and deletes the log, though the transaction then commits in RAM:
%% at the node's next start the write is gone. The first test makes that
%% window last on purpose: one transaction writes a table on each node,
%% C's transaction manager (which votes for C) is held while B, which has
%% voted, dumps its log; after B's Mnesia restarts, B has lost the write.
%% The same three writes made with `fraghash_tab:by_layout/2' (one
%% symmetric transaction per layout) survive the same sequence. The second
%% test traces every commit on A during an `add_frag', a `relieve' and a
%% `del_frag' of a table whose fragments have one disc copy each, spread
%% over A and B, and finds no asymmetric commit that writes records.
%%
%% In the slow tier: it runs only with `FRAGHASH_SLOW_TESTS=1'.
-module(fraghash_commit_layout_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0, report/2, start_peer/2]).

-export([write_while_voting/4, count_commits/1, hold_votes/3]).

-define(RECORDS, 3000).

commit_layout_test_() ->
    fraghash_test_support:slow_tier(
      {setup, fun start_nodes/0, fun stop_nodes/1,
       fun(Nodes) ->
               [{timeout, 120, {"an asymmetric commit dumped before its outcome is lost; "
                                "one transaction per layout is not",
                                fun() -> dump_window(Nodes) end}},
                {timeout, 300, {"the growth path commits no asymmetric transaction of records",
                                fun() -> growth_is_symmetric(Nodes) end}}]
       end}).

start_nodes() ->
    Dir = filename:join(scratch(), "commit_layout_" ++ os:getpid()),
    Id = integer_to_list(erlang:phash2(Dir)),
    Started = [start_peer(list_to_atom("fhl" ++ L ++ "_" ++ Id), filename:join(Dir, L))
               || L <- ["a", "b", "c"]],
    [A, B, C] = [N || {_P, N} <- Started],
    ok = rpc:call(A, mnesia, create_schema, [[A, B, C]]),
    [ok = rpc:call(N, mnesia, start, []) || N <- [A, B, C]],
    #{peers => [P || {P, _N} <- Started], a => A, b => B, c => C}.

stop_nodes(#{peers := Peers}) ->
    [catch peer:stop(P) || P <- Peers],
    ok.

%%% The window

dump_window(#{a := A, b := B, c := C}) ->
    [{atomic, ok} = rpc:call(A, mnesia, create_table,
                             [T, [{attributes, [key, val]}, {disc_copies, [N]}]])
     || {T, N} <- [{on_a, A}, {on_b, B}, {on_c, C}]],
    %% The baseline: the three writes in one transaction, which Mnesia
    %% commits with its asymmetric protocol (the tables' layouts differ).
    {atomic, ok} = rpc:call(A, ?MODULE, write_while_voting, [{B, C}, one, 1, one_transaction]),
    %% The same, one transaction per layout.
    {atomic, _} = rpc:call(A, ?MODULE, write_while_voting, [{B, C}, per_layout, 2, by_layout]),
    restart_mnesia(B),
    report("commit layout: after B's restart, one transaction: ~0p; per layout: ~0p~n",
           [rpc:call(B, mnesia, dirty_read, [on_b, 1]), rpc:call(B, mnesia, dirty_read, [on_b, 2])]),
    %% Mnesia's loss: B holds the write in its table files no more, though
    %% A and C kept theirs.
    ?assertEqual([], rpc:call(B, mnesia, dirty_read, [on_b, 1])),
    ?assertEqual([{on_a, 1, one}], rpc:call(A, mnesia, dirty_read, [on_a, 1])),
    ?assertEqual([{on_c, 1, one}], rpc:call(C, mnesia, dirty_read, [on_c, 1])),
    %% What one transaction per layout keeps.
    [?assertEqual([{T, 2, per_layout}], rpc:call(N, mnesia, dirty_read, [T, 2]))
     || {T, N} <- [{on_a, A}, {on_b, B}, {on_c, C}]].

%% @doc Run on A: writes `{Key, Value}' to `on_a', `on_b' and `on_c' (one
%% disc copy each, on A, B and C), in one `sync_transaction'
%% (`one_transaction') or with `fraghash_tab:by_layout/2' (one transaction
%% per table). Each transaction, as it ends, has C's transaction manager
%% held (see {@link hold_votes/3}) while B dumps its log.
write_while_voting({B, C}, Value, Key, How) ->
    Body = fun(Mine) ->
                   [ok = mnesia:write({T, Key, Value}) || T <- [on_a, on_b, on_c], Mine(T)],
                   Caller = self(),
                   spawn(C, ?MODULE, hold_votes, [Caller, B, 300]),
                   receive {held, _} -> ok end
           end,
    case How of
        one_transaction -> mnesia:sync_transaction(fun() -> Body(fun(_) -> true end) end);
        by_layout -> fraghash_tab:by_layout([on_a, on_b, on_c], Body)
    end.

%% @doc Run on C: suspends C's transaction manager (a suspension is its
%% suspender's to lift), tells `Caller', waits `Ms' (a commit that needs
%% C's vote waits for it; B, which takes part too, has voted), has B dump
%% its log, and resumes the manager whatever the dump did.
hold_votes(Caller, B, Ms) ->
    Tm = whereis(mnesia_tm),
    true = erlang:suspend_process(Tm),
    Caller ! {held, self()},
    timer:sleep(Ms),
    try
        dumped = rpc:call(B, mnesia, dump_log, [], 10000)
    after
        erlang:resume_process(Tm)
    end.

restart_mnesia(N) ->
    stopped = rpc:call(N, mnesia, stop, []),
    ok = rpc:call(N, mnesia, start, []),
    ok = rpc:call(N, mnesia, wait_for_tables, [rpc:call(N, mnesia, system_info, [tables]), 30000]).

%%% The growth path

growth_is_symmetric(#{a := A, b := B}) ->
    Tab = layout_slots,
    {atomic, ok} =
        rpc:call(A, mnesia, create_table,
                 [Tab, [{attributes, [key, val]},
                        {frag_properties, [{n_fragments, 5}, {hash_module, mnesia_frag_slots},
                                           {node_pool, [A, B]}, {n_disc_copies, 1}]}]]),
    ok = rpc:call(A, mnesia, activity,
                  [sync_dirty, fun() -> [mnesia:write({Tab, I, I}) || I <- lists:seq(1, ?RECORDS)],
                                        ok end, [], mnesia_frag]),
    ok = rpc:call(A, fraghash_frag, recover, []),
    Layouts = lists:usort([rpc:call(A, mnesia, table_info, [F, where_to_commit])
                           || F <- rpc:call(A, mnesia, activity,
                                            [async_dirty, fun() -> mnesia:table_info(Tab, frag_names)
                                                          end, [], mnesia_frag])]),
    %% The case is only a test if the fragments have several layouts.
    ?assert(length(Layouts) > 1),
    Ops = [fun() -> fraghash_frag:add_frag(Tab, [A, B]) end,
           fun() -> fraghash_frag:add_frag(Tab, [B, A]) end,
           fun() -> fraghash_frag:relieve(Tab, [A, B], largest) end,
           fun() -> fraghash_frag:del_frag(Tab) end,
           fun() -> fraghash_frag:del_frag(Tab) end],
    Counts = rpc:call(A, ?MODULE, count_commits, [Ops], 240000),
    report("commit layout: commits on A during add, add, relieve, del, del: ~0p~n", [Counts]),
    ?assertMatch(#{results := [{atomic, ok}, {atomic, ok}, {atomic, ok}, {atomic, ok},
                               {atomic, ok}]}, Counts),
    ?assertEqual(0, maps:get(asym_records, Counts)),
    ?assert(maps:get(sym_records, Counts) > 0),
    %% And every record is still there, once.
    Keys = rpc:call(A, mnesia, activity,
                    [async_dirty, fun() -> mnesia:all_keys(Tab) end, [], mnesia_frag]),
    ?assertEqual(lists:seq(1, ?RECORDS), lists:sort(Keys)).

%% @doc Run on A: calls each of `Ops' in turn while tracing every commit
%% that a process of this node coordinates (`mnesia_tm:multi_commit/5',
%% whose first argument is the protocol); returns the results and the
%% counts of commits that write records with each protocol.
count_commits(Ops) ->
    Collector = spawn(fun() -> collect(#{}) end),
    erlang:trace_pattern({mnesia_tm, multi_commit, 5}, true, [local]),
    erlang:trace(all, true, [call, {tracer, Collector}]),
    Results = [Op() || Op <- Ops],
    erlang:trace(all, false, [call]),
    erlang:trace_pattern({mnesia_tm, multi_commit, 5}, false, [local]),
    Collector ! {done, self()},
    receive {counts, Counts} -> Counts#{results => Results} end.

collect(Counts) ->
    receive
        {trace, _Pid, call, {mnesia_tm, multi_commit, [Protocol, _Maj, _Tid, Commits, _Store]}} ->
            Kind = kind(Protocol, Commits),
            Counts2 = case Kind of
                          asym_records -> maps:update_with(asym_tables, fun(Ts) -> [tables(Commits) | Ts] end, [], Counts);
                          _ -> Counts
                      end,
            collect(maps:update_with(Kind, fun(C) -> C + 1 end, 1, Counts2));
        {done, From} ->
            From ! {counts, maps:merge(#{asym_records => 0, sym_records => 0}, Counts)}
    end.

%% What a commit is: a schema change, or one writing records, by protocol.
kind(Protocol, Commits) ->
    Schema = lists:any(fun(C) -> element(8, C) =/= [] end, Commits),
    Asym = lists:member(Protocol, [asym_trans, sync_asym_trans]),
    if
        Schema -> schema;
        Protocol =:= read_only -> read_only;
        Asym -> asym_records;
        true -> sym_records
    end.

tables(Commits) ->
    lists:usort([T || C <- Commits, I <- lists:seq(4, 7), {{T, _K}, _, _} <- element(I, C)]).
