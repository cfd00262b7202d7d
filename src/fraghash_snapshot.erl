%% @doc Snapshots of `disc_only_copies' fragments around the steps of
%% `fraghash_frag' that rewrite them, and the restore that puts back what a
%% kill -9 made dets drop.
%%
%% dets keeps the records whose keys hash to one of its slots together, and
%% rewrites that whole collection for any change to it: the slot's pointer,
%% then the old block marked free, then the new block. The repair that
%% Mnesia's next start runs on a file written since its last `dets:sync'
%% keeps only blocks marked active, so a kill -9 between those writes drops
%% every record of the slot, including records synced long before (shown
%% with dets alone by `repro/dets-kill'). Every write into a fragment that
%% keeps other records exposes them that way. A migration's own writes
%% (records moved into a fragment, or out of it) would make a migrated
%% table lose records that a table only written by its users keeps.
%%
%% So each step of a migration that writes `disc_only_copies' fragments
%% (on this node) runs, under table locks that keep transactions out, as:
%% <ol>
%% <li>{@link take/2}: each fragment it will write is flushed and copied,
%% through dets's own `bchunk' format, to a file of its own beside
%% Mnesia's; the copy is closed (a properly closed dets file) and renamed
%% into place;</li>
%% <li>the step's writes, then `dets:sync' of those fragments: from then on
%% their files are consistent again;</li>
%% <li>{@link discard/1}, once no kill can drop what the step exposed.</li>
%% </ol>
%% A snapshot that exists when recovery runs ({@link restore/2}) belongs to
%% a step that a kill interrupted between 1 and 3 (or to an interrupted
%% recovery, which snapshots the table before it writes): every record of the
%% snapshot that the hash module routes to the fragment it was copied from,
%% and that the fragment lacks, is written back (a value the fragment holds
%% is newer, and kept). The records that an `add_frag' moves into the new
%% fragment are in the journal entry, and restored the same way.
%%
%% Limits: a snapshot copies whole fragments (the dets slots a change
%% touches are internal to dets), so it costs a read and a write of each
%% fragment a step writes. A key that a user deleted, durably, in the
%% moments between the step's commit and its `discard/1' comes back if the
%% VM is killed in those moments. Only this node's files are covered.
-module(fraghash_snapshot).

-export([take/2, discard/1, restore/2, dir/1, local_dets/1]).

-define(CHUNK, 1000).

%% @doc Snapshots the fragments `Frags' (table names) of `Tab' that have a
%% `disc_only_copies' copy on this node. Call it inside the transaction
%% that holds table locks on them, before writing them. On a failure (a
%% full disc, say) it aborts that transaction with `{fraghash,
%% snapshot_failed, Message}': the step has written nothing yet.
-spec take(atom(), [atom()]) -> ok.
take(Tab, Frags) ->
    case local_dets(Frags) of
        [] ->
            ok;
        Local ->
            Dir = dir(Tab),
            try
                ok = filelib:ensure_dir(filename:join(Dir, "x")),
                lists:foreach(fun(F) -> ok = copy(F, Dir) end, Local)
            catch
                _:Reason ->
                    _ = discard(Tab),
                    mnesia:abort(
                      {fraghash, snapshot_failed,
                       lists:flatten(
                         io_lib:format("could not copy ~s's disc_only_copies fragments into "
                                       "~s (~0tp): make room there, then run the "
                                       "operation again", [Tab, Dir, Reason]))})
            end
    end.

%% @doc Removes `Tab''s snapshot, if any.
-spec discard(atom()) -> ok.
discard(Tab) ->
    Dir = dir(Tab),
    case file:list_dir(Dir) of
        {ok, Files} ->
            [ok = file:delete(filename:join(Dir, F)) || F <- Files],
            _ = file:del_dir(Dir),
            ok;
        {error, _} ->
            %% None (or not a directory: then take/2 reports it).
            ok
    end.

%% @doc After a crash: writes back every record of `Tab''s snapshot (and of
%% the moves `Entry' journals) that the hash module routes to the fragment
%% it was taken from and that the fragment lacks, then flushes. Returns the
%% count written back. The snapshot stays: the caller discards it once the
%% rest of recovery is durable.
-spec restore(atom(), map() | none) -> {ok, non_neg_integer()} | {error, term()}.
restore(Tab, Entry) ->
    Dir = dir(Tab),
    case file:list_dir(Dir) of
        {error, enoent} ->
            {ok, 0};
        {ok, Files} ->
            Frags = [list_to_atom(filename:rootname(F)) || F <- Files,
                                                          filename:extension(F) =:= ".DAT"],
            Moves = case Entry of
                        #{op := add, moves := Ms} -> [{To, Rec} || {_K, _F, To, Rec} <- Ms];
                        _ -> []
                    end,
            try
                Back = lists:sum([restore_frag(Tab, F, Dir) || F <- Frags])
                    + restore_records(Tab, Moves),
                {ok, Back}
            catch
                error:{fraghash_snapshot, Reason} -> {error, Reason}
            end
    end.

%% @doc The directory of `Tab''s snapshot, beside Mnesia's files.
-spec dir(atom()) -> file:filename().
dir(Tab) ->
    filename:join([mnesia:system_info(directory), "fraghash_snapshots", atom_to_list(Tab)]).

%% @doc Those of the fragments `Frags' that have a `disc_only_copies' copy
%% on this node (sorted, without duplicates): the ones a snapshot covers.
-spec local_dets([atom()]) -> [atom()].
local_dets(Frags) ->
    Local = mnesia:system_info(local_tables),
    [F || F <- lists:usort(Frags), lists:member(F, Local),
          mnesia:table_info(F, storage_type) =:= disc_only_copies].

%%% Internals

%% Copies fragment F's dets table into Dir/F.DAT, through a temporary file.
copy(F, Dir) ->
    ok = dets:sync(F),
    Tmp = filename:join(Dir, atom_to_list(F) ++ ".TMP"),
    Final = filename:join(Dir, atom_to_list(F) ++ ".DAT"),
    _ = file:delete(Tmp),
    Name = {?MODULE, F},
    {ok, Name} = dets:open_file(Name, [{file, Tmp},
                                       {type, dets:info(F, type)},
                                       {keypos, dets:info(F, keypos)},
                                       {auto_save, infinity}]),
    dets:safe_fixtable(F, true),
    try
        ok = dets:init_table(Name, chunks(F, start), [{format, bchunk}])
    after
        dets:safe_fixtable(F, false),
        ok = dets:close(Name)
    end,
    %% A properly closed file; flushed to the device as well, then moved
    %% into place (a snapshot file is whole or absent).
    {ok, Fd} = file:open(Tmp, [read, write, raw, binary]),
    ok = file:sync(Fd),
    ok = file:close(Fd),
    ok = file:rename(Tmp, Final).

chunks(F, Cont) ->
    fun(read) ->
            case dets:bchunk(F, Cont) of
                {error, Reason} -> error({fraghash_snapshot, {F, Reason}});
                {Cont2, Data} -> {Data, chunks(F, Cont2)};
                '$end_of_table' -> end_of_input
            end;
       (close) ->
            ok
    end.

restore_frag(Tab, F, Dir) ->
    File = filename:join(Dir, atom_to_list(F) ++ ".DAT"),
    %% (open_file/1 reads the table's type and key position from the file,
    %% which take/2 closed properly before naming it .DAT.)
    case dets:open_file(File) of
        {ok, Name} ->
            try
                restore_chunks(Tab, F, dets:select(Name, [{'_', [], ['$_']}], ?CHUNK), 0)
            after
                dets:close(Name)
            end;
        {error, Reason} ->
            error({fraghash_snapshot, {unreadable, File, Reason}})
    end.

restore_chunks(_Tab, _F, '$end_of_table', Back) ->
    Back;
restore_chunks(_Tab, F, {error, Reason}, _Back) ->
    error({fraghash_snapshot, {F, Reason}});
restore_chunks(Tab, F, {Recs, Cont}, Back) ->
    N = restore_records(Tab, [{F, R} || R <- Recs]),
    restore_chunks(Tab, F, dets:select(Cont), Back + N).

%% Writes each {Frag, Record} whose key the hash module routes to Frag, when
%% Frag holds no record of that key.
%% (A Mnesia record's key is its second element.)
restore_records(_Tab, []) ->
    0;
restore_records(Tab, Items) ->
    {Mod, S, _N} = fraghash_tab:hash(Tab),
    Tables = mnesia:system_info(tables),
    Mine = [{F, R} || {F, R} <- Items, lists:member(F, Tables),
                      fraghash_tab:frag_name(Tab, Mod:key_to_frag_number(S, element(2, R)))
                          =:= F],
    write_missing(Mine, 0).

write_missing([], Back) ->
    Back;
write_missing(Items, Back) ->
    {Batch, Rest} = lists:split(min(?CHUNK, length(Items)), Items),
    case mnesia:transaction(
           fun() ->
                   lists:sum([case mnesia:read(F, element(2, R), write) of
                                  [] -> mnesia:write(F, R, write), 1;
                                  _ -> 0
                              end || {F, R} <- Batch])
           end) of
        {atomic, N} -> write_missing(Rest, Back + N);
        {aborted, Reason} -> error({fraghash_snapshot, {restore_aborted, Reason}})
    end.
