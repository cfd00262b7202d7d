#!/usr/bin/env escript
%% -*- erlang -*-
%%! -noshell
%%
%% Standalone reproduction: mnesia:change_table_frag/2 on a fragmented
%% disc_copies table loses records on disc, leaves stale copies and brings
%% deleted keys back after a restart. Plain OTP only: the default hash module
%% mnesia_frag_hash, one node (nonode@nohost), a disc schema.
%%
%% Run (15 to 45 s on 2 shared cores; report: repro/mnesia-frag-disc-bug.md):
%%
%%     escript repro/mnesia_frag_disc_loss.escript
%%
%% Each run starts from a fresh scratch directory under $TMPDIR (or /tmp),
%% removed at the end unless MNESIA_REPRO_KEEP=1. Every run creates a
%% disc_copies table of 4 fragments, writes N records ({repro, K, {value, K}},
%% K = 1..N, 100 per transaction), calls mnesia:dump_log() (the records reach
%% the fragments' .DCL files, as after any automatic dump), then:
%%
%%   del_frag       one change_table_frag(T, del_frag)                (4 -> 3)
%%   grow_shrink    4 x {add_frag, [node()]}, then 2 x del_frag  (4 -> 8 -> 6)
%%   add_frag       one {add_frag, [node()]}                          (4 -> 5)
%%   add_frag_dump  one {add_frag, [node()]}, then mnesia:dump_log()  (4 -> 5)
%%
%% After every add_frag, 10 of the keys that add moved are deleted (one
%% transaction each). Then one of three restarts:
%%
%%   stop_start   mnesia:stop(), mnesia:start() in the same VM;
%%   new_vm       mnesia:stop(), then a new VM (this script run again with
%%                the phase argument `check') starts Mnesia and checks;
%%   kill9        the steps run in a child VM, which calls mnesia:sync_log()
%%                and then kills itself with kill -9; a new VM checks.
%%
%% The table is checked in RAM right after the steps and again after the
%% restart. Figures, expected against found:
%%   read   live records readable: the key is in the fragment that
%%          mnesia_frag_hash names for it (what mnesia:read/1 finds);
%%   rows   rows in all fragment tables together (what mnesia:all_keys/1,
%%          select and table_info size count through mnesia_frag);
%%   stale  rows in a fragment other than the one the hash module names;
%%   back   deleted keys present again in some fragment;
%%   bread  deleted keys readable again through the hash module.
%%
%% Control: MNESIA_REPRO_DC_DUMP_LIMIT=1.0e-9 sets Mnesia's dc_dump_limit in
%% every VM of the run. With it, mnesia_dumper never takes the branch that
%% snapshots a table's RAM into its .DCD while it applies the record moves,
%% and every run comes back exact: this isolates the cause.
%%
%% Candidate fix: `sh repro/try_dumper_patch.sh' runs this script with
%% mnesia_dumper patched by mnesia_dumper_rec_ops.patch (same directory).
%% The line "mnesia_dumper: <path>" in the output says which module ran.
%%
%% Exit codes:
%%   0  not reproduced: every run found what it expected (the last line says
%%      "NOT REPRODUCED"); a Mnesia without the fault, or the control above;
%%   1  reproduced: at least one run found records missing, stale rows or
%%      deleted keys back (the last line says "REPRODUCED");
%%   2  the reproduction itself failed (bad arguments, Mnesia refused a
%%      step, a child VM failed or timed out); nothing is concluded.
%%
%% Internal phases, used by the script on itself: `steps' and `check'.
-mode(compile).

-define(TAB, repro).
-define(FRAGS, 4).
-define(DELETED_PER_ADD, 10).
-define(BATCH, 100).
-define(CHILD_TIMEOUT_MS, 60000).

main(Args) ->
    %% Mnesia's "application exited: stopped" reports would drown the table.
    ok = logger:set_primary_config(level, warning),
    phase(Args).

phase([]) ->
    run_all();
phase(["steps", Scenario, N, Dir]) ->
    child(fun() -> child_steps(list_to_atom(Scenario), list_to_integer(N), Dir) end);
phase(["check", Dir]) ->
    child(fun() -> child_check(Dir) end);
phase(Args) ->
    io:format(standard_error, "usage: escript ~s   (takes no arguments; got ~p)~n",
              [escript:script_name(), Args]),
    halt(2).

%%% ------------------------------------------------------------------
%%% Driver

runs() ->
    [{S, N, R} || {S, N} <- [{del_frag, 1000}, {grow_shrink, 1000},
                             {add_frag, 1000}, {add_frag_dump, 1000},
                             {del_frag, 10000}, {grow_shrink, 10000}],
                  R <- [stop_start, new_vm, kill9]].

run_all() ->
    Start = erlang:monotonic_time(millisecond),
    Root = scratch_root(),
    io:format("~s~n", [versions()]),
    io:format("table: disc_copies, ~b fragments at start, hash module mnesia_frag_hash, "
              "one node, disc schema, dc_dump_limit ~s~n",
              [?FRAGS, case dc_dump_limit() of
                           default -> "4 (default)";
                           L -> io_lib:format("~p (control)", [L])
                       end]),
    {module, mnesia_dumper} = code:ensure_loaded(mnesia_dumper),
    io:format("mnesia_dumper: ~s~n", [code:which(mnesia_dumper)]),
    io:format("scratch: ~s~n", [Root]),
    io:format("figures: read/rows/stale/back/bread (see the header of ~s)~n~n",
              [filename:basename(escript:script_name())]),
    io:format("~-13s ~5s ~-10s | ~-24s | ~-24s | ~-24s~n",
              ["scenario", "n", "restart", "expected", "before restart (RAM)",
               "after restart (disc)"]),
    Results = try
                  [run_one(Root, I, Run) || {I, Run} <- enumerate(runs())]
              catch Class:Reason:Stack ->
                      _ = mnesia:stop(),
                      io:format("~nFAILED: the reproduction could not run "
                                "(scratch kept: ~s):~n~p:~p~n~p~n",
                                [Root, Class, Reason, Stack]),
                      halt(2)
              end,
    case os:getenv("MNESIA_REPRO_KEEP") of
        "1" -> ok;
        _ -> ok = file:del_dir_r(Root)
    end,
    Bad = [R || R = {_, false} <- Results],
    Ms = erlang:monotonic_time(millisecond) - Start,
    io:format("~n~b of ~b runs differ from what they expect (~.1f s)~n",
              [length(Bad), length(Results), Ms / 1000]),
    case Bad of
        [] ->
            io:format("NOT REPRODUCED: every run found every record, no stale "
                      "row and no deleted key back.~n"),
            halt(0);
        _ ->
            io:format("REPRODUCED: after change_table_frag and a restart, records "
                      "are missing, stale rows remain or deleted keys are back.~n"),
            halt(1)
    end.

run_one(Root, I, {Scenario, N, Restart} = Run) ->
    Dir = filename:join(Root, lists:flatten(io_lib:format("~2..0b_~s_~b_~s",
                                                          [I, Scenario, N, Restart]))),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    {Exp, Before} =
        case Restart of
            kill9 ->
                child_vm(["steps", atom_to_list(Scenario), integer_to_list(N), Dir]),
                read_term(Dir, "steps.term");
            _ ->
                start_mnesia(Dir, new),
                E = steps(Scenario, N),
                {E, check(E)}
        end,
    After =
        case Restart of
            stop_start ->
                stopped = mnesia:stop(),
                start_mnesia(Dir, existing),
                A = check(Exp),
                stopped = mnesia:stop(),
                A;
            new_vm ->
                stopped = mnesia:stop(),
                child_vm(["check", Dir]),
                read_term(Dir, "check.term");
            kill9 ->
                child_vm(["check", Dir]),
                read_term(Dir, "check.term")
        end,
    Want = expected(Exp),
    Ok = After =:= Want andalso Before =:= Want,
    io:format("~-13s ~5b ~-10s | ~-24s | ~-24s | ~-24s~s~n",
              [Scenario, N, Restart, fig(Want), fig(Before), fig(After),
               case Ok of true -> ""; false -> " <- differs" end]),
    {Run, Ok}.

expected(#{n := N, deleted := Deleted}) ->
    Live = N - length(Deleted),
    #{read => Live, rows => Live, stale => 0, back => 0, bread => 0}.

fig(#{read := R, rows := W, stale := S, back := B, bread := BR}) ->
    lists:flatten(io_lib:format("~b/~b/~b/~b/~b", [R, W, S, B, BR])).

%%% ------------------------------------------------------------------
%%% Child VM (this script run again with a phase argument)

child(Fun) ->
    try
        Fun(),
        halt(0)
    catch Class:Reason:Stack ->
            io:format("child failed: ~p:~p~n~p~n", [Class, Reason, Stack]),
            halt(2)
    end.

child_steps(Scenario, N, Dir) ->
    start_mnesia(Dir, new),
    Exp = steps(Scenario, N),
    ok = write_term(Dir, "steps.term", {Exp, check(Exp)}),
    %% Mnesia's own durability line for disc_copies: what returned before a
    %% sync_log() that returned is on disc. Then die without any shutdown.
    ok = mnesia:sync_log(),
    _ = os:cmd("kill -9 " ++ os:getpid()),
    timer:sleep(infinity).

child_check(Dir) ->
    Exp = read_term(Dir, "exp.term"),
    start_mnesia(Dir, existing),
    ok = write_term(Dir, "check.term", check(Exp)),
    stopped = mnesia:stop().

%% Runs this script in a new VM and waits for it. The `steps' phase ends
%% with kill -9, so its expected exit status is 128 + 9.
child_vm(Args) ->
    Escript = os:find_executable("escript"),
    Port = open_port({spawn_executable, Escript},
                     [{args, [escript:script_name() | Args]}, exit_status,
                      stderr_to_stdout, binary]),
    {Status, Out} = collect(Port, []),
    Expected = case hd(Args) of "steps" -> 128 + 9; _ -> 0 end,
    case Status of
        Expected -> ok;
        _ -> error({child_vm_failed, Args, {exit_status, Status}, Out})
    end.

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, [D | Acc]);
        {Port, {exit_status, S}} -> {S, iolist_to_binary(lists:reverse(Acc))}
    after ?CHILD_TIMEOUT_MS ->
            error({child_vm_timeout, iolist_to_binary(lists:reverse(Acc))})
    end.

%%% ------------------------------------------------------------------
%%% Mnesia

start_mnesia(Dir, Kind) ->
    ok = application:set_env(mnesia, dir, Dir),
    case dc_dump_limit() of
        default -> ok;
        Limit -> ok = application:set_env(mnesia, dc_dump_limit, Limit)
    end,
    case Kind of
        new -> ok = mnesia:create_schema([node()]);
        existing -> ok
    end,
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables(mnesia:system_info(local_tables), 30000).

dc_dump_limit() ->
    case os:getenv("MNESIA_REPRO_DC_DUMP_LIMIT") of
        false -> default;
        "" -> default;
        S ->
            try list_to_float(S)
            catch error:badarg -> list_to_integer(S)
            end
    end.

ops(del_frag) -> [del];
ops(grow_shrink) -> [add, add, add, add, del, del];
ops(add_frag) -> [add];
ops(add_frag_dump) -> [add, dump].

%% The scenario's steps; returns what a correct Mnesia must show afterwards.
steps(Scenario, N) ->
    {atomic, ok} =
        mnesia:create_table(?TAB, [{attributes, [key, val]},
                                   {frag_properties, [{n_fragments, ?FRAGS},
                                                      {n_disc_copies, 1}]}]),
    write_records(N),
    %% The records reach the fragments' .DCL files, as they would after any
    %% automatic log dump (every 1,000 commits or 3 minutes by default).
    dumped = mnesia:dump_log(),
    Deleted = lists:append([op(Op, N) || Op <- ops(Scenario)]),
    Exp = #{n => N, deleted => Deleted},
    ok = write_term(mnesia:system_info(directory), "exp.term", Exp),
    Exp.

%% One step; returns the keys it deleted.
op(del, _N) ->
    ok = change_frag(del_frag),
    [];
op(dump, _N) ->
    dumped = mnesia:dump_log(),
    [];
op(add, N) ->
    Before = key_frags(N),
    ok = change_frag({add_frag, [node()]}),
    Moved = [K || {{K, Old}, {K, New}} <- lists:zip(Before, key_frags(N)), New =/= Old],
    Del = lists:sublist(Moved, ?DELETED_PER_ADD),
    [ok = frag_activity(transaction, fun() -> mnesia:delete({?TAB, K}) end) || K <- Del],
    Del.

write_records(N) ->
    lists:foreach(
      fun(Batch) ->
              frag_activity(transaction,
                            fun() -> [ok = mnesia:write({?TAB, K, {value, K}}) || K <- Batch] end)
      end, chunks(lists:seq(1, N), ?BATCH)).

change_frag(Change) ->
    case mnesia:change_table_frag(?TAB, Change) of
        {atomic, ok} -> ok;
        Other -> error({change_table_frag, Change, Other})
    end.

frag_activity(Kind, Fun) ->
    mnesia:activity(Kind, Fun, [], mnesia_frag).

hash_state() ->
    Props = mnesia:table_info(?TAB, frag_properties),
    mnesia_frag_hash = proplists:get_value(hash_module, Props),
    proplists:get_value(hash_state, Props).

key_frags(N) ->
    S = hash_state(),
    [{K, mnesia_frag_hash:key_to_frag_number(S, K)} || K <- lists:seq(1, N)].

%% What the table holds now, read fragment table by fragment table.
check(#{n := N, deleted := Deleted}) ->
    S = hash_state(),
    Home = fun(K) -> mnesia_frag_hash:key_to_frag_number(S, K) end,
    Frags = frag_activity(async_dirty, fun() -> mnesia:table_info(?TAB, frag_names) end),
    %% Key -> numbers of the fragments that hold a row with that key.
    Where = lists:foldl(
              fun({I, F}, Acc) ->
                      lists:foldl(fun(K, A) -> maps:update_with(K, fun(L) -> [I | L] end, [I], A) end,
                                  Acc, mnesia:dirty_all_keys(F))
              end, #{}, enumerate(Frags)),
    Readable = fun(K) -> lists:member(Home(K), maps:get(K, Where, [])) end,
    Live = lists:seq(1, N) -- Deleted,
    #{read => length(lists:filter(Readable, Live)),
      rows => lists:sum([length(L) || L <- maps:values(Where)]),
      stale => lists:sum([length([I || I <- L, I =/= Home(K)]) || {K, L} <- maps:to_list(Where)]),
      back => length([K || K <- Deleted, maps:is_key(K, Where)]),
      bread => length(lists:filter(Readable, Deleted))}.

%%% ------------------------------------------------------------------
%%% Helpers

versions() ->
    ok = application:load(mnesia),
    {ok, Mnesia} = application:get_key(mnesia, vsn),
    OtpVersionFile = filename:join([code:root_dir(), "releases",
                                    erlang:system_info(otp_release), "OTP_VERSION"]),
    Otp = case file:read_file(OtpVersionFile) of
              {ok, B} -> string:trim(binary_to_list(B));
              _ -> erlang:system_info(otp_release)
          end,
    lists:flatten(io_lib:format("OTP ~s, erts ~s, Mnesia ~s, ~s",
                                [Otp, erlang:system_info(version), Mnesia,
                                 erlang:system_info(system_architecture)])).

scratch_root() ->
    Tmp = case os:getenv("TMPDIR") of
              false -> "/tmp";
              "" -> "/tmp";
              T -> T
          end,
    Root = filename:join(Tmp, "mnesia_frag_disc_loss." ++ os:getpid()),
    ok = filelib:ensure_dir(filename:join(Root, "x")),
    Root.

write_term(Dir, Name, Term) ->
    file:write_file(filename:join(Dir, Name), io_lib:format("~p.~n", [Term])).

read_term(Dir, Name) ->
    {ok, [T]} = file:consult(filename:join(Dir, Name)),
    T.

chunks([], _) -> [];
chunks(L, Size) when length(L) =< Size -> [L];
chunks(L, Size) ->
    {H, T} = lists:split(Size, L),
    [H | chunks(T, Size)].

enumerate(L) ->
    lists:zip(lists:seq(1, length(L)), L).
