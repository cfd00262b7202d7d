%% @doc EUnit tests of `fraghash_frag:distribution/1' and `info/1' in real
%% Mnesia: every figure is checked against what Mnesia says of each
%% fragment and against the formulas recomputed from the counts.
%%
%% Needs `FRAGHASH_TEST_DIR' (scripts/test-mnesia.sh sets it up).
-module(fraghash_frag_info_tests).

-include_lib("eunit/include/eunit.hrl").

-define(RECORDS, 8000).

info_test_() ->
    {setup, fun setup/0, fun cleanup/1,
     fun(_) ->
             [{timeout, 120, {"distribution of a disc_copies slots table",
                              fun() -> distribution(dist_slots, mnesia_frag_slots,
                                                    n_disc_copies) end}},
              {timeout, 120, {"distribution of a disc_only_copies default table",
                              fun() -> distribution(dist_default, mnesia_frag_hash,
                                                    n_disc_only_copies) end}},
              {timeout, 120, {"info of fraghash and default tables", fun info/0}}]
     end}.

setup() ->
    fraghash_test_support:start_mnesia("info_mnesia").

cleanup(Dir) ->
    fraghash_test_support:stop_mnesia(Dir).

create(Tab, Mod, Copies) ->
    ok = fraghash_test_support:create_frag(Tab, Mod, 8, [{Copies, 1}]),
    ok = fraghash_test_support:fill(Tab, lists:seq(1, ?RECORDS), fun(K) -> K * 3 end).

distribution(Tab, Mod, Copies) ->
    create(Tab, Mod, Copies),
    D = fraghash_frag:distribution(Tab),
    #{records := M, n_fragments := N, fragments := Frags} = D,
    ?assertEqual(?RECORDS, M),
    ?assertEqual(8, N),
    ?assertEqual(lists:seq(1, 8), [maps:get(fragment, F) || F <- Frags]),
    Storage = case Copies of
                  n_disc_copies -> disc_copies;
                  n_disc_only_copies -> disc_only_copies
              end,
    Counts = [begin
                  #{table := T, records := R, bytes := B, storage := S} = F,
                  ?assertEqual(mnesia:table_info(T, size), R),
                  ?assertEqual(Storage, S),
                  ?assert(B > 0),
                  R
              end || F <- Frags],
    ?assertEqual(M, lists:sum(Counts)),
    ?assertEqual(lists:sum([maps:get(bytes, F) || F <- Frags]), maps:get(bytes, D)),
    Mean = M / N,
    ?assertEqual(Mean, maps:get(mean, D)),
    Sd = math:sqrt(lists:sum([(C - Mean) * (C - Mean) || C <- Counts]) / N),
    ?assert(abs(Sd - maps:get(stddev, D)) < 1.0e-9),
    %% sqrt(8000 * 1/8 * 7/8) = sqrt(875)
    ?assert(abs(math:sqrt(875) - maps:get(binomial_floor, D)) < 1.0e-9),
    ?assertEqual(lists:min(Counts), maps:get(min, D)),
    ?assertEqual(lists:max(Counts), maps:get(max, D)),
    ?assert(abs(lists:max(Counts) / Mean - maps:get(max_over_mean, D)) < 1.0e-9).

info() ->
    Slots = fraghash_frag:info(dist_slots),
    ?assertMatch(#{hash_module := mnesia_frag_slots, n_fragments := 8, scheme := slots,
                   state := #{spec := <<"slots">>, fragments := 8}}, Slots),
    %% The state Mnesia copies per operation: its bytes, the words of its
    %% lookup included (8 fragments: well under 1 KiB).
    {_, SlotsState, 8} = fraghash_frag:hash(dist_slots),
    ?assertEqual(byte_size(SlotsState), maps:get(hash_state_bytes, Slots)),
    ?assert(maps:get(hash_state_bytes, Slots) < 1024),
    Default = fraghash_frag:info(dist_default),
    ?assertMatch(#{hash_module := mnesia_frag_hash, n_fragments := 8}, Default),
    ?assertNot(maps:is_key(scheme, Default)),
    {atomic, ok} = fraghash_frag:add_frag(dist_slots, [node()]),
    ?assertMatch(#{n_fragments := 9, state := #{fragments := 9}},
                 fraghash_frag:info(dist_slots)).
