%% Kill -9 reproduction for dets alone (no Mnesia): does a dets file lose
%% records that a completed dets:sync/1 had already written, when the VM is
%% killed while dets writes out a later batch, and its repair runs at the
%% next open?
%%
%% A child VM opens three dets `set' files and loops:
%% <ul>
%% <li>`batch': a batch of Batch operations (overwrite, delete or insert of
%% random keys, one dets call each, as Mnesia applies a migration), then
%% dets:sync/1;</li>
%% <li>`twin': the same operations, each applied right after the one on
%% `batch', then dets:sync/1: a table under the same churn;</li>
%% <li>`single': three operations per batch, each followed by dets:sync/1
%% (the torture test's writers' pattern);</li>
%% </ul>
%% writing before each batch an intent (its operations) and after each sync
%% an acknowledgement to a plain log. The parent kills the child with kill
%% -9 at a random moment; the next child opens the files (dets repairs
%% them: they were not closed) and checks every key against the log: the
%% last acknowledged value, or the value of the batch in flight (which may
%% or may not have reached the file). Anything else is a record lost (or
%% wrong) that a completed sync had written. Keys lost that the batch in
%% flight did not touch are counted apart ("bystanders").
%%
%% Run: repro/dets-kill/run.sh [Kills [Batch [Keys]]]
-module(dets_kill).
-export([parent/1, child/1]).

parent([Dir, KillsS, BatchS, KeysS]) ->
    Kills = list_to_integer(KillsS),
    rand:seed(exsss, {7, 7, 7}),
    os:cmd("rm -rf " ++ Dir), ok = filelib:ensure_path(Dir),
    Args = [BatchS, KeysS],
    [kill_one(Dir, Args, R) || R <- lists:seq(1, Kills)],
    0 = run(Dir, Args, Kills + 1, "check"),
    {ok, Rs} = file:consult(filename:join(Dir, "results.log")),
    Sum = fun(T, K) -> lists:sum([maps:get(K, C) || {check, _, T2, C} <- Rs, T2 =:= T]) end,
    [io:format("~-7s checks=~b keys_checked=~b lost_or_wrong=~b (lost ~b, older ~b, deleted_back ~b; "
               "bystanders ~b) repaired_opens=~b~n",
               [T, length([x || {check, _, T2, _} <- Rs, T2 =:= T]), Sum(T, checked), Sum(T, bad),
                Sum(T, lost), Sum(T, older), Sum(T, back), Sum(T, bystanders), Sum(T, repaired)])
     || T <- [batch, twin, single]],
    %% Keys one of the twins lost or got wrong and the other kept, per check.
    Only = fun(A, B) -> lists:sum([length(maps:get(bad_keys, CA) -- maps:get(bad_keys, CB))
                                   || {check, R, A2, CA} <- Rs, A2 =:= A,
                                      {check, R2, B2, CB} <- Rs, B2 =:= B, R2 =:= R]) end,
    io:format("batch lost or wrong where twin kept it: ~b; twin where batch kept it: ~b~n",
              [Only(batch, twin), Only(twin, batch)]),
    halt(0).

kill_one(Dir, Args, Run) ->
    Port = start(Dir, Args, Run, "work"),
    {os_pid, Os} = erlang:port_info(Port, os_pid),
    wait_line(Port, "running"),
    timer:sleep(rand:uniform(1500)),
    os:cmd("kill -9 " ++ integer_to_list(Os)),
    wait_exit(Port).

run(Dir, Args, Run, Mode) -> wait_exit(start(Dir, Args, Run, Mode)).

start(Dir, Args, Run, Mode) ->
    Erl = os:find_executable("erl"),
    Ebin = filename:dirname(code:which(?MODULE)),
    open_port({spawn_executable, Erl},
              [{args, ["-noshell", "-pa", Ebin, "-run", ?MODULE_STRING, "child", Dir,
                       integer_to_list(Run), Mode | Args]},
               exit_status, stderr_to_stdout, binary, {line, 1000}]).

wait_line(Port, L) ->
    receive
        {Port, {data, {_, Bin}}} ->
            case binary_to_list(Bin) of
                L -> ok;
                Other -> io:format("~s~n", [Other]), wait_line(Port, L)
            end;
        {Port, {exit_status, S}} -> error({child_exited, S})
    end.

wait_exit(Port) ->
    receive
        {Port, {exit_status, S}} -> S;
        {Port, {data, {_, B}}} ->
            case B of
                <<"dets: file", _/binary>> -> ok;   % repair notices, counted below
                _ -> io:format("~s~n", [B])
            end,
            wait_exit(Port)
    after 600000 -> error(timeout)
    end.

%%% Child

child([Dir, RunS, Mode, BatchS, KeysS]) ->
    Run = list_to_integer(RunS),
    Batch = list_to_integer(BatchS),
    Keys = list_to_integer(KeysS),
    rand:seed(exsss, {Run, 1, 2}),
    Tabs = [batch, twin, single],
    Repaired = [{T, open(Dir, T)} || T <- Tabs],
    [check(Dir, Run, T, proplists:get_value(T, Repaired)) || T <- Tabs],
    case Mode of
        "check" -> [ok = dets:close(T) || T <- Tabs], halt(0);
        "work" ->
            io:format("running~n"),
            {ok, L1} = file:open(logfile(Dir, batch), [append, raw, binary]),
            {ok, L2} = file:open(logfile(Dir, single), [append, raw, binary]),
            {ok, L3} = file:open(logfile(Dir, twin), [append, raw, binary]),
            loop({L1, L3}, L2, Run, Batch, Keys, 1)
    end.

open(Dir, T) ->
    File = filename:join(Dir, atom_to_list(T) ++ ".DAT"),
    %% 1 when dets will repair the file: its header says it was not
    %% closed properly (bytes 8-11).
    Repaired = case file:read_file(File) of
                   {ok, <<_:64, 0:32, _/binary>>} -> 1;
                   _ -> 0
               end,
    {ok, T} = dets:open_file(T, [{file, File}, {repair, true}]),
    Repaired.

loop({L1, L3}, L2, Run, Batch, Keys, I) ->
    Ops = [op(Keys, {Run, I, J}) || J <- lists:seq(1, Batch)],
    log(L1, {intent, Ops}),
    log(L3, {intent, Ops}),
    [begin apply_op(batch, Op), apply_op(twin, Op) end || Op <- Ops],
    ok = dets:sync(batch),
    log(L1, {ack, Ops}),
    ok = dets:sync(twin),
    log(L3, {ack, Ops}),
    %% A few single writes per batch, on the other table.
    [begin
         Op = op(Keys, {Run, I, s, J}),
         log(L2, {intent, [Op]}),
         apply_op(single, Op),
         ok = dets:sync(single),
         log(L2, {ack, [Op]})
     end || J <- lists:seq(1, 3)],
    loop({L1, L3}, L2, Run, Batch, Keys, I + 1).

op(Keys, Seq) ->
    K = rand:uniform(Keys),
    case rand:uniform(4) of
        1 -> {K, deleted};
        _ -> {K, Seq}
    end.

apply_op(T, {K, deleted}) -> ok = dets:delete(T, K);
apply_op(T, {K, V}) -> ok = dets:insert(T, {K, V}).

logfile(Dir, T) -> filename:join(Dir, "log_" ++ atom_to_list(T)).

log(F, Term) ->
    B = term_to_binary(Term),
    ok = file:write(F, <<(byte_size(B)):32, B/binary>>).

frames(<<S:32, B:S/binary, R/binary>>) -> [binary_to_term(B) | frames(R)];
frames(_) -> [].

check(Dir, Run, T, Repaired) ->
    Terms = case file:read_file(logfile(Dir, T)) of
                {ok, Bin} -> frames(Bin);
                _ -> []
            end,
    %% Key => {Acked, History of acked values}, and the ops in flight.
    {Acked, Hist, InFlight} =
        lists:foldl(fun({intent, Ops}, {A, H, _}) -> {A, H, Ops};
                       ({ack, Ops}, {A, H, _}) ->
                            lists:foldl(fun({K, V}, {A1, H1, F}) ->
                                                {A1#{K => V}, H1#{K => [V | maps:get(K, H1, [])]}, F}
                                        end, {A, H, []}, Ops)
                    end, {#{}, #{}, []}, Terms),
    Maybe = lists:foldl(fun({K, V}, M) -> M#{K => [V | maps:get(K, M, [])]} end, #{}, InFlight),
    Found = maps:from_list([{K, V} || {K, V} <- dets:match_object(T, '_')]),
    AllKeys = lists:usort(maps:keys(Acked) ++ maps:keys(Found)),
    Bad = [{K, maps:get(K, Acked, deleted), maps:get(K, Found, deleted)}
           || K <- AllKeys,
              not lists:member(maps:get(K, Found, deleted),
                               [maps:get(K, Acked, deleted) | maps:get(K, Maybe, [])])],
    Class = fun({K, Exp, Got}) ->
                    if Got =:= deleted -> lost;
                       Exp =:= deleted -> back;
                       true -> case lists:member(Got, maps:get(K, Hist, [])) of
                                   true -> older;
                                   false -> other
                               end
                    end
            end,
    Cls = [Class(B) || B <- Bad],
    Count = fun(C) -> length([x || X <- Cls, X =:= C]) end,
    Bystanders = length([K || {K, _, _} <- Bad, not maps:is_key(K, Maybe)]),
    R = #{checked => maps:size(Acked), bad => length(Bad), lost => Count(lost),
          older => Count(older), back => Count(back), other => Count(other),
          bystanders => Bystanders, repaired => Repaired, examples => lists:sublist(Bad, 3),
          bad_keys => [K || {K, _, _} <- Bad]},
    {ok, F} = file:open(filename:join(Dir, "results.log"), [append]),
    io:format(F, "~p.~n", [{check, Run, T, R}]),
    ok = file:close(F),
    %% Make the file agree with the log again, so that later checks count
    %% only new losses.
    [case maps:get(K, Acked, deleted) of
         deleted -> ok = dets:delete(T, K);
         V -> ok = dets:insert(T, {K, V})
     end || {K, _, _} <- Bad],
    ok = dets:sync(T),
    %% What the batch in flight left is now the acknowledged state of its
    %% keys (a bad key was put back to its acknowledged value above).
    BadKeys = [K || {K, _, _} <- Bad],
    Left = [{K, maps:get(K, Found, deleted)} || K <- lists:usort(maps:keys(Maybe)),
                                                 not lists:member(K, BadKeys)],
    {ok, L} = file:open(logfile(Dir, T), [append, raw, binary]),
    log(L, {ack, Left}),
    ok = file:close(L).
