%% @doc Where a long write waited: while a writer's write has run for
%% `MinMs' or more, a sampler looks every 5 ms at where the writer is (its
%% top stack frames) and at which processes of the node are busy (running,
%% runnable, collecting garbage, or with a message queue) and which of the
%% VM's threads wait in the kernel (state D: their thread name and top
%% kernel frames, from /proc/self/task, readable as root); it also takes
%% the VM's long garbage collections and long schedules
%% (`erlang:system_monitor/2'). Each long write is printed as a comment
%% line: when it began, how long the sampler saw it, and the counts of
%% both per sample. Off unless `FRAGHASH_BENCH_STALLS' names `MinMs'; it
%% costs nothing then, and little otherwise until a write grows long.
%%
%% A writer tells the sampler when its write began by calling
%% {@link began/1} before it and {@link ended/0} after it (its process
%% dictionary, read by the sampler).
-module(fraghash_bench_stalls).

-export([start/1, stop/2, began/1, ended/0]).

-define(KEY, fraghash_bench_write_began).
-define(PERIOD_MS, 5).
-define(FRAMES, 3).

%% @doc Starts watching `Writers' when `FRAGHASH_BENCH_STALLS' is set:
%% the sampler, or `off'.
-spec start([pid()]) -> pid() | off.
start(Writers) ->
    case os:getenv("FRAGHASH_BENCH_STALLS") of
        false ->
            off;
        Ms ->
            MinUs = list_to_integer(Ms) * 1000,
            Parent = self(),
            Pid = spawn(fun() ->
                                _ = erlang:system_monitor(self(), [{long_gc, 20},
                                                                   {long_schedule, 20}]),
                                Parent ! {stalls_started, self()},
                                sample(Writers, MinUs, #{}, [], [])
                        end),
            receive {stalls_started, Pid} -> Pid end
    end.

%% @doc Stops the sampler and prints each long write it saw, its start in
%% seconds from `T0Us' (`erlang:monotonic_time(microsecond)').
-spec stop(pid() | off, integer()) -> ok.
stop(off, _T0Us) ->
    ok;
stop(Pid, T0Us) ->
    Pid ! {stop, self()},
    receive
        {stalls, Pid, Stalls, Monitor} ->
            [print(S, T0Us) || S <- lists:keysort(2, Stalls)],
            [io:format("<!-- system monitor: ~s of ~s at ~.2f s: ~0tp -->~n",
                       [What, Who, (At - T0Us) / 1.0e6, Info])
             || {At, What, Who, Info} <- lists:reverse(Monitor)],
            ok
    end.

%% @doc Called by a writer as its write begins.
-spec began(integer()) -> ok.
began(Us) ->
    put(?KEY, Us),
    ok.

%% @doc Called by a writer as its write ends.
-spec ended() -> ok.
ended() ->
    erase(?KEY),
    ok.

%%% The sampler

%% `Open': per writer, the long write it is in: `{BeganUs, Samples,
%% WriterFrames, Busy}' (counts). `Done': the long writes ended.
sample(Writers, MinUs, Open, Done, Monitor) ->
    receive
        {monitor, Pid, What, Info} ->
            sample(Writers, MinUs, Open, Done,
                   [{now_us(), What, name(Pid, names(), "", 0), brief(Info)} | Monitor]);
        {stop, From} ->
            _ = erlang:system_monitor(undefined),
            From ! {stalls, self(), Done ++ maps:values(Open), Monitor},
            ok
    after ?PERIOD_MS ->
            Now = now_us(),
            Long = [{W, B} || W <- Writers, B <- [began_at(W)], is_integer(B),
                              Now - B >= MinUs],
            %% Named again at each busy sample: tables and logs opened
            %% since (a new fragment, a scratch table) get their names.
            Busy = case Long of
                       [] -> [];
                       _ -> busy(names()) ++ kernel_waits()
                   end,
            Open2 = maps:from_list(
                      [{W, add(maps:get(W, Open, {W, B, 0, #{}, #{}}), B, frames(W), Busy)}
                       || {W, B} <- Long]),
            Ended = [S || {W, {_, B, _, _, _} = S} <- maps:to_list(Open),
                          not (maps:is_key(W, Open2)
                               andalso element(2, maps:get(W, Open2)) =:= B)],
            sample(Writers, MinUs, Open2, Ended ++ Done, Monitor)
    end.

%% A new sample of a long write; one that began later is a new write.
add({W, B, N, Frames, Busy}, B, Frame, BusyNow) ->
    {W, B, N + 1, count([Frame], Frames), count(BusyNow, Busy)};
add({W, _OldB, _, _, _}, B, Frame, BusyNow) ->
    add({W, B, 0, #{}, #{}}, B, Frame, BusyNow).

count(Items, Counts) ->
    lists:foldl(fun(I, C) -> maps:update_with(I, fun(X) -> X + 1 end, 1, C) end, Counts, Items).

began_at(W) ->
    case process_info(W, dictionary) of
        {dictionary, D} -> proplists:get_value(?KEY, D);
        undefined -> undefined
    end.

%% Where writer `W' is: its top frames, `module:function'.
frames(W) ->
    case process_info(W, current_stacktrace) of
        {current_stacktrace, Stack} ->
            lists:flatten(lists:join(" < ", [io_lib:format("~s:~s", [M, F])
                                             || {M, F, _, _} <- lists:sublist(Stack, ?FRAMES)]));
        undefined ->
            "gone"
    end.

%% The node's busy processes, named.
busy(Names) ->
    [name(P, Names, Status, Q)
     || P <- processes(), P =/= self(),
        [{status, Status}, {message_queue_len, Q}] <- [info(P)],
        Status =/= waiting orelse Q > 0].

info(P) ->
    case process_info(P, [status, message_queue_len]) of
        undefined -> none;
        I -> I
    end.

name(P, _Names, _Status, _Q) when is_port(P) ->
    lists:flatten(io_lib:format("port ~0tp", [erlang:port_info(P, name)]));
name(P, Names, Status, Q) ->
    Name = case maps:find(P, Names) of
               {ok, N} -> N;
               error ->
                   case process_info(P, [registered_name, current_function]) of
                       [{registered_name, R}, _] when is_atom(R) -> R;
                       [_, {current_function, {M, F, _}}] -> io_lib:format("(~s:~s)", [M, F]);
                       _ -> gone
                   end
           end,
    Queue = if Q >= 100 -> " q>=100"; Q > 0 -> " q"; true -> "" end,
    lists:flatten(io_lib:format("~s ~s~s", [Name, Status, Queue])).

%% The VM's threads in uninterruptible sleep: `thread Name D: frames'.
kernel_waits() ->
    case file:list_dir("/proc/self/task") of
        {ok, Tids} -> lists:append([kernel_wait(T) || T <- Tids]);
        {error, _} -> []
    end.

kernel_wait(Tid) ->
    Dir = ["/proc/self/task/", Tid, "/"],
    case file:read_file([Dir, "stat"]) of
        {ok, Stat} ->
            %% "tid (name) state ...": the name may hold spaces.
            [Pre, Post] = string:split(Stat, ")", trailing),
            [_, Name] = string:split(Pre, "("),
            case string:trim(Post, leading) of
                <<"D", _/binary>> -> [lists:flatten(io_lib:format("thread ~s D: ~s",
                                                                   [Name, kernel_frames(Dir)]))];
                _ -> []
            end;
        {error, _} ->
            []
    end.

kernel_frames(Dir) ->
    case file:read_file([Dir, "stack"]) of
        {ok, Stack} ->
            %% Past the scheduler's own frames, to what it waits for.
            Frames = [F || L <- string:split(Stack, "\n", all), L =/= <<>>,
                           F <- [hd(string:split(lists:last(string:split(L, " ")), "+"))],
                           string:find(F, "schedule") =:= nomatch],
            lists:join("<", [binary_to_list(F) || F <- lists:sublist(Frames, 5)]);
        {error, _} ->
            "?"
    end.

%% Names for the processes that serve dets tables and disk logs (Mnesia's
%% own, the growth path's list of moved records). A dets server's pid is
%% read from dets's registry, not asked of the server, which may be the
%% one holding the writers.
names() ->
    Dets = [{Pid, io_lib:format("dets ~s", [T])}
            || T <- dets:all(), Pid <- [catch dets_server:get_pid(T)], is_pid(Pid)],
    Logs = try ets:tab2list(disk_log_names) of
               L -> [{Pid, io_lib:format("disk_log ~0tp", [N])} || {N, Pid} <- L, is_pid(Pid)]
           catch
               error:badarg -> []
           end,
    maps:from_list([{P, lists:flatten(N)} || {P, N} <- Dets ++ Logs]).

brief(Info) when is_list(Info) ->
    [I || {K, _} = I <- Info, lists:member(K, [timeout, heap_size, old_heap_size])];
brief(Info) ->
    Info.

print({W, Began, Samples, Frames, Busy}, T0Us) ->
    Top = fun(Counts) ->
                  lists:join(", ", [io_lib:format("~s x~b", [K, C])
                                    || {K, C} <- lists:sublist(
                                                   lists:reverse(lists:keysort(2, maps:to_list(Counts))),
                                                   8)])
          end,
    io:format("<!-- long write by ~p began at ~.2f s, sampled ~b times (~b ms apart): "
              "writer at: ~s; busy: ~s -->~n",
              [W, (Began - T0Us) / 1.0e6, Samples, ?PERIOD_MS, Top(Frames), Top(Busy)]).

now_us() ->
    erlang:monotonic_time(microsecond).
