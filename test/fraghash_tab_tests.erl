%% @doc EUnit tests of `fraghash_tab''s list helpers, without Mnesia (the
%% fast tier): `chunks/2' cuts a list into batches of the size asked, in
%% order, the last one shorter, for every length around the batch size and
%% for a long list (its speed is measured apart, never in a test).
-module(fraghash_tab_tests).

-include_lib("eunit/include/eunit.hrl").

chunks_test_() ->
    [{"every length from 0 to 3 batches, sizes 1 to 7", fun small/0},
     {"500 at a time (the copy's batch) over 100,001 items", fun long/0},
     {"a size that is not a positive integer is refused", fun bad_size/0}].

small() ->
    [check(lists:seq(1, Len), Size) || Size <- lists:seq(1, 7), Len <- lists:seq(0, 3 * Size + 1)],
    ?assertEqual([], fraghash_tab:chunks([], 3)),
    ?assertEqual([[a, b], [c]], fraghash_tab:chunks([a, b, c], 2)),
    ?assertEqual([[a, b, c]], fraghash_tab:chunks([a, b, c], 5)).

long() ->
    Items = lists:seq(1, 100001),
    Batches = fraghash_tab:chunks(Items),
    ?assertEqual(201, length(Batches)),
    ?assertEqual([500], lists:usort([length(B) || B <- lists:droplast(Batches)])),
    ?assertEqual([100001], lists:last(Batches)),
    ?assertEqual(Items, lists:append(Batches)).

bad_size() ->
    ?assertError(function_clause, fraghash_tab:chunks([a], 0)),
    ?assertError(function_clause, fraghash_tab:chunks([a], x)).

%% `Items' cut in batches of `Size': joined back, they are `Items'; every
%% batch but the last has `Size' items, the last 1 to `Size'.
check(Items, Size) ->
    Batches = fraghash_tab:chunks(Items, Size),
    ?assertEqual(Items, lists:append(Batches)),
    ?assertEqual((length(Items) + Size - 1) div Size, length(Batches)),
    case Batches of
        [] ->
            ok;
        _ ->
            ?assertEqual([], [B || B <- lists:droplast(Batches), length(B) =/= Size]),
            ?assert(length(lists:last(Batches)) >= 1 andalso length(lists:last(Batches)) =< Size)
    end.
