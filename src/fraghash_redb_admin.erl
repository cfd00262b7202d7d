%% @doc Where a node's `redb_copies' database is opened
%% ({@link fraghash_redb_copies}): on every running node when the backend
%% is registered, and on a node where a replica is made while its database
%% is not open; a missing `fraghash.redb' is refused, not made empty.
-module(fraghash_redb_admin).

-export([start_everywhere/1, start_local/1, open_db/1, need_db/1, info_table/0]).

%% @doc The table of index states kept in every node's database.
-spec info_table() -> binary().
info_table() ->
    <<"fraghash:info">>.

%% @doc Opens the database under alias `Alias' on every node running
%% Mnesia: `{atomic, ok}', or `{aborted, {fraghash_redb, not_started,
%% Text}}' naming the nodes where it did not open.
-spec start_everywhere(atom()) -> {atomic, ok} | {aborted, term()}.
start_everywhere(Alias) ->
    Nodes = mnesia:system_info(running_db_nodes),
    {Answers, Down} = rpc:multicall(Nodes, ?MODULE, start_local, [[Alias]], 60000),
    Failed = [{N, A} || {N, A} <- lists:zip(Nodes -- Down, Answers), A =/= ok] ++
             [{N, nodedown} || N <- Down],
    case Failed of
        [] ->
            {atomic, ok};
        _ ->
            Text = io_lib:format("redb_copies is registered, but its database did not open "
                                 "on ~0p: ~0tp (is fraghash on those nodes' code path?)",
                                 [[N || {N, _} <- Failed], Failed]),
            {aborted, {fraghash_redb, not_started, unicode:characters_to_binary(Text)}}
    end.

%% @doc Opens this node's database for aliases `Aliases' of the backend.
-spec start_local([atom()]) -> ok | {error, term()}.
start_local(Aliases) ->
    case open_db([]) of
        ok -> _ = fraghash_redb_db:add_aliases(Aliases), ok;
        {error, _} = E -> E
    end.

%% @doc Opens the node's database unless it is open, with the table of
%% index states in it. `Creating' are tables being created here now, which
%% the schema may list already.
-spec open_db([atom()]) -> ok | {error, term()}.
open_db(Creating) ->
    Path = fraghash_redb_db:path(),
    case fraghash_redb_db:is_open() orelse {filelib:is_file(Path), local_tables() -- Creating} of
        true ->
            ok;
        {false, [_ | _] = Tabs} ->
            Text = io_lib:format("~ts is missing, but this node holds ~b redb_copies "
                                 "table(s) (~0p): restore the file from a backup, or, where "
                                 "another node holds copies, delete this node's copies from "
                                 "there (mnesia:del_table_copy/2) and add them again",
                                 [Path, length(Tabs), Tabs]),
            {error, {fraghash_redb, missing, Path, unicode:characters_to_binary(Text)}};
        _ ->
            case fraghash_redb_db:ensure_started() of
                ok -> ensure_info();
                {error, _} = E -> E
            end
    end.

%% @doc The database, opened if Mnesia did not start the backend on this
%% node (the type was added while this node ran): a replica of `Tab' made
%% here by another node's call then gets its table all the same. Raises
%% `{fraghash_redb, Kind, Text}' when it cannot be opened.
-spec need_db(atom() | tuple()) -> ok.
need_db(Tab) ->
    case open_db([Tab]) of
        ok -> ok;
        {error, {fraghash_redb, Kind, _Path, Text}} -> erlang:error({fraghash_redb, Kind, Text});
        {error, Other} -> erlang:error({fraghash_redb, not_started, Other})
    end.

%% The tables the schema puts on this node with this backend (known when
%% Mnesia starts the backend: it has read the schema by then).
local_tables() ->
    Tabs = try mnesia_lib:val({schema, tables}) catch _:_ -> [] end,
    [T || T <- Tabs, {{_Alias, fraghash_redb_copies}, Nodes} <- external_copies(T),
          lists:member(node(), Nodes)].

external_copies(Tab) ->
    try mnesia_lib:val({Tab, external_copies}) catch _:_ -> [] end.

%% Creates the table of index states unless it exists.
ensure_info() ->
    case fraghash_redb_nif:create_table(fraghash_redb_db:handle(), info_table(), <<>>) of
        ok -> ok;
        {error, {table_exists, _}} -> ok;
        {error, {Kind, Msg}} -> erlang:error({fraghash_redb, Kind, Msg})
    end.
