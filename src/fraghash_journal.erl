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
%% A node whose Mnesia is stopped, or that is down, while an entry is
%% written is passed over (it holds nothing of the table: `fraghash_grow'
%% refuses otherwise), and that keeps the promise: when its Mnesia starts
%% while a node holding the journal runs, Mnesia loads the journal from that
%% node, not from its own files, so it sees every entry written meanwhile;
%% and it does not start alone on its older copy, since Mnesia loads a
%% table from its own disc only on a node that went down last (one that
%% went down before the others waits for one of them), unless an operator
%% forces it (`mnesia:force_load_table/1', master nodes: the heal of a
%% partition, docs/mnesia-disc-safety.md).
%%
%% An entry is small whatever the size an operation moves: its plan (the
%% hash states and fragment names) and its phase (`fraghash_grow_machine').
-module(fraghash_journal).

-export([ensure/0, write/2, set_phase/3, read/1, delete/1, pending/0]).

-define(TABLE, fraghash_journal).
-define(WAIT_MS, 60000).

%% @doc Creates the journal table if it does not exist (a `disc_copies'
%% copy on every node whose schema is on disc and whose Mnesia runs with
%% this one), and waits for it; gives a copy to such a node that has none
%% (one whose Mnesia was stopped when the table was made, or a disc node
%% added since). A node whose Mnesia is stopped holds no fragment of a
%% table an operation changes (`fraghash_grow' refuses otherwise), so it
%% needs no entry meanwhile; it gets its copy at the next call here once
%% it runs, before any entry of a table it holds is written.
-spec ensure() -> ok | {error, term()}.
ensure() ->
    Disc = [N || N <- mnesia:table_info(schema, disc_copies),
                 lists:member(N, mnesia:system_info(running_db_nodes))],
    case lists:member(?TABLE, mnesia:system_info(tables)) of
        true ->
            case wait() of
                ok -> add_copies(Disc -- mnesia:table_info(?TABLE, disc_copies));
                Error -> Error
            end;
        false ->
            case mnesia:create_table(?TABLE, [{disc_copies, Disc},
                                              {attributes, [tab, entry]}]) of
                {atomic, ok} -> wait();
                {aborted, {already_exists, ?TABLE}} -> wait();
                {aborted, Reason} -> {error, {cannot_create_journal, Reason}}
            end
    end.

add_copies([]) ->
    ok;
add_copies([N | Ns]) ->
    case mnesia:add_table_copy(?TABLE, N, disc_copies) of
        {atomic, ok} -> add_copies(Ns);
        {aborted, {already_exists, ?TABLE, N}} -> add_copies(Ns);
        {aborted, Reason} -> {error, {cannot_copy_journal, N, Reason}}
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
