%% @doc Where an operation's time goes, across nodes: the calls of given
%% functions, by every process of each node, timed (call tracing with
%% return, system-time stamps: comparable across the VMs of one host to
%% about a millisecond) while the operation runs, then printed as comment
%% lines. Each node must load this module (a peer started with the bench
%% path among its `-pa').
-module(fraghash_bench_trace).

-export([start/2, stop/1, print/4, tracer/2]).

%% @doc Starts timing the calls `MFAs' on each of `Nodes'; returns once
%% every node's tracer runs: its tracers, for {@link stop/1}.
-spec start([node()], [mfa()]) -> [pid()].
start(Nodes, MFAs) ->
    Tracers = [spawn(N, ?MODULE, tracer, [self(), MFAs]) || N <- Nodes],
    [receive {tracing, T} -> ok end || T <- Tracers],
    Tracers.

%% @doc Stops `Tracers': each node's calls, `{Node, [{MFA, StartUs,
%% EndUs}]}' (system time, µs; calls under way are left out), by start.
-spec stop([pid()]) -> [{node(), [{mfa(), integer(), integer()}]}].
stop(Tracers) ->
    [begin T ! {stop, self()}, receive {traced, T, Calls} -> {node(T), Calls} end end
     || T <- Tracers].

%% @doc Prints, one comment line per node (named by `Name(Node)'), each
%% call of at least `MinUs' µs: its function, start in seconds from
%% `Sys0' (system time, µs), and time in seconds.
-spec print([{node(), [{mfa(), integer(), integer()}]}], integer(), non_neg_integer(),
            fun((node()) -> string())) -> ok.
print(Traced, Sys0, MinUs, Name) ->
    [io:format("<!-- traced on ~s (function start-s duration-s): ~s -->~n",
               [Name(N), lists:join(", ", [io_lib:format("~s:~s ~.2f ~.2f",
                                                         [M, F, (S - Sys0) / 1.0e6,
                                                          (E - S) / 1.0e6])
                                           || {{M, F, _}, S, E} <- Calls, E - S >= MinUs])])
     || {N, Calls} <- Traced],
    ok.

%% @doc Run on a node by {@link start/2}: times the calls `MFAs' of every
%% process there, from the moment it tells `Parent' `{tracing, self()}'
%% until `{stop, From}', then sends `From' `{traced, self(), Calls}'.
-spec tracer(pid(), [mfa()]) -> ok.
tracer(Parent, MFAs) ->
    _ = erlang:trace(all, true, [call, timestamp]),
    [_ = erlang:trace_pattern(MFA, [{'_', [], [{return_trace}]}], [local]) || MFA <- MFAs],
    Parent ! {tracing, self()},
    traced(MFAs, #{}, []).

traced(MFAs, Open, Done) ->
    receive
        {trace_ts, Pid, call, {M, F, Args}, Ts} ->
            traced(MFAs, Open#{{Pid, {M, F, length(Args)}} => us(Ts)}, Done);
        {trace_ts, Pid, return_from, MFA, _Result, Ts} ->
            case maps:take({Pid, MFA}, Open) of
                {Start, Open2} -> traced(MFAs, Open2, [{MFA, Start, us(Ts)} | Done]);
                error -> traced(MFAs, Open, Done)
            end;
        {stop, From} ->
            _ = erlang:trace(all, false, [call]),
            [_ = erlang:trace_pattern(MFA, false, [local]) || MFA <- MFAs],
            From ! {traced, self(), lists:keysort(2, Done)},
            ok
    end.

%% A trace timestamp (as erlang:now/0 gives it) in µs.
us({Mega, S, Micro}) -> (Mega * 1000000 + S) * 1000000 + Micro.
