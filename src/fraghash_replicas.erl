%% @doc The copies of a fragmented table's fragments, compared and made to
%% agree: {@link running/1} says whether the copies held by running nodes
%% hold the same records, {@link repair/1} makes those that do not agree.
%% `fraghash_frag' offers both (`check_replicas/1', `repair_replicas/1'),
%% under the table's lock.
%%
%% == Why copies come apart, and why agreeing is enough ==
%% Mnesia 4.21.3 can leave the copies of a table on two running nodes
%% holding different records after a third node, coordinating a
%% `sync_transaction' on them, is cut off (or killed) between telling one
%% participant to commit and telling the other: each participant then asks
%% the other what happened, and one that asks before the other has applied
%% the commit is told nothing, presumes an abort, and aborts, while the
%% other commits. Nothing of fraghash takes part; a plain Mnesia table shows
%% it (docs/mnesia-cluster.md, healing after a partition). Such a
%% transaction was never acknowledged by the durability line
%% (`fraghash_durable:tables/1' cannot sync the cut node's holders, or its
%% caller is dead), so either outcome is a correct one: what is wrong is
%% only that the copies disagree, and a read gives one or the other
%% depending on the node.
%%
%% {@link repair/1} settles each key whose copies differ, under a write
%% lock on the key: a record that one copy holds and another lacks is
%% kept (written to every copy); copies holding different records of a
%% `set' key get the record most copies hold, the greatest in Erlang's term
%% order among equals; a `bag' key gets every record any copy holds. A
%% write acknowledged by the durability line is on every copy, so none is
%% ever undone; an unacknowledged delete that reached one copy only is
%% undone (the record stays).
-module(fraghash_replicas).

-export([running/1, repair/1, kept/2, local_digest/1, local_keys/1, local_records/2]).

%% Keys settled per transaction by repair/1.
-define(KEYS_PER_TRANSACTION, 100).
-define(READ_MS, 600000).

%% @doc Whether the copies of each fragment of `Tab' held by nodes where
%% Mnesia runs with this one (a node stopped or apart loads its copies
%% from them when it joins) hold the same records, for each fragment with
%% two such copies or more: `ok', or `{error, {fraghash, replicas_differ,
%% Text}}', `Text' naming each fragment, its nodes and their counts, and
%% what to do. Each fragment is read under a read lock on it (its writers
%% wait meanwhile), and one found differing is read again twice, 200 ms
%% apart, so that a commit on its way to a copy (or a dirty write) is not
%% taken for a difference. O(records) on every holder, the holders of a
%% fragment in parallel.
-spec running(atom()) -> ok | {error, {fraghash, atom(), string()}}.
running(Tab) ->
    case fragments(Tab) of
        {error, _} = Error ->
            Error;
        Frags ->
            case [{I, F, Ds} || {I, F} <- Frags, {differ, Ds} <- [compare(F, 3)]] of
                [] -> ok;
                Differ -> {error, {fraghash, replicas_differ, differ_text(Tab, Differ)}}
            end
    end.

%% @doc Makes the copies of each fragment of `Tab' held by running nodes
%% agree, key by key (see the module documentation for which record a key
%% keeps): `{ok, Settled}', one map per key rewritten (`fragment', `key',
%% `copies', `[{Node, Records}]' as each copy held it under the key's
%% lock, and `kept', the records now on every copy), after which {@link
%% running/1} answers `ok'; `{error, Reason}' if a holder cannot be read, a
%% transaction aborts, or copies still differ (writers going on: dirty
%% writes, which take no lock). Each key is settled in a transaction that
%% holds its write lock, `100' keys a transaction; finding the keys reads
%% every record of each differing fragment on each running holder,
%% O(records of that fragment) in time and in memory.
-spec repair(atom()) -> {ok, [map()]} | {error, term()}.
repair(Tab) ->
    case fragments(Tab) of
        {error, _} = Error ->
            Error;
        Frags ->
            try
                Settled = lists:append([settle_fragment(F) || {_I, F} <- Frags,
                                                              {differ, _} <- [compare(F, 1)]]),
                case running(Tab) of
                    ok -> {ok, Settled};
                    Error -> Error
                end
            catch
                throw:{repair_failed, Reason} -> {error, Reason}
            end
    end.

%% @doc This node's copy of `Frag': `{Records, Digest}', the digest the
%% sum of a hash of each record (so the same for the same records in any
%% order).
-spec local_digest(atom()) -> {non_neg_integer(), non_neg_integer()}.
local_digest(Frag) ->
    Fold = fun(Rec, {C, D}) -> {C + 1, (D + erlang:phash2(Rec, 1 bsl 32)) band (1 bsl 64 - 1)} end,
    local(fun() -> mnesia:foldl(Fold, {0, 0}, Frag) end).

%% @doc Each key of this node's copy of `Frag' with a digest of its records
%% (as {@link local_digest/1}: the same for the same records in any
%% order), sorted.
-spec local_keys(atom()) -> [{term(), non_neg_integer()}].
local_keys(Frag) ->
    Add = fun(Rec, M) ->
                  H = erlang:phash2(Rec, 1 bsl 32),
                  maps:update_with(element(2, Rec), fun(D) -> (D + H) band (1 bsl 64 - 1) end,
                                   H, M)
          end,
    lists:sort(maps:to_list(local(fun() -> mnesia:foldl(Add, #{}, Frag) end))).

%% @doc The records of each of `Keys' in this node's copy of `Frag',
%% sorted.
-spec local_records(atom(), [term()]) -> [{term(), [tuple()]}].
local_records(Frag, Keys) ->
    local(fun() -> [{K, lists:sort(mnesia:read(Frag, K))} || K <- Keys] end).

%% Reads this node's own copy (Mnesia reads a table where it is held).
local(Fun) ->
    mnesia:activity(async_dirty, Fun, [], mnesia).

%%% Comparing

%% `same', or `{differ, [{Node, Records, Digest} | {Node, unreadable,
%% Why}]}' after `Tries' reads; the holders where Mnesia runs are asked
%% again at each (a node killed meanwhile leaves them).
compare(F, Tries) ->
    case running_holders(F) of
        [_, _ | _] = Nodes ->
            Read = fun() ->
                           mnesia:lock({table, F}, read),
                           erpc:multicall(Nodes, ?MODULE, local_digest, [F], ?READ_MS)
                   end,
            Ds = case mnesia:transaction(Read) of
                     {atomic, Rs} -> lists:zip(Nodes, Rs);
                     {aborted, Why} -> [{node(), {aborted, Why}}]
                 end,
            case lists:usort([R || {_, R} <- Ds]) of
                [{ok, _}] -> same;
                _ when Tries > 1 -> timer:sleep(200), compare(F, Tries - 1);
                _ -> {differ, [{Nd, C, D} || {Nd, {ok, {C, D}}} <- Ds]
                          ++ [{Nd, unreadable, R} || {Nd, R} <- Ds, element(1, R) =/= ok]}
            end;
        _ ->
            same
    end.

running_holders(F) ->
    Running = mnesia:system_info(running_db_nodes),
    [Nd || Nd <- lists:usort(mnesia:table_info(F, all_nodes)), lists:member(Nd, Running)].

differ_text(Tab, Differ) ->
    Each = [io_lib:format("fragment ~b (~s): ~s", [I, F, lists:join(", ", [copy(D) || D <- Ds])])
            || {I, F, Ds} <- Differ],
    lists:flatten(
      io_lib:format("the copies of ~s differ, ~s: fraghash_frag:repair_replicas(~s) makes them "
                    "agree (a record one copy lacks is kept), then run fraghash_frag:recover/0 "
                    "again",
                    [Tab, lists:join("; ", Each), Tab])).

copy({Node, unreadable, R}) -> io_lib:format("~s unreadable (~0tP)", [Node, R, 8]);
copy({Node, C, D}) -> io_lib:format("~s ~b records (digest ~.16b)", [Node, C, D]).

%%% Repairing

%% Every key of fragment `F' whose running copies differ, settled.
settle_fragment(F) ->
    Nodes = running_holders(F),
    Lists = case read_copies(F, Nodes, local_keys, [F]) of
                {ok, Read} -> [L || {_, L} <- Read];
                {error, Reason} -> throw({repair_failed, Reason})
            end,
    Keys = differing_keys(Lists, length(Nodes)),
    Type = mnesia:table_info(F, type),
    lists:append([settle_keys(F, Type, Chunk)
                  || Chunk <- fraghash_tab:chunks(Keys, ?KEYS_PER_TRANSACTION)]).

%% `{ok, [{Node, Answer}]}', each of `Nodes' answering `Function(Args...)'
%% of this module on its copy of `F', or `{error, {fraghash,
%% node_unreachable, Text}}' naming the first that did not.
read_copies(F, Nodes, Function, Args) ->
    Answers = lists:zip(Nodes, erpc:multicall(Nodes, ?MODULE, Function, Args, ?READ_MS)),
    case [{Nd, R} || {Nd, R} <- Answers, element(1, R) =/= ok] of
        [] -> {ok, [{Nd, L} || {Nd, {ok, L}} <- Answers]};
        [{Nd, R} | _] -> {error, fraghash_error:new(node_unreachable,
                                                    "could not read ~s on ~s: ~0tP", [F, Nd, R, 8])}
    end.

%% The keys whose `{Key, Digest}' is not in every one of the `N' sorted
%% lists: one sort of all of them.
differing_keys(Lists, N) ->
    runs(lists:sort(lists:append(Lists)), N, []).

runs([], _N, Acc) ->
    lists:usort(Acc);
runs([P | _] = L, N, Acc) ->
    {Same, Rest} = lists:splitwith(fun(Q) -> Q =:= P end, L),
    case length(Same) of
        N -> runs(Rest, N, Acc);
        _ -> runs(Rest, N, [element(1, P) | Acc])
    end.

%% Settles `Keys' of fragment `F' in one transaction holding their write
%% locks: the copies are read under the locks, so no transaction changes
%% them meanwhile.
settle_keys(F, Type, Keys) ->
    Settle =
        fun() ->
                [mnesia:lock({record, F, K}, write) || K <- Keys],
                Read = case read_copies(F, running_holders(F), local_records, [F, Keys]) of
                           {ok, R} -> R;
                           {error, Reason} -> mnesia:abort(Reason)
                       end,
                lists:append([settle_key(F, Type, K, [{Nd, proplists:get_value(K, L)}
                                                      || {Nd, L} <- Read])
                              || K <- Keys])
        end,
    case mnesia:transaction(Settle) of
        {atomic, Settled} -> Settled;
        {aborted, Reason} -> throw({repair_failed, Reason})
    end.

%% Writes the records key `K' keeps to every copy, unless every copy
%% already holds them (a commit that was on its way when the key was
%% listed).
settle_key(F, Type, K, Copies) ->
    Kept = kept(Type, [Recs || {_, Recs} <- Copies]),
    case lists:all(fun({_, Recs}) -> Recs =:= Kept end, Copies) of
        true ->
            [];
        false ->
            case Type of
                bag -> mnesia:delete(F, K, write);
                _ -> ok
            end,
            [mnesia:write(F, R, write) || R <- Kept],
            [#{fragment => F, key => K, copies => Copies, kept => Kept}]
    end.

%% @doc The records a key keeps, from the records each copy holds of it
%% (`Held', each sorted): in a `bag' every record any copy holds; in a
%% `set' or `ordered_set' the record most copies hold, the greatest in
%% Erlang's term order among those held by as many, none only when no copy
%% holds one.
-spec kept(set | ordered_set | bag, [[tuple()]]) -> [tuple()].
kept(bag, Held) ->
    lists:usort(lists:append(Held));
kept(_SetOrOrdered, Held) ->
    case [R || [R] <- Held] of
        [] -> [];
        Present ->
            Counted = [{length([Q || Q <- Present, Q =:= R]), R} || R <- lists:usort(Present)],
            {_, Best} = lists:max(Counted),
            [Best]
    end.

%%% The table

%% `[{Number, FragmentTable}]' of `Tab' (itself alone when it is not
%% fragmented), or an error naming a table this node does not know.
fragments(Tab) ->
    case fraghash_tab:inspect_hash(Tab) of
        {error, _} = Error -> Error;
        {_Mod, _State, N} -> [{I, fraghash_tab:frag_name(Tab, I)} || I <- lists:seq(1, N)]
    end.
