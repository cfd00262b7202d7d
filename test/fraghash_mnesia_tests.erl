%% @doc EUnit tests of the fraghash Mnesia hash modules in real Mnesia.
%%
%% Needs a distributed node (`-sname') and the environment variable
%% `FRAGHASH_TEST_DIR' (a scratch directory); `scripts/test-mnesia.sh' sets
%% both up. The linear cross-check always uses 100,000 keys. The table
%% tests use `FRAGHASH_TEST_RECORDS' records (default 5,000 in the fast
%% tier and 20,000 with `FRAGHASH_SLOW_TESTS=1', not the full size of
%% 100,000: with a full check after every one of the 112 steps per module,
%% 100,000 records take several minutes on 2 shared cores; set it to 100000
%% for the full size) and grow to
%% `FRAGHASH_TEST_MAX_FRAGS' fragments (default 64).
-module(fraghash_mnesia_tests).

-include_lib("eunit/include/eunit.hrl").
-include("fraghash.hrl").

-export([read_all/2, check_placement/1, put_all/3]).

-import(fraghash_test_support, [scratch/0, quiet_overload/0, report/2, start_peer/2,
                                wait_down/1, grow/3, inline_kind/1]).

-define(MODULES, [mnesia_frag_slots, mnesia_frag_chash, mnesia_frag_jump]).
-define(T, 600).

%%% Fixture: one Mnesia with a disc schema for the whole run.

mnesia_test_() ->
    {setup, fun setup/0, fun cleanup/1,
     fun(_) ->
             {inorder,
              [{timeout, ?T, {"linear equals mnesia_frag_hash, 1..70 fragments",
                              fun cross_check_linear/0}},
               {timeout, ?T, {"initial hash_state honoured or aborted",
                              fun options/0}},
               {timeout, ?T, {"corrupt hash_state raises, VM survives",
                              fun corrupt_state/0}},
               {timeout, ?T, {"hash_state: one binary, carrying small lookups",
                              fun state_forms/0}}]
              ++ [{timeout, ?T, {atom_to_list(M) ++ ": 8 -> 64 -> 8 fragments",
                                 fun() -> grow_shrink(M) end}}
                  || M <- ?MODULES]
              ++ [{timeout, ?T, {"restart: records and routing intact",
                                 fun restart/0}}]
              %% A peer node killed with kill -9: the slow tier.
              ++ fraghash_test_support:slow_tier(
                   [{timeout, ?T, {"two nodes", fun two_nodes/0}}])}
     end}.

setup() ->
    quiet_overload(),
    Dir = filename:join(scratch(), "mnesia_" ++ atom_to_list(node())),
    ok = application:set_env(mnesia, dir, Dir),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    Dir.

cleanup(_Dir) ->
    stopped = mnesia:stop(),
    ok.

env_int(Name, Default) ->
    case os:getenv(Name) of
        false -> Default;
        "" -> Default;
        V -> list_to_integer(V)
    end.

%% 5,000 records in the fast tier, 20,000 in the slow one.
records() ->
    Default = case os:getenv("FRAGHASH_SLOW_TESTS") of
                  "1" -> 20000;
                  _ -> 5000
              end,
    env_int("FRAGHASH_TEST_RECORDS", Default).
max_frags() -> env_int("FRAGHASH_TEST_MAX_FRAGS", 64).

%%% Cross-check of linear against mnesia_frag_hash.

mixed_keys(N) ->
    rand:seed(exsss, {1, 2, 3}),
    [mixed_key(I) || I <- lists:seq(1, N)].

mixed_key(I) ->
    case I rem 6 of
        0 -> "key-" ++ integer_to_list(I);
        1 -> <<"bin", I:32, (rand:uniform(255)):8>>;
        2 -> I * 7919 - 50000000;
        3 -> list_to_atom("atom_" ++ integer_to_list(I rem 20000));
        4 -> {user, I, [I rem 7, "x"]};
        5 -> (1 bsl 70) + I * rand:uniform(1000)
    end.

cross_check_linear() ->
    Keys = mixed_keys(100000),
    S0 = mnesia_frag_hash:init_state(t, undefined),
    %% An existing table's name (schema), so that add_frag takes the path
    %% of a live table, not the one of a table being created.
    L0 = mnesia_frag_linear:init_state(schema, undefined),
    cross_check(Keys, 1, 70, S0, L0).

cross_check(_Keys, N, Max, _S, _L) when N > Max -> ok;
cross_check(Keys, N, Max, S, L) ->
    Bad = [K || K <- Keys,
                mnesia_frag_hash:key_to_frag_number(S, K)
                    =/= mnesia_frag_linear:key_to_frag_number(L, K)],
    ?assertEqual({N, []}, {N, lists:sublist(Bad, 5)}),
    {S2, SIter, SLock} = mnesia_frag_hash:add_frag(S),
    {L2, LIter, LLock} = mnesia_frag_linear:add_frag(L),
    %% The same fragment is split, and the same new one locked.
    ?assertEqual({N, SIter, SLock}, {N, LIter, LLock}),
    cross_check(Keys, N + 1, Max, S2, L2).

%%% Options.

options() ->
    S = mnesia_frag_chash:init_state(t, [{points, 1000}]),
    ?assertMatch(#{spec := <<"ring:1000">>}, fraghash_mnesia:info(S)),
    ?assertMatch(#{spec := <<"ring">>},
                 fraghash_mnesia:info(mnesia_frag_chash:init_state(t, undefined))),
    W = mnesia_frag_slots:init_state(t, [{weights, [2, 1, 3]}, {donors, all}]),
    {W2, _, _} = mnesia_frag_slots:add_frag(W),
    {W3, _, _} = mnesia_frag_slots:add_frag(W2),
    {W4, _, _} = mnesia_frag_slots:add_frag(W3),
    ?assertMatch(#{weights := [2, 1, 3, 1]}, fraghash_mnesia:info(W4)),
    #{slots_per_fragment := Slots} = fraghash_mnesia:info(W4),
    [A, B, C, D] = Slots,
    ?assert(abs(A - 2 * B) =< 2 andalso abs(C - 3 * D) =< 3),
    Bad = [{points, 0}, {points, 10001}, {nope, 1}, not_a_list],
    [?assertExit({aborted, {bad_hash_state, mnesia_frag_chash, _}},
                 mnesia_frag_chash:init_state(t, O)) || O <- wrap(Bad)],
    [?assertExit({aborted, {bad_hash_state, mnesia_frag_slots, _}},
                 mnesia_frag_slots:init_state(t, O))
     || O <- [[{donors, 0}], [{weights, [1, 0]}], [{points, 10}]]],
    ?assertExit({aborted, {bad_hash_state, mnesia_frag_jump, _}},
                mnesia_frag_jump:init_state(t, [{points, 10}])),
    %% Through Mnesia: a bad option aborts create_table with the reason.
    ?assertMatch({aborted, {bad_hash_state, mnesia_frag_chash, _}},
                 mnesia:create_table(opt_bad,
                                     [{frag_properties,
                                       [{n_fragments, 2},
                                        {hash_module, mnesia_frag_chash},
                                        {hash_state, [{points, -1}]}]}])),
    ok.

%% A state carries the lookup of its scheme (slot words for slots, the two
%% parameters for linear) or names a published one (chash, jump), at every
%% size; it decodes and encodes back to itself.
state_forms() ->
    lists:foreach(
      fun({Mod, Opts, Frags, Kind}) ->
              S = grow(Mod, Mod:init_state(list_to_atom("forms_" ++ atom_to_list(Mod)), Opts),
                       Frags - 1),
              <<"fh", 1, _:8, _:128, Frags:32, Kind:8, _/binary>> = S,
              {ok, R} = fraghash_state:decode(S),
              ?assertEqual(S, fraghash_mnesia:encode(R)),
              %% The decoded record is not a state Mnesia may hold.
              ?assertExit({aborted, {bad_hash_state, _}}, Mod:key_to_frag_number(R, 1))
      end, [{mnesia_frag_slots, [], 4, ?FRAGHASH_INLINE_SLOT_WORDS},
            {mnesia_frag_slots, [], 400, ?FRAGHASH_INLINE_SLOT_WORDS},
            {mnesia_frag_chash, [{points, 10}], 4, ?FRAGHASH_INLINE_NONE},
            {mnesia_frag_chash, [], 400, ?FRAGHASH_INLINE_NONE},
            {mnesia_frag_jump, [], 4, ?FRAGHASH_INLINE_NONE},
            {mnesia_frag_linear, [], 4, ?FRAGHASH_INLINE_LOW_BITS}]).

%% The state with the last byte of its recipe flipped.
flip_recipe(<<Head:33/binary, TabLen:16, Tab:TabLen/binary, OptsLen:16, Opts:OptsLen/binary,
              BLen:32, B:BLen/binary, Rest/binary>>) ->
    Cut = BLen - 1,
    <<Keep:Cut/binary, Last>> = B,
    <<Head/binary, TabLen:16, Tab/binary, OptsLen:16, Opts/binary, BLen:32, Keep/binary,
      (Last bxor 1), Rest/binary>>.

wrap(L) -> [case O of not_a_list -> O; _ -> [O] end || O <- L].

corrupt_state() ->
    S = mnesia_frag_slots:init_state(t, undefined),
    {S2, _, _} = mnesia_frag_slots:add_frag(S),
    {ok, R2} = fraghash_state:decode(S2),
    %% A recipe changed under the same key: refused before the NIF reads it
    %% (by a change, and by the first lookup of a state that does not carry
    %% its own lookup).
    ?assertExit({aborted, {fraghash, digest_mismatch, _}},
                mnesia_frag_slots:add_frag(flip_recipe(S2))),
    J = mnesia_frag_jump:init_state(t, undefined),
    ?assertExit({aborted, {fraghash, digest_mismatch, _}},
                mnesia_frag_jump:key_to_frag_number(flip_recipe(J), key)),
    %% A state whose key matches a recipe the core cannot read (a jump
    %% state: it carries no lookup, so the recipe is read on first use).
    Garbage = <<"FHST", 1, 0, 4, "garbage">>,
    Forged = fraghash_state:encode(R2#fraghash_state{scheme = jump, bytes = Garbage,
                                                     digest = fraghash_nif:digest(Garbage)},
                                   none),
    ?assertExit({aborted, {fraghash, corrupt_state, _}},
                mnesia_frag_jump:key_to_frag_number(Forged, key)),
    ?assertExit({aborted, {fraghash, corrupt_state, _}},
                mnesia_frag_jump:del_frag(Forged)),
    %% A slots state that carries no slot words is not one the encoder
    %% writes: refused as damaged.
    ?assertExit({aborted, {bad_hash_state, _}},
                mnesia_frag_slots:key_to_frag_number(fraghash_state:encode(R2, none), key)),
    ?assertExit({aborted, {bad_hash_state, _}},
                mnesia_frag_slots:key_to_frag_number(not_a_state, key)),
    %% Cut short, another layout, another scheme's state.
    ?assertExit({aborted, {bad_hash_state, _}},
                mnesia_frag_slots:key_to_frag_number(binary:part(S2, 0, 25), key)),
    <<"fh", _Layout, Rest/binary>> = S2,
    ?assertExit({aborted, {bad_hash_state, _}},
                mnesia_frag_slots:key_to_frag_number(<<"fh", 2, Rest/binary>>, key)),
    ?assertExit({aborted, {bad_hash_state, mnesia_frag_chash, _}}, mnesia_frag_chash:add_frag(S2)),
    ?assertExit({aborted, {bad_hash_state, mnesia_frag_slots, _}},
                mnesia_frag_slots:add_frag({bad})),
    ?assertError(badarg, fraghash_nif:locate(<<1:128>>, -1)),
    ?assertError({fraghash, corrupt_state, _}, fraghash_nif:locate(<<1:8>>, 1)),
    %% Removing the only fragment is refused with a reason.
    ?assertExit({aborted, {bad_hash_state, mnesia_frag_jump, _}},
                mnesia_frag_jump:del_frag(mnesia_frag_jump:init_state(t, undefined))),
    ok.

%%% Grow and shrink a disc_copies table in real Mnesia.

table_name(Mod) -> list_to_atom("t_" ++ atom_to_list(Mod)).

key(I) ->
    case I rem 3 of
        0 -> I;
        1 -> "k" ++ integer_to_list(I);
        2 -> {k, I}
    end.

value(I) -> I * 3 + 1.

create(Tab, Mod, N, Props) ->
    fraghash_test_support:create_frag(Tab, Mod, N, [{n_disc_copies, 1} | Props]).

put_all(Tab, From, To) ->
    put_all(Tab, From, To, async_dirty).

%% sync_dirty when another node reads right after: async_dirty updates
%% other nodes' replicas asynchronously.
put_all(Tab, From, To, Kind) ->
    mnesia:activity(Kind,
                    fun() ->
                            [mnesia:write({Tab, key(I), value(I)})
                             || I <- lists:seq(From, To)],
                            ok
                    end, [], mnesia_frag).

%% Every record readable with its value: returns how many were checked.
read_all(Tab, Count) ->
    mnesia:activity(async_dirty,
                    fun() ->
                            lists:foreach(
                              fun(I) ->
                                      K = key(I),
                                      [{Tab, K, V}] = mnesia:read(Tab, K),
                                      V = value(I)
                              end, lists:seq(1, Count)),
                            Count
                    end, [], mnesia_frag).

frag_names(Tab) ->
    mnesia:activity(async_dirty, fun() -> mnesia:table_info(Tab, frag_names) end,
                    [], mnesia_frag).

hash(Tab) -> fraghash_frag:hash(Tab).

%% Every record sits in the fragment key_to_frag_number names; returns the
%% record count of each fragment.
check_placement(Tab) ->
    {Mod, S, N} = hash(Tab),
    Names = frag_names(Tab),
    N = length(Names),
    lists:map(
      fun({F, Name}) ->
              Keys = mnesia:dirty_all_keys(Name),
              Wrong = [{K, Mod:key_to_frag_number(S, K)}
                       || K <- Keys, Mod:key_to_frag_number(S, K) =/= F],
              ?assertEqual({Name, F, []}, {Name, F, lists:sublist(Wrong, 3)}),
              length(Keys)
      end, lists:zip(lists:seq(1, N), Names)).

check(Tab, Count, Step) ->
    small_state(element(2, hash(Tab))),
    Counts = check_placement(Tab),
    ?assertEqual(Count, lists:sum(Counts)),
    Size = mnesia:activity(async_dirty, fun() -> mnesia:table_info(Tab, size) end,
                           [], mnesia_frag),
    ?assertEqual(Count, Size),
    Count = read_all(Tab, Count),
    print_dist(Tab, Step, Counts).

%% A fraghash state stays small: Mnesia copies it out of ets on every
%% operation. Its recipe stays within 64 bytes through this test's growth.
small_state(S) when is_binary(S) ->
    {ok, #fraghash_state{bytes = B}} = fraghash_state:decode(S),
    ?assert(byte_size(B) =< 64);
small_state(_) -> ok.

print_dist(Tab, Step, Counts) ->
    N = length(Counts),
    Mean = lists:sum(Counts) / N,
    Sd = math:sqrt(lists:sum([(C - Mean) * (C - Mean) || C <- Counts]) / N),
    Full = N =:= 8 orelse N =:= max_frags(),
    report("~s ~-8s n=~-3b mean=~8.1f stddev=~8.1f min=~6b max=~6b max/mean=~5.3f~s~n",
              [Tab, Step, N, Mean, Sd, lists:min(Counts), lists:max(Counts),
               lists:max(Counts) / Mean,
               case Full of
                   true -> io_lib:format(" ~w", [Counts]);
                   false -> ""
               end]).

%% Mnesia's own change_table_frag, driven by the module's IterFrags and lock
%% lists, one step at a time: the plain calls are allowed here on purpose
%% (they are refused by default on disc tables; the safe path has its own
%% tests), and the restart test below reports what Mnesia then loses.
grow_shrink(Mod) ->
    ok = application:set_env(fraghash, allow_unsafe_change_table_frag, true),
    try grow_shrink_plain(Mod)
    after application:unset_env(fraghash, allow_unsafe_change_table_frag)
    end.

grow_shrink_plain(Mod) ->
    Tab = table_name(Mod),
    Count = records(),
    ok = create(Tab, Mod, 8, []),
    ok = put_all(Tab, 1, Count),
    check(Tab, Count, "created"),
    Max = max_frags(),
    T0 = erlang:monotonic_time(millisecond),
    lists:foreach(
      fun(_) ->
              {atomic, ok} = mnesia:change_table_frag(Tab, {add_frag, [node()]}),
              check(Tab, Count, "add_frag")
      end, lists:seq(9, Max)),
    T1 = erlang:monotonic_time(millisecond),
    lists:foreach(
      fun(_) ->
              {atomic, ok} = mnesia:change_table_frag(Tab, del_frag),
              check(Tab, Count, "del_frag")
      end, lists:seq(9, Max)),
    T2 = erlang:monotonic_time(millisecond),
    report("~s: ~b add_frag steps in ~b ms, ~b del_frag steps in ~b ms "
              "(with the checks)~n", [Tab, Max - 8, T1 - T0, Max - 8, T2 - T1]),
    {_, _, 8} = hash(Tab),
    ok.

%%% Restart.

restart() ->
    %% Mnesia 4.21.3 does not always make durable the record moves of
    %% change_table_frag (see fraghash_frag): the t_* tables above, grown and
    %% shrunk with plain change_table_frag, are only reported. Fresh r_*
    %% tables are grown and shrunk with fraghash_frag:add_frag/del_frag and
    %% must come back exactly; mnesia_frag_hash runs beside ours.
    Count = records(),
    Plain = [table_name(M) || M <- ?MODULES],
    Tabs = [begin
                T = list_to_atom("r_" ++ atom_to_list(M)),
                ok = create(T, M, 8, []),
                ok = put_all(T, 1, Count),
                [{atomic, ok} = fraghash_frag:add_frag(T, [node()]) || _ <- lists:seq(1, 6)],
                [{atomic, ok} = fraghash_frag:del_frag(T) || _ <- lists:seq(1, 2)],
                check(T, Count, "pre-restart"),
                T
            end || M <- [mnesia_frag_hash | ?MODULES]],
    Before = [check_placement(T) || T <- Tabs],
    stopped = mnesia:stop(),
    ok = mnesia:start(),
    ok = mnesia:wait_for_tables(mnesia:system_info(tables), 60000),
    ?assertEqual(Before, [check_placement(T) || T <- Tabs]),
    [check(T, Count, "restart") || T <- Tabs],
    %% Routing still works after the restart: a further add_frag.
    [begin
         {atomic, ok} = fraghash_frag:add_frag(T, [node()]),
         check(T, Count, "restart+add")
     end || T <- Tabs],
    [report("~s (plain change_table_frag) after restart: ~b of ~b records "
               "readable, ~b stale copies~n",
               [T, readable(T, Count), Count, fraghash_frag:stale_copies(T)])
     || T <- Plain],
    ok.

readable(Tab, Count) ->
    mnesia:activity(async_dirty,
                    fun() ->
                            length([I || I <- lists:seq(1, Count),
                                         mnesia:read(Tab, key(I)) =:= [{Tab, key(I), value(I)}]])
                    end, [], mnesia_frag).

%%% Two nodes.

two_nodes() ->
    two_nodes(?MODULES).

two_nodes(Modules) ->
    Count = records() div 5,
    A = node(),
    Name = list_to_atom("fraghash_peer_" ++ os:getpid()),
    DirB = filename:join(scratch(), "mnesia_" ++ atom_to_list(Name)),
    {Peer, B} = start_peer(Name, DirB),
    ok = rpc:call(B, application, set_env, [mnesia, extra_db_nodes, [A]]),
    ok = rpc:call(B, mnesia, start, []),
    {atomic, ok} = mnesia:change_table_copy_type(schema, B, disc_copies),
    Tabs = [{Mod, NCopies, list_to_atom(lists:concat(["two_", Mod, "_", NCopies]))}
            || Mod <- Modules, NCopies <- [1, 2]],
    lists:foreach(
      fun({Mod, NCopies, Tab}) ->
              {atomic, ok} =
                  mnesia:create_table(Tab, [{attributes, [key, val]},
                                            {frag_properties,
                                             [{n_fragments, 8}, {hash_module, Mod},
                                              {node_pool, [A, B]},
                                              {n_disc_copies, NCopies}]}]),
              ok = put_all(Tab, 1, Count, sync_dirty),
              Count = read_all(Tab, Count),
              Count = rpc:call(B, ?MODULE, read_all, [Tab, Count]),
              %% add_frag issued on B, seen on A.
              {atomic, ok} = rpc:call(B, fraghash_frag, add_frag, [Tab, [A, B]]),
              {_, _, 9} = hash(Tab),
              check(Tab, Count, "add@B"),
              {atomic, ok} = fraghash_frag:add_frag(Tab, [B, A]),
              Counts = rpc:call(B, ?MODULE, check_placement, [Tab]),
              ?assertEqual(Count, lists:sum(Counts)),
              Count = rpc:call(B, ?MODULE, read_all, [Tab, Count])
      end, Tabs),
    %% Kill B (no clean shutdown), restart it, nothing lost.
    OsPid = rpc:call(B, os, getpid, []),
    os:cmd("kill -9 " ++ OsPid),
    wait_down(B),
    catch peer:stop(Peer),
    {_Peer2, B} = start_peer(Name, DirB),
    ok = rpc:call(B, mnesia, start, []),
    %% Every fragment, not only the base tables: a fragment whose only copy
    %% is on B is readable from A once B has loaded it.
    TabNames = lists:append([frag_names(T) || {_, _, T} <- Tabs]),
    ok = rpc:call(B, mnesia, wait_for_tables, [TabNames, 60000]),
    ok = mnesia:wait_for_tables(TabNames, 60000),
    %% Every record readable with its value from both nodes, in the
    %% fragment key_to_frag_number names, and the size exact.
    lists:foreach(
      fun({_Mod, _NCopies, Tab}) ->
              check(Tab, Count, "B-killed"),
              Count = rpc:call(B, ?MODULE, read_all, [Tab, Count]),
              ?assertEqual(0, rpc:call(B, fraghash_frag, stale_copies, [Tab]))
      end, Tabs),
    %% B rebuilt the grown states whose lookups need the built scheme (those
    %% that do not carry their lookup) by replaying their recipes, and kept
    %% the builds in its Mnesia directory (one file per recipe: a module's
    %% two tables had the same history, so they share one); after one more
    %% crash it reads them back (no replay, no new file) and still places
    %% every record where it is.
    Built = filelib:wildcard(filename:join([DirB, "fraghash", "*.fhbuilt"])),
    Published = lists:usort([Mod || {Mod, _, Tab} <- Tabs, Mod =/= mnesia_frag_hash,
                                    inline_kind(element(2, hash(Tab))) =:= ?FRAGHASH_INLINE_NONE]),
    ?assertEqual(length(Published), length(Built)),
    os:cmd("kill -9 " ++ rpc:call(B, os, getpid, [])),
    wait_down(B),
    {_Peer3, B} = start_peer(Name, DirB),
    ok = rpc:call(B, mnesia, start, []),
    ok = rpc:call(B, mnesia, wait_for_tables, [TabNames, 60000]),
    lists:foreach(
      fun({_Mod, _NCopies, Tab}) ->
              Counts2 = rpc:call(B, ?MODULE, check_placement, [Tab]),
              ?assertEqual(Count, lists:sum(Counts2)),
              Count = rpc:call(B, ?MODULE, read_all, [Tab, Count])
      end, Tabs),
    ?assertEqual(Built, filelib:wildcard(filename:join([DirB, "fraghash", "*.fhbuilt"]))),
    ok.
