%% @doc The application's modules call one another in one direction only:
%% no two modules reach each other through calls (no import circle).
%% Checked on the compiled modules with `xref' (module call graph), so
%% calls named in strings or comments do not count and every real call
%% does. And every `{fraghash, Reason, Text}' error is made by
%% `fraghash_error:new/3', checked on the sources. Needs no Mnesia.
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

%% No module but fraghash_error writes the error's tuple with a text of
%% its own: a literal string or a formatted one after the reason (on one
%% line or the next).
one_error_constructor_test() ->
    _ = application:load(fraghash),
    {ok, Mods} = application:get_key(fraghash, modules),
    ByHand = "\\{fraghash,\\s*[a-z_]+,\\s*(\"|lists:flatten|io_lib:format|unicode:)",
    Found = [{M, Match} || M <- Mods, M =/= fraghash_error,
                           {ok, Src} <- [file:read_file(proplists:get_value(source,
                                                                            M:module_info(compile)))],
                           {match, Matches} <- [re:run(code_only(Src), ByHand,
                                                       [global, {capture, first, binary}])],
                           Match <- Matches],
    ?assertEqual([], Found),
    ?assertEqual({fraghash, why, "a 1 b"}, fraghash_error:new(why, "a ~b ~s", [1, "b"])).

%% A source without its comment lines.
code_only(Src) ->
    Lines = binary:split(Src, <<"\n">>, [global]),
    lists:join(<<"\n">>, [L || L <- Lines, not is_comment(L)]).

is_comment(Line) ->
    case string:trim(Line, leading) of
        <<"%", _/binary>> -> true;
        _ -> false
    end.
