%% @doc What writers did to the fragments an operation takes records from
%% while it ran: `fraghash_grow' and `fraghash_grow_del' copy again the keys
%% they touched (each {@link take/2} gives the events since the last one);
%% `fraghash_frag' settles the writers that raced its schema change, as
%% below.
%%
%% Mnesia's routing race: a writer names the fragment of a key with the
%% hash state it reads before it takes its locks. A transaction older than
%% the add's schema transaction that asks for a lock the change holds waits
%% for it (Mnesia lets an older transaction wait for a younger one), then
%% goes on with its fragment: the one the key has just left. Its write
%% lands where reads no longer look (`fraghash_frag' moves it), and its
%% delete deletes nothing there, so the moved record stays in the new
%% fragment: a deleted key back. Nothing on disc tells that delete from
%% one that never happened, so it is watched as it happens:
%% <ol>
%% <li>{@link start/1} before the change: a process subscribes to the
%% donors' table events (`simple');</li>
%% <li>{@link mark/2} from inside the schema transaction, once it holds its
%% locks: events before the mark come from transactions that committed
%% before the change could lock, and are dropped;</li>
%% <li>{@link racing/2} once the follow-up holds table locks on the donors:
%% every racing writer (queued for those locks before it) has committed,
%% and its events, sent during its commit, are in. The change's own moves
%% (its transaction's events) are left out.</li>
%% </ol>
%% Each fragment is watched on one node that holds an active replica of it
%% (this node when it does), by a watcher process there: every commit to
%% the fragment is applied on that node, and there the events of a commit
%% reach the watcher before the commit's locks are released, so before
%% anything that waited for them. A watcher whose node goes down makes
%% {@link take/2} raise: the caller's operation stops and recovery takes
%% over. A kill between a racing delete and the follow-up loses what was
%% watched. The watchers hold every event on the fragments from the mark
%% (or the last take) to the follow-up: memory in proportion to the writes
%% made to them in that time.
-module(fraghash_frag_watch).

-export([start/1, mark/2, racing/2, take/2, stop/1, undo_racing_deletes/3]).

-opaque watch() :: [pid()].
-export_type([watch/0]).

%% @doc Starts watching the fragments `Frags'; the watchers end with their
%% caller.
-spec start([atom()]) -> watch().
start(Frags) ->
    Caller = self(),
    ByNode = lists:foldl(fun(F, Acc) ->
                                 maps:update_with(watch_node(F), fun(Fs) -> [F | Fs] end, [F], Acc)
                         end, #{}, Frags),
    [start_on(Node, Fs, Caller) || {Node, Fs} <- maps:to_list(ByNode)].

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

start_on(Node, Frags, Caller) ->
    Ref = make_ref(),
    Pid = spawn(Node, fun() ->
                              MRef = monitor(process, Caller),
                              [{ok, _} = mnesia:subscribe({table, F, simple}) || F <- Frags],
                              Caller ! {Ref, watching, self()},
                              loop(Caller, MRef, none, [])
                      end),
    receive
        {Ref, watching, Pid} -> Pid
    after 30000 ->
            exit(Pid, kill),
            error({fraghash, watcher_not_started, Node})
    end.

%% @doc Called from the schema transaction `Tid', holding its locks.
-spec mark(watch(), term()) -> ok.
mark(Pids, Tid) ->
    [Pid ! {mark, Tid} || Pid <- Pids],
    ok.

%% @doc The events since the last mark, oldest first per fragment, without
%% the marking transaction's own and those of the watcher's caller: `{write,
%% Record, Tid}', `{delete, {Frag, Key}, Tid}' or `{delete_object, Record,
%% Tid}', the record's first element being the fragment's name. Waits at
%% most `Timeout' ms for each watcher; a watcher gone answers nothing.
-spec racing(watch(), timeout()) -> [tuple()].
racing(Pids, Timeout) ->
    lists:append([ask(Pid, racing, Timeout, []) || Pid <- Pids]).

%% @doc As {@link racing/2}, and forgets the events returned: the next
%% call returns only later ones. Raises when a watcher is gone or does not
%% answer (its events would be missing).
-spec take(watch(), timeout()) -> [tuple()].
take(Pids, Timeout) ->
    lists:append([ask(Pid, take, Timeout, error) || Pid <- Pids]).

ask(Pid, What, Timeout, OnFailure) ->
    Ref = monitor(process, Pid),
    Pid ! {What, self(), Ref},
    receive
        {Ref, Events} ->
            demonitor(Ref, [flush]),
            Events;
        {'DOWN', Ref, process, Pid, Why} when OnFailure =:= error ->
            error({fraghash, watcher_gone, node(Pid), Why});
        {'DOWN', Ref, process, Pid, _} ->
            OnFailure
    after Timeout ->
            demonitor(Ref, [flush]),
            case OnFailure of
                error -> error({fraghash, watcher_timeout, node(Pid)});
                _ -> OnFailure
            end
    end.

%% @doc Stops the watchers.
-spec stop(watch()) -> ok.
stop(Pids) ->
    [exit(Pid, kill) || Pid <- Pids],
    ok.

%% @doc For each key an add moved (`Moved': key to the record moved) whose
%% last racing event is a delete: deletes it from the new
%% fragment `New' if that still holds the moved record or a value a racing
%% writer wrote (copied there by the follow-up), not a value written since
%% by a writer that routed the key to `New'. Call inside a transaction that
%% holds `New''s table lock. Returns the keys deleted.
-spec undo_racing_deletes([tuple()], #{term() => tuple()}, atom()) -> [term()].
undo_racing_deletes(Events, Moved, New) ->
    {Last, Written} =
        lists:foldl(
          fun({write, Rec, _}, {L, W}) ->
                  K = element(2, Rec),
                  {L#{K => write}, maps:update_with(K, fun(Vs) -> [Rec | Vs] end, [Rec], W)};
             ({delete, {_F, K}, _}, {L, W}) ->
                  {L#{K => delete}, W};
             ({delete_object, Rec, _}, {L, W}) ->
                  {L#{element(2, Rec) => delete}, W};
             (_, Acc) ->
                  Acc
          end, {#{}, #{}}, Events),
    Deleted = [K || {K, delete} <- maps:to_list(Last), maps:is_key(K, Moved)],
    lists:filtermap(
      fun(K) ->
              %% (An event's record is named after its fragment.)
              Known = [setelement(1, R, element(1, maps:get(K, Moved)))
                       || R <- [maps:get(K, Moved) | maps:get(K, Written, [])]],
              case mnesia:read(New, K, write) of
                  [V] ->
                      case lists:member(V, Known) of
                          true -> mnesia:delete(New, K, write), {true, K};
                          false -> false
                      end;
                  _ ->
                      false
              end
      end, Deleted).

%%% The watcher

loop(Caller, MRef, Tid, Acc) ->
    receive
        {mark, Tid2} ->
            loop(Caller, MRef, Tid2, []);
        {mnesia_table_event, {_Op, _What, EventTid} = Event} ->
            %% The change's own moves, and the follow-up's own writes (its
            %% caller's transactions), are not racing.
            case EventTid =:= Tid orelse activity_of(Caller, EventTid) of
                true -> loop(Caller, MRef, Tid, Acc);
                false -> loop(Caller, MRef, Tid, [Event | Acc])
            end;
        {mnesia_table_event, _} ->
            loop(Caller, MRef, Tid, Acc);
        {racing, From, Ref} ->
            From ! {Ref, lists:reverse(Acc)},
            loop(Caller, MRef, Tid, Acc);
        {take, From, Ref} ->
            From ! {Ref, lists:reverse(Acc)},
            loop(Caller, MRef, Tid, []);
        {'DOWN', MRef, process, _, _} ->
            ok
    end.

%% Whether an activity id (`{tid, Counter, Pid}', `{dirty, Pid}') is one of
%% `Pid''s.
activity_of(Pid, Id) when is_tuple(Id), tuple_size(Id) >= 2 ->
    element(tuple_size(Id), Id) =:= Pid;
activity_of(_Pid, _Id) ->
    false.
