%% @doc Keeps a benchmark's table files in the page cache: a process that
%% reads every `.DAT' file of Mnesia's directory from start to end, again
%% and again, 2 s apart. For a machine that evicts page cache nobody uses
%% much (the benchmarks' VM runs DAMON's `pageout' on file pages seen
%% accessed in at most 1 of its 10 samples per 5 s, for 60 s, up to
%% 128 MB/s; a pass every 15 s was not enough), so that a measurement can
%% tell what the disc costs from what the operation costs. A pass of 1 GB
%% from the cache takes about 0.16 s of one core. It held 1 GB there; at
%% 2 GB pages still went, and its own reads then waited on the disc beside
%% the table's (its binaries also count in the peak RSS). Off unless
%% `FRAGHASH_BENCH_KEEP_CACHED=1'.
-module(fraghash_bench_cache).

-export([start/1, stop/1]).

-define(PAUSE_MS, 2000).
-define(BLOCK, 1048576).

%% @doc Starts keeping the files of Mnesia directory `Dir' cached when
%% `FRAGHASH_BENCH_KEEP_CACHED=1', returning once a first pass ended (the
%% pid), else `off'.
-spec start(string()) -> pid() | off.
start(Dir) ->
    case os:getenv("FRAGHASH_BENCH_KEEP_CACHED") of
        "1" ->
            Parent = self(),
            Pid = spawn_link(fun() -> toucher(Dir, Parent) end),
            receive {cache_warm, Pid, Bytes, Ms} ->
                    io:format("<!-- page cache kept: ~b MB of table files read in ~b ms, "
                              "again every ~b ms -->~n", [Bytes div ?BLOCK, Ms, ?PAUSE_MS])
            end,
            Pid;
        _ ->
            off
    end.

%% @doc Stops it.
-spec stop(pid() | off) -> ok.
stop(off) ->
    ok;
stop(Pid) ->
    unlink(Pid),
    exit(Pid, kill),
    ok.

toucher(Dir, Parent) ->
    T0 = erlang:monotonic_time(millisecond),
    Bytes = pass(Dir),
    Parent ! {cache_warm, self(), Bytes, erlang:monotonic_time(millisecond) - T0},
    loop(Dir).

loop(Dir) ->
    timer:sleep(?PAUSE_MS),
    _ = pass(Dir),
    loop(Dir).

%% Reads each table file once; a file gone or changing meanwhile is
%% read as far as it goes.
pass(Dir) ->
    Files = filelib:wildcard(filename:join(Dir, "*.DAT")),
    lists:sum([read_all(F) || F <- Files]).

read_all(File) ->
    case file:open(File, [read, raw, binary]) of
        {ok, Fd} ->
            try read_blocks(Fd, 0) after file:close(Fd) end;
        {error, _} ->
            0
    end.

read_blocks(Fd, Acc) ->
    case file:read(Fd, ?BLOCK) of
        {ok, Bin} -> read_blocks(Fd, Acc + byte_size(Bin));
        _ -> Acc
    end.
