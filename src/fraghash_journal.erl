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
%% An entry is small whatever the size an operation moves: its plan (the
%% hash states and fragment names) and its phase (`fraghash_grow_machine').
-module(fraghash_journal).

-export([ensure/0, write/2, set_phase/3, read/1, delete/1, pending/0]).

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
-spec write(atom(), map()) -> ok.
write(Tab, Entry) ->
    Stamped = Entry#{cookie => mnesia:table_info(Tab, cookie)},
    {atomic, ok} = mnesia:sync_transaction(fun() -> mnesia:write({?TABLE, Tab, Stamped}) end),
    fraghash_durable:tables([?TABLE]).

%% @doc Writes `Entry' (as {@link read/1} gave it) in phase `Phase',
%% durably.
-spec set_phase(atom(), map(), atom()) -> ok.
set_phase(Tab, Entry, Phase) ->
    write(Tab, Entry#{phase => Phase}).

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
                true -> Entry;
                false -> stale
            end;
        [] ->
            none
    end.

%% @doc Removes the entry of `Tab', durably.
-spec delete(atom()) -> ok.
delete(Tab) ->
    {atomic, ok} = mnesia:sync_transaction(fun() -> mnesia:delete({?TABLE, Tab}) end),
    fraghash_durable:tables([?TABLE]).

%% @doc The tables that have an entry (an operation to finish or undo).
-spec pending() -> [atom()].
pending() ->
    [T || T <- mnesia:dirty_all_keys(?TABLE), is_atom(T)].
