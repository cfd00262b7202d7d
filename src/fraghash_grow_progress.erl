%% @doc How far a running growth operation got, for those who watch it: the
%% records read from its sources and those copied or deleted, per phase,
%% kept where `fraghash_frag:operations/0' reads them (an ets table owned by
%% the operation's process, gone with it), told to `logger' every 10 s
%% (level `notice') and at each phase (level `info'), and to the progress
%% hook a user installs
%% (`fraghash_frag:set_progress_hook/1') at most once a second and at each
%% phase. So a 30-minute move shows whether it still advances.
%%
%% A report is a map: `table', `op' (`add', `del', `rehash' or `move'), `phase', `node' (the
%% node running it), `started' (its start, `erlang:system_time(millisecond)'),
%% `elapsed_ms', `scanned' (records of its sources read in this phase),
%% `to_scan' (the records its sources held when the phase began), `written'
%% (records copied, or deleted from the sources while cleaning). A move's
%% `copying' counts the records of the fragments it moves as `to_scan' and
%% what their new copies hold so far, counted once a second while Mnesia
%% loads them, as `written'.
-module(fraghash_grow_progress).

-export([start/3, phase/3, chunk/3, stop/1, read/1, set_hook/1]).

-define(LOG_MS, 10000).
-define(HOOK_MS, 1000).

%% @doc Begins the progress of operation `Op' on `Tab', run by this
%% process.
-spec start(atom(), fraghash_grow_machine:op(), integer()) -> ok.
start(Tab, Op, Started) ->
    Name = name(Tab),
    _ = case ets:whereis(Name) of
            undefined -> ets:new(Name, [named_table, protected, set]);
            _ -> ets:delete_all_objects(Name)
        end,
    true = ets:insert(Name, [{op, Op}, {started, Started}, {phase, none}]),
    ok.

%% @doc Enters `Phase', whose sources hold `ToScan' records; the phase
%% before is reported as it ended.
-spec phase(atom(), atom(), non_neg_integer()) -> ok.
phase(Tab, Phase, ToScan) ->
    running(Tab, fun(Name) ->
                         [report(Tab, logger_and_hook) || ets:lookup(Name, phase) =/= [{phase, none}]],
                         Now = erlang:monotonic_time(millisecond),
                         true = ets:insert(Name, [{phase, Phase}, {to_scan, ToScan}, {scanned, 0},
                                                  {written, 0}, {logged, Now}, {hooked, Now}]),
                         report(Tab, logger_and_hook)
                 end).

%% @doc A chunk done: `Scanned' records read, `Written' copied or deleted.
-spec chunk(atom(), non_neg_integer(), non_neg_integer()) -> ok.
chunk(Tab, Scanned, Written) ->
    running(Tab, fun(Name) ->
                         _ = ets:update_counter(Name, scanned, Scanned),
                         _ = ets:update_counter(Name, written, Written),
                         Now = erlang:monotonic_time(millisecond),
                         [report(Tab, logger) || due(Name, logged, ?LOG_MS, Now)],
                         [report(Tab, hook) || due(Name, hooked, ?HOOK_MS, Now)],
                         ok
                 end).

%% @doc Ends the progress of `Tab''s operation.
-spec stop(atom()) -> ok.
stop(Tab) ->
    running(Tab, fun(Name) -> true = ets:delete(Name), ok end).

%% @doc The progress of the operation on `Tab' that this node runs, or
%% `none'.
-spec read(atom()) -> map() | none.
read(Tab) ->
    case ets:whereis(name(Tab)) of
        undefined ->
            none;
        _ ->
            try maps:from_list(ets:tab2list(name(Tab))) of
                #{op := Op, started := Started, phase := Phase} = M ->
                    #{table => Tab, op => Op, phase => Phase, node => node(),
                      started => Started,
                      elapsed_ms => erlang:system_time(millisecond) - Started,
                      scanned => maps:get(scanned, M, 0), to_scan => maps:get(to_scan, M, 0),
                      written => maps:get(written, M, 0)}
            catch
                error:badarg -> none
            end
    end.

%% @doc Installs `Fun(Report)', called with a report (see above) at each
%% phase and at most once a second while one runs; `undefined' removes it.
%% It runs in the operation's process: a slow hook slows the operation, and
%% one that raises is ignored.
-spec set_hook(fun((map()) -> any()) | undefined) -> ok.
set_hook(undefined) ->
    _ = persistent_term:erase({?MODULE, hook}),
    ok;
set_hook(Fun) when is_function(Fun, 1) ->
    persistent_term:put({?MODULE, hook}, Fun).

%%% Internals

name(Tab) ->
    list_to_atom("fraghash_progress_" ++ atom_to_list(Tab)).

%% `F(Name)' on the progress table of `Tab''s operation, if one runs here;
%% else `ok'.
running(Tab, F) ->
    Name = name(Tab),
    case ets:whereis(Name) of
        undefined -> ok;
        _ -> F(Name)
    end.

due(Name, Key, Every, Now) ->
    case ets:lookup(Name, Key) of
        [{Key, Last}] when Now - Last >= Every -> true = ets:insert(Name, {Key, Now});
        _ -> false
    end.

report(Tab, To) ->
    case read(Tab) of
        none ->
            ok;
        R ->
            Level = case To of
                        logger -> notice;
                        _ -> info
                    end,
            [logger:log(Level, "fraghash: ~s of ~s, ~s: ~b of ~b records read, ~b written, "
                        "~.1f s in", [maps:get(op, R), Tab, maps:get(phase, R),
                                      maps:get(scanned, R), maps:get(to_scan, R),
                                      maps:get(written, R), maps:get(elapsed_ms, R) / 1000])
             || To =/= hook],
            case persistent_term:get({?MODULE, hook}, undefined) of
                Hook when To =/= logger, Hook =/= undefined -> _ = catch Hook(R), ok;
                _ -> ok
            end
    end.
