%% @doc The fence of a switch: a transaction older than every other that
%% can still write, which write-locks the fragments an operation takes
%% records from (its donors) while the last copies are made and the hash
%% state is replaced, and keeps them locked until every running node
%% routes with the new state. So no writer's write reaches a donor by the
%% old state once the switch has committed: after it, the records that
%% moved are held by their new fragments alone, and the copies left in the
%% donors are nobody's (`fraghash_grow' deletes them with no per-key
%% record of what was copied).
%%
%% Why it holds. Mnesia's lock manager lets an older transaction wait for
%% a younger one's lock, and makes a younger one that wants a lock held or
%% awaited by an older one restart from its beginning (its `fun' runs
%% again, and routes its keys again, with the state of then). Age is the
%% transaction id, a counter each node keeps and raises past any id it
%% hears of. {@link start/0} begins the fence's transaction, raises every
%% running node's counter past its id (so every transaction begun after
%% is younger), and waits until every older transaction has ended, other
%% fences excepted. From then on the fence is older than any transaction
%% that can write: {@link hold/2} gets the donors' table locks once their
%% holders commit, and every writer that asks for a donor's lock meanwhile,
%% or while they are held, restarts. Those that began before the switch
%% committed and routed a moving key to a donor therefore route it again,
%% after it: to its new fragment. A writer on a node that has not yet
%% applied the switch is held the same way until {@link release/3} has
%% seen every running node route with the new state.
%%
%% Limits: dirty writers take no lock and pass the fence (as they pass
%% every lock; the safety page says what that costs them). When the node
%% running the operation dies during the switch's commit, Mnesia releases
%% the fence's locks with it, and a writer on a node that learns of the
%% commit last could reach a donor by the old state in between.
-module(fraghash_grow_fence).

-export([start/0, hold/2, release/3, stop/1]).

-opaque fence() :: {pid(), reference()}.
-export_type([fence/0]).

%% How long the fence waits for the transactions older than it to end, and
%% for the nodes to route with the new state.
-define(OLDER_MS, 60000).
-define(ROUTED_MS, 5000).
%% Marks a fence's process, so that one fence does not wait for another
%% (two tables can grow at once).
-define(MARK, '$fraghash_fence').

%% @doc Begins a fence (a process of its own, ended with its caller) and
%% returns once no transaction older than it, nor any that ran when it was
%% called (whatever its id: each node counts its own), runs on a running
%% node: every commit made before the call is applied where it goes.
%% Raises `{fraghash, transactions_running, Text}' when some still run
%% after 60 s.
-spec start() -> fence().
start() ->
    Running = mnesia:system_info(running_db_nodes),
    Before = fraghash_tab:transactions(Running),
    Owner = self(),
    {Pid, Ref} = spawn_monitor(fun() -> run(Owner) end),
    Tid = receive
              {Pid, tid, T} -> T;
              {'DOWN', Ref, process, Pid, Why} -> error({fraghash, fence_failed, Why})
          end,
    _ = erpc:multicall(Running, mnesia_recover, sync_trans_tid_serial, [Tid], 5000),
    ok = older_ended(Tid, Before, Running, erlang:monotonic_time(millisecond) + ?OLDER_MS),
    {Pid, Ref}.

%% @doc Write-locks the tables `Frags' (whole) in the fence's transaction;
%% returns once they are held.
-spec hold(fence(), [atom()]) -> ok.
hold({Pid, Ref}, Frags) ->
    Pid ! {hold, self(), Frags},
    receive
        {Pid, held} -> ok;
        {'DOWN', Ref, process, Pid, Why} -> error({fraghash, fence_failed, Why})
    end.

%% @doc Waits until every running node routes `Tab' with hash state
%% `State' (up to 5 s: a node that does not by then is cut off or dying,
%% and reaches no donor of ours), then ends the fence, which releases its
%% locks.
-spec release(fence(), atom(), term()) -> ok.
release({Pid, Ref}, Tab, State) ->
    routed(Tab, State, erlang:monotonic_time(millisecond) + ?ROUTED_MS),
    %% The fence's transaction commits (it wrote nothing), which releases
    %% its locks before the process ends.
    Pid ! {release, self()},
    receive {'DOWN', Ref, process, Pid, _} -> ok end.

%% @doc Ends the fence at once, releasing its locks (Mnesia aborts its
%% transaction); nothing if it has ended.
-spec stop(fence()) -> ok.
stop({Pid, Ref}) ->
    exit(Pid, kill),
    true = demonitor(Ref, [flush]),
    ok.

%%% The fence's process

run(Owner) ->
    put(?MARK, true),
    OwnerRef = monitor(process, Owner),
    %% Mnesia runs the fun again, with the same id, if it restarts the
    %% transaction: the tables asked for are kept here for that.
    mnesia:transaction(
      fun() ->
              case get(fraghash_fence_frags) of
                  undefined ->
                      {_Mod, Tid, _Ts} = mnesia:get_activity_id(),
                      Owner ! {self(), tid, Tid},
                      receive
                          {hold, Owner, Frags} -> put(fraghash_fence_frags, Frags);
                          {'DOWN', OwnerRef, process, Owner, _} -> exit(normal)
                      end;
                  _ ->
                      ok
              end,
              [mnesia:lock({table, F}, write) || F <- get(fraghash_fence_frags)],
              Owner ! {self(), held},
              receive
                  {release, Owner} -> ok;
                  {'DOWN', OwnerRef, process, Owner, _} -> exit(normal)
              end
      end).

%%% Internals

%% Waits until no transaction older than `Tid', nor any of `Before', runs
%% on `Nodes', fences excepted.
older_ended(Tid, Before, Nodes, Deadline) ->
    Older = [T || {_Node, Counter, Pid} = T <- fraghash_tab:transactions(Nodes),
                  {tid, Counter, Pid} < Tid orelse lists:member(T, Before), not is_fence(Pid)],
    case Older of
        [] ->
            ok;
        [{Node, _, Pid} | _] ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true ->
                    error(fraghash_error:new(transactions_running,
                                             "~b transaction(s) began before the switch and still "
                                             "run (~p on ~s among them): end them, then run "
                                             "fraghash_frag:recover/0",
                                             [length(Older), Pid, Node]));
                false ->
                    timer:sleep(5),
                    older_ended(Tid, Before, Nodes, Deadline)
            end
    end.

is_fence(Pid) ->
    case catch erpc:call(node(Pid), erlang, process_info, [Pid, dictionary], 5000) of
        {dictionary, Dict} -> lists:keymember(?MARK, 1, Dict);
        _ -> false
    end.

%% Waits until every running node's hash state of `Tab' is `State'.
routed(Tab, State, Deadline) ->
    Nodes = mnesia:system_info(running_db_nodes),
    Behind = [N || {N, R} <- lists:zip(Nodes, erpc:multicall(Nodes, fraghash_tab, hash, [Tab],
                                                              5000)),
                   not routes_with(R, State)],
    case Behind =/= [] andalso erlang:monotonic_time(millisecond) < Deadline of
        true -> timer:sleep(2), routed(Tab, State, Deadline);
        false -> ok
    end.

routes_with({ok, {_Mod, State, _N}}, State) -> true;
routes_with({ok, _Other}, _State) -> false;
%% A node that does not answer, or no longer has the table, routes nothing.
routes_with(_Error, _State) -> true.
