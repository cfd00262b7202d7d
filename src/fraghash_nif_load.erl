%% @doc Where the application's NIF libraries are looked for, and how one is
%% loaded: the same for `fraghash_nif' and `fraghash_redb_nif'.
%%
%% A library is looked for in these directories, in order, and the first
%% that holds one that loads wins:
%% <ol>
%% <li>`$FRAGHASH_NIF_DIR', when that environment variable is set;</li>
%% <li>`code:priv_dir(fraghash)', when the application is on the code path;</li>
%% <li>`../priv' next to the `ebin' directory of the application's modules.</li>
%% </ol>
%% A directory without the library is skipped, so a stale `FRAGHASH_NIF_DIR'
%% or a code path entry that only looks like the application costs nothing.
-module(fraghash_nif_load).

-export([load/2]).

-type source() :: env_fraghash_nif_dir | application_priv_dir | beside_ebin.
-type tried() :: [{source(), file:filename(), not_found | {load_failed, atom(), string()}}].
-type status() :: {loaded, file:filename(), tried()} | {not_loaded, tried()}.
-export_type([source/0, tried/0, status/0]).

%% @doc Loads library `Lib' (a file name without its extension) with
%% `Load(PathWithoutExtension)', which must be `erlang:load_nif(Path, 0)'
%% written in the NIF module itself (`erlang:load_nif/2' loads a library for
%% the module whose code calls it). `{loaded, Path, Tried}' with the
%% candidates skipped before it, or `{not_loaded, Tried}'; never raises.
-spec load(string(), fun((string()) -> ok | {error, {atom(), string()}})) -> status().
load(Lib, Load) ->
    try_load(Lib, Load, candidates(), []).

try_load(_Lib, _Load, [], Tried) ->
    {not_loaded, lists:reverse(Tried)};
try_load(Lib, Load, [{Source, Dir} | Rest], Tried) ->
    Path = filename:join(Dir, Lib),
    case filelib:is_regular(Path ++ ".so") of
        false ->
            try_load(Lib, Load, Rest, [{Source, Path ++ ".so", not_found} | Tried]);
        true ->
            case Load(Path) of
                ok ->
                    {loaded, Path ++ ".so", lists:reverse(Tried)};
                {error, {Reason, Text}} ->
                    Why = {load_failed, Reason, Text},
                    try_load(Lib, Load, Rest, [{Source, Path ++ ".so", Why} | Tried])
            end
    end.

%% The candidate directories, in order, without repeats.
candidates() ->
    Env = case os:getenv("FRAGHASH_NIF_DIR") of
              Dir when is_list(Dir), Dir =/= "" -> [{env_fraghash_nif_dir, Dir}];
              _ -> []
          end,
    App = case code:priv_dir(fraghash) of
              Priv when is_list(Priv) -> [{application_priv_dir, Priv}];
              _ -> []
          end,
    Beside = case code:which(?MODULE) of
                 Beam when is_list(Beam), Beam =/= "" ->
                     Ebin = filename:dirname(Beam),
                     [{beside_ebin, filename:join(filename:dirname(Ebin), "priv")}];
                 _ ->
                     []
             end,
    dedup(Env ++ App ++ Beside, []).

dedup([], Seen) ->
    lists:reverse(Seen);
dedup([{_, Dir} = C | Rest], Seen) ->
    Abs = filename:absname(Dir),
    case lists:any(fun({_, D}) -> filename:absname(D) =:= Abs end, Seen) of
        true -> dedup(Rest, Seen);
        false -> dedup(Rest, [C | Seen])
    end.
