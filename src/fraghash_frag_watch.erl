%% @doc What writers racing an `add_frag' did to the fragments it takes
%% records from, so that `fraghash_frag' can settle their changes after the
%% commit.
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
%% On one node the events of a commit reach the watcher before the commit's
%% locks are released, so before anything that waited for them. Only this
%% node's commits are seen: a racing writer on another node is seen when
%% its commit is applied here, which Mnesia does for a table replicated
%% here; the donors of a table with no replica here are not watched. A kill
%% between a racing delete and the follow-up loses what was watched. The
%% watcher holds every event on the donors from the mark to the follow-up's
%% lock: memory in proportion to the writes made to them in that time.
-module(fraghash_frag_watch).

-export([start/1, mark/2, racing/2, stop/1, undo_racing_deletes/3]).

%% @doc Starts watching the fragments `Frags' (those with a replica on this
%% node); the watcher ends with its caller.
-spec start([atom()]) -> pid().
start(Frags) ->
    Caller = self(),
    Ref = make_ref(),
    Pid = spawn(fun() ->
                        MRef = monitor(process, Caller),
                        Local = mnesia:system_info(local_tables),
                        _ = [mnesia:subscribe({table, F, simple})
                             || F <- Frags, lists:member(F, Local)],
                        Caller ! {Ref, watching},
                        loop(Caller, MRef, none, [])
                end),
    receive {Ref, watching} -> Pid end.

%% @doc Called from the schema transaction `Tid', holding its locks.
-spec mark(pid(), term()) -> ok.
mark(Pid, Tid) ->
    Pid ! {mark, Tid},
    ok.

%% @doc The events since the last mark, oldest first, without the marking
%% transaction's own and those of the watcher's caller: `{write, Record, Tid}', `{delete, {Frag, Key}, Tid}'
%% or `{delete_object, Record, Tid}', the record's first element being the
%% fragment's name. Waits at most `Timeout' ms for the watcher.
-spec racing(pid(), timeout()) -> [tuple()].
racing(Pid, Timeout) ->
    Ref = monitor(process, Pid),
    Pid ! {racing, self(), Ref},
    receive
        {Ref, Events} -> demonitor(Ref, [flush]), Events;
        {'DOWN', Ref, process, Pid, _} -> []
    after Timeout ->
            demonitor(Ref, [flush]),
            []
    end.

%% @doc Stops the watcher.
-spec stop(pid()) -> ok.
stop(Pid) ->
    exit(Pid, kill),
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
        {'DOWN', MRef, process, _, _} ->
            ok
    end.

%% Whether an activity id (`{tid, Counter, Pid}', `{dirty, Pid}') is one of
%% `Pid''s.
activity_of(Pid, Id) when is_tuple(Id), tuple_size(Id) >= 2 ->
    element(tuple_size(Id), Id) =:= Pid;
activity_of(_Pid, _Id) ->
    false.
