%% @doc The application's modules call one another in one direction only:
%% no two modules reach each other through calls (no import circle).
%% Checked on the compiled modules with `xref' (module call graph), so
%% calls named in strings or comments do not count and every real call
%% does. Needs no Mnesia.
-module(fraghash_layers_tests).

-include_lib("eunit/include/eunit.hrl").

no_circle_test() ->
    Ebin = filename:dirname(code:which(fraghash_frag)),
    {ok, X} = xref:start([{xref_mode, modules}]),
    try
        {ok, _} = xref:add_directory(X, Ebin, [{warnings, false}]),
        {ok, Calls} = xref:q(X, "ME || AM"),
        G = digraph:new(),
        [begin
             digraph:add_vertex(G, From),
             digraph:add_vertex(G, To),
             digraph:add_edge(G, From, To)
         end || {From, To} <- Calls, From =/= To],
        ?assertEqual([], digraph_utils:cyclic_strong_components(G))
    after
        xref:stop(X)
    end.
