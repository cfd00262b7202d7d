%% @doc EUnit tests of how `fraghash_nif' finds its library, and of the
%% error every entry point gives when it finds none.
%%
%% Each case starts a fresh peer node with its own code path and
%% environment, since a NIF library is loaded once per VM. Needs a
%% distributed node and `FRAGHASH_TEST_DIR' (scripts/test-mnesia.sh sets
%% both up).
-module(fraghash_load_tests).

-include_lib("eunit/include/eunit.hrl").

-define(T, 120).

load_test_() ->
    {inorder,
     [{timeout, ?T, {"a wrong FRAGHASH_NIF_DIR is skipped",
                     fun wrong_env_dir/0}},
      {timeout, ?T, {"a library that does not load is skipped",
                     fun broken_library/0}},
      {timeout, ?T, {"a code path entry named fraghash-x without priv is skipped",
                     fun lookalike_app_dir/0}},
      {timeout, ?T, {"no library: every call names each path tried",
                     fun missing_library/0}}]}.

wrong_env_dir() ->
    Missing = filename:join(scratch(), "no-such-dir"),
    with_peer([ebin()], [{"FRAGHASH_NIF_DIR", Missing}],
              fun(Node) ->
                      {loaded, Path, Tried} = status(Node),
                      ?assertEqual(real_library(), Path),
                      ?assertEqual([{env_fraghash_nif_dir, lib_in(Missing), not_found}],
                                   Tried),
                      works(Node)
              end).

broken_library() ->
    Dir = filename:join(scratch(), "broken-nif"),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    ok = file:write_file(lib_in(Dir), <<"not a shared library">>),
    with_peer([ebin()], [{"FRAGHASH_NIF_DIR", Dir}],
              fun(Node) ->
                      {loaded, Path, Tried} = status(Node),
                      ?assertEqual(real_library(), Path),
                      Expected = lib_in(Dir),
                      ?assertMatch([{env_fraghash_nif_dir, Expected,
                                     {load_failed, _, _}}], Tried),
                      works(Node)
              end).

%% A directory named `fraghash-Something' on the code path, ahead of the
%% real application, is what `code:priv_dir(fraghash)' resolves to; the
%% loader must move on to the library beside this module's ebin.
lookalike_app_dir() ->
    Lookalike = filename:join([scratch(), "fraghash-x", "ebin"]),
    ok = filelib:ensure_dir(filename:join(Lookalike, "x")),
    %% `-pa' puts the later directory first, so the lookalike comes ahead.
    with_peer([ebin(), Lookalike], [],
              fun(Node) ->
                      {loaded, Path, Tried} = status(Node),
                      ?assertEqual(real_library(), Path),
                      ?assertEqual([{application_priv_dir,
                                     lib_in(filename:join([scratch(), "fraghash-x", "priv"])),
                                     not_found}],
                                   Tried),
                      works(Node)
              end).

%% The modules alone, in a directory that is not named like the
%% application and has no priv beside it.
missing_library() ->
    Ebin = filename:join([scratch(), "lonely", "ebin"]),
    ok = filelib:ensure_dir(filename:join(Ebin, "x")),
    [{ok, _} = file:copy(B, filename:join(Ebin, filename:basename(B)))
     || B <- filelib:wildcard(filename:join(ebin(), "*.beam"))],
    with_peer([Ebin], [],
              fun(Node) ->
                      Tried = [{beside_ebin,
                                lib_in(filename:join([scratch(), "lonely", "priv"])),
                                not_found}],
                      ?assertEqual({not_loaded, Tried}, status(Node)),
                      %% A direct call names the cause...
                      ?assertMatch({badrpc, {'EXIT', {{fraghash, nif_not_loaded, Tried}, _}}},
                                   rpc:call(Node, fraghash_nif, digest, [<<>>])),
                      %% ...and so does Mnesia, instead of `undef'.
                      ok = rpc:call(Node, mnesia, start, []),
                      Props = [{frag_properties, [{n_fragments, 2},
                                                  {hash_module, mnesia_frag_slots}]}],
                      ?assertEqual({aborted, {fraghash, nif_not_loaded, Tried}},
                                   rpc:call(Node, mnesia, create_table, [t, Props]))
              end).

%%% Helpers

status(Node) ->
    rpc:call(Node, fraghash_nif, load_status, []).

works(Node) ->
    ?assertMatch(<<_:128>>, rpc:call(Node, fraghash_nif, digest, [<<"x">>])).

ebin() ->
    filename:dirname(code:which(fraghash_nif)).

real_library() ->
    lib_in(code:priv_dir(fraghash)).

lib_in(Dir) ->
    filename:join(Dir, "libfraghash_nif.so").

scratch() ->
    filename:join(fraghash_test_support:scratch(), "load").

with_peer(Paths, Env, Fun) ->
    Name = list_to_atom("fraghash_load_" ++ integer_to_list(erlang:unique_integer([positive]))),
    {ok, Peer, Node} = peer:start(#{name => Name, host => "localhost",
                                    args => ["-pa" | Paths], env => Env}),
    fraghash_test_support:record_peer(Node),
    try Fun(Node)
    after peer:stop(Peer)
    end.
