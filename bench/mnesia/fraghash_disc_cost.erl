%% @doc What the crash-safe path costs: growing a 1,000,000-record
%% `disc_copies' (or `disc_only_copies') table of 50 fragments by one
%% fragment with plain
%% `mnesia:change_table_frag/2' (unsafe on disc: the reference) and with
%% `fraghash_frag:add_frag/2', per hash module, in one run. Run by
%% `bench/mnesia/disc-measure.sh cost'.
%%
%% Per module one table is loaded once; then, `Reps' times: a plain add
%% (timed), a plain del back (not timed), a safe add (timed), a safe del
%% back (not timed), so both adds split the same table; odd repetitions
%% run the plain path first, even ones the safe path; the log is dumped
%% before each timed add. Printed per add:
%% wall time, records scanned (the records of the fragments the hash
%% module's `add_frag' names, which Mnesia reads) and records moved (the new
%% fragment's size). Plain calls on fraghash modules are let through with
%% `{fraghash, allow_unsafe_change_table_frag, true}'.
-module(fraghash_disc_cost).

-export([run/3, run/4]).

%% @doc {@link run/4} on `disc_copies'.
-spec run(string(), pos_integer(), pos_integer()) -> ok.
run(Dir, Records, Reps) ->
    run(Dir, Records, Reps, disc_copies).

%% @doc `Dir': empty scratch directory; `Records' (1,000,000 for the
%% figures in the docs); `Reps' repetitions per module; `Storage'
%% `disc_copies' or `disc_only_copies' (where the safe path also
%% snapshots the fragments an add rewrites).
-spec run(string(), pos_integer(), pos_integer(), disc_copies | disc_only_copies) -> ok.
run(Dir, Records, Reps, Storage) ->
    ok = application:set_env(mnesia, dir, Dir),
    ok = application:set_env(fraghash, allow_unsafe_change_table_frag, true),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    ok = fraghash_journal:ensure(),
    io:format("module             path   rep  wall_ms  scanned  moved~n"),
    io:format("~s, ~b records~n", [Storage, Records]),
    [module(Mod, Records, Reps, Storage) || Mod <- [mnesia_frag_hash, mnesia_frag_slots,
                                                    mnesia_frag_chash]],
    stopped = mnesia:stop(),
    ok.

module(Mod, Records, Reps, Storage) ->
    Copies = case Storage of
                 disc_copies -> n_disc_copies;
                 disc_only_copies -> n_disc_only_copies
             end,
    Tab = list_to_atom("cost_" ++ atom_to_list(Mod)),
    {atomic, ok} =
        mnesia:create_table(Tab, [{attributes, [key, val]},
                                  {frag_properties,
                                   [{n_fragments, 50}, {hash_module, Mod},
                                    {node_pool, [node()]}, {Copies, 1}]}]),
    load(Tab, 1, Records),
    ok = mnesia:sync_log(),
    Plain = fun(Rep) ->
                    timed(Tab, Mod, plain, Rep,
                          fun() -> mnesia:change_table_frag(Tab, {add_frag, [node()]}) end),
                    {atomic, ok} = mnesia:change_table_frag(Tab, del_frag)
            end,
    Safe = fun(Rep) ->
                   timed(Tab, Mod, safe, Rep, fun() -> fraghash_frag:add_frag(Tab, [node()]) end),
                   {atomic, ok} = fraghash_frag:del_frag(Tab)
           end,
    %% Alternate which path goes first, so neither always meets a fuller
    %% log or a colder cache.
    lists:foreach(
      fun(Rep) when Rep rem 2 =:= 1 -> Plain(Rep), Safe(Rep);
         (Rep) -> Safe(Rep), Plain(Rep)
      end, lists:seq(1, Reps)),
    {atomic, ok} = mnesia:delete_table(Tab),
    ok.

load(_Tab, From, To) when From > To ->
    ok;
load(Tab, From, To) ->
    Last = min(To, From + 9999),
    mnesia:activity(async_dirty,
                    fun() -> [mnesia:write({Tab, K, K}) || K <- lists:seq(From, Last)], ok end,
                    [], mnesia_frag),
    load(Tab, Last + 1, To).

timed(Tab, Mod, Path, Rep, Add) ->
    {M, S, N} = fraghash_frag:hash(Tab),
    {_, Iter, _} = M:add_frag(S),
    Scanned = lists:sum([mnesia:table_info(fraghash_frag:frag_name(Tab, F), size)
                         || F <- Iter]),
    %% Both paths start from an empty transaction log.
    ok = mnesia:sync_log(),
    {atomic, ok} = mnesia:dump_log() =:= dumped andalso {atomic, ok},
    T0 = erlang:monotonic_time(microsecond),
    {atomic, ok} = Add(),
    Ms = (erlang:monotonic_time(microsecond) - T0) div 1000,
    Moved = mnesia:table_info(fraghash_frag:frag_name(Tab, N + 1), size),
    io:format("~-18s ~-6s ~3b ~8b ~8b ~6b~n", [Mod, Path, Rep, Ms, Scanned, Moved]).
