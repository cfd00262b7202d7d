%% @doc The journal of the crash-safe fragment operations of
%% `fraghash_frag': one `disc_copies' Mnesia table, `fraghash_journal',
%% holding at most one entry per fragmented table, the operation in
%% progress on it and what recovery needs to finish it or roll it back.
%%
%% Every change to the journal is an ordinary transaction followed by a
%% sync of Mnesia's log on every node holding a copy of the journal
%% (`fraghash_durable'): when a function here returns, the entry is on disc
%% there (Mnesia's durability line for `disc_copies'), so recovery on any
%% of them sees it, and it survives a kill -9 of any of them from then on.
%%
%% An entry's moved records (its `moved' map: one record per key moved, so
%% O(records moved), megabytes for a large add) are kept in a record of
%% their own, under `{moved, Tab}', and the last copies a switch made
%% under its locks in another, under `{last_copies, Tab}': a change of
%% phase, and the switch's last copies, write what changed only, and the
%% switch, which holds writers off while it runs, reads and writes
%% O(records it copies), never the whole map.
-module(fraghash_journal).

-export([ensure/0, write/2, set_phase/3, read/1, delete/1, pending/0, last_copies/1,
         write_last_copies/2, progress/1, write_progress/2]).

-define(TABLE, fraghash_journal).
-define(WAIT_MS, 60000).

%% @doc Creates the journal table if it does not exist (a `disc_copies'
%% copy on every node whose schema is on disc), and waits for it.
-spec ensure() -> ok | {error, term()}.
ensure() ->
    case lists:member(?TABLE, mnesia:system_info(tables)) of
        true ->
            wait();
        false ->
            Nodes = mnesia:table_info(schema, disc_copies),
            case mnesia:create_table(?TABLE, [{disc_copies, Nodes},
                                              {attributes, [tab, entry]}]) of
                {atomic, ok} -> wait();
                {aborted, {already_exists, ?TABLE}} -> wait();
                {aborted, Reason} -> {error, {cannot_create_journal, Reason}}
            end
    end.

wait() ->
    case mnesia:wait_for_tables([?TABLE], ?WAIT_MS) of
        ok -> ok;
        Other -> {error, {journal_not_loaded, Other}}
    end.

%% @doc Writes the entry of `Tab', durably. The entry records the table's
%% incarnation (its Mnesia cookie), so that it is never applied to a table
%% of the same name created after this one was deleted (see {@link read/1}).
%% An entry with a `moved' map replaces the moved records kept (and drops
%% the last copies, which a later switch makes again); one without keeps
%% those there.
-spec write(atom(), map()) -> ok.
write(Tab, Entry) ->
    Stamped = maps:remove(moved, Entry#{cookie => mnesia:table_info(Tab, cookie)}),
    {atomic, ok} = mnesia:sync_transaction(
                     fun() ->
                             mnesia:write({?TABLE, Tab, Stamped}),
                             case Entry of
                                 #{moved := Moved} ->
                                     mnesia:write({?TABLE, {moved, Tab}, Moved}),
                                     mnesia:delete({?TABLE, {last_copies, Tab}});
                                 _ ->
                                     ok
                             end
                     end),
    fraghash_durable:tables([?TABLE]).

%% @doc Writes `Entry' (as {@link read/1} gave it) in phase `Phase',
%% durably, keeping the moved records and last copies kept beside it as
%% they are: a change of phase does not rewrite them.
-spec set_phase(atom(), map(), atom()) -> ok.
set_phase(Tab, Entry, Phase) ->
    write(Tab, maps:remove(moved, Entry#{phase => Phase})).

%% @doc The last copies a switch of `Tab''s operation made under its locks
%% (`#{}' when none): what an earlier try of the switch copied, when
%% Mnesia runs its schema change again.
-spec last_copies(atom()) -> map().
last_copies(Tab) ->
    case mnesia:dirty_read(?TABLE, {last_copies, Tab}) of
        [{?TABLE, _, Copies}] -> Copies;
        [] -> #{}
    end.

%% @doc Records, durably, the last copies of a switch (`Copies', added to
%% the entry's moved records when it is read), from a fresh process: the
%% caller is inside the switch's schema transaction, and this is an
%% ordinary transaction of its own, not a part of it. Aborts the caller's
%% transaction if it fails.
-spec write_last_copies(atom(), map()) -> ok.
write_last_copies(Tab, Copies) ->
    Write = fun() ->
                    {atomic, ok} = mnesia:sync_transaction(
                                     fun() ->
                                             mnesia:write({?TABLE, {last_copies, Tab}, Copies})
                                     end),
                    fraghash_durable:tables([?TABLE])
            end,
    {Pid, Ref} = spawn_monitor(fun() -> exit({journal_written, Write()}) end),
    receive
        {'DOWN', Ref, process, Pid, {journal_written, ok}} -> ok;
        {'DOWN', Ref, process, Pid, Other} ->
            mnesia:abort({fraghash, journal_write_failed,
                          lists:flatten(
                            io_lib:format("could not write ~s's journal entry (~0tp): make room "
                                          "on the disc of every node holding the journal, then "
                                          "run the operation again", [Tab, Other]))})
    end.

%% @doc The entry of `Tab'; `none' when there is none; `stale' when it
%% belongs to a table of that name that no longer exists (deleted, or
%% deleted and created again since): nothing of it applies to the table
%% there now.
-spec read(atom()) -> map() | none | stale.
read(Tab) ->
    case mnesia:dirty_read(?TABLE, Tab) of
        [{?TABLE, Tab, Entry}] ->
            Exists = lists:member(Tab, mnesia:system_info(tables)),
            case Exists andalso maps:get(cookie, Entry) =:= mnesia:table_info(Tab, cookie) of
                true -> with_moved(Tab, Entry);
                false -> stale
            end;
        [] ->
            none
    end.

%% The entry with its moved records, the last copies among them.
with_moved(Tab, Entry) ->
    case mnesia:dirty_read(?TABLE, {moved, Tab}) of
        [{?TABLE, _, Moved}] -> Entry#{moved => maps:merge(Moved, last_copies(Tab))};
        [] -> Entry
    end.

%% @doc How far the cleaning of `Tab''s operation got: `{done_to, Key}'
%% (every key up to `Key', in Erlang term order, is done), or `none'.
%% Kept beside the entry (under `{progress, Tab}'), so that writing it does
%% not rewrite the entry.
-spec progress(atom()) -> {done_to, term()} | none.
progress(Tab) ->
    case mnesia:dirty_read(?TABLE, {progress, Tab}) of
        [{?TABLE, _, Progress}] -> Progress;
        [] -> none
    end.

%% @doc Records, inside the caller's transaction, that every key up to
%% `Key' is done: the mark commits with the work it stands for, or not at
%% all.
-spec write_progress(atom(), term()) -> ok.
write_progress(Tab, Key) ->
    mnesia:write({?TABLE, {progress, Tab}, {done_to, Key}}).

%% @doc Removes the entry of `Tab', its moved records and its progress
%% mark, durably.
-spec delete(atom()) -> ok.
delete(Tab) ->
    {atomic, ok} = mnesia:sync_transaction(
                     fun() ->
                             [mnesia:delete({?TABLE, K})
                              || K <- [{progress, Tab}, {last_copies, Tab}, {moved, Tab}, Tab]],
                             ok
                     end),
    fraghash_durable:tables([?TABLE]).

%% @doc The tables that have an entry (an operation to finish or undo).
-spec pending() -> [atom()].
pending() ->
    [T || T <- mnesia:dirty_all_keys(?TABLE), is_atom(T)].
