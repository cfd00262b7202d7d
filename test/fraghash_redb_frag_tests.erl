%% @doc EUnit tests of fragmented tables on the `redb_copies' backend, in
%% real Mnesia: a table created with `disc_copies' fragments and moved to
%% `redb_copies' (Mnesia 4.21.3 cannot create fragments of a backend type
%% itself), grown and shrunk through the safe path with every hash module,
%% each new fragment created on `redb_copies'; after every step each record
%% is read back with its value, once, from the fragment its key routes to,
%% and `fraghash_frag:distribution/1' reads the records' bytes in the
%% database. Then the leftover of a fragment whose deletion a kill cut
%% short (its rows still in the database, the table gone from Mnesia's
%% schema) does not come back in a new fragment of the same name. And
%% `fraghash_frag:relieve(Tab, Nodes, largest)' halves the fragment with
%% the most records, which is not the last one.
%%
%% Needs a distributed node (`-sname') and `FRAGHASH_TEST_DIR';
%% `scripts/test-mnesia.sh' sets both up.
-module(fraghash_redb_frag_tests).

-include_lib("eunit/include/eunit.hrl").

-define(T, 300).
-define(RECORDS, 3000).
-define(REDB, {ext, redb_copies, fraghash_redb_copies}).

redb_frag_test_() ->
    {setup, fun setup/0, fun fraghash_test_support:stop_mnesia/1,
     fun(_Dir) ->
             {inorder,
              [{timeout, ?T, {atom_to_list(Mod) ++ ": grow to 6, shrink to 3",
                              fun() -> grow_and_shrink(Mod) end}}
               || Mod <- [mnesia_frag_slots, mnesia_frag_hash, mnesia_frag_jump,
                          mnesia_frag_chash, mnesia_frag_linear]]
              ++ [{timeout, ?T, {"a fragment's leftover rows stay out of its successor",
                                 fun leftover/0}},
                  {timeout, ?T, {"relieve(largest) halves the fragment with the most records, "
                                 "not the last", fun relieve_largest/0}},
                  {timeout, ?T, {"plain change_table_frag is refused, naming the safe call",
                                 fun plain_refused/0}},
                  {timeout, ?T, {"a write reported before the table holds it moves with its "
                                 "new value", fun reported_before_applied/0}}]}
     end}.

setup() ->
    Dir = fraghash_test_support:start_mnesia("redb_frag"),
    {atomic, ok} = fraghash_redb_copies:register(),
    Dir.

%% A fragmented table of `N' fragments, every one on redb_copies.
create(Tab, Mod, N) ->
    ok = fraghash_test_support:create_frag(Tab, Mod, N, [{n_disc_copies, 1}]),
    [{atomic, ok} = mnesia:change_table_copy_type(F, node(), redb_copies)
     || F <- frags(Tab)],
    ok.

grow_and_shrink(Mod) ->
    Tab = list_to_atom("rf_" ++ atom_to_list(Mod)),
    ok = create(Tab, Mod, 4),
    Keys = lists:seq(1, ?RECORDS),
    ok = fraghash_test_support:fill(Tab, Keys, fun value/1),
    ok = check(Tab, Keys),
    [{atomic, ok} = fraghash_frag:add_frag(Tab, [node()]) || _ <- [5, 6]],
    ?assertEqual(6, length(frags(Tab))),
    ok = check(Tab, Keys),
    [{atomic, ok} = fraghash_frag:del_frag(Tab) || _ <- [5, 4, 3]],
    ok = check(Tab, Keys),
    #{records := Records, bytes := Bytes, fragments := Frags} = fraghash_frag:distribution(Tab),
    ?assertEqual(?RECORDS, Records),
    %% Each record's key and value are stored: at least the value's bytes.
    ?assert(Bytes >= ?RECORDS * byte_size(value(1))),
    [?assertMatch(#{storage := ?REDB, bytes := B} when B > 0, F) || F <- Frags],
    {atomic, ok} = mnesia:delete_table(Tab).

%% Mnesia's own add_frag and del_frag may lose the records they move on
%% disc: on redb_copies fragments as on Mnesia's disc types, a fraghash
%% hash module refuses them with the call to use instead.
plain_refused() ->
    Tab = rf_plain,
    ok = create(Tab, mnesia_frag_slots, 3),
    ok = fraghash_test_support:fill(Tab, lists:seq(1, 100), fun value/1),
    ?assertMatch({aborted, {fraghash, unsafe_change_table_frag, "rf_plain has disc" ++ _}},
                 mnesia:change_table_frag(Tab, {add_frag, [node()]})),
    ?assertMatch({aborted, {fraghash, unsafe_change_table_frag, "rf_plain has disc" ++ _}},
                 mnesia:change_table_frag(Tab, del_frag)),
    ?assertEqual(3, length(frags(Tab))),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Every key's record is in the fragment its key routes to, with its value,
%% and in no other; every fragment is on redb_copies.
check(Tab, Keys) ->
    Frags = frags(Tab),
    [?assertEqual(?REDB, mnesia:table_info(F, storage_type)) || F <- Frags],
    Where = fun(K) -> [F || F <- Frags, mnesia:dirty_read(F, K) =/= []] end,
    Routed = fun(K) ->
                     {M, S, _} = fraghash_tab:hash(Tab),
                     fraghash_tab:frag_name(Tab, M:key_to_frag_number(S, K))
             end,
    [?assertEqual({K, [Routed(K)]}, {K, Where(K)}) || K <- Keys],
    Read = mnesia:activity(async_dirty,
                           fun() -> [mnesia:read(Tab, K) || K <- Keys] end, [], mnesia_frag),
    ?assertEqual([[{Tab, K, value(K)}] || K <- Keys], Read),
    ?assertEqual(length(Keys), lists:sum([mnesia:table_info(F, size) || F <- Frags])),
    ok.

%% The rows of a fragment whose deletion a kill cut short: Mnesia's schema
%% no longer has the table, the database still does. The next fragment of
%% that name must hold only the records moved into it.
leftover() ->
    Tab = rf_leftover,
    ok = create(Tab, mnesia_frag_slots, 4),
    Keys = lists:seq(1, ?RECORDS),
    ok = fraghash_test_support:fill(Tab, Keys, fun value/1),
    {atomic, ok} = fraghash_frag:del_frag(Tab),
    Gone = rf_leftover_frag4,
    ?assertNot(lists:member(Gone, mnesia:system_info(tables))),
    Db = fraghash_redb_db:handle(),
    Name = <<"m:", (atom_to_binary(Gone, utf8))/binary>>,
    ok = fraghash_redb_nif:create_table(Db, Name, term_to_binary(Gone)),
    Stale = {Gone, stale_key, stale_value},
    ok = fraghash_redb_db:write([{put, Name, fraghash_redb_nif:order_key(stale_key),
                                  term_to_binary(Stale)}]),
    {atomic, ok} = fraghash_frag:add_frag(Tab, [node()]),
    ?assertEqual([], mnesia:dirty_read(Gone, stale_key)),
    ok = check(Tab, Keys),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Fragment 2 of 4 holds about twice the records of each other one (every
%% key the table routes there, and as many again): `relieve(largest)'
%% halves it, and only it. (The bytes of each fragment's files in Mnesia's
%% directory, which it went by, are 0 for every `redb_copies' fragment, so
%% it halved fragment 4.)
relieve_largest() ->
    Tab = rf_relieve_largest,
    ok = create(Tab, mnesia_frag_slots, 4),
    {M, S, 4} = fraghash_tab:hash(Tab),
    Extra = [K || K <- lists:seq(?RECORDS + 1, 4 * ?RECORDS),
                  M:key_to_frag_number(S, K) =:= 2],
    Keys = lists:seq(1, ?RECORDS) ++ lists:sublist(Extra, ?RECORDS div 4),
    ok = fraghash_test_support:fill(Tab, Keys, fun value/1),
    [F1, F2, F3, F4] = frags(Tab),
    Before = [mnesia:table_info(F, size) || F <- [F1, F2, F3, F4]],
    ?assertEqual(lists:max(Before), lists:nth(2, Before)),
    {atomic, ok} = fraghash_frag:relieve(Tab, [node()], largest),
    [_, _, _, _, F5] = frags(Tab),
    Moved = mnesia:table_info(F5, size),
    After = [mnesia:table_info(F, size) || F <- [F1, F2, F3, F4]],
    ?assertEqual([lists:nth(1, Before), lists:nth(2, Before) - Moved, lists:nth(3, Before),
                  lists:nth(4, Before)], After),
    %% Half of its slots: about half of its records.
    ?assert(Moved > lists:nth(2, Before) div 3 andalso Moved < 2 * lists:nth(2, Before) div 3),
    ok = check(Tab, Keys),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Mnesia tells a table's subscribers (the growth path's watch) of a
%% commit's change just before it applies it. Here the database's writer
%% process is suspended, so a writer's commit to the last fragment (on
%% redb_copies) is reported and then held before the table has it, while
%% a del copies that fragment into the others (on disc_copies, not held)
%% and takes the report in a copy round. Once the writer process resumes,
%% the commit is applied; the record must reach its new fragment with
%% that value, not the one the round could read a moment before.
reported_before_applied() ->
    Tab = rf_reported,
    ok = fraghash_test_support:create_frag(Tab, mnesia_frag_slots, 3, [{n_disc_copies, 1}]),
    Last = fraghash_tab:frag_name(Tab, 3),
    {atomic, ok} = mnesia:change_table_copy_type(Last, node(), redb_copies),
    Keys = lists:seq(1, 300),
    ok = fraghash_test_support:fill(Tab, Keys, fun value/1),
    {Mod, State, 3} = fraghash_frag:hash(Tab),
    K = hd([K || K <- Keys, Mod:key_to_frag_number(State, K) =:= 3]),
    Self = self(),
    Db = whereis(fraghash_redb_db),
    Hook = fun(T, grow_del_copy) when T =:= Tab ->
                   %% The commit, reported and held.
                   Seen = spawn_link(fun() -> report_seen(Self, Last, K) end),
                   receive {Seen, subscribed} -> ok end,
                   ok = sys:suspend(Db),
                   spawn_link(fun() ->
                                      R = mnesia:activity(transaction,
                                                          fun() -> mnesia:write({Tab, K, late}) end,
                                                          [], mnesia_frag),
                                      Self ! {late_writer, R}
                              end),
                   receive {Seen, reported} -> ok end,
                   %% Applied a second later, after the copy rounds began.
                   spawn(fun() -> timer:sleep(1000), sys:resume(Db) end);
              (_, _) ->
                   ok
           end,
    ok = fraghash_frag:set_step_hook(Hook),
    try
        ?assertEqual({atomic, ok}, fraghash_frag:del_frag(Tab))
    after
        fraghash_frag:set_step_hook(undefined),
        catch sys:resume(Db)
    end,
    receive {late_writer, W} -> ?assertEqual(ok, W) end,
    ?assertEqual([{Tab, K, late}],
                 mnesia:activity(async_dirty, fun() -> mnesia:read(Tab, K) end, [], mnesia_frag)),
    {atomic, ok} = mnesia:delete_table(Tab).

%% Tells `Parent' once subscribed to `Frag''s events, then once the write
%% of `K' is reported.
report_seen(Parent, Frag, K) ->
    {ok, _} = mnesia:subscribe({table, Frag, simple}),
    Parent ! {self(), subscribed},
    receive {mnesia_table_event, {write, {Frag, K, late}, _}} -> ok end,
    Parent ! {self(), reported}.

frags(Tab) ->
    mnesia:activity(async_dirty, fun() -> mnesia:table_info(Tab, frag_names) end, mnesia_frag).

value(K) ->
    <<K:64, 0:(8 * 92)>>.
