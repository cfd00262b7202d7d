%% @doc The node side of the kill -9 torture of two or three nodes
%% (`fraghash_torture2_tests'): run by `rpc' on each Mnesia node A, B (and
%% C) (peer nodes, OS processes the parent kills with kill -9).
%% {@link configure/1} says how many nodes the cluster has, on every node
%% and in the test's VM: the tables and the writers' keys follow from it.
%%
%% It creates the tables, runs the writers (one per table on each node)
%% and the controller (on one node per run: grows, shrinks and relieves
%% the tables through `fraghash_frag', and on three nodes moves copies of
%% a disc_copies table's fragments between them), marks where the controller and
%% recovery are, and checks a table as this node sees it.
%%
%% Files in the run directory (appended with single writes, which a kill -9
%% of the node cannot lose once they returned):
%% <ul>
%% <li>`ack_<table>_<W>.log': per table and writer (1 on A, 2 on B, 3 on
%% C; with N nodes writer W owns the keys K with (K - 1) rem N + 1 = W,
%% so that each key's history is in one file, in order), framed terms
%% (`fraghash_torture_child:log_line/2'): `{intent, Seq, Key, Value}'
%% before the transactions and `{ack, Seq, Key, Value}' once they returned
%% and `fraghash_durable:tables/1' of every fragment of the table and of
%% its control returned: Mnesia's durability line across nodes. Each
%% transaction is a `sync_transaction': a plain one returns once every
%% replica voted for it, before each has logged it, and a sync of a
%% holder's log can come before its commit is in it.
%% `Value' is `deleted' for a delete.</li>
%% <li>`marks.log': `running', `enter'/`leave'/`failed' of each operation,
%% `step' of each step (the step hook), `recover_start'/`recover_end'.</li>
%% </ul>
-module(fraghash_torture2_node).

-export([configure/1, nodes_count/0, cases/0, tables/0, control/1, create_tables/1, set_hook/1,
         start_work/5, stop_work/1, recover/1, check/2, repair/4, owner/1, ack_file/3]).

-define(KEYS, 400).
-define(MIN_FRAGS, 2).
-define(MAX_FRAGS, 7).

%% @doc Sets the number of nodes (2 or 3) in this VM.
-spec configure(2 | 3) -> ok.
configure(N) when N =:= 2; N =:= 3 ->
    persistent_term:put({?MODULE, nodes}, N).

%% @doc The number of nodes {@link configure/1} set (2 by default).
nodes_count() -> persistent_term:get({?MODULE, nodes}, 2).

%% @doc `{Table, HashModule, CopiesPerFragment, Storage}'. Two nodes: every
%% fragment on both, or each on one of them (spread by `add_frag''s node
%% list), on `disc_copies'. Three nodes: every fragment on two of the
%% three, on `disc_copies' and on `redb_copies', where one table is a
%% `bag' and one has an index (see {@link kind/1}).
cases() ->
    case nodes_count() of
        2 -> [{t2_slots_dc2, mnesia_frag_slots, 2, disc_copies},
              {t2_slots_dc1, mnesia_frag_slots, 1, disc_copies},
              {t2_hash_dc1, mnesia_frag_hash, 1, disc_copies}];
        3 -> [{t3_slots_dc2, mnesia_frag_slots, 2, disc_copies},
              {t3_slots_rc2, mnesia_frag_slots, 2, redb_copies},
              {t3_hash_rc2_ix, mnesia_frag_hash, 2, redb_copies},
              {t3_slots_rc2_bag, mnesia_frag_slots, 2, redb_copies}]
    end.

tables() -> [T || {T, _, _, _} <- cases()].

%% @doc What a table (or its control) is besides its case: `bag' (written
%% as a set: each write replaces the key's record, as
%% `fraghash_torture_child:replace_bag_key/3' does), `indexed' (an
%% index on its value, checked against its records on every node holding
%% a fragment), or `set'.
-spec kind(atom()) -> set | bag | indexed.
kind(T) ->
    Name = atom_to_list(T),
    case {lists:suffix("_bag", Name), lists:suffix("_ix", Name)} of
        {true, _} -> bag;
        {_, true} -> indexed;
        _ -> set
    end.

%% @doc The never-migrated control of a table: same hash module, copies and
%% node pool, written just after the table, by the same writer.
control(Tab) -> list_to_atom("ctl_" ++ atom_to_list(Tab)).

%% @doc Creates every table and its control on `Nodes' (3 fragments each),
%% and the journal. A `redb_copies' table is made on `disc_copies' and each
%% copy of each fragment changed to `redb_copies' (Mnesia cannot create
%% fragments of a backend type); fraghash_frag gives new fragments the
%% base table's storage.
create_tables(Nodes) ->
    {atomic, ok} = fraghash_redb_copies:register(),
    lists:foreach(
      fun({Tab, Mod, Copies, Storage}) ->
              Def = fun(T) ->
                            [{attributes, [key, val]},
                             {frag_properties, [{n_fragments, 3}, {hash_module, Mod},
                                                {node_pool, Nodes}, {n_disc_copies, Copies}]}]
                                ++ [{type, bag} || kind(T) =:= bag]
                                ++ [{index, [val]} || kind(T) =:= indexed]
                    end,
              [begin
                   {atomic, ok} = mnesia:create_table(T, Def(T)),
                   [{atomic, ok} = mnesia:change_table_copy_type(F, N, Storage)
                    || Storage =/= disc_copies,
                       F <- mnesia:activity(async_dirty,
                                            fun() -> mnesia:table_info(T, frag_names) end,
                                            [], mnesia_frag),
                       N <- mnesia:table_info(F, disc_copies)]
               end || T <- [Tab, control(Tab)]]
      end, cases()),
    ok = fraghash_journal:ensure().

%% @doc Marks each step of an operation or recovery on this node; a step of
%% the ordinary-transaction add and del lingers up to 25 ms (they take
%% milliseconds here), so that kills find every one of them.
set_hook(Dir) ->
    Me = short(node()),
    fraghash_frag:set_step_hook(
      fun(Tab, Step) ->
              mark(Dir, "step ~s ~s ~s", [Me, Tab, Step]),
              case atom_to_list(Step) of
                  "grow_" ++ _ -> timer:sleep(rand:uniform(25) - 1);
                  _ -> ok
              end
      end).

%% @doc The writer that owns `Key' (1 on A, 2 on B, 3 on C: one key in N
%% each, N the number of nodes).
owner(Key) -> (Key - 1) rem nodes_count() + 1.

ack_file(Dir, Tab, Writer) ->
    filename:join(Dir, lists:concat(["ack_", Tab, "_", Writer, ".log"])).

%%% Work

%% @doc Starts this node's writers (writer number `Writer') and, when
%% `Controller', the controller; returns at once. `Nodes' are A, B (and C).
start_work(Dir, Run, Writer, Controller, Nodes) ->
    persistent_term:put({?MODULE, stop}, false),
    Parent = self(),
    Pid = spawn(fun() ->
                        rand:seed(exsss, {Run, Writer, 77}),
                        Ws = [spawn_monitor(fun() -> writer(Dir, Run, Writer, T) end)
                              || T <- tables()],
                        Cs = [spawn_monitor(fun() -> controller(Dir, Nodes) end) || Controller],
                        mark(Dir, "running ~s", [short(node())]),
                        Parent ! {self(), started},
                        holder(Ws ++ Cs)
                end),
    receive {Pid, started} -> ok end,
    true = register(fraghash_torture2_work, Pid),
    ok.

%% Waits for `stop', then for the workers to finish what they are doing.
holder(Workers) ->
    receive
        {stop, From, TimeoutMs} ->
            persistent_term:put({?MODULE, stop}, true),
            Left = wait_workers(Workers, erlang:monotonic_time(millisecond) + TimeoutMs),
            [exit(P, kill) || {P, _} <- Left],
            From ! {stopped, length(Left)}
    end.

wait_workers([], _Deadline) ->
    [];
wait_workers([{P, Ref} | Rest] = All, Deadline) ->
    Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {'DOWN', Ref, process, P, _} -> wait_workers(Rest, Deadline)
    after Wait ->
            All
    end.

%% @doc Stops the writers and the controller after their current
%% transaction or operation; returns how many had to be killed (still
%% running after `TimeoutMs').
stop_work(TimeoutMs) ->
    case whereis(fraghash_torture2_work) of
        undefined ->
            {stopped, 0};
        Pid ->
            Pid ! {stop, self(), TimeoutMs},
            receive {stopped, _} = R -> R end
    end.

stopping() -> persistent_term:get({?MODULE, stop}, true).

writer(Dir, Run, Writer, Tab) ->
    {ok, Log} = file:open(ack_file(Dir, Tab, Writer), [append, raw, binary]),
    writer(Log, Run, Writer, Tab, 1).

writer(Log, Run, Writer, Tab, I) ->
    case stopping() of
        true ->
            ok = file:close(Log);
        false ->
            N = nodes_count(),
            Key = N * rand:uniform(?KEYS div N) - N + Writer,
            Seq = {Run, Writer, I},
            Value = case rand:uniform(5) of
                        1 -> deleted;
                        _ -> Seq
                    end,
            ok = fraghash_torture_child:log_line(Log, {intent, Seq, Key, Value}),
            Acked = try
                        %% The durability line: every node holding a disc
                        %% copy of a fragment written syncs its log.
                        ok = fraghash_durable:tables(put_both(Tab, Key, Value))
                    of
                        ok -> fraghash_torture_child:log_line(Log, {ack, Seq, Key, Value})
                    catch
                        %% A node down (its fragments unreachable, or not
                        %% durable there): no ack, the intent stays.
                        _:_ -> failed
                    end,
            Acked =:= ok orelse timer:sleep(20),
            writer(Log, Run, Writer, Tab, I + 1)
    end.

%% Writes or deletes `Key' in `Tab', then in its control, each in a
%% mnesia_frag `sync_transaction' of its own; returns every fragment of
%% both, the ones to make durable. Not the fragment the key routes to now:
%% a write that routed with the state before a switch and waited for the
%% switch's locks lands in the fragment the key has just left, and an
%% application cannot tell which one its write went to either.
%%
%% One transaction per table, because one writing both would be committed
%% with Mnesia's asymmetric protocol whenever the key's fragment of `Tab'
%% and of the control have different replicas (one copy each, on
%% different nodes), and a node taking part in that protocol can leave a
%% committed transaction out of its table files if its log is dumped at
%% the wrong moment (see `fraghash_tab'): such a write is lost at that
%% node's next restart, a loss of Mnesia's, not of the growth path.
put_both(Tab, Key, Value) ->
    lists:append([mnesia:activity(sync_transaction, fun() -> put_value(T, Key, Value) end,
                                  [], mnesia_frag)
                  || T <- [Tab, control(Tab)]]).

%% Writes or deletes `Key' in `T', in the caller's mnesia_frag transaction;
%% returns every fragment of `T'.
put_value(T, Key, Value) ->
    case {Value, kind(T)} of
        {deleted, _} -> ok = mnesia:delete({T, Key});
        {_, bag} -> ok = fraghash_torture_child:replace_bag_key(T, Key, Value);
        _ -> ok = mnesia:write({T, Key, Value})
    end,
    mnesia:table_info(T, frag_names).

controller(Dir, Nodes) ->
    case stopping() of
        true ->
            ok;
        false ->
            Tabs = tables(),
            Tab = lists:nth(rand:uniform(length(Tabs)), Tabs),
            {Mod, _, N} = fraghash_frag:hash(Tab),
            Grow = case {Mod, rand:uniform(3)} of
                       {mnesia_frag_slots, 1} -> relieve;
                       _ -> add
                   end,
            %% On three nodes, one operation in two moves a fragment's
            %% copy to a node not holding it (each fragment is on two), of
            %% `disc_copies' and `redb_copies' tables alike (a node killed
            %% in a `redb_copies' move takes the running nodes' definition
            %% at restart, fraghash_redb_align); of `disc_copies' ones
            %% only with FRAGHASH_TORTURE3_REDB_MOVES=0.
            Move = length(Nodes) >= 3 andalso rand:uniform(2) =:= 1
                andalso (element(4, lists:keyfind(Tab, 1, cases())) =:= disc_copies
                         orelse os:getenv("FRAGHASH_TORTURE3_REDB_MOVES") =/= "0"),
            Op = if
                     Move -> move;
                     N =< ?MIN_FRAGS -> Grow;
                     N >= ?MAX_FRAGS -> del;
                     true -> case rand:uniform(2) of 1 -> Grow; 2 -> del end
                 end,
            %% Which nodes get a new fragment (its copies on the first
            %% ones) varies.
            On = shuffle(Nodes),
            mark(Dir, "enter ~s ~s ~b", [Tab, Op, N]),
            Res = try
                      case Op of
                          add -> fraghash_frag:add_frag(Tab, On);
                          relieve -> fraghash_frag:relieve(Tab, On, largest);
                          del -> fraghash_frag:del_frag(Tab);
                          move -> move_one(Tab, N, Nodes)
                      end
                  catch
                      C:R -> {C, R}
                  end,
            case Res of
                {atomic, ok} -> mark(Dir, "leave ~s ~s", [Tab, Op]);
                Other -> mark(Dir, "failed ~s ~s ~0p", [Tab, Op, reason(Other)])
            end,
            timer:sleep(rand:uniform(40)),
            controller(Dir, Nodes)
    end.

%% Moves the copy of a random fragment of `Tab' (of `N') on a random node
%% holding it to a random node of `Nodes' holding none.
move_one(Tab, N, Nodes) ->
    Frag = fraghash_frag:frag_name(Tab, rand:uniform(N)),
    Holders = [H || {H, _} <- fraghash_move:copies(Frag)],
    case {shuffle(Holders), shuffle(Nodes -- Holders)} of
        {[From | _], [To | _]} -> fraghash_frag:move_replica(Frag, From, To);
        _ -> {atomic, ok}
    end.

%% A failure's reason, short enough for a mark line.
reason({aborted, {fraghash, Why, _Text}}) -> Why;
reason({aborted, R}) -> element(1, R);
reason({C, R}) when is_tuple(R) -> {C, element(1, R)};
reason(Other) -> Other.

%% @doc `fraghash_frag:recover()' between two marks.
recover(Dir) ->
    Me = short(node()),
    mark(Dir, "recover_start ~s ~w", [Me, fraghash_journal:pending()]),
    R = fraghash_frag:recover(),
    mark(Dir, "recover_end ~s ~0p", [Me, R]),
    R.

%%% Checks

%% @doc `{Counts, BadKeys, Layout}' of `Tab' (a case's table or its
%% control) as this node sees it, against `Exp' (Key => {LastAcked,
%% [LaterIntents]}); each fragment must have the case's copies of its
%% storage. A fragment is read where Mnesia reads it from
%% this node: its own copy when it holds one. Layout is `{HashModule,
%% State, [{Fragment, SortedKeys}]}', for comparing the two nodes.
check(Tab, Exp) ->
    [{Copies, Storage}] = [{C, St} || {T, _, C, St} <- cases(), lists:member(Tab, [T, control(T)])],
    {Mod, S, N} = fraghash_frag:hash(Tab),
    Frags = [fraghash_frag:frag_name(Tab, F) || F <- lists:seq(1, N)],
    PerFrag = [{F, mnesia:dirty_select(Frag, [{'_', [], ['$_']}])}
               || {F, Frag} <- lists:zip(lists:seq(1, N), Frags)],
    Rows = [{element(2, R), F, element(3, R)} || {F, Rs} <- PerFrag, R <- Rs],
    Keys = lists:usort([K || {K, _, _} <- Rows]),
    %% A bag key may hold its old record beside its new one (a kill in the
    %% commit of a replacement): each must have an allowed value.
    Found = lists:foldl(fun({K, _, V}, M) -> maps:update_with(K, fun(Vs) -> [V | Vs] end, [V], M)
                        end, #{}, Rows),
    Bad = [K || {K, {Last, Maybe}} <- maps:to_list(Exp),
                not lists:all(fun(V) -> lists:member(V, [Last | Maybe]) end,
                              maps:get(K, Found, [deleted]))]
        ++ [K || K <- maps:keys(Found), not maps:is_key(K, Exp)],
    %% Sizes as each fragment's holder counts them.
    Sizes = [rpc:call(mnesia:table_info(Frag, where_to_read), mnesia, table_info, [Frag, size])
             || Frag <- Frags],
    %% The fragments without the case's copies: every copy of each, as
    %% the schema here lists it.
    CopiesBad = [{F, fraghash_move:copies(F)} || F <- Frags,
                                                 length(holders(F, Storage)) =/= Copies],
    Names = mnesia:activity(async_dirty, fun() -> mnesia:table_info(Tab, frag_names) end,
                            [], mnesia_frag),
    Prefix = atom_to_list(Tab) ++ "_frag",
    Orphans = [T || T <- mnesia:system_info(tables), lists:prefix(Prefix, atom_to_list(T)),
                    not lists:member(T, Names)],
    Counts = #{n => N, records => length(Rows), checked => maps:size(Exp),
               %% A key in two fragments; in a set, a key twice at all.
               duplicates => case kind(Tab) of
                                 bag -> length(lists:usort([{K, F} || {K, F, _} <- Rows]))
                                            - length(Keys);
                                 _ -> length(Rows) - length(Keys)
                             end,
               misplaced => length([K || {K, F, _} <- Rows, Mod:key_to_frag_number(S, K) =/= F]),
               wrong_or_lost => length(Bad),
               lost => length([K || K <- Bad, not maps:is_key(K, Found)]),
               sizes_add_up => lists:sum(Sizes) =:= length(Rows),
               frag_names_match => Names =:= Frags,
               copies_ok => CopiesBad =:= [],
               copies_bad => CopiesBad,
               orphans => length(Orphans),
               journal_left => length([T || T <- fraghash_journal:pending(), T =:= Tab]),
               %% Index rows and index reads of the fragments held here,
               %% against their records.
               index_ok => lists:all(fun(F) -> fraghash_redb_index_tests:check(F) =:= ok end,
                                     [F || F <- Frags, kind(Tab) =:= indexed,
                                           lists:member(node(), holders(F, Storage))])},
    Layout = {Mod, S, [{F, lists:sort([element(2, R) || R <- Rs])} || {F, Rs} <- PerFrag]},
    {Counts, Bad, Layout}.

%% @doc Gives `Keys' of `Tab' and its control their last acknowledged value
%% (`Exp') again, logged as acknowledged by `{Run, repair}' in the owner's
%% log, and moves misplaced records: so that the next check counts only new
%% losses. Runs with the writers stopped.
repair(Dir, Run, Tab, {Keys, Exp}) ->
    [{atomic, _} = fraghash_frag:repair(T) || T <- [Tab, control(Tab)]],
    lists:foreach(
      fun(K) ->
              {Last, _} = maps:get(K, Exp, {deleted, []}),
              ok = fraghash_durable:tables(put_both(Tab, K, Last)),
              {ok, Log} = file:open(ack_file(Dir, Tab, owner(K)), [append, raw, binary]),
              ok = fraghash_torture_child:log_line(Log, {ack, {Run, repair}, K, Last}),
              ok = file:close(Log)
      end, Keys).

%% The nodes holding a copy of `Frag' of type `Storage'.
holders(Frag, disc_copies) ->
    mnesia:table_info(Frag, disc_copies);
holders(Frag, Alias) ->
    lists:append([Ns || {{A, _}, Ns} <- mnesia:table_info(Frag, external_copies), A =:= Alias]).

shuffle(L) -> [X || {_, X} <- lists:sort([{rand:uniform(), X} || X <- L])].

%%% Marks

short(Node) -> hd(string:split(atom_to_list(Node), "@")).

mark(Dir, Fmt, Args) ->
    {ok, F} = file:open(filename:join(Dir, "marks.log"), [append, raw]),
    ok = file:write(F, [io_lib:format(Fmt, Args), $\n]),
    ok = file:close(F).
