%% @doc How the growth path moves records while writers keep going, in
%% memory of one batch whatever the size moved: the bulk copy, read from
%% each source fragment in chunks; rounds of copies of what writers
%% touched meanwhile; the last copy, made under the switch's fence; and,
%% after the switch, the deletion of the moved records from their sources.
%% Shared by the add and the del (`fraghash_grow').
%%
%% Records are named by items `{Source, Key}': the fragment they are
%% taken from, and their key. `Where' maps each source fragment to how its
%% table places a record (`route()'): where the target state `to' and the
%% old state `from' put it, by the value of its placing field (the key, or
%% a foreign-key table's foreign key), and the fragments its copies may be
%% in (`dests'). A record moves when `to' places it elsewhere than its
%% source; a copy of it is a record in a destination that `from' places
%% in the source. Correctness needs no record of what was copied: before
%% the switch a copy is only ever replaced by a newer one (a writer's change
%% to the source is seen by the watch and copied again), and after it
%% nothing but the copies is read (`fraghash_grow_fence'), so the copies
%% the sources still hold are deleted wherever they are found. The items
%% copied are noted in a list on disc (`fraghash_grow_moved') all the same,
%% so that the cleaning finds them without reading the sources again.
%%
%% Every copy and every delete returns once every replica applied it and
%% makes no writer wait: no writer writes a hidden copy (its key routes to
%% its source) nor, after the switch, a moved record in its source (it
%% routes to the copy). The bulk copy into an add's new fragment, which no
%% writer reaches, is a `sync_transaction' per chunk under a table lock on
%% it, or, where that fragment is one dets file, one write of the chunk
%% into it (into_dests/2); every other copy and delete is a `sync_dirty'
%% activity and takes no lock. A lock on a fragment that writers write (a
%% donor, a del's or a rehash's destination) would make them wait, or make
%% the operation's younger transaction restart behind theirs, chunk after
%% chunk. The one other lock taken is a read lock on each item a writer
%% touched, while the round that copies it reads it (see copy_items/3).
%% Each phase ends with a sync of what it wrote on every node holding it
%% (`fraghash_durable').
-module(fraghash_grow_copy).

-export([copy_all/3, last_copy/2, clean/3, remove_hidden/1]).

-export_type([where/0, route/0]).

-import(fraghash_tab, [chunks/1]).

-type route() :: #{pos := pos_integer(), to := fun((term()) -> atom()),
                   from := fun((term()) -> atom()), dests := [atom()], by_key := boolean(),
                   hidden := boolean()}.
-type where() :: #{atom() => route()}.

%% Copy rounds after the bulk copy, at most.
-define(ROUNDS, 8).
%% Chunks of the bulk copy between two copies of what writers touched, so
%% that the watch holds the writes of a few seconds at most.
-define(DRAIN_EVERY, 20).
-define(WATCH_MS, 60000).

%%% Copying

%% @doc Copies every moving record of the sources of `Where' to where the
%% target states place it, reading each source in chunks (`fraghash_tab:
%% fold/4'), in one activity per chunk: a writer's change to a record after
%% it was read is seen by
%% `Watcher' (started on the sources before), and copied again, every few
%% chunks and in rounds after, until a round finds nothing or 8 rounds are
%% done. What writers touch after that is copied under the fence
%% ({@link last_copy/2}). `Progress(Read, Copied)' is told of each chunk.
-spec copy_all(where(), fraghash_frag_watch:watch(),
               fun((non_neg_integer(), non_neg_integer()) -> ok)) -> ok.
copy_all(Where, Watcher, Progress) ->
    Spec = [{'_', [], ['$_']}],
    maps:foreach(
      fun(S, Route) ->
              Copy = fun(Chunk, Count) ->
                             Copied = copy_chunk(Where, S, Route, Chunk),
                             ok = Progress(length(Chunk), Copied),
                             case (Count + 1) rem ?DRAIN_EVERY of
                                 0 -> _ = copy_touched(Where, Watcher, locked), ok;
                                 _ -> ok
                             end,
                             Count + 1
                     end,
              _ = fraghash_tab:fold(S, Spec, Copy, 0)
      end, Where),
    rounds(Where, Watcher, ?ROUNDS).

rounds(_Where, _Watcher, 0) ->
    ok;
rounds(Where, Watcher, Left) ->
    case copy_touched(Where, Watcher, locked) of
        none -> ok;
        ok -> rounds(Where, Watcher, Left - 1)
    end.

%% @doc The last copy, made while the fence holds every source: no writer
%% changes one any more, and every change made to one before is in the
%% watch and applied by now (the events of a commit reach a watcher before
%% its locks are released, and a node releases them once it applied it).
%% Its reads take no lock: the fence holds them all.
-spec last_copy(where(), fraghash_frag_watch:watch()) -> ok.
last_copy(Where, Watcher) ->
    case copy_touched(Where, Watcher, fenced) of
        none -> ok;
        ok -> ok
    end.

%% Copies what writers touched since the last take, read as `Reading'
%% says (copy_items/3): `none' when they touched nothing.
copy_touched(Where, Watcher, Reading) ->
    case touched(Where, Watcher) of
        [] -> none;
        Items -> copy_items(Where, Items, Reading)
    end.

%% A chunk of source `S''s records, read by the bulk copy. One record per
%% key in a `set' or `ordered_set' table: each moving one is written where
%% it goes. A `bag' key's records may span two chunks: its items are
%% copied whole (copy_items/3). Returns how many records moved.
copy_chunk(Where, S, Route, Chunk) ->
    Moving = [R || R <- Chunk, moves(S, Route, R)],
    case mnesia:table_info(S, type) of
        bag ->
            ok = copy_items(Where, lists:usort([{S, element(2, R)} || R <- Moving]), locked);
        _ ->
            ok = fraghash_grow_moved:note([{S, element(2, R)} || R <- Moving]),
            ok = into_dests(Route, Moving)
    end,
    length(Moving).

%% Writes `Moving' where the target state places each record. Into a
%% hidden destination (an add's new fragment, which no writer reaches
%% before the switch): straight into its dets file when that is its only
%% copy and nothing else of Mnesia's watches it (bulk_holder/1), else in a
%% `sync_transaction' under a write lock on it (the lock makes nobody
%% wait, and one commit of a chunk costs about half as much as a dirty
%% write per record on `disc_only_copies'). Elsewhere in a dirty activity
%% (a lock there would hold writers).
into_dests(#{hidden := true} = Route, Moving) ->
    ByDest = maps:groups_from_list(fun(R) -> place(Route, to, R) end, Moving),
    case maps:filter(fun(D, Recs) -> not bulk_insert(bulk_holder(D), D, Recs) end, ByDest) of
        Logged when map_size(Logged) =:= 0 ->
            ok;
        Logged ->
            mnesia:activity(sync_transaction,
                            fun() ->
                                    maps:foreach(fun(D, Recs) ->
                                                         _ = mnesia:lock({table, D}, write),
                                                         [ok = mnesia:write(D, R, write)
                                                          || R <- Recs]
                                                 end, Logged)
                            end)
    end;
into_dests(Route, Moving) ->
    dirty(fun() -> [ok = mnesia:write(place(Route, to, R), R, write) || R <- Moving], ok end).

%% The node holding hidden fragment `D''s only copy, when that copy is a
%% dets file (`disc_only_copies') of a `set' that Mnesia keeps nothing
%% else for: no index, no checkpoint, no subscriber on this node (one on
%% the holder, if that is another node, is not seen). Else `logged'.
%%
%% Why: Mnesia applies a commit one record at a time, and dets takes a
%% record written alone at about three times what it takes for each of a
%% batch of 500 (the relieve benchmark's loader: 140 against 45 us a
%% record); on `disc_only_copies' that was most of an add's copy (a
%% relieve at 1 GB of 1 KB records: 32.5 s of copying instead of 71.9).
%% Writing the records straight into the file, as Mnesia's own loader
%% fills a new copy, skips Mnesia's log and its replicas, which is sound
%% only there: no other copy is to be kept equal, nobody reads the
%% fragment before the switch, and the sync that ends the copy
%% (`fraghash_durable:tables/1', a `dets:sync/1') puts these records on
%% disc before the switch makes them the table's. After a kill before
%% then recovery drops the fragment; Mnesia's log holds no
%% write that could replay an older value over them (every writer's change
%% during the copy is copied again through Mnesia after it,
%% copy_touched/3). A second copy added by hand while the add runs would
%% miss them: Mnesia's loader would not see them coming.
bulk_holder(D) ->
    case {mnesia:table_info(D, all_nodes), mnesia:table_info(D, disc_only_copies),
          mnesia:table_info(D, type), mnesia:table_info(D, index),
          mnesia:table_info(D, subscribers), mnesia:table_info(D, checkpoints)} of
        {[Node], [Node], set, [], [], []} -> Node;
        _ -> logged
    end.

%% Writes `Recs' into the dets file of `D' on `Node' in one request
%% (`true'), or answers `false' for `logged'. A failed write raises (a
%% full disc is named as one, fraghash_frag:recover/0): the copy stops,
%% and recovery undoes the operation.
bulk_insert(logged, _D, _Recs) ->
    false;
bulk_insert(Node, D, Recs) ->
    case on(Node, fun() -> dets:insert(D, Recs) end, 60000) of
        ok -> true;
        {error, Why} -> error({dets_insert_failed, D, Node, Why})
    end.

%% Copies each item afresh: its source's moving records (read now) replace
%% its copies in every fragment where they go or may have gone, in
%% batches.
%%
%% A writer's event reaches the watch just before its commit is applied
%% (Mnesia reports a change, then makes it), so an item taken from the
%% watch may not hold its new records yet. Outside the fence (`locked')
%% each batch is read in a transaction that read-locks its items: a node
%% releases a writer's locks once it has applied the commit, so the read
%% sees every write the watch reported (measured: without the lock, a
%% `redb_copies' write read a moment too early was copied old and lost).
%% Under the fence (`fenced') the fence's locks already say so, and a
%% read lock would wait for them.
copy_items(Where, Items, Reading) ->
    lists:foreach(fun(Batch) ->
                          ok = fraghash_grow_moved:note(Batch),
                          Read = read_batch(Where, Batch, Reading),
                          ok = dirty(fun() -> put_batch(Read) end)
                  end,
                  chunks(lists:usort(Items))).

%% In a dirty activity: each item read copied afresh.
put_batch(Read) ->
    [put_copies(I, Recs, Route, D) || {I, Recs, Route} <- Read, D <- dests(I, Recs, Route)],
    ok.

%% `{Item, MovingRecords, Route}' of each item of `Batch', read now.
read_batch(Where, Batch, fenced) ->
    reads(Where, Batch, fun(S, K) -> mnesia:dirty_read(S, K) end);
read_batch(Where, Batch, locked) ->
    {atomic, Read} = mnesia:transaction(
                       fun() -> reads(Where, Batch, fun(S, K) -> mnesia:read(S, K, read) end) end),
    Read.

reads(Where, Batch, Read) ->
    [{I, [R || R <- Read(S, K), moves(S, Route, R)], Route}
     || {S, K} = I <- Batch, Route <- [maps:get(S, Where)]].

%% The fragments item `I''s copies go to (those of its moving records
%% `Recs') or may be in: for a table placed by its key, where the key
%% goes; for a foreign-key table, whose records move with a field a
%% writer can change, every destination of the source.
dests({S, K}, Recs, #{by_key := ByKey, to := To, dests := All} = Route) ->
    Where = [place(Route, to, R) || R <- Recs],
    Maybe = case ByKey of
                true -> [D || D <- [To(K)], D =/= S];
                false -> All
            end,
    lists:usort(Where ++ Maybe).

%% Makes destination `D' hold, of the records under the key of item
%% `{S, K}', the moving records it is due (`Recs' placed there) and no
%% other copy from `S': a record there that the old state places in `S'
%% is such a copy.
put_copies({S, K}, Recs, Route, D) ->
    Old = mnesia:read(D, K, write),
    Copies = [R || R <- Old, place(Route, from, R) =:= S],
    Due = [R || R <- Recs, place(Route, to, R) =:= D],
    case mnesia:table_info(D, type) of
        bag ->
            [ok = mnesia:delete_object(D, R, write) || R <- Copies -- Due],
            [ok = mnesia:write(D, R, write) || R <- Due -- Old],
            ok;
        _ when Due =/= [] ->
            [ok = mnesia:write(D, R, write) || R <- Due, [R] =/= Old],
            ok;
        _ when Copies =/= [], Copies =:= Old ->
            ok = mnesia:delete(D, K, write);
        _ ->
            [ok = mnesia:delete_object(D, R, write) || R <- Copies],
            ok
    end.

%% The items that writers wrote or deleted in the sources since the last
%% call and that can concern the operation: in a table placed by its key,
%% one whose key moves; in a foreign-key table, any (a change of the
%% placing field moves the record, or takes it back).
touched(Where, Watcher) ->
    lists:usort([I || E <- fraghash_frag_watch:take(Watcher, ?WATCH_MS),
                      {S, K} = I <- [fraghash_frag_watch:item(E)],
                      Route <- [maps:get(S, Where)],
                      not maps:get(by_key, Route) orelse place_key(Route, K) =/= S]).

%%% After the switch

%% Deletes from each source of `Where' the records the target state
%% places elsewhere (their copies are where they are read now), reading
%% the source in chunks and deleting each chunk's in one dirty activity.
%% Idempotent: recovery runs it again after a kill. `Progress(Read,
%% Deleted)' is told of each chunk.
-spec clean(where(), fun((non_neg_integer(), non_neg_integer()) -> ok)) -> ok.
clean(Where, Progress) ->
    maps:foreach(
      fun(S, Route) ->
              %% In the reader, next to the source (fraghash_tab:fold/5).
              Leave = fun(Chunk) ->
                              Keys = lists:usort([K || {K, V} <- Chunk,
                                                       place_value(Route, to, V) =/= S]),
                              ok = leave_source(S, Route, Keys),
                              {length(Chunk), length(Keys)}
                      end,
              ok = fraghash_tab:fold(S, placing_spec(Route), Leave,
                                     fun({Read, Deleted}, ok) -> Progress(Read, Deleted) end, ok)
      end, Where).

%% @doc Deletes from each source of `Where' the records the target state
%% places elsewhere, found by the items the copy moved, read from list
%% `Moved' (`fraghash_grow_moved'); without a list, or one that cannot be
%% read to its end, by reading the sources (clean/2). Each chunk's deletes
%% run on a node holding the source. Idempotent: recovery runs it again
%% after a kill. `Progress(Read, Deleted)' is told of each chunk.
-spec clean(where(), fun((non_neg_integer(), non_neg_integer()) -> ok),
            fraghash_grow_moved:moved() | none) -> ok.
clean(Where, Progress, none) ->
    clean(Where, Progress);
clean(Where, Progress, Moved) ->
    Leave = fun(Items) ->
                    BySource = maps:groups_from_list(fun({S, _}) -> S end,
                                                     fun({_, K}) -> K end, Items),
                    maps:foreach(fun(S, Keys) ->
                                         leave_listed(S, maps:get(S, Where), Keys, Progress)
                                 end, maps:with(maps:keys(Where), BySource))
            end,
    case fraghash_grow_moved:fold(Moved, Leave) of
        ok ->
            ok;
        {error, Why} ->
            logger:warning("fraghash: the list of moved records could not be read to its end "
                           "(~0tP): cleaning reads the sources instead", [Why, 20]),
            clean(Where, Progress)
    end.

%% The listed keys of source `S' that the target state places elsewhere
%% (a key placed by itself is checked again; a foreign-key table's records
%% are, in leave_key/3) deleted there, next to the source.
leave_listed(S, Route, Listed, Progress) ->
    Keys = [K || K <- lists:usort(Listed),
                 not maps:get(by_key, Route) orelse place_key(Route, K) =/= S],
    ok = on(fraghash_tab:reader_node(S), fun() -> leave_source(S, Route, Keys) end, infinity),
    Progress(length(Listed), length(Keys)).

%% Deletes the moved records of `Keys' from source `S' in one dirty
%% activity: a table placed by its key moves a key's records together, so
%% the key goes, unread; a foreign-key table's records are read and those
%% placed elsewhere go. (Transactions that lock the fragment for a batch
%% were tried on `disc_only_copies': no faster, restarting behind the
%% writers, and they held them to a tenth of their rate.)
leave_source(_S, _Route, []) ->
    ok;
leave_source(S, Route, Keys) ->
    dirty(fun() -> [leave_key(S, Route, K) || K <- Keys], ok end).

leave_key(S, #{by_key := true}, K) ->
    ok = mnesia:delete(S, K, write);
leave_key(S, Route, K) ->
    All = mnesia:read(S, K, write),
    case [R || R <- All, place(Route, to, R) =/= S] of
        [] -> ok;
        All -> ok = mnesia:delete(S, K, write);
        Here -> [ok = mnesia:delete_object(S, R, write) || R <- Here], ok
    end.

%% @doc Undoes the copies of a del or a rehash that did not switch:
%% deletes from each destination of the sources of `Where' every record the
%% old state places in a source other than that destination (no key reads
%% one there), in chunks, each destination read once.
-spec remove_hidden(where()) -> ok.
remove_hidden(Where) ->
    Sources = maps:keys(Where),
    Dests = lists:usort([D || #{dests := Ds} <- maps:values(Where), D <- Ds]),
    lists:foreach(
      fun(D) ->
              [Route | _] = [R || #{dests := Ds} = R <- maps:values(Where), lists:member(D, Ds)],
              Hidden = fun(R) -> F = place(Route, from, R), F =/= D andalso lists:member(F, Sources) end,
              ok = fraghash_tab:fold(D, [{'_', [], ['$_']}],
                                     fun(Chunk) -> remove_copies(D, [R || R <- Chunk, Hidden(R)]) end,
                                     fun(ok, ok) -> ok end, ok)
      end, Dests).

remove_copies(_D, []) ->
    ok;
remove_copies(D, Copies) ->
    dirty(fun() -> [ok = mnesia:delete_object(D, R, write) || R <- Copies], ok end).

%%% Internals

%% Whether record `R' of source `S' moves.
moves(S, Route, R) ->
    place(Route, to, R) =/= S.

place(#{pos := Pos} = Route, Which, R) ->
    place_value(Route, Which, element(Pos, R)).

place_value(Route, Which, V) ->
    (maps:get(Which, Route))(V).

place_key(Route, K) ->
    place_value(Route, to, K).

%% `{Key, PlacingValue}' of each record of a source.
placing_spec(#{pos := Pos}) ->
    [{'_', [], [{{{element, 2, '$_'}, {element, Pos, '$_'}}}]}].

%% `F()' run on `Node': here in this process (its data not copied), else
%% by `erpc' within `Timeout'.
on(Node, F, _Timeout) when Node =:= node() ->
    F();
on(Node, F, Timeout) ->
    erpc:call(Node, F, Timeout).

%% Runs `F' in a `sync_dirty' activity: no lock, applied on every replica
%% when it returns.
dirty(F) ->
    mnesia:activity(sync_dirty, F).
