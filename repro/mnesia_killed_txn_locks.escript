#!/usr/bin/env escript
%% -*- erlang -*-
%%! -noshell -sname fraghash_lock_check
%%
%% Check: do processes killed inside transactions leave a lock behind on a
%% two-node cluster? Reported for Mnesia (erlang/otp#9581 on GitHub: locks held on
%% the peer node after writers to a replicated table were killed with
%% timer:kill_after/1). Plain OTP only: the default hash module, a
%% fragmented ram_copies table replicated on this node and a peer node
%% (started with `peer', on localhost; needs epmd, which the VM starts).
%%
%% Run (about 10 s):
%%
%%     escript repro/mnesia_killed_txn_locks.escript [Processes]
%%
%% Processes (default 2000) each start a transaction through mnesia_frag
%% writing one of 50 keys, with timer:kill_after/1 set 1 to 3 ms ahead.
%% Three seconds after the last one, it prints the locks Mnesia still holds
%% on each node (mnesia:system_info(held_locks)) and runs one transaction
%% writing all 50 keys. Exit status 1 when a lock is left or that
%% transaction fails (the problem is present), 0 otherwise.
%%
%% On OTP 25 (Mnesia 4.21.3), 2 cores: no lock left in three runs of 1,000
%% to 5,000 processes.

main(Args) ->
    Procs = case Args of
                [P] -> list_to_integer(P);
                [] -> 2000
            end,
    %% The peer stops with this VM (it is linked to its connection).
    {ok, _Peer, Other} = peer:start(#{name => fraghash_lock_peer, host => "localhost"}),
    run(Other, Procs).

run(Other, Procs) ->
    ok = mnesia:start(),
    ok = rpc:call(Other, mnesia, start, []),
    {ok, [Other]} = mnesia:change_config(extra_db_nodes, [Other]),
    {atomic, ok} = mnesia:create_table(
                     lock_check,
                     [{attributes, [k, v]},
                      {frag_properties, [{n_fragments, 4}, {node_pool, [node(), Other]},
                                         {n_ram_copies, 2}]}]),
    Write = fun(K) ->
                    mnesia:activity(transaction,
                                    fun() -> mnesia:write({lock_check, K, self()}) end,
                                    [], mnesia_frag)
            end,
    [begin
         spawn(fun() -> {ok, _} = timer:kill_after(rand:uniform(3)), Write(I rem 50) end),
         %% A pause every 20 processes, so that kills land inside
         %% transactions rather than before any starts.
         case I rem 20 of 0 -> timer:sleep(1); _ -> ok end
     end || I <- lists:seq(1, Procs)],
    timer:sleep(3000),
    Here = mnesia:system_info(held_locks),
    There = rpc:call(Other, mnesia, system_info, [held_locks]),
    io:format("~b processes killed 1 to 3 ms into a transaction~n", [Procs]),
    io:format("locks held on ~s: ~p~nlocks held on ~s: ~p~n", [node(), Here, Other, There]),
    After = (catch mnesia:activity(transaction,
                                   fun() ->
                                           [ok = mnesia:write({lock_check, K, done})
                                            || K <- lists:seq(0, 49)],
                                           ok
                                   end, [], mnesia_frag)),
    io:format("a transaction writing every key afterwards: ~p~n", [After]),
    case {Here, There, After} of
        {[], [], ok} -> io:format("no lock left: the problem is not present~n"), halt(0);
        _ -> io:format("a lock was left behind: the problem is present~n"), halt(1)
    end.
