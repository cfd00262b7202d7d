%% @doc Runs the sessions of the guides, as written there, each in a fresh
%% node with its own Mnesia directory, so the guides cannot drift from what
%% the code does: the first session of docs/mnesia.md, and the adoption
%% session of docs/mnesia-adopt.md (a table grown by plain
%% `change_table_frag', checked, repaired, moved to another hash module
%% and grown, every record read back), and the cluster session of
%% docs/mnesia-cluster.md (two nodes, a third joins, rebalance, drain; the
%% session starts its peers itself).
%%
%% A session is the first ```erlang block after the line that names this
%% module. Its expressions are evaluated in order, as the shell would (a
%% failed match fails the test). Needs a distributed node and
%% `FRAGHASH_TEST_DIR' (scripts/test-mnesia.sh sets both up); the guides are
%% read from `docs/' under the current directory (rebar3 runs the tests from
%% the repository root) or under `$FRAGHASH_ROOT'.
-module(fraghash_guide_tests).

-include_lib("eunit/include/eunit.hrl").

guide_session_test_() ->
    [{timeout, 300, {"docs/" ++ Page ++ ": the session runs as written",
                     fun() -> session(Page) end}}
     || Page <- ["mnesia.md", "mnesia-adopt.md", "mnesia-cluster.md"]].

session(Page) ->
    Exprs = parse(session_block(read_guide(Page))),
    ?assert(length(Exprs) >= 10),
    Dir = filename:join(fraghash_test_support:scratch(), "guide_" ++ filename:rootname(Page)),
    Name = list_to_atom("fraghash_guide_" ++ filename:rootname(Page) ++ "_" ++ os:getpid()),
    {Peer, Node} = fraghash_test_support:start_peer(Name, Dir),
    try
        Result = rpc:call(Node, erl_eval, exprs, [Exprs, erl_eval:new_bindings()],
                          240000),
        ?assertMatch({value, ok, _}, Result)
    after
        peer:stop(Peer)
    end.

read_guide(Page) ->
    Root = case os:getenv("FRAGHASH_ROOT") of
               false -> ".";
               R -> R
           end,
    {ok, Text} = file:read_file(filename:join([Root, "docs", Page])),
    binary_to_list(Text).

%% The lines between the first "```erlang" after the marker and the next "```".
session_block(Text) ->
    Lines = string:split(Text, "\n", all),
    AfterMarker = lists:dropwhile(
                    fun(L) -> string:find(L, atom_to_list(?MODULE)) =:= nomatch end,
                    Lines),
    ?assertNotEqual([], AfterMarker),
    [_ | FromFence] = lists:dropwhile(fun(L) -> L =/= "```erlang" end, AfterMarker),
    Body = lists:takewhile(fun(L) -> L =/= "```" end, FromFence),
    lists:flatten(lists:join("\n", Body)).

parse(Source) ->
    {ok, Tokens, _} = erl_scan:string(Source),
    {ok, Exprs} = erl_parse:parse_exprs(Tokens),
    Exprs.
