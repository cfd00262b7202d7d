%% @doc Partitions in the torture of two or three nodes
%% (`fraghash_torture2_tests'):
%% the cut, the marks that say which acknowledgements the operator's heal
%% gives up, and the expected values read with them.
%%
%% A cut is `erlang:disconnect_node/1' run on one node for each other
%% node, one after the other: the connections go, both sides get
%% `nodedown', and each Mnesia takes the other side for down and goes on
%% alone (writes to the replicas it holds, schema changes that touch only
%% them). The connection comes back at the next message between the nodes
%% (a writer's durability call, an rpc), but Mnesia stays split: it reports
%% `{inconsistent_database, running_partitioned_network, Node}' and does
%% not merge. With `FRAGHASH_TORTURE_CUT=stay' the cut stays until the
%% heal instead (`net_kernel:allow/1' on the cut node first: no new
%% connection but the test node's), as a network dropping its packets. Not
%% by default: this test node's `global' (OTP 25, overlapping partitions
%% prevented) then sometimes drops its connection to the cut node, and a
%% peer halts when it loses its origin.
%%
%% The marks, in the acknowledgement logs (one framed term each, as the
%% writers' lines): `{cut, Run}' in every log just before the cut, and
%% `{discarded, Run}' in the logs of the writer on the side the heal threw
%% away, once that node is dead. Acknowledgements between the two in such a
%% log were given on that side after the cut: the operator's loss, read as
%% intents (the key may hold the value or not). Everything before the cut
%% mark, and everything in the kept side's logs, must be there.
-module(fraghash_torture2_partition).

-export([share/0, peer_args/0, cut/4, rejoin/2, discarded/3, terms/1, excluded/1]).

-define(NODE, fraghash_torture2_node).
-define(SPLIT_MS, 10000).

%% @doc The percentage of faults that are partitions (the others are
%% kills): `FRAGHASH_TORTURE2_PARTITIONS' on two nodes,
%% `FRAGHASH_TORTURE3_PARTITIONS' on three, default 20. On three, a cut can
%% leave the two kept replicas of a fragment differing by a write no one
%% acknowledged (Mnesia resolving the transaction the cut interrupted
%% differently on the two): recovery then reports `replicas_differ', and
%% the test repairs them (fraghash_frag:repair_replicas/1) and checks each
%% key settled against the acknowledgements.
share() ->
    {Var, Default} = case ?NODE:nodes_count() of
                         2 -> {"FRAGHASH_TORTURE2_PARTITIONS", 20};
                         3 -> {"FRAGHASH_TORTURE3_PARTITIONS", 20}
                     end,
    case os:getenv(Var) of
        V when V =:= false; V =:= "" -> Default;
        V -> list_to_integer(V)
    end.

%% @doc Command-line arguments for A and B. global's
%% `prevent_overlapping_partitions' (on by default in OTP 25) would have a
%% node that lost the other tell every node it knows, this test's node
%% among them, which then disconnects from both; a `peer' node halts when
%% it loses its origin, and the cut would become two kills.
peer_args() ->
    ["-kernel", "prevent_overlapping_partitions", "false"].

%% @doc Marks every log, then cuts node `X' from the `Others', one after
%% the other (for good with `FRAGHASH_TORTURE_CUT=stay': until {@link
%% rejoin/2} or `X' dies). Returns whether each Mnesia then had the other
%% side out of its running nodes (within ?SPLIT_MS).
cut(Dir, Run, X, Others) ->
    [append(?NODE:ack_file(Dir, T, W), {cut, Run})
     || T <- ?NODE:tables(), W <- lists:seq(1, ?NODE:nodes_count())],
    [ok = rpc:call(X, net_kernel, allow, [[X, node()]]) || stays()],
    [true = rpc:call(X, erlang, disconnect_node, [O]) || O <- Others],
    split(X, Others, ?SPLIT_MS).

%% @doc Lets the cut node `X', kept by the heal, connect to `Nodes' again
%% (restarted after being thrown away), when cuts stay.
rejoin(X, Nodes) ->
    [ok = rpc:call(X, net_kernel, allow, [Nodes]) || stays()],
    ok.

stays() -> os:getenv("FRAGHASH_TORTURE_CUT") =:= "stay".

split(X, Others, Ms) ->
    Apart = lists:all(fun(O) -> not lists:member(O, running(X))
                                    andalso not lists:member(X, running(O))
                      end, Others),
    if
        Apart -> true;
        Ms =< 0 -> false;
        true -> timer:sleep(10), split(X, Others, Ms - 10)
    end.

running(N) ->
    case rpc:call(N, mnesia, system_info, [running_db_nodes], 5000) of
        L when is_list(L) -> L;
        _ -> []
    end.

%% @doc Marks the logs of writer `Writer' (1: A's, 2: B's, 3: C's): its side was
%% thrown away by the heal of the cut of run `Run'. Called once that node
%% is dead, so no acknowledgement of its can come after the mark.
discarded(Dir, Run, Writer) ->
    [append(?NODE:ack_file(Dir, T, Writer), {discarded, Run}) || T <- ?NODE:tables()],
    ok.

append(File, Term) ->
    {ok, Log} = file:open(File, [append, raw, binary]),
    ok = fraghash_torture_child:log_line(Log, Term),
    ok = file:close(Log).

%% @doc The intents and acknowledgements of a log, in order, as
%% `fraghash_torture_child:expected_terms/1' reads them: an acknowledgement
%% between `{cut, R}' and `{discarded, R}' becomes an intent; the marks
%% go.
terms(File) ->
    {Terms, _} = demote(fraghash_torture_child:read_terms(File)),
    Terms.

%% @doc How many acknowledgements the heals gave up, over every log.
excluded(Dir) ->
    lists:sum([element(2, demote(fraghash_torture_child:read_terms(?NODE:ack_file(Dir, T, W))))
               || T <- ?NODE:tables(), W <- lists:seq(1, ?NODE:nodes_count())]).

demote(Terms) ->
    Thrown = [R || {discarded, R} <- Terms],
    {Out, _, Count} =
        lists:foldl(
          fun({cut, R}, {Acc, _, C}) -> {Acc, lists:member(R, Thrown), C};
             ({discarded, _}, {Acc, _, C}) -> {Acc, false, C};
             ({ack, Seq, K, V}, {Acc, true, C}) -> {[{intent, Seq, K, V} | Acc], true, C + 1};
             (T, {Acc, In, C}) -> {[T | Acc], In, C}
          end, {[], false, 0}, Terms),
    {lists:reverse(Out), Count}.
