%% @doc What publishing a state's lookup table costs: `add_frag' through
%% Mnesia with and without many other processes alive.
%%
%% A slots, chash or linear lookup reads the state's table from a
%% persistent term, published by the first lookup of a new state (see
%% `fraghash_mnesia'). Publishing a new term is a copy; erasing the one it
%% retires makes the VM scan every process's heap, so its cost grows with
%% the number of processes. Here each of `Procs' idle processes holds a
%% small heap (a list of 100 integers), and the time of one
%% `mnesia:change_table_frag(Tab, {add_frag, [node()]})' (which moves
%% records, so it looks keys up in the new state and publishes it) is
%% taken for each module, with 0 and with `Procs' processes.
-module(fraghash_bench_publish).

-export([run/3]).

%% @doc One line per module: median `add_frag' time over `Adds' adds on a
%% table of `Frags' fragments holding `Records' records, without and with
%% 10,000 idle processes, and the median time of the publish alone (the
%% first lookup of the new state) with them.
-spec run([module()], pos_integer(), pos_integer()) -> ok.
run(Mods, Frags, Records) ->
    Procs = 10000,
    Adds = 5,
    io:format("| hash module | add_frag, no other processes (ms) "
              "| add_frag, ~b processes (ms) | publish alone, ~b processes (ms) |~n"
              "|---|---|---|---|~n", [Procs, Procs]),
    lists:foreach(
      fun(Mod) ->
              Quiet = median(add_frags(Mod, Frags, Records, Adds, 0)),
              Pids = spawn_idle(Procs),
              Busy = median(add_frags(Mod, Frags, Records, Adds, 1)),
              Pub = case publishes(Mod, Frags, Adds) of
                        [] -> "-";
                        Us -> io_lib:format("~.1f", [median(Us) / 1000])
                    end,
              [exit(P, kill) || P <- Pids],
              io:format("| `~s` | ~.1f | ~.1f | ~s |~n",
                        [Mod, Quiet / 1000, Busy / 1000, Pub])
      end, Mods).

%% Microseconds of each of `Adds' add_frags on a new table.
add_frags(Mod, Frags, Records, Adds, Run) ->
    Tab = list_to_atom(lists:flatten(io_lib:format("pub_~s_~b", [Mod, Run]))),
    {atomic, ok} = mnesia:create_table(Tab, [{attributes, [k, v]},
                                             {frag_properties,
                                              [{n_fragments, Frags},
                                               {hash_module, Mod},
                                               {node_pool, [node()]}]}]),
    ok = mnesia:activity(async_dirty,
                         fun() -> [mnesia:write({Tab, I, I}) || I <- lists:seq(1, Records)],
                                  ok
                         end, [], mnesia_frag),
    %% The first lookups published the current state: each add below makes
    %% and publishes a new one.
    [element(1, timer:tc(fun() ->
                                 {atomic, ok} = mnesia:change_table_frag(Tab, {add_frag, [node()]})
                         end)) || _ <- lists:seq(1, Adds)].

%% Microseconds of the first lookup of each of `Adds' new states of a
%% detached hash state (no table): the publish alone; none for a module
%% that publishes nothing.
publishes(mnesia_frag_hash, _Frags, _Adds) -> [];
publishes(mnesia_frag_jump, _Frags, _Adds) -> [];
publishes(Mod, Frags, Adds) ->
    S0 = fraghash_bench:grow(Mod, Mod:init_state(pub_detached, undefined), Frags - 1),
    {_, Us} = lists:foldl(
                fun(_, {S, Acc}) ->
                        {S2, _, _} = Mod:add_frag(S),
                        %% Built in the NIF first, so that the time is the
                        %% lookup table and its publishing.
                        _ = fraghash_mnesia:info(S2),
                        {T, _} = timer:tc(fun() -> Mod:key_to_frag_number(S2, k) end),
                        {S2, [T | Acc]}
                end, {S0, []}, lists:seq(1, Adds)),
    Us.


spawn_idle(N) ->
    [spawn(fun() -> L = lists:seq(1, 100), receive stop -> L end end)
     || _ <- lists:seq(1, N)].

median(L) -> lists:nth((length(L) + 1) div 2, lists:sort(L)).
