%% @doc What the torture of two or three nodes (`fraghash_torture2_tests')
%% prints at its end, how it tells where the nodes disagree, and where in
%% an operation each kill landed.
-module(fraghash_torture2_report).

-export([report/4, differences/1, classify/2, last_step/1, note/3]).

-define(NODE, fraghash_torture2_node).

%% @doc Prints the faults (where they landed, which nodes) and, per table,
%% the checks' sums and the keys behind any loss.
report(Kills, Checks, Secs, Excluded) ->
    Count = fun(F) -> length([K || K <- Kills, F(K)]) end,
    Steps = lists:foldl(fun(#{where := {step, _, _, S}}, Acc) ->
                                maps:update_with(S, fun(C) -> C + 1 end, 1, Acc);
                           (_, Acc) -> Acc
                        end, #{}, Kills),
    Victim = fun(#{kind := partition, kept := K}) ->
                     io_lib:format("partition, ~s kept", [lists:join("+", [atom_to_list(X) || X <- K])]);
                 (#{victims := [_, _ | _] = Vs}) -> lists:join("+", [atom_to_list(V) || V <- Vs]);
                 (#{victims := [V], controller := V}) -> io_lib:format("~s (the controller's)", [V]);
                 (#{victims := [V], controller := none}) -> io_lib:format("~s (in recovery)", [V]);
                 (#{victims := [V]}) -> io_lib:format("~s (not the controller's)", [V])
             end,
    ByVictim = lists:foldl(fun(K, Acc) ->
                                   maps:update_with(lists:flatten(Victim(K)), fun(C) -> C + 1 end, 1, Acc)
                           end, #{}, Kills),
    Parts = [K || #{kind := partition} = K <- Kills],
    io:format(user, "~ntorture~b: ~b faults (~b kills, ~b partitions) in ~b s: ~b inside an "
              "operation (~s), ~b right after one returned, ~b during recovery (~b with an "
              "operation to recover), ~b outside; victims: ~s~n",
              [?NODE:nodes_count(), length(Kills), length(Kills) - length(Parts), length(Parts), Secs, lists:sum(maps:values(Steps)), fmt_counts(Steps),
               Count(fun(#{where := W}) -> is_tuple(W) andalso element(1, W) =:= leave end),
               Count(fun(#{where := W}) -> is_tuple(W) andalso element(1, W) =:= recovery end),
               Count(fun(#{where := {recovery, P, _}}) -> P; (_) -> false end),
               Count(fun(#{where := W}) -> W =:= outside end), fmt_counts(ByVictim)]),
    io:format(user, "partitions: ~b (Mnesia split on both sides in ~b), inside an operation ~b, "
              "right after one returned ~b, during recovery ~b; acknowledgements given up by "
              "the heals (the thrown-away side's, after the cut): ~b~n",
              [length(Parts), length([P || #{split := true} = P <- Parts]),
               length([P || #{where := {step, _, _, _}} = P <- Parts]),
               length([P || #{where := {leave, _, _}} = P <- Parts]),
               length([P || #{where := {recovery, _, _}} = P <- Parts]), Excluded]),
    lists:foreach(
      fun(Tab) ->
              T = atom_to_list(Tab),
              InTab = lists:foldl(fun(#{where := {step, T2, _, S}}, Acc) when T2 =:= T ->
                                          maps:update_with(S, fun(C) -> C + 1 end, 1, Acc);
                                     (_, Acc) -> Acc
                                  end, #{}, Kills),
              Cs = [C || #{tab := T2} = C <- Checks, T2 =:= Tab],
              Sum = fun(K) -> lists:sum([maps:get(K, C) || C <- Cs]) end,
              io:format(user, "~-16s checks=~b records_checked=~b lost_or_wrong ours=~b "
                        "control=~b dup=~b misplaced=~b orphans=~b journal_left=~b "
                        "structure=~b disagree=~b settled=~b settled_bad=~b | kills inside: ~s~n",
                        [Tab, length(Cs), Sum(checked), Sum(ours), Sum(control_lost),
                         Sum(duplicates), Sum(misplaced), Sum(orphans), Sum(journal_left),
                         length([C || #{structure := [_ | _]} = C <- Cs]),
                         length([C || #{disagree := true} = C <- Cs]),
                         Sum(settled), length(lists:append([B || #{settled_bad := B} <- Cs])),
                         fmt_counts(InTab)]),
              [io:format(user, "  run ~b: ours ~0p, control ~0p; faults ~0p~n",
                         [R, OK, CK, maps:get(faults, C, [])])
               || #{run := R, ours_keys := OK, control_keys := CK} = C <- Cs, OK ++ CK =/= []],
              %% The first check whose structure failed, with what each
              %% node saw of the copies.
              case [C || #{structure := [_ | _]} = C <- Cs] of
                  [] ->
                      ok;
                  [#{run := R, structure := S, nodes := Ns} = C | _] ->
                      io:format(user, "  first structure failure, run ~b: ~0p; copies_bad ~0p; "
                                "faults ~0p~n",
                                [R, S, [{N, maps:get(copies_bad, NC, [])} || {N, NC} <- Ns],
                                 maps:get(faults, C, [])])
              end
      end, ?NODE:tables()).

fmt_counts(M) ->
    lists:join(", ", [io_lib:format("~s ~b", [K, V]) || {K, V} <- lists:sort(maps:to_list(M))]).

%% @doc Where the nodes' layouts of a table and its control differ: the hash
%% state (as a digest) and each fragment's keys (count and digest) per
%% node, for the parts that differ.
-spec differences([{node(), tuple(), tuple()}]) -> map().
differences(Per) ->
    Parts = fun({Mod, S, Frags}) -> [{state, Mod, erlang:phash2(S)}
                                     | [{F, length(Ks), erlang:phash2(Ks)} || {F, Ks} <- Frags]]
            end,
    ByNode = [{N, Parts(L), Parts(CL)} || {N, {_, _, L}, {_, _, CL}} <- Per],
    Differs = fun(Pos) ->
                      All = [element(Pos, X) || X <- ByNode],
                      [{N, P} || {N, Ps} <- lists:zip([N || {N, _, _} <- ByNode], All),
                                 P <- Ps,
                                 lists:any(fun(Other) -> not lists:member(P, Other) end, All)]
              end,
    #{table => Differs(2), control => Differs(3)}.

%%% Where a kill landed

%% @doc From the marks before the kill: `{step, Tab, Op, Step}' inside an
%% operation (`enter' before its first step), `{leave, Tab, Op}' right
%% after one returned (when aimed there), `outside' otherwise.
classify(Lines, Aim) ->
    State = lists:foldl(
              fun(L, S) ->
                      case string:lexemes(L, " ") of
                          ["enter", T, Op | _] -> {step, T, Op, "enter"};
                          ["step", _Node, T, Step] when element(1, S) =:= step,
                                                        element(2, S) =:= T ->
                              setelement(4, S, Step);
                          ["leave", T, Op] -> {leave, T, Op};
                          ["failed", T, Op | _] -> {failed, T, Op};
                          _ -> S
                      end
              end, outside, Lines),
    case {State, Aim} of
        {{step, _, _, _}, _} -> State;
        {{leave, _, _}, leave} -> State;
        _ -> outside
    end.

%% @doc The last step a recovery marked before the kill (`none').
last_step(Lines) ->
    lists:foldl(fun(L, S) ->
                        case string:lexemes(L, " ") of
                            ["step", _Node, T, Step] -> {T, Step};
                            _ -> S
                        end
                end, none, Lines).

%% @doc A line `harness <time> ...' in marks.log, for reading a kept run's
%% faults against the nodes' own lines and logs (the reports skip it).
note(Dir, Fmt, Args) ->
    {ok, F} = file:open(filename:join(Dir, "marks.log"), [append, raw]),
    Time = calendar:system_time_to_rfc3339(erlang:system_time(millisecond),
                                           [{unit, millisecond}]),
    ok = file:write(F, ["harness ", Time, " ", io_lib:format(Fmt, Args), $\n]),
    ok = file:close(F).
