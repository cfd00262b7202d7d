%% @doc The items an operation's copy moved, kept on disc while it runs, so
%% that its cleaning deletes them from their sources without reading every
%% source again. Reading a source whole costs about what copying it did (a
%% `disc_only_copies' fragment is read slot by slot, a request each), where
%% deleting the moved items alone costs a few microseconds each.
%%
%% The items, `{Source, Key}', go to a `disk_log' (halt, internal format)
%% named after the table in Mnesia's directory on the node running the
%% operation, as each chunk is copied: memory of one chunk, a file of
%% about 30 bytes per item, deleted when the run ends, however it ends.
%%
%% The list is a shortcut, never the only way: the cleaning reads the
%% sources instead (`fraghash_grow_copy:clean/3') whenever the list may be
%% incomplete. That is when a write to it failed (the disc full), when it
%% cannot be read back, and in every run that recovery starts after a kill:
%% the list belongs to the run that copied, kept in its process dictionary,
%% and is never read by another. It is complete in the run that copied:
%% every record a source holds at the switch that the target state places
%% elsewhere was copied by that run (the bulk copy, the rounds and the last
%% copy under the fence, `fraghash_grow_copy'), and each copy notes its
%% items first. An item noted that did not move, or moved twice, costs a
%% delete that finds nothing to delete: cleaning deletes only what the
%% target state places elsewhere.
-module(fraghash_grow_moved).

-export([open/1, note/1, count/0, take/0, fold/2, close/1, sweep/0]).

-export_type([moved/0]).

-opaque moved() :: #{log := term(), file := file:filename()}.

-define(KEY, fraghash_grow_moved).
-define(PREFIX, "fraghash.moved.").
%% Items read back at a time.
-define(CHUNK, 500).

%% @doc Starts the list of `Tab''s operation, run by this process, in a
%% fresh file. Without a file (Mnesia keeps no directory here, the disc is
%% full) there is no list, and the cleaning reads the sources.
-spec open(atom()) -> ok.
open(Tab) ->
    File = file(Tab),
    _ = file:delete(File),
    %% A name of its own: the log of a run killed a moment ago in this VM
    %% may still be open (on the file deleted above) until its owner's
    %% exit reaches it, and opening that name again would join it.
    case disk_log:open([{name, {?KEY, Tab, make_ref()}}, {file, File}, {type, halt},
                        {format, internal},
                        {repair, truncate}, {mode, read_write}, {quiet, true}]) of
        {ok, Log} ->
            put(?KEY, #{log => Log, file => File}),
            ok;
        _ ->
            _ = file:delete(File),
            ok
    end.

%% @doc Notes items `{Source, Key}' about to be copied. A failed write ends
%% the list: the cleaning then reads the sources.
-spec note([{atom(), term()}]) -> ok.
note([]) ->
    ok;
note(Items) ->
    case get(?KEY) of
        undefined ->
            ok;
        #{log := Log} ->
            case disk_log:log_terms(Log, Items) of
                ok -> ok;
                _ -> close(erase(?KEY))
            end
    end.

%% @doc How many items were noted (with repeats), 0 without a list.
-spec count() -> non_neg_integer().
count() ->
    case get(?KEY) of
        undefined -> 0;
        #{log := Log} -> proplists:get_value(no_written_items, disk_log:info(Log), 0)
    end.

%% @doc Takes the list from this process, `none' when there is none.
-spec take() -> moved() | none.
take() ->
    case erase(?KEY) of
        undefined -> none;
        Moved -> Moved
    end.

%% @doc Calls `Fun(Items)' on the items of the list, a chunk at a time, in
%% the order noted; `{error, Reason}' if it cannot be read to its end.
-spec fold(moved(), fun(([{atom(), term()}]) -> ok)) -> ok | {error, term()}.
fold(#{log := Log}, Fun) ->
    _ = disk_log:sync(Log),
    fold_chunks(Log, start, Fun).

fold_chunks(Log, Cont, Fun) ->
    case disk_log:chunk(Log, Cont, ?CHUNK) of
        eof -> ok;
        {error, _} = Error -> Error;
        {_Cont, _Items, BadBytes} -> {error, {damaged, BadBytes}};
        {Cont2, Items} -> ok = Fun(Items), fold_chunks(Log, Cont2, Fun)
    end.

%% @doc Closes the list and deletes its file.
-spec close(moved() | none) -> ok.
close(none) ->
    ok;
close(#{log := Log, file := File}) ->
    _ = disk_log:close(Log),
    _ = file:delete(File),
    ok.

%% @doc Deletes the lists that runs on this node left when their node
%% stopped under them, those of tables whose operation does not run here
%% now. Run by `fraghash_frag:recover/0'.
-spec sweep() -> ok.
sweep() ->
    Dir = mnesia:system_info(directory),
    Names = case file:list_dir(Dir) of
                {ok, Listed} -> Listed;
                {error, _} -> []
            end,
    [_ = file:delete(filename:join(Dir, N)) || ?PREFIX ++ Tab = N <- Names,
                                              fraghash_grow_progress:read(list_to_atom(Tab)) =:= none],
    ok.

file(Tab) ->
    filename:join(mnesia:system_info(directory), ?PREFIX ++ atom_to_list(Tab)).
