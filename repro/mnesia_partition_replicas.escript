#!/usr/bin/env escript
%% -*- erlang -*-
%%! -noshell -sname fraghash_partition_check
%%
%% Check: when the node coordinating transactions on a table held by two
%% other nodes is cut off mid-commit, do the two copies still hold the same
%% records, and is every write Mnesia acknowledged on them? Plain OTP only,
%% no fraghash: three peer nodes A, B, C (OS processes on localhost, driven
%% through peer's control connections, not distribution;
%% `prevent_overlapping_partitions' off so that only A is apart), one
%% `disc_copies' table `t' on B and C, and 8 writers on A, each writing
%% its own keys in `sync_transaction's.
%%
%% Each trial, on fresh nodes, lets the writers run 300 to 700 ms, cuts A
%% from B (`erlang:disconnect_node/1' on A), then from C 0 to 3 ms later,
%% waits 2 s and compares the two copies (each read on its own node), and
%% counts the writes whose `sync_transaction' returned `{atomic, ok}' on A
%% but that neither copy holds.
%%
%% Run (about 3 s a trial):
%%
%%     escript repro/mnesia_partition_replicas.escript [Trials]
%%
%% Exit status 1 and a last line `REPRODUCED' when a trial ends with the
%% copies differing or an acknowledged write on neither; 0 and `NOT
%% REPRODUCED' otherwise.
%%
%% On OTP 25 (Mnesia 4.21.3), 2 cores, 20 trials: copies apart after 9,
%% acknowledged writes on neither copy after some of them (see
%% docs/mnesia-cluster.md, healing after a partition).

main(Args) ->
    Trials = case Args of [T] -> list_to_integer(T); [] -> 20 end,
    Dir = filename:join(os:getenv("TMPDIR", "/tmp"), "partition_replicas_" ++ os:getpid()),
    io:format("OTP ~s, Mnesia ~s~n", [erlang:system_info(otp_release), mnesia_vsn()]),
    Results = [trial(I, filename:join(Dir, integer_to_list(I))) || I <- lists:seq(1, Trials)],
    os:cmd("rm -rf " ++ Dir),
    Apart = length([x || {apart, _} <- Results]),
    Lost = lists:sum([L || {_, L} <- Results]),
    io:format("~b of ~b trials ended with the copies of t differing; ~b acknowledged "
              "writes on neither copy~n", [Apart, Trials, Lost]),
    case Apart + Lost of
        0 -> io:format("NOT REPRODUCED~n"), halt(0);
        _ -> io:format("REPRODUCED~n"), halt(1)
    end.

trial(I, Dir) ->
    S = integer_to_list(erlang:unique_integer([positive])),
    [{PA, _A}, {PB, B}, {PC, C}] = Peers =
        [start(list_to_atom(lists:concat(["prc", K, S])), filename:join(Dir, K))
         || K <- ["a", "b", "c"]],
    Nodes = [N || {_, N} <- Peers],
    [pong = peer:call(P, net_adm, ping, [N]) || {P, _} <- Peers, N <- Nodes],
    ok = peer:call(PA, mnesia, create_schema, [Nodes]),
    [ok = peer:call(P, mnesia, start, []) || {P, _} <- Peers],
    {atomic, ok} = peer:call(PB, mnesia, create_table, [t, [{disc_copies, [B, C]}]]),
    ok = peer:call(PA, mnesia, wait_for_tables, [[t], 30000]),
    Acks = peer:call(PA, erlang, apply, [fun() -> spawn_writers() end, []]),
    timer:sleep(300 + rand:uniform(400)),
    true = peer:call(PA, erlang, disconnect_node, [B]),
    timer:sleep(rand:uniform(4) - 1),
    true = peer:call(PA, erlang, disconnect_node, [C]),
    timer:sleep(2000),
    Acked = peer:call(PA, erlang, apply, [fun() -> Acks ! {get, self()},
                                                   receive {acked, L} -> L end
                                          end, []]),
    [OnB, OnC] = [lists:sort(peer:call(P, ets, tab2list, [t])) || P <- [PB, PC]],
    Lost = [K || K <- Acked, not lists:keymember(K, 2, OnB), not lists:keymember(K, 2, OnC)],
    io:format("trial ~b: B ~b records, C ~b; only on B ~0p, only on C ~0p; acknowledged, "
              "on neither ~0p~n", [I, length(OnB), length(OnC), keys(OnB -- OnC),
                                   keys(OnC -- OnB), Lost]),
    [catch peer:stop(P) || {P, _} <- Peers],
    {case OnB =:= OnC of true -> same; false -> apart end, length(Lost)}.

keys(Recs) -> [K || {t, K, _} <- Recs].

%% On A: 8 writers of their own keys, each key whose sync_transaction
%% returned {atomic, ok} kept by a process of its own (returned).
spawn_writers() ->
    Acks = spawn(fun() -> acks([]) end),
    [spawn(fun() -> write(W, 1, Acks) end) || W <- lists:seq(1, 8)],
    Acks.

acks(L) ->
    receive
        {ack, K} -> acks([K | L]);
        {get, From} -> From ! {acked, L}, acks(L)
    end.

write(W, I, Acks) ->
    case mnesia:sync_transaction(fun() -> mnesia:write({t, {W, I}, I}) end) of
        {atomic, ok} -> Acks ! {ack, {W, I}}, write(W, I + 1, Acks);
        {aborted, _} -> ok
    end.

start(Name, Dir) ->
    ok = filelib:ensure_path(Dir),
    {ok, P, Node} = peer:start(#{name => Name, connection => 0,
                                 args => ["-mnesia", "dir", "\"" ++ Dir ++ "\"",
                                          "-kernel", "prevent_overlapping_partitions", "false"]}),
    {P, Node}.

mnesia_vsn() ->
    _ = application:load(mnesia),
    {ok, V} = application:get_key(mnesia, vsn),
    V.
