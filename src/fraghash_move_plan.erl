%% @doc Where fragment replicas should go, pure: the plans of
%% `fraghash_frag:drain/2' and `fraghash_frag:rebalance/1,2', computed from
%% a table's layout without a Mnesia call. `fraghash_move' reads the
%% layout and carries the moves out.
%%
%% A layout is a list of units, one per fragment number: its `records'
%% (what the fragment, and the fragments of that number of the table's
%% foreign-key tables, hold: they move together) and its `copies'
%% (`[{Node, StorageType}]'). A node's load is the records of the units
%% it holds a copy of; the mean is the pool's load over its nodes. A move
%% `{Unit, From, To}' takes a copy of `Unit' from `From' to `To', which
%% holds none; every unit keeps its number of copies of each storage type.
%%
%% The rebalance is greedy. Its measure is the distance outside the band:
%% how far each node's load lies above `(1 + Tolerance) * Mean' or below
%% `(1 - Tolerance) * Mean', summed. Every plan moves at least the records
%% above the band (they must leave their nodes) and at least those missing
%% below it, and a move of `S' records lowers the distance by at most
%% `2 * S' (the node it leaves and the node it joins). Each step looks
%% at the moves from a more loaded node to a less loaded one that lower
%% the distance. It takes the smallest that leaves both nodes in the band
%% (no smaller single move settles that pair; one large fragment is
%% preferred to several small ones of the same records); failing one, the
%% one that lowers the distance most per record moved (a move that brings
%% an excess to a deficit, both outside the band, lowers it by `2 * S',
%% wasting nothing), then the one that lowers it most (fewer moves). It
%% stops when every node is in the band, or when no move lowers the
%% distance (the band cannot be reached with these fragment sizes; the
%% plan gets as near as the steps could).
%% The distance falls at every step, so no layout comes back and the plan
%% ends.
-module(fraghash_move_plan).

-export([drain/3, rebalance/2, rebalance/3, loads/2, mean/2, within/3]).

-export_type([unit/0, move/0]).

-type unit() :: #{unit := term(), records := non_neg_integer(), copies := [{node(), atom()}]}.
-type move() :: {term(), node(), node()}.

-define(TOLERANCE, 0.1).

%% @doc Moves every copy `Node' holds onto the other nodes of `Pool' that
%% hold no copy of its unit, the largest units first, each to the node of
%% least load then (the first in `Pool' of those tied):
%% `{ok, Moves}', or `{error, {no_room, Unit}}' when no node of the pool
%% can take a copy of `Unit'.
-spec drain([unit()], [node()], node()) -> {ok, [move()]} | {error, {no_room, term()}}.
drain(Units, Pool, Node) ->
    Targets = [N || N <- Pool, N =/= Node],
    Held = lists:sort(fun(#{records := A}, #{records := B}) -> A >= B end,
                      [U || U <- Units, holds(U, Node)]),
    drain(Held, Units, Targets, Node, []).

drain([], _Units, _Targets, _Node, Moves) ->
    {ok, lists:reverse(Moves)};
drain([#{unit := Id} = U | Rest], Units, Targets, Node, Moves) ->
    Loads = loads(Units, Targets),
    case [{Load, Index, N} || {Index, N} <- lists:enumerate(Targets), not holds(U, N),
                              {_, Load} <- [lists:keyfind(N, 1, Loads)]] of
        [] ->
            {error, {no_room, Id}};
        Free ->
            {_, _, To} = lists:min(Free),
            drain(Rest, apply_move(Units, {Id, Node, To}), Targets, Node, [{Id, Node, To} | Moves])
    end.

%% @doc {@link rebalance/3} with a tolerance of 10%.
-spec rebalance([unit()], [node()]) -> [move()].
rebalance(Units, Pool) ->
    rebalance(Units, Pool, ?TOLERANCE).

%% @doc The moves, in order, that bring every node of `Pool' within
%% `Tolerance' (a fraction) of the mean load, or as near as the greedy
%% steps get (see the module doc). Copies on nodes outside `Pool' stay
%% where they are and do not count.
-spec rebalance([unit()], [node()], float()) -> [move()].
rebalance(Units, Pool, Tolerance) ->
    rebalance(Units, Pool, Tolerance, []).

rebalance(Units, Pool, Tolerance, Moves) ->
    case within(Units, Pool, Tolerance) of
        true ->
            lists:reverse(Moves);
        false ->
            %% A move changes two loads and not the mean: its gain is
            %% theirs.
            Outside = outside(mean(Units, Pool), Tolerance),
            Loads = loads(Units, Pool),
            Candidates =
                [{Settles, Gain, S, {Id, H, L}}
                 || {H, LoadH} <- Loads, {L, LoadL} <- Loads, LoadH > LoadL,
                    #{unit := Id, records := S} = U <- Units, S > 0, S < LoadH - LoadL,
                    holds(U, H), not holds(U, L),
                    Gain <- [Outside(LoadH) + Outside(LoadL) - Outside(LoadH - S)
                             - Outside(LoadL + S)],
                    Gain > 1.0e-9,
                    Settles <- [Outside(LoadH - S) + Outside(LoadL + S) =< 1.0e-9]],
            case best(Candidates) of
                none -> lists:reverse(Moves);
                Best -> rebalance(apply_move(Units, Best), Pool, Tolerance, [Best | Moves])
            end
    end.

%% The move of a step: the smallest that leaves both its nodes in the
%% band, else the one of most gain per record, then of most gain.
best([]) ->
    none;
best(Candidates) ->
    case [{S, -Gain, Move} || {true, Gain, S, Move} <- Candidates] of
        [_ | _] = Settling ->
            element(3, lists:min(Settling));
        [] ->
            element(4, lists:max([{Gain / S, Gain, -S, Move} || {_, Gain, S, Move} <- Candidates]))
    end.

%% @doc Each node of `Pool' with its load (records of the units it holds a
%% copy of), in the pool's order.
-spec loads([unit()], [node()]) -> [{node(), non_neg_integer()}].
loads(Units, Pool) ->
    [{N, lists:sum([R || #{records := R} = U <- Units, holds(U, N)])} || N <- Pool].

%% @doc The mean load of the nodes of `Pool'.
-spec mean([unit()], [node()]) -> float().
mean(_Units, []) ->
    0.0;
mean(Units, Pool) ->
    lists:sum([L || {_, L} <- loads(Units, Pool)]) / length(Pool).

%% @doc Whether every node of `Pool' holds a load within `Tolerance' of
%% the mean (an empty table is).
-spec within([unit()], [node()], float()) -> boolean().
within(Units, Pool, Tolerance) ->
    distance(Units, Pool, Tolerance) =< 1.0e-9.

%% How far the loads lie outside the band around the mean, summed.
distance(Units, Pool, Tolerance) ->
    Outside = outside(mean(Units, Pool), Tolerance),
    lists:sum([Outside(L) || {_, L} <- loads(Units, Pool)]).

%% How far a load lies outside the band around `Mean'.
outside(Mean, Tolerance) ->
    Low = (1 - Tolerance) * Mean,
    High = (1 + Tolerance) * Mean,
    fun(L) -> max(0.0, L - High) + max(0.0, Low - L) end.

holds(#{copies := Copies}, Node) ->
    lists:keymember(Node, 1, Copies).

%% The layout after `Move': the unit's copy on `From' is on `To', of the
%% same storage type.
apply_move(Units, {Id, From, To}) ->
    [case U of
         #{unit := Id, copies := Copies} ->
             {From, Type} = lists:keyfind(From, 1, Copies),
             U#{copies := lists:keystore(To, 1, lists:keydelete(From, 1, Copies), {To, Type})};
         _ ->
             U
     end || U <- Units].
