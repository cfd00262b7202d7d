%% @doc The growth path's state machine, pure: the phases of each
%% operation, in order, and the recovery decision, a table from what the
%% journal says (the operation and its phase) and what the schema shows
%% (the table's hash state and fragment count, seen from the entry's
%% states) to the one action that finishes or undoes the operation. No
%% Mnesia call is made here; `fraghash_grow' runs the phases and the
%% actions, and writes each phase to the journal, durably on every node
%% holding it, before it performs that phase's effects. So the phase the
%% journal names is the furthest any effect can have got, and the schema
%% says which of that phase's effects committed.
%%
%% The operations (a relieve is an `add' whose target state the hash
%% module was asked for with one donor):
%% <ul>
%% <li>`add': `creating' (fragment N+1 is created hidden: no key routes
%% to it), `copying' (the donors' moving records are copied into it),
%% `switching' (the donors are fenced, the last copies made, the hash
%% state replaced), `cleaning' (the moved records leave the donors).</li>
%% <li>`del': `copying' (the last fragment's records are copied to the
%% fragments the target state sends them to, hidden there: the old state
%% still routes them to the last fragment), `switching' (as for an add),
%% `dropping' (the last fragment, which no key routes to, is deleted).</li>
%% <li>`rehash' (a change of hash module, same fragment count): `copying'
%% (every record the new module places in another fragment is copied
%% there, hidden), `switching' (module and state replaced), `cleaning'
%% (the moved records leave the fragments they came from).</li>
%% <li>`move' (replicas of fragments go from one node to another, the
%% layout and the records unchanged): `copying' (a copy of each fragment,
%% of the storage type of the one it replaces, is added on the new node;
%% Mnesia loads it while writers go on), `dropping' (once each new copy is
%% loaded, active and durable, the copy on the old node is deleted).</li>
%% </ul>
%% What the schema shows (`observed()'), for an entry of `n' fragments:
%% `untouched' (its `from' state, N fragments: an add's hidden fragment
%% not created, or dropped), `hidden' (an add's `from' with N+1, or a del's
%% `from' with N: copies exist that no key reads), `switched' (its `to'
%% state, the count it switched at), `dropped' (a del's `to' with N-1), or
%% `unexpected' (anything else: a change the growth path did not make).
%% A move is observed per replica, from the fragment's copies
%% (`[{Node, StorageType}]'): `untouched' (the old node holds its copy of
%% the type, the new one holds none), `copied' (both hold a copy of the
%% type), `moved' (the new node holds one, the old node none), or
%% `unexpected'.
-module(fraghash_grow_machine).

-export([phases/1, first_phase/1, next_phase/2, observe/3, recovery/3, steps/1]).

-export_type([op/0, phase/0, observed/0, action/0]).

-type op() :: add | del | rehash | move.
-type phase() :: creating | copying | switching | cleaning | dropping.
-type observed() :: untouched | hidden | switched | dropped | copied | moved | unexpected.
%% `forget': nothing of the operation is left but its entry (and names a
%% kill left, which are cleared); `rollback': the copies no key reads are
%% removed, then the entry; `clean': the moved records leave the donors,
%% then the entry; `drop': the del's last fragment is deleted, then the
%% entry; `finish': the del's drop committed, only its follow-up is left.
%% For a move's replica: `forget', nothing to undo; `rollback', the new
%% copy is deleted; `drop', the old copy is deleted once the new one is
%% active and durable; `finish', only the follow-up of that delete is left.
-type action() :: forget | rollback | clean | drop | finish | unexpected.

%% @doc The phases of `Op', in order.
-spec phases(op()) -> [phase()].
phases(add) -> [creating, copying, switching, cleaning];
phases(del) -> [copying, switching, dropping];
phases(rehash) -> [copying, switching, cleaning];
phases(move) -> [copying, dropping].

%% @doc The step hook's names (`fraghash_frag:set_step_hook/1') of an
%% operation's run, in order: points inside its phases where tests and
%% tracing look in (a rehash takes an add's). `_switch_locked' is the fence
%% holding the sources, `_switch_synced' the last copies durable,
%% `_switched' the switch committed. A move's: `move_copy' (before the
%% copies are added), `move_copied' (added, not yet known active and
%% durable), `move_drop' (before the old copies go), `move_dropped' (gone,
%% the entry not yet), `move_done'.
-spec steps(op()) -> [atom()].
steps(del) ->
    [grow_del_copy, grow_del_switch, grow_del_switch_locked, grow_del_switch_synced,
     grow_del_switched, grow_del_drop, grow_del_dropped, grow_del_done];
steps(move) ->
    [move_copy, move_copied, move_drop, move_dropped, move_done];
steps(_AddOrRehash) ->
    [grow_create, grow_copy, grow_switch, grow_switch_locked, grow_switch_synced, grow_switched,
     grow_clean, grow_done].

%% @doc The phase `Op' begins in: the one its first journal entry names.
-spec first_phase(op()) -> phase().
first_phase(Op) -> hd(phases(Op)).

%% @doc The phase after `Phase' in `Op', or `done'.
-spec next_phase(op(), phase()) -> phase() | done.
next_phase(Op, Phase) ->
    case lists:dropwhile(fun(P) -> P =/= Phase end, phases(Op)) of
        [Phase, Next | _] -> Next;
        [Phase] -> done
    end.

%% @doc What the schema shows of an operation of `Op' that began at `N'
%% fragments with states `{From, To}', given the table's state `State' and
%% count `Count' now. For a move, of one replica: `{From, To, Type}' (the
%% nodes and the copy's storage type) and the fragment's copies now,
%% `[{Node, StorageType}]'.
-spec observe(op(), {pos_integer(), term(), term()} | {node(), node(), atom()},
              {term(), pos_integer()} | [{node(), atom()}]) -> observed().
observe(add, {N, From, _To}, {From, N}) -> untouched;
observe(add, {N, From, _To}, {From, N1}) when N1 =:= N + 1 -> hidden;
observe(add, {N, _From, To}, {To, N1}) when N1 =:= N + 1 -> switched;
observe(del, {N, From, _To}, {From, N}) -> hidden;
observe(del, {N, _From, To}, {To, N}) -> switched;
observe(del, {N, _From, To}, {To, N1}) when N1 =:= N - 1 -> dropped;
observe(rehash, {N, From, _To}, {From, N}) -> hidden;
observe(rehash, {N, _From, To}, {To, N}) -> switched;
observe(move, {From, To, Type}, Copies) when is_list(Copies), From =/= To ->
    case {lists:keyfind(From, 1, Copies), lists:keyfind(To, 1, Copies)} of
        {{From, Type}, false} -> untouched;
        {{From, Type}, {To, Type}} -> copied;
        {false, {To, Type}} -> moved;
        _ -> unexpected
    end;
observe(_Op, _Entry, _Now) -> unexpected.

%% @doc The recovery decision: what finishes or undoes an operation of `Op'
%% whose journal names `Phase' and whose table shows `Observed'.
%%
%% Before `switching' is durable the hash state cannot have changed, so
%% the operation is undone: `rollback' while its hidden copies exist,
%% `forget' once none do (an add's fragment not yet created, or dropped by
%% a rollback that a kill cut short before it removed the entry). In
%% `switching' the switch either committed (`switched': go forward) or not
%% (`hidden': undo). From `cleaning' or `dropping' on, it committed, and
%% the operation goes forward: cleaning again, which is idempotent, or the
%% drop, then its follow-up. Every other pair is a table changed by
%% something else: the entry cannot say what to do (`unexpected').
%%
%% A move's replica in `copying' is undone: a new copy that exists may not
%% be active or durable yet (`dropping' is written only once it is both),
%% and the old copy holds every record, so deleting the new one loses
%% nothing. In `dropping' it goes forward: the old copy is deleted (again)
%% once the new one is active, or, gone already, only the follow-up is
%% left. A move never deletes a copy before `dropping', so a replica with
%% neither copy, or only the new one in `copying', is `unexpected'.
-spec recovery(op(), phase(), observed()) -> action().
recovery(add, creating, untouched) -> forget;
recovery(add, creating, hidden) -> rollback;
recovery(add, copying, untouched) -> forget;
recovery(add, copying, hidden) -> rollback;
recovery(add, switching, untouched) -> forget;
recovery(add, switching, hidden) -> rollback;
recovery(add, switching, switched) -> clean;
recovery(add, cleaning, switched) -> clean;
recovery(del, copying, hidden) -> rollback;
recovery(del, switching, hidden) -> rollback;
recovery(del, switching, switched) -> drop;
recovery(del, dropping, switched) -> drop;
recovery(del, dropping, dropped) -> finish;
recovery(rehash, copying, hidden) -> rollback;
recovery(rehash, switching, hidden) -> rollback;
recovery(rehash, switching, switched) -> clean;
recovery(rehash, cleaning, switched) -> clean;
recovery(move, copying, untouched) -> forget;
recovery(move, copying, copied) -> rollback;
recovery(move, dropping, copied) -> drop;
recovery(move, dropping, moved) -> finish;
recovery(_Op, _Phase, _Observed) -> unexpected.
