#!/usr/bin/env escript
%%! -sname fhixstart -noshell
%% Start to loaded of a redb_copies table with two indexes, against the
%% same table without indexes: whether Mnesia builds the indexes at start
%% (the release before fraghash_redb_index rebuilt them every time) or not.
%%
%% Usage: index-start.escript fill Dir Records indexed|plain
%%        index-start.escript start Dir Runs
%% with the application's ebin on the code path (ERL_LIBS, or -pa in
%% ERL_FLAGS) and FRAGHASH_NIF_DIR naming the NIF libraries. `fill' makes
%% Dir's database: one table `t' of {t, K, K rem 1000, K rem 100}, with
%% indexes on both attributes (`indexed') or none (`plain'). `start'
%% starts Mnesia on Dir `Runs' times and prints the milliseconds from
%% mnesia:start() to wait_for_tables([t]) returning, their median, and
%% the load average. Run `start' with the ebin of the release measured:
%% both read the same database.
main(["fill", Dir, Records, Kind]) ->
    N = list_to_integer(Records),
    ok = application:set_env(mnesia, dir, Dir),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    {atomic, ok} = fraghash_redb_copies:register(),
    Index = case Kind of "indexed" -> [{index, [a, b]}]; "plain" -> [] end,
    {atomic, ok} = mnesia:create_table(t, [{redb_copies, [node()]}, {attributes, [key, a, b]}
                                           | Index]),
    Writers = 8,
    Self = self(),
    [spawn_link(fun() ->
                        [ok = mnesia:dirty_write({t, K, K rem 1000, K rem 100})
                         || K <- lists:seq(W, N, Writers)],
                        Self ! done
                end) || W <- lists:seq(1, Writers)],
    [receive done -> ok end || _ <- lists:seq(1, Writers)],
    io:format("filled ~ts: ~b records~n", [Dir, mnesia:table_info(t, size)]),
    stopped = mnesia:stop();
main(["start", Dir, Runs]) ->
    ok = application:set_env(mnesia, dir, Dir),
    Ms = [start_ms() || _ <- lists:seq(1, list_to_integer(Runs))],
    io:format("~ts: ~w ms, median ~b ms; load average ~ts",
              [Dir, Ms, lists:nth((length(Ms) + 1) div 2, lists:sort(Ms)),
               os:cmd("cut -d' ' -f1-3 /proc/loadavg")]).

start_ms() ->
    T0 = erlang:monotonic_time(millisecond),
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables([t], infinity),
    Ms = erlang:monotonic_time(millisecond) - T0,
    stopped = mnesia:stop(),
    Ms.
