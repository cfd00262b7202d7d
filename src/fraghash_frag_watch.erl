%% @doc What writers did to the fragments an operation takes records from
%% while it ran: the growth path (`fraghash_grow_copy') copies again the keys
%% they touched (each {@link take/2} gives the events since the last one).
%%
%% Each fragment is watched on one node that holds an active replica of it
%% (this node when it does), by a watcher process there subscribed to its
%% table events (`simple'): every commit to the fragment is applied on that
%% node, and there the events of a commit reach the watcher before the
%% commit's locks are released, so before anything that waited for them
%% (a copy round's read lock, the switch's write locks). An event comes
%% just before its change is made (Mnesia reports a change, then applies
%% it): a reader of a taken item waits for the writer's lock to see it,
%% and a change whose event came before the watcher subscribed is still
%% being applied for a moment (`fraghash_grow' starts the fence, which
%% waits for every transaction then running, after the watch). The
%% operation's own writes (its process's activities) are left out. A watcher whose
%% node goes down makes {@link take/2} raise: the caller's operation stops
%% and recovery takes over. The watchers hold every event on the
%% fragments since the last take: memory in proportion to the writes made
%% to them in that time.
-module(fraghash_frag_watch).

-export([start/1, take/2, stop/1, item/1]).

-opaque watch() :: [pid()].
-export_type([watch/0]).

%% @doc Starts watching the fragments `Frags' for {@link take/2}; the
%% watchers end with their caller.
-spec start([atom()]) -> watch().
start(Frags) ->
    start(Frags, self()).

start(Frags, Owner) ->
    ByNode = lists:foldl(fun(F, Acc) ->
                                 maps:update_with(watch_node(F), fun(Fs) -> [F | Fs] end, [F], Acc)
                         end, #{}, Frags),
    [start_on(Node, Fs, Owner) || {Node, Fs} <- maps:to_list(ByNode)].

%% The node that watches fragment `F': this one when it holds an active
%% replica, else the first that does.
watch_node(F) ->
    case mnesia:table_info(F, active_replicas) of
        [] -> error({fraghash, no_active_replica, F});
        Nodes -> case lists:member(node(), Nodes) of
                     true -> node();
                     false -> hd(Nodes)
                 end
    end.

start_on(Node, Frags, Owner) ->
    Ref = make_ref(),
    Starter = self(),
    Pid = spawn(Node, fun() ->
                              MRef = monitor(process, Owner),
                              [{ok, _} = mnesia:subscribe({table, F, simple}) || F <- Frags],
                              Starter ! {Ref, watching, self()},
                              loop(Owner, MRef, [])
                      end),
    receive
        {Ref, watching, Pid} -> Pid
    after 30000 ->
            exit(Pid, kill),
            error({fraghash, watcher_not_started, Node})
    end.

%% @doc The events since the last call (since the start for the first),
%% oldest first per fragment, without those of the caller's own
%% activities: `{write, Record, Tid}', `{delete, {Frag, Key}, Tid}' or
%% `{delete_object, Record, Tid}', the record's first element being the
%% fragment's name. Waits at most `Timeout' ms for each watcher. Raises
%% when a watcher is gone or does not answer (its events would be
%% missing).
-spec take(watch(), timeout()) -> [tuple()].
take(Pids, Timeout) ->
    lists:append([ask(Pid, take, Timeout) || Pid <- Pids]).

ask(Pid, Question, Timeout) ->
    Ref = monitor(process, Pid),
    Pid ! {Question, self(), Ref},
    receive
        {Ref, Events} ->
            demonitor(Ref, [flush]),
            Events;
        {'DOWN', Ref, process, Pid, Why} ->
            error({fraghash, watcher_gone, node(Pid), Why})
    after Timeout ->
            demonitor(Ref, [flush]),
            error({fraghash, watcher_timeout, node(Pid)})
    end.

%% @doc Stops the watchers.
-spec stop(watch()) -> ok.
stop(Pids) ->
    [exit(Pid, kill) || Pid <- Pids],
    ok.

%%% The watcher

loop(Caller, MRef, Acc) ->
    receive
        {mnesia_table_event, {_Op, _What, EventTid} = Event} ->
            %% The operation's own copies are not a writer's.
            case activity_of(Caller, EventTid) of
                true -> loop(Caller, MRef, Acc);
                false -> loop(Caller, MRef, [Event | Acc])
            end;
        {mnesia_table_event, _} ->
            loop(Caller, MRef, Acc);
        {take, From, Ref} ->
            From ! {Ref, lists:reverse(Acc)},
            loop(Caller, MRef, []);
        {'DOWN', MRef, process, _, _} ->
            ok
    end.

%% @doc The item `{Fragment, Key}' that an event of {@link take/2} changed.
-spec item(tuple()) -> {atom(), term()}.
item({write, Rec, _}) -> {element(1, Rec), element(2, Rec)};
item({delete_object, Rec, _}) -> {element(1, Rec), element(2, Rec)};
item({delete, {Frag, K}, _}) -> {Frag, K}.

%% Whether an activity id (`{tid, Counter, Pid}', `{dirty, Pid}') is one of
%% `Pid''s.
activity_of(Pid, Id) when is_tuple(Id), tuple_size(Id) >= 2 ->
    element(tuple_size(Id), Id) =:= Pid;
activity_of(_Pid, _Id) ->
    false.
