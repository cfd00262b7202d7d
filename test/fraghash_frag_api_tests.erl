%% @doc EUnit tests of what `fraghash_frag''s calls answer to wrong input,
%% in real Mnesia: nodes for a new fragment that are not a list of nodes
%% (a bare node, say) are refused with `bad_nodes', before anything
%% changes; and with Mnesia stopped every public call answers
%% `{fraghash, mnesia_not_running, Text}' in its own error form (the
%% operations `{aborted, _}', recovery and the inspections `{error, _}',
%% the calls with no error form raise it), never a stack from inside
%% Mnesia.
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_frag_api_tests).

-include_lib("eunit/include/eunit.hrl").

-define(TAB, api_tab).

frag_api_test_() ->
    {setup, fun setup/0, fun fraghash_test_support:stop_mnesia/1,
     fun(_Dir) ->
             {inorder,
              [{timeout, 60, {"nodes that are not a list are refused", fun bad_nodes/0}},
               {timeout, 60, {"with Mnesia stopped every call says so", fun not_running/0}}]}
     end}.

setup() ->
    Dir = fraghash_test_support:start_mnesia("frag_api"),
    ok = fraghash_test_support:create_frag(?TAB, mnesia_frag_slots, 3, [{n_disc_copies, 1}]),
    ok = fraghash_test_support:fill(?TAB, lists:seq(1, 300), fun(K) -> K end),
    Dir.

bad_nodes() ->
    Before = fraghash_frag:hash(?TAB),
    [?assertMatch({aborted, {fraghash, bad_nodes, Text}} when is_list(Text), Call())
     || Call <- [fun() -> fraghash_frag:add_frag(?TAB, node()) end,
                 fun() -> fraghash_frag:add_frag(?TAB, [node() | node()]) end,
                 fun() -> fraghash_frag:add_frag(?TAB, ["node"]) end,
                 fun() -> fraghash_frag:relieve(?TAB, node(), largest) end,
                 fun() -> fraghash_frag:relieve(?TAB, {node()}, 1) end]],
    ?assertEqual(Before, fraghash_frag:hash(?TAB)),
    %% Nodes, and a frag_dist, are taken.
    ?assertEqual({atomic, ok}, fraghash_frag:add_frag(?TAB, [node()])),
    Dist = mnesia:activity(async_dirty, fun() -> mnesia:table_info(?TAB, frag_dist) end, [],
                           mnesia_frag),
    ?assertEqual({atomic, ok}, fraghash_frag:add_frag(?TAB, Dist)),
    ?assertMatch({_, _, 5}, fraghash_frag:hash(?TAB)).

not_running() ->
    stopped = mnesia:stop(),
    NotRunning = fun({fraghash, mnesia_not_running, Text}) -> is_list(Text);
                    (_) -> false
                 end,
    Aborted = [fraghash_frag:add_frag(?TAB, [node()]),
               fraghash_frag:relieve(?TAB, [node()], largest),
               fraghash_frag:del_frag(?TAB),
               fraghash_frag:repair(?TAB)],
    [?assertMatch({{aborted, _}, true}, {A, NotRunning(element(2, A))}) || A <- Aborted],
    Errors = [fraghash_frag:recover(), fraghash_frag:recover(?TAB),
              fraghash_frag:distribution(?TAB), fraghash_frag:info(?TAB)],
    [?assertMatch({{error, _}, true}, {E, NotRunning(element(2, E))}) || E <- Errors],
    Raised = [catch_error(fun() -> fraghash_frag:hash(?TAB) end),
              catch_error(fun() -> fraghash_frag:stale_copies(?TAB) end),
              catch_error(fun fraghash_frag:loadable_tables/0)],
    [?assertMatch({_, true}, {R, NotRunning(R)}) || R <- Raised],
    %% The calls that read no table still answer.
    ?assertEqual(api_tab_frag2, fraghash_frag:frag_name(?TAB, 2)).

catch_error(F) ->
    try F() of
        Value -> {returned, Value}
    catch
        error:Reason -> Reason
    end.
