%% @doc Durability across the nodes of a table: what a commit wrote is on
%% disc on every node that holds a disc copy of it.
%%
%% `mnesia:sync_log/0' syncs the calling node's log only. A commit
%% replicated to another node sits in that node's disk_log cache until the
%% cache is flushed (seconds later), and dets (`disc_only_copies') keeps
%% recent writes in its own cache: a kill -9 of that node in between loses
%% them there, and where that node holds the only disc copy of a fragment,
%% they are lost for good. So every step of `fraghash_frag' that must be
%% durable asks each node holding a disc copy to sync.
-module(fraghash_durable).

-export([tables/1, here/1]).

-define(TIMEOUT_MS, 60000).

%% @doc Makes what was committed to `Tables' durable on every node holding
%% a disc copy of one of them (and on this node): each syncs Mnesia's log
%% and flushes the dets files of its `disc_only_copies' copies among them.
%% A node that is down is passed over for a table that some node which did
%% sync also holds on disc: when it comes back, Mnesia loads that table
%% from the live copy, not from its own files. Raises when a table's
%% commit is on disc nowhere (its only holders down), or a node cannot sync
%% (a write that fails): whatever the caller was about to record as done (a
%% journal entry removed, an operation returned) must then wait for
%% recovery.
-spec tables([atom()]) -> ok.
tables(Tables) ->
    Holders = [{T, disc_holders(T)} || T <- Tables],
    Nodes = lists:usort([node() | lists:append([Ns || {_, Ns} <- Holders])]),
    Results = lists:zip(Nodes, erpc:multicall(Nodes, ?MODULE, here, [Tables], ?TIMEOUT_MS)),
    Synced = [N || {N, {ok, ok}} <- Results],
    Down = [N || {N, {error, {erpc, noconnection}}} <- Results],
    Failed = [{N, R} || {N, R} <- Results, R =/= {ok, ok}, not lists:member(N, Down)],
    %% Tables a down node holds that no node which synced holds too.
    Lost = [T || {T, Ns} <- Holders, lists:any(fun(N) -> lists:member(N, Down) end, Ns),
                 not lists:any(fun(N) -> lists:member(N, Synced) end, Ns)],
    case {Failed, Lost} of
        {[], []} -> ok;
        _ -> error({fraghash, not_durable, #{failed => Failed, down => Down, tables => Lost}})
    end.

disc_holders(T) ->
    mnesia:table_info(T, disc_copies) ++ mnesia:table_info(T, disc_only_copies).

%% @doc {@link tables/1} on this node alone (what each node runs).
-spec here([atom()]) -> ok.
here(Tables) ->
    ok = mnesia:sync_log(),
    Local = mnesia:system_info(local_tables),
    [ok = dets:sync(T) || T <- Tables, lists:member(T, Local),
                          mnesia:table_info(T, storage_type) =:= disc_only_copies],
    ok.
