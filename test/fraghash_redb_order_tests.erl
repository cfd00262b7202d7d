%% @doc EUnit tests of the redb NIF (fraghash_redb_nif) against ets: random
%% terms, from a fixed seed, go into an ets `ordered_set' and into a redb
%% table keyed by their order keys; both must hold the same keys in the same
%% order, read forward and backward in chunks, and give the same neighbours
%% (next/prev) of arbitrary terms. Then each error path of the NIF: a
%% corrupt file, a file that is no database, a file open twice, a closed
%% handle, a missing table, a term that cannot be a key.
%%
%% Needs `FRAGHASH_TEST_DIR' (a scratch directory); `scripts/test-mnesia.sh'
%% sets it. No Mnesia here.
-module(fraghash_redb_order_tests).

-include_lib("eunit/include/eunit.hrl").

-import(fraghash_test_support, [scratch/0]).

%% The term generator, for the backend's tests (fraghash_redb_copies_tests).
-export([terms/1]).

-define(TERMS, 4000).
-define(PROBES, 1500).
-define(SEED, {exsss, {20250611, 42, 7}}).
-define(TAB, <<"terms">>).

%%% Ets and redb hold the same keys in the same order

same_order_as_ets_test_() ->
    {timeout, 120, fun same_order_as_ets/0}.

same_order_as_ets() ->
    rand:seed(element(1, ?SEED), element(2, ?SEED)),
    Terms = specials() ++ [gen(0) || _ <- lists:seq(1, ?TERMS)],
    Path = db_path("order"),
    {ok, Db} = fraghash_redb_nif:open(Path, #{}),
    ok = fraghash_redb_nif:create_table(Db, ?TAB, <<"ordered_set">>),
    Ets = ets:new(order_reference, [ordered_set]),
    %% Same insertion order: where keys are equal (1 and 1.0), both keep
    %% the last one inserted.
    lists:foreach(fun(Batch) ->
                          ok = fraghash_redb_nif:write(Db, [put_op(T) || T <- Batch], deferred),
                          ets:insert(Ets, [{T} || T <- Batch])
                  end, batches(Terms, 250)),
    ok = fraghash_redb_nif:sync(Db),
    Size = ets:info(Ets, size),
    ?assertEqual({ok, Size}, fraghash_redb_nif:size(Db, ?TAB)),
    %% Some keys were equal without being identical (1 and 1.0, 0 and -0.0):
    %% fewer records than distinct terms (map keys are distinct by =:=).
    ?assert(Size < map_size(maps:from_keys(Terms, []))),
    ?assertEqual(Size, length(lists:usort(Terms))),

    Forward = ets_walk(Ets, ets:first(Ets), fun ets:next/2),
    Backward = ets_walk(Ets, ets:last(Ets), fun ets:prev/2),
    ?assertEqual(Size, length(Forward)),
    ?assert(Forward =:= nif_walk(Db, forward, 97)),
    ?assert(Backward =:= nif_walk(Db, backward, 89)),
    ?assert(Backward =:= lists:reverse(Forward)),
    ?assert(first_difference(Forward, nif_walk(Db, forward, 1)) =:= none),
    ?assertEqual(nif_one(fraghash_redb_nif:first(Db, ?TAB)), hd(Forward)),
    ?assertEqual(nif_one(fraghash_redb_nif:last(Db, ?TAB)), lists:last(Forward)),

    %% Neighbours of arbitrary terms, in the table or not.
    Probes = [gen(0) || _ <- lists:seq(1, ?PROBES)] ++ lists:sublist(Terms, 300),
    lists:foreach(
      fun(P) ->
              K = fraghash_redb_nif:order_key(P),
              ?assertEqual({P, ets:next(Ets, P)},
                           {P, nif_one(fraghash_redb_nif:next(Db, ?TAB, K))}),
              ?assertEqual({P, ets:prev(Ets, P)},
                           {P, nif_one(fraghash_redb_nif:prev(Db, ?TAB, K))}),
              Present = case ets:lookup(Ets, P) of
                            [{Stored}] -> {ok, term_to_binary(Stored)};
                            [] -> not_found
                        end,
              ?assertEqual({P, Present}, {P, fraghash_redb_nif:get(Db, ?TAB, K)}),
              %% On a normal scheduler (from memory) or a dirty one: the same.
              ?assertEqual({P, Present}, {P, fraghash_redb_nif:read(Db, ?TAB, K)}),
              ?assert(lists:member(fraghash_redb_nif:get_now(Db, ?TAB, K), [Present, dirty]))
      end, Probes),
    %% Keys compare as the terms do.
    Pairs = lists:zip(lists:sublist(Terms, length(Probes)), Probes),
    lists:foreach(fun({A, B}) ->
                          KA = fraghash_redb_nif:order_key(A),
                          KB = fraghash_redb_nif:order_key(B),
                          ?assertEqual({A, B, cmp(A, B)}, {A, B, cmp(KA, KB)})
                  end, Pairs),
    ok = fraghash_redb_nif:close(Db),
    ets:delete(Ets).

put_op(T) ->
    {put, ?TAB, fraghash_redb_nif:order_key(T), term_to_binary(T)}.

batches([], _) -> [];
batches(L, N) when length(L) =< N -> [L];
batches(L, N) ->
    {B, Rest} = lists:split(N, L),
    [B | batches(Rest, N)].

cmp(A, B) when A < B -> lt;
cmp(A, B) when A == B -> eq;
cmp(_, _) -> gt.

ets_walk(_Ets, '$end_of_table', _Step) -> [];
ets_walk(Ets, K, Step) ->
    %% The key as stored (1 or 1.0: the last inserted), not as asked.
    [{Stored}] = ets:lookup(Ets, K),
    [Stored | ets_walk(Ets, Step(Ets, K), Step)].

nif_walk(Db, Dir, Max) ->
    nif_walk(Db, Dir, Max, edge).

nif_walk(Db, Dir, Max, Start) ->
    {ok, Items, More} = fraghash_redb_nif:chunk(Db, ?TAB, Start, Dir, Max),
    true = length(Items) =< Max,
    Terms = [binary_to_term(V) || {_, V} <- Items],
    case More of
        done -> Terms;
        more ->
            {LastKey, _} = lists:last(Items),
            Terms ++ nif_walk(Db, Dir, Max, {'after', LastKey})
    end.

nif_one({ok, _Key, Value}) -> binary_to_term(Value);
nif_one('$end_of_table') -> '$end_of_table'.

first_difference([X | A], [Y | B]) when X =:= Y -> first_difference(A, B);
first_difference([], []) -> none;
first_difference(A, B) -> {lists:sublist(A, 3), lists:sublist(B, 3)}.

%%% Terms

%% The special terms and `N' random ones, from the fixed seed.
terms(N) ->
    rand:seed(element(1, ?SEED), element(2, ?SEED)),
    specials() ++ [gen(0) || _ <- lists:seq(1, N)].

%% Terms that must be there whatever the seed gives.
specials() ->
    P53 = 1 bsl 53,
    [1, 1.0, 0, 0.0, -0.0, -1, -1.0, 0.5, -0.5,
     P53, P53 + 1, P53 - 1, float(P53), -P53, -P53 - 1, float(-P53),
     1 bsl 64, float(1 bsl 64), (1 bsl 64) + 1, 1 bsl 1100, -(1 bsl 1100),
     1.7976931348623157e308, -1.7976931348623157e308, 5.0e-324, -5.0e-324,
     '', a, aa, b, 'é', 'ÿ', 'Ā', '日本', list_to_atom([128512]), list_to_atom([0]),
     <<>>, <<0>>, <<0, 0>>, <<0, 1>>, <<1>>, <<1:1>>, <<1, 1:1>>, <<255>>, <<"a">>, <<"ab">>,
     [], [a], [a | b], [a, b], [a | <<>>], [[]], "abc", "ab", [1 | 2.0], [1.0 | 2],
     {}, {a}, {1, a}, {1.0, a}, {1, b}, {{}}, {[]}, {a, b, c},
     #{}, #{1 => a}, #{1.0 => a}, #{a => 1}, #{a => 1.0}, #{2 => a}, #{a => 1, 1 => a}]
        ++ big_maps().

%% Maps over 32 keys (stored as hash tries, compared by ERTS otherwise
%% than small ones), differing in one key or one value.
big_maps() ->
    Base = maps:from_list([{K, K * 2} || K <- lists:seq(1, 40)]),
    [Base, Base#{41 => 0}, maps:remove(7, Base), (maps:remove(7, Base))#{7.0 => 14},
     Base#{7 := 15}, Base#{40 := 79}, Base#{1 := 2.0}, maps:remove(40, Base#{a => 0}),
     maps:remove(1, Base#{0 => 0}), maps:remove(1, Base#{41 => 0})].

pick(L) -> lists:nth(rand:uniform(length(L)), L).

gen(D) when D >= 3 -> leaf();
gen(D) ->
    case rand:uniform(12) of
        N when N =< 7 -> leaf();
        8 -> list_to_tuple([gen(D + 1) || _ <- lists:seq(1, rand:uniform(4) - 1)]);
        9 -> [gen(D + 1) || _ <- lists:seq(1, rand:uniform(4) - 1)];
        10 -> lists:foldl(fun(E, Acc) -> [E | Acc] end, leaf(),
                          [gen(D + 1) || _ <- lists:seq(1, rand:uniform(3))]);
        11 -> maps:from_list([{gen(D + 1), gen(D + 1)} || _ <- lists:seq(1, rand:uniform(4) - 1)]);
        12 -> pick(specials())
    end.

leaf() ->
    case rand:uniform(10) of
        1 -> rand:uniform(600) - 300;
        2 -> int();
        3 -> float(rand:uniform(600) - 300);
        4 -> float_();
        5 -> atom_();
        6 -> atom_();
        7 -> bin();
        8 -> bits();
        9 -> [];
        10 -> pick([1, 1.0, 0, 0.0, -0.0, a, <<>>, <<0>>])
    end.

int() ->
    Sign = pick([1, -1]),
    case rand:uniform(3) of
        1 -> Sign * rand:uniform(1 bsl 62);
        2 -> Sign * ((1 bsl pick([31, 52, 53, 54, 59, 60, 63, 64, 65, 100, 200])) + rand:uniform(7) - 4);
        3 -> Sign * rand:uniform(1 bsl 150)
    end.

float_() ->
    case rand:uniform(5) of
        1 -> (rand:uniform(600) - 300) / pick([2, 4, 8, 3]);
        2 -> pick([0.0, -0.0, 5.0e-324, 2.2250738585072014e-308, 1.0e300, -1.0e300]);
        3 -> (rand:uniform() - 0.5) * math:pow(10, rand:uniform(600) - 300);
        _ ->
            %% The floats next to a power of two, either side, either sign.
            F = float(1 bsl pick([31, 52, 53, 54, 59, 60, 63, 64, 65, 100, 200])),
            <<Bits:64>> = <<F/float>>,
            <<G/float>> = <<(Bits + rand:uniform(5) - 3):64>>,
            pick([1, -1]) * G
    end.

atom_() ->
    Chars = [$a, $b, $z, $A, 0, 233, 255, 256, 26085, 128512],
    list_to_atom([pick(Chars) || _ <- lists:seq(1, rand:uniform(5) - 1)]).

bin() ->
    list_to_binary([pick([0, 1, 127, 128, 254, 255, $a]) || _ <- lists:seq(1, rand:uniform(6) - 1)]).

bits() ->
    N = rand:uniform(7),
    <<(bin())/binary, (rand:uniform(1 bsl N) - 1):N>>.

%%% Key prefixes of match patterns

key_prefixes_test_() ->
    {timeout, 60, fun key_prefixes/0}.

%% A term opened into a match pattern (parts of it made `'_'' or a
%% variable), against ets's own matching: every term ets matches to the
%% pattern, among the term, the pattern filled in three ways (maps given a
%% key more) and other test terms, has an order key starting with the
%% pattern's prefix; a pattern with nothing open has its whole order key.
key_prefixes() ->
    Terms = list_to_tuple(terms(1000)),
    rand:seed(exsss, {20251206, 9, 3}),
    lists:foreach(
      fun(I) ->
              T = element(I, Terms),
              put(vars, 0),
              Pat = open(T),
              Prefix = fraghash_redb_nif:key_prefix(Pat),
              Others = [element(rand:uniform(tuple_size(Terms)), Terms) || _ <- lists:seq(1, 20)],
              Candidates = [T, fill(Pat, a), fill(Pat, []), fill(Pat, {x, [1 | 2.0]}) | Others],
              MS = ets:match_spec_compile([{Pat, [], ['$_']}]),
              Matches = ets:match_spec_run(Candidates, MS),
              ?assert(length(Matches) >= 4),
              lists:foreach(fun(M) ->
                                    K = fraghash_redb_nif:order_key(M),
                                    ?assertEqual({Pat, M, Prefix},
                                                 {Pat, M, binary:part(K, 0, min(byte_size(K),
                                                                               byte_size(Prefix)))})
                            end, Matches),
              case Pat =:= T andalso not has_map(T) of
                  true -> ?assertEqual(fraghash_redb_nif:order_key(T), Prefix);
                  false -> ok
              end
      end, lists:seq(1, tuple_size(Terms))),
    ?assertEqual(<<>>, fraghash_redb_nif:key_prefix('_')),
    ?assertEqual(<<>>, fraghash_redb_nif:key_prefix('$1')),
    Zero = fraghash_redb_nif:order_key(0),
    ?assertEqual(binary:part(fraghash_redb_nif:order_key({user, 42, 0}), 0,
                             byte_size(fraghash_redb_nif:order_key({user, 42, 0})) - byte_size(Zero)),
                 fraghash_redb_nif:key_prefix({user, 42, '_'})),
    %% What comes before the first open part must be able to be a key;
    %% what comes after it is not read.
    ?assertError({fraghash_redb, unsupported_key, _}, fraghash_redb_nif:key_prefix({self(), '_'})),
    ?assertEqual(fraghash_redb_nif:key_prefix({'_', a}), fraghash_redb_nif:key_prefix({'_', self()})),
    %% Patterns over a few KiB go to a dirty scheduler: the same rule, and
    %% a part after the open place too large for a key is not read either.
    Big = binary:copy(<<1>>, 6000),
    BigKey = fraghash_redb_nif:order_key({Big, 0}),
    ?assertEqual(binary:part(BigKey, 0, byte_size(BigKey) - byte_size(Zero)),
                 fraghash_redb_nif:key_prefix({Big, '_'})),
    ?assertEqual(fraghash_redb_nif:key_prefix({'_', a}),
                 fraghash_redb_nif:key_prefix({'_', binary:copy(<<1>>, 100000)})).

%% Parts of `T' made `'_'' (one in four) or a new variable (one in eight).
%% Map keys stay: a match pattern's are ground.
open(T) ->
    case rand:uniform(8) of
        N when N =< 2 -> '_';
        3 -> put(vars, get(vars) + 1), list_to_atom("$" ++ integer_to_list(get(vars)));
        _ when is_tuple(T) -> list_to_tuple([open(E) || E <- tuple_to_list(T)]);
        _ when is_map(T) -> maps:map(fun(_, V) -> open(V) end, T);
        _ -> open_list(T)
    end.

open_list([H | Tail]) -> [open(H) | open(Tail)];
open_list(T) -> T.

%% `Pat' with `X' in each open part and a key more in each map.
fill('_', X) -> X;
fill(A, X) when is_atom(A) ->
    case fraghash_redb_select:is_var(A) of
        true -> X;
        false -> A
    end;
fill(T, X) when is_tuple(T) -> list_to_tuple([fill(E, X) || E <- tuple_to_list(T)]);
fill(M, X) when is_map(M) -> (maps:map(fun(_, V) -> fill(V, X) end, M))#{'extra key' => X};
fill([H | T], X) -> [fill(H, X) | fill(T, X)];
fill(T, _) -> T.

has_map(M) when is_map(M) -> true;
has_map(T) when is_tuple(T) -> has_map(tuple_to_list(T));
has_map([H | T]) -> has_map(H) orelse has_map(T);
has_map(_) -> false.

%%% Error paths

errors_test_() ->
    [{"a corrupt file gives {error, {corrupt, _}}", fun corrupt_file/0},
     {"a file that is not a database gives {error, {foreign, _}}", fun foreign_file/0},
     {"a file open already gives {error, {locked, _}}", fun open_twice/0},
     {"a missing file without create gives {error, {not_found, _}}", fun missing_file/0},
     {"a closed handle gives {error, {closed, _}}", fun closed_handle/0},
     {"a database whose opener ended unclosed is closed, its logged writes kept",
      fun opener_gone/0},
     {"logged writes of the caller's own: ok, notify, dirty, busy", fun written_by_caller/0},
     {"a missing table gives {error, {no_such_table, _}}", fun missing_table/0},
     {"normal_reads false: every read on a dirty scheduler, same answers", fun dirty_reads_only/0},
     {"a pid, ref, port or fun is not a key", fun unsupported_keys/0},
     {"bad arguments raise badarg", fun bad_arguments/0}].

db_path(Name) ->
    Dir = filename:join(scratch(), "redb_order"),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Path = filename:join(Dir, Name ++ ".redb"),
    _ = file:delete(Path),
    unicode:characters_to_binary(Path).

made(Name) ->
    Path = db_path(Name),
    {ok, Db} = fraghash_redb_nif:open(Path, #{}),
    ok = fraghash_redb_nif:create_table(Db, ?TAB, <<>>),
    Ops = [{put, ?TAB, fraghash_redb_nif:order_key(I), binary:copy(<<"v">>, 300)}
           || I <- lists:seq(1, 2000)],
    ok = fraghash_redb_nif:write(Db, Ops, immediate),
    ok = fraghash_redb_nif:close(Db),
    Path.

corrupt_file() ->
    Path = made("corrupt"),
    {ok, Bytes} = file:read_file(Path),
    %% Keep redb's magic number; garble the header and both commit slots.
    <<Magic:16/binary, _:512/binary, Rest/binary>> = Bytes,
    Garbage = << <<((I * 37) bxor 16#A5):8>> || I <- lists:seq(0, 511) >>,
    ok = file:write_file(Path, [Magic, Garbage, Rest]),
    ?assertMatch({error, {corrupt, Msg}} when is_binary(Msg),
                 fraghash_redb_nif:open(Path, #{})),
    %% The VM is fine, and so is the next database.
    {ok, Db} = fraghash_redb_nif:open(db_path("after_corrupt"), #{}),
    ok = fraghash_redb_nif:close(Db).

foreign_file() ->
    Path = db_path("foreign"),
    ok = file:write_file(Path, binary:copy(<<"not a database\n">>, 100)),
    ?assertMatch({error, {foreign, _}}, fraghash_redb_nif:open(Path, #{})),
    {ok, <<"not a database\n", _/binary>>} = file:read_file(Path).

open_twice() ->
    Path = db_path("twice"),
    {ok, Db} = fraghash_redb_nif:open(Path, #{}),
    ?assertMatch({error, {locked, _}}, fraghash_redb_nif:open(Path, #{})),
    ok = fraghash_redb_nif:close(Db),
    {ok, Db2} = fraghash_redb_nif:open(Path, #{create => false}),
    ok = fraghash_redb_nif:close(Db2).

missing_file() ->
    Path = db_path("missing"),
    ?assertMatch({error, {not_found, _}}, fraghash_redb_nif:open(Path, #{create => false})),
    ?assertNot(filelib:is_file(Path)).

closed_handle() ->
    {ok, Db} = fraghash_redb_nif:open(db_path("closed"), #{}),
    ok = fraghash_redb_nif:create_table(Db, ?TAB, <<>>),
    ok = fraghash_redb_nif:close(Db),
    ok = fraghash_redb_nif:close(Db),
    ?assertMatch({error, {closed, _}}, fraghash_redb_nif:get(Db, ?TAB, <<1>>)),
    ?assertMatch({error, {closed, _}}, fraghash_redb_nif:read(Db, ?TAB, <<1>>)),
    ?assertMatch({error, {closed, _}},
                 fraghash_redb_nif:write(Db, [{put, ?TAB, <<1>>, <<2>>}], immediate)).

opener_gone() ->
    Path = db_path("opener_gone"),
    Self = self(),
    {Pid, Ref} = spawn_monitor(fun() ->
                                       {ok, Db} = fraghash_redb_nif:open(Path, #{}),
                                       ok = fraghash_redb_nif:create_table(Db, ?TAB, <<>>),
                                       ok = fraghash_redb_nif:write(Db, [{put, ?TAB, <<1>>, <<2>>}], logged),
                                       Self ! {db, Db}
                               end),
    Db = receive {db, D} -> D end,
    receive {'DOWN', Ref, process, Pid, normal} -> ok end,
    %% Closed with its opener (the handle still held here): refused, and
    %% the file free for the next open, which replays the logged write.
    ?assert(wait_closed(Db, 100)),
    ?assertMatch({error, {closed, _}}, fraghash_redb_nif:write_logged(Db, [{put, ?TAB, <<3>>, <<4>>}])),
    {ok, Db2} = fraghash_redb_nif:open(Path, #{create => false}),
    ?assertEqual({ok, <<2>>}, fraghash_redb_nif:get(Db2, ?TAB, <<1>>)),
    ?assertEqual(not_found, fraghash_redb_nif:get(Db2, ?TAB, <<3>>)),
    ok = fraghash_redb_nif:close(Db2).

wait_closed(Db, Tries) ->
    case fraghash_redb_nif:get(Db, ?TAB, <<1>>) of
        {error, {closed, _}} -> true;
        _ when Tries > 0 -> timer:sleep(10), wait_closed(Db, Tries - 1);
        _ -> false
    end.

written_by_caller() ->
    {ok, Db} = fraghash_redb_nif:open(db_path("by_caller"), #{memtable_bytes => 10000}),
    ok = fraghash_redb_nif:create_table(Db, ?TAB, <<>>),
    Put = fun(K, V) -> [{put, ?TAB, <<K:32>>, V}] end,
    %% The first batch into an empty memtable is to be told to the writer,
    %% the next is not; one past the memtable's size is.
    ?assertEqual(notify, fraghash_redb_nif:write_logged(Db, Put(1, <<"a">>))),
    ?assertEqual(ok, fraghash_redb_nif:write_logged(Db, Put(2, <<"b">>))),
    ?assertEqual(notify, fraghash_redb_nif:write_logged(Db, Put(3, binary:copy(<<"c">>, 10000)))),
    %% Too large for a normal scheduler: dirty, nothing written; the dirty
    %% call writes it.
    Big = lists:append([Put(K, <<"d">>) || K <- lists:seq(10, 80)]),
    ?assertEqual(dirty, fraghash_redb_nif:write_logged(Db, Big)),
    ?assertEqual(not_found, fraghash_redb_nif:get(Db, ?TAB, <<10:32>>)),
    ?assertEqual(notify, fraghash_redb_nif:write_logged_dirty(Db, Big)),
    ?assertEqual({ok, <<"d">>}, fraghash_redb_nif:get(Db, ?TAB, <<80:32>>)),
    %% Held off: busy, nothing written, until let go.
    ok = fraghash_redb_nif:hold_direct_writes(Db, true),
    ?assertEqual(busy, fraghash_redb_nif:write_logged(Db, Put(4, <<"e">>))),
    ?assertEqual(busy, fraghash_redb_nif:write_logged_dirty(Db, Put(4, <<"e">>))),
    ok = fraghash_redb_nif:hold_direct_writes(Db, false),
    ?assertEqual(not_found, fraghash_redb_nif:get(Db, ?TAB, <<4:32>>)),
    ?assertMatch(A when A =:= ok; A =:= notify, fraghash_redb_nif:write_logged(Db, Put(4, <<"e">>))),
    ?assertEqual({ok, <<"e">>}, fraghash_redb_nif:get(Db, ?TAB, <<4:32>>)),
    ?assertMatch({error, {no_such_table, _}},
                 fraghash_redb_nif:write_logged(Db, [{put, <<"nope">>, <<1>>, <<1>>}])),
    ok = fraghash_redb_nif:close(Db).

%% Opened with `normal_reads' false, every read goes to a dirty scheduler,
%% with the same answers.
dirty_reads_only() ->
    Path = db_path("dirty_reads"),
    {ok, Db} = fraghash_redb_nif:open(Path, #{normal_reads => false}),
    ok = fraghash_redb_nif:create_table(Db, ?TAB, <<>>),
    ok = fraghash_redb_nif:write(Db, [{put, ?TAB, <<1>>, <<"one">>}], immediate),
    ?assertEqual(dirty, fraghash_redb_nif:get_now(Db, ?TAB, <<1>>)),
    ?assertEqual({ok, <<"one">>}, fraghash_redb_nif:read(Db, ?TAB, <<1>>)),
    ?assertEqual(not_found, fraghash_redb_nif:read(Db, ?TAB, <<2>>)),
    ?assertError(badarg, fraghash_redb_nif:open(db_path("dirty_reads2"), #{normal_reads => 1})),
    ok = fraghash_redb_nif:close(Db),
    {ok, Db2} = fraghash_redb_nif:open(Path, #{}),
    ?assertEqual({ok, <<"one">>}, fraghash_redb_nif:get_now(Db2, ?TAB, <<1>>)),
    ok = fraghash_redb_nif:close(Db2).

missing_table() ->
    {ok, Db} = fraghash_redb_nif:open(db_path("tables"), #{}),
    ok = fraghash_redb_nif:create_table(Db, <<"a">>, <<"props">>),
    ?assertMatch({error, {table_exists, _}}, fraghash_redb_nif:create_table(Db, <<"a">>, <<>>)),
    ?assertMatch({error, {no_such_table, _}}, fraghash_redb_nif:get(Db, <<"b">>, <<1>>)),
    ?assertMatch({error, {no_such_table, _}}, fraghash_redb_nif:read(Db, <<"b">>, <<1>>)),
    %% A batch naming a missing table writes nothing.
    ?assertMatch({error, {no_such_table, _}},
                 fraghash_redb_nif:write(Db, [{put, <<"a">>, <<1>>, <<1>>},
                                              {put, <<"b">>, <<1>>, <<1>>}], immediate)),
    ?assertEqual(not_found, fraghash_redb_nif:get(Db, <<"a">>, <<1>>)),
    ?assertEqual({ok, [{<<"a">>, <<"props">>}]}, fraghash_redb_nif:tables(Db)),
    ok = fraghash_redb_nif:delete_table(Db, <<"a">>),
    ?assertMatch({error, {no_such_table, _}}, fraghash_redb_nif:delete_table(Db, <<"a">>)),
    ok = fraghash_redb_nif:close(Db).

unsupported_keys() ->
    Port = hd(erlang:ports()),
    lists:foreach(
      fun(T) ->
              ?assertError({fraghash_redb, unsupported_key, _}, fraghash_redb_nif:order_key(T)),
              ?assertError({fraghash_redb, unsupported_key, _},
                           fraghash_redb_nif:order_key({wrapped, [T]}))
      end, [self(), make_ref(), Port, fun() -> ok end, fun lists:map/2]),
    ?assertError({fraghash_redb, key_too_large, _},
                 fraghash_redb_nif:order_key(binary:copy(<<1>>, 100000))),
    ?assertError({fraghash_redb, bad_term, _}, fraghash_redb_nif:order_key_etf(<<1, 2, 3>>)),
    Compressed = term_to_binary(binary:copy(<<0>>, 10000), [compressed]),
    <<131, 80, _/binary>> = Compressed,
    ?assertError({fraghash_redb, bad_term, _}, fraghash_redb_nif:order_key_etf(Compressed)).

bad_arguments() ->
    {ok, Db} = fraghash_redb_nif:open(db_path("badarg"), #{}),
    ok = fraghash_redb_nif:create_table(Db, ?TAB, <<>>),
    ?assertError(badarg, fraghash_redb_nif:write(Db, [{put, ?TAB, <<1>>}], immediate)),
    ?assertError(badarg, fraghash_redb_nif:write(Db, [], sometime)),
    ?assertError(badarg, fraghash_redb_nif:chunk(Db, ?TAB, {from, <<1>>}, forward, 10)),
    ?assertError(badarg, fraghash_redb_nif:open(<<"x">>, not_a_map)),
    ok = fraghash_redb_nif:close(Db).
