%% @doc How many fragment adds it takes to halve the one fragment that is
%% clearly the largest on disc (the posts' case: a `disc_only_copies'
%% fragment nearing dets's 2 GB limit), per hash module, measured in real
%% Mnesia. Run by `bench/mnesia/disc-measure.sh relieve'.
%%
%% Each table is `disc_only_copies' with 8 fragments and 40,000 records:
%% the records of fragment 8 (Mnesia's numbering) carry 1,000-byte values,
%% the others 50-byte values, so fragment 8 holds about 5 MB of the table's
%% about 6.7 MB. Fragment 8 is the last one `mnesia_frag_hash' splits from
%% 8 fragments, which is linear hashing's worst case and a fair one: linear
%% hashing splits in a fixed order, whatever the sizes. Adds go through
%% `fraghash_frag' until the records still in fragment 8 weigh less than
%% half of what they weighed (the bytes of the records, `erlang:external_size';
%% a dets file does not shrink when records leave it, it reuses the space,
%% which is what stops it growing toward the limit). Printed per variant:
%% adds, records scanned and moved in total, and the fragment's file size.
-module(fraghash_relieve_measure).

-export([run/1]).

-define(RECORDS, 40000).
-define(FRAGS, 8).
-define(HEAVY, 8).
-define(MAX_ADDS, 64).

%% @doc `Dir' is an empty scratch directory for Mnesia.
-spec run(string()) -> ok.
run(Dir) ->
    ok = application:set_env(mnesia, dir, Dir),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    io:format("variant                            adds  scanned   moved  heavy_bytes_before  "
              "heavy_file_before  heavy_file_after  heavy share after each add~n"),
    [variant(Name, Mod, How)
     || {Name, Mod, How} <- [{"mnesia_frag_hash add_frag", mnesia_frag_hash, add},
                             {"mnesia_frag_chash add_frag", mnesia_frag_chash, add},
                             {"mnesia_frag_slots add_frag", mnesia_frag_slots, add},
                             {"mnesia_frag_slots relieve(8)", mnesia_frag_slots,
                              relieve}]],
    stopped = mnesia:stop(),
    ok.

variant(Name, Mod, How) ->
    Tab = list_to_atom("relieve_" ++ atom_to_list(Mod) ++ "_" ++ atom_to_list(How)),
    {atomic, ok} =
        mnesia:create_table(Tab, [{attributes, [key, val]},
                                  {frag_properties,
                                   [{n_fragments, ?FRAGS}, {hash_module, Mod},
                                    {node_pool, [node()]}, {n_disc_only_copies, 1}]}]),
    {M, S, ?FRAGS} = fraghash_frag:hash(Tab),
    Heavy = fraghash_frag:frag_name(Tab, ?HEAVY),
    Small = binary:copy(<<"s">>, 50),
    Big = binary:copy(<<"b">>, 1000),
    mnesia:activity(async_dirty,
                    fun() ->
                            [mnesia:write({Tab, K, case M:key_to_frag_number(S, K) of
                                                       ?HEAVY -> Big;
                                                       _ -> Small
                                                   end})
                             || K <- lists:seq(1, ?RECORDS)],
                            ok
                    end, [], mnesia_frag),
    ok = mnesia:sync_log(),
    _ = dets:sync(Heavy),
    Before = bytes(Heavy),
    FileBefore = fraghash_frag:disc_bytes(Heavy),
    {Adds, Scanned, Moved, Trail} = grow(Tab, How, Heavy, Before, 0, 0, 0, []),
    io:format("~-34s ~4b ~8b ~7b ~19b ~18b ~17b  ~s~n",
              [Name, Adds, Scanned, Moved, Before, FileBefore,
               fraghash_frag:disc_bytes(Heavy),
               string:join([io_lib:format("~.1f%", [100 * B / Before])
                            || B <- lists:reverse(Trail)], " ")]),
    {atomic, ok} = mnesia:delete_table(Tab),
    ok.

grow(_Tab, _How, _Heavy, _Before, ?MAX_ADDS, Scanned, Moved, Trail) ->
    {?MAX_ADDS, Scanned, Moved, Trail};
grow(Tab, How, Heavy, Before, Adds, Scanned, Moved, Trail) ->
    Now = bytes(Heavy),
    Trail2 = case Adds of 0 -> Trail; _ -> [Now | Trail] end,
    case Now * 2 =< Before of
        true ->
            {Adds, Scanned, Moved, Trail2};
        false ->
            {Mod, S, N} = fraghash_frag:hash(Tab),
            {Iter, _} = iter_frags(Tab, How, Mod, S),
            Scan = lists:sum([mnesia:table_info(fraghash_frag:frag_name(Tab, F), size)
                              || F <- Iter]),
            {atomic, ok} = case How of
                               add -> fraghash_frag:add_frag(Tab, [node()]);
                               relieve -> fraghash_frag:relieve(Tab, [node()], ?HEAVY)
                           end,
            New = mnesia:table_info(fraghash_frag:frag_name(Tab, N + 1), size),
            grow(Tab, How, Heavy, Before, Adds + 1, Scanned + Scan, Moved + New, Trail2)
    end.

%% The fragments the add scans, as the hash module says (for relieve: the
%% heavy fragment, named: `largest' goes by records, and every fragment
%% here holds about as many).
iter_frags(_Tab, add, Mod, S) ->
    {_, Iter, Lock} = Mod:add_frag(S),
    {Iter, Lock};
iter_frags(_Tab, relieve, _Mod, _S) ->
    {[?HEAVY], []}.

%% The bytes of the records a fragment holds.
bytes(Frag) ->
    mnesia:activity(async_dirty,
                    fun() ->
                            mnesia:foldl(fun(R, Acc) -> Acc + erlang:external_size(R) end,
                                         0, Frag)
                    end).
