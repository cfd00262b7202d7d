%% @doc `select' over a redb table of the `redb_copies' backend
%% ({@link fraghash_redb_copies}): match specs run on records read from
%% redb, in key order (Erlang's term order), with a limit and a
%% continuation.
%%
%% == What is read ==
%% {@link plan/2} chooses, from the heads of the match spec's clauses:
%% <ul>
%% <li>`{keys, Keys}' when every clause binds the key to a ground term:
%% one lookup per distinct key, nothing else.</li>
%% <li>`{prefix, Bytes}' when every clause binds a leading part of the key
%% (``{user, 42, '_'}'', ``{{user, '$1'}, '_'}'', ``[$a, $b | '_']''): the keys
%% matching it all have order keys starting with a prefix the clause
%% fixes ({@link fraghash_redb_nif:key_prefix/1}: order keys of tuples and
%% lists are the concatenation of their elements' keys, none of which is
%% the start of another, see `crates/fraghash-redb'), so only the range of
%% the longest prefix common to all clauses is read.</li>
%% <li>`scan' otherwise: the whole table.</li>
%% </ul>
%% Scans read chunks of {@link chunk/0} records; a
%% range starts with 16 and grows the chunk fourfold up to that size. The
%% compiled match spec runs on each record, except when its first clause
%% returns every record as it is (`{'_', [], ['$_']}', `{'$1', [], ['$1']}'):
%% then the records are the matches, and the copy of each one that
%% `ets:match_spec_run/2' makes is saved (measured on 1,000,000 records in
%% one VM: 1.5-1.9 s to 1.3-1.6 s for a full scan). A continuation
%% resumes after the last record looked at, so a table written between two
%% calls is read as it is then (as an ets table without `safe_fixtable').
%%
%% Complexity: `keys', O(K log N); `prefix', O(log N + R) for R records in
%% the range; `scan', O(N). A call with a limit L reads at most L matches
%% and the records between them.
-module(fraghash_redb_select).

-export([select/4, select/5, select/1, repair_continuation/2, plan/2, chunk/0, is_var/1,
         ground/1, wild/2, slot/2]).

%% Records read per chunk by a scan and by loading a copy; bounds a
%% reader's memory.
-define(CHUNK, 500).

%% The first chunk of a range: most ranges (an index value, a key's
%% leading part) hold a few records, and a chunk reads its records' values
%% whole; each next chunk is four times larger, up to the chunk size.
-define(FIRST_RANGE_CHUNK, 16).

-record(sel, {name, keypos, ms, cms, limit, prefix = <<>>, start = edge, pending = [],
              chunk = ?CHUNK, bag = false}).

%% @doc Up to `Limit' (`infinity' for all) matches of `MS' in table `Name'
%% (records keyed in position `KeyPos'), and a continuation; or
%% `'$end_of_table'' when there is none.
select(Name, KeyPos, MS, Limit) ->
    select(Name, KeyPos, false, MS, Limit).

%% @doc As {@link select/4}, in a table stored as a `bag' when `IsBag'
%% (one row per record, see {@link fraghash_redb_bag}): a key is the range
%% of its rows, and a continuation resumes after a record's own row.
select(Name, KeyPos, IsBag, MS, Limit) when Limit =:= infinity; is_integer(Limit), Limit > 0 ->
    S = #sel{name = Name, keypos = KeyPos, ms = MS, cms = compile(MS), limit = Limit,
             bag = IsBag},
    case plan(KeyPos, MS) of
        {keys, Keys} ->
            from_pending(S#sel{start = done, pending = matches_of_keys(S, Keys)});
        {prefix, Prefix} ->
            scan(S#sel{prefix = Prefix, chunk = ?FIRST_RANGE_CHUNK}, [], 0);
        scan ->
            scan(S, [], 0)
    end.

%% @doc The next matches after a continuation.
select('$end_of_table') ->
    '$end_of_table';
select(#sel{pending = [_ | _]} = S) ->
    from_pending(S);
select(#sel{start = done}) ->
    '$end_of_table';
select(#sel{} = S) ->
    scan(S, [], 0).

%% @doc A continuation kept across a process or node boundary has lost its
%% compiled match spec: it is compiled again.
repair_continuation(#sel{ms = MS} = S, _MS) ->
    S#sel{cms = compile(MS)};
repair_continuation(Cont, _MS) ->
    Cont.

%% @doc What a select of `MS' reads in a table keyed in position `KeyPos'
%% (see the module documentation).
-spec plan(pos_integer(), ets:match_spec()) -> {keys, [term()]} | {prefix, binary()} | scan.
plan(KeyPos, MS) ->
    Pats = [key_pattern(Head, KeyPos) || {Head, _, _} <- MS],
    case Pats =/= [] andalso lists:all(fun(P) -> P =/= none andalso ground(P) end, Pats) of
        true ->
            {keys, lists:usort(Pats)};
        false ->
            Prefixes = [prefix(P) || P <- Pats],
            case common_prefix(Prefixes) of
                <<>> -> scan;
                Prefix -> {prefix, Prefix}
            end
    end.

%%% Plans

%% `identity' when the first clause takes every record and returns it
%% unchanged (so every record is a match, as itself); else the compiled
%% match spec. Compiled either way, so that a spec ets rejects is
%% rejected here too.
compile(MS) ->
    CMS = ets:match_spec_compile(MS),
    case MS of
        [{Head, [], [Body]} | _] when is_atom(Head) ->
            Any = Head =:= '_' orelse is_var(Head),
            case Any andalso (Body =:= '$_' orelse Body =:= Head andalso Head =/= '_') of
                true -> identity;
                false -> CMS
            end;
        _ ->
            CMS
    end.

matches(Recs, identity) -> Recs;
matches(Recs, CMS) -> ets:match_spec_run(Recs, CMS).

%% The key's part of a clause head; `none' when the head fixes nothing
%% there (a variable, `'_'', not a tuple).
key_pattern(Head, Pos) when is_tuple(Head), tuple_size(Head) >= Pos ->
    element(Pos, Head);
key_pattern(_, _) ->
    none.

%% @doc Whether match pattern `P' holds no wildcard and no variable.
-spec ground(term()) -> boolean().
ground('_') -> false;
ground(A) when is_atom(A) -> not is_var(A);
ground([H | T]) -> ground(H) andalso ground(T);
ground(T) when is_tuple(T) -> ground(tuple_to_list(T));
ground(M) when is_map(M) -> ground(maps:to_list(M));
ground(_) -> true.

%% @doc Whether every record of a table keyed in position `Pos' matches
%% pattern `Pat' (its record name aside).
-spec wild(term(), pos_integer()) -> boolean().
wild('_', _Pos) -> true;
wild(Pat, Pos) when is_tuple(Pat) ->
    lists:all(fun({I, E}) -> E =:= '_' orelse (I =:= 1 andalso Pos =/= 1 andalso is_atom(E)
                                                andalso not is_var(E)) end,
              lists:zip(lists:seq(1, tuple_size(Pat)), tuple_to_list(Pat)));
wild(_, _) -> false.

%% @doc The record in slot `Pos' (from 0) of redb table `Name', in key
%% order, or `'$end_of_table'': a walk of O(Pos).
-spec slot(binary(), non_neg_integer()) -> [tuple()] | '$end_of_table'.
slot(Name, Pos) ->
    slot_walk(Name, edge, Pos).

slot_walk(Name, Start, Pos) ->
    Db = fraghash_redb_db:handle(),
    case fraghash_redb_nif:check(fraghash_redb_nif:chunk(Db, Name, Start, forward, ?CHUNK)) of
        {ok, Items, _} when length(Items) > Pos ->
            {_, V} = lists:nth(Pos + 1, Items),
            [binary_to_term(V)];
        {ok, Items, more} ->
            {K, _} = lists:last(Items),
            slot_walk(Name, {'after', K}, Pos - length(Items));
        {ok, _, done} ->
            '$end_of_table'
    end.

%% @doc Records read per chunk by a scan (and by loading a copy).
-spec chunk() -> pos_integer().
chunk() -> ?CHUNK.

%% @doc Whether atom `A' is a match spec variable (`'$1'', `'$2'', ...).
-spec is_var(atom()) -> boolean().
is_var(A) ->
    case atom_to_list(A) of
        [$$ | Digits] when Digits =/= [] -> lists:all(fun(C) -> C >= $0 andalso C =< $9 end, Digits);
        _ -> false
    end.

%% The bytes the order key of every term matching pattern `P' starts with
%% (the rule is the encoder's: fraghash_redb_nif:key_prefix/1); nothing
%% for a pattern no stored key can match, which a scan answers.
prefix(none) ->
    <<>>;
prefix(P) ->
    try fraghash_redb_nif:key_prefix(P)
    catch error:{fraghash_redb, _, _} -> <<>>
    end.

%% The longest prefix of all of `Ps': every key matching any clause starts
%% with it.
common_prefix([]) ->
    <<>>;
common_prefix([P]) ->
    P;
common_prefix(Ps) ->
    case lists:member(<<>>, Ps) of
        true -> <<>>;
        false -> binary:part(hd(Ps), 0, binary:longest_common_prefix(Ps))
    end.

%%% Reading

from_pending(#sel{pending = []}) ->
    '$end_of_table';
from_pending(#sel{pending = P, limit = infinity} = S) ->
    {P, S#sel{pending = []}};
from_pending(#sel{pending = P, limit = L} = S) when length(P) =< L ->
    {P, S#sel{pending = []}};
from_pending(#sel{pending = P, limit = L} = S) ->
    {Now, Later} = lists:split(L, P),
    {Now, S#sel{pending = Later}}.

%% In key order, as a scan would give them.
matches_of_keys(#sel{name = Name, cms = CMS, bag = true}, Keys) ->
    KBs = lists:usort([K || {ok, K} <- [fraghash_redb_nif:key_bin(Key) || Key <- Keys]]),
    matches(lists:append([fraghash_redb_bag:lookup(Name, K) || K <- KBs]), CMS);
matches_of_keys(#sel{name = Name, cms = CMS}, Keys) ->
    Db = fraghash_redb_db:handle(),
    KBs = lists:usort([K || {ok, K} <- [fraghash_redb_nif:key_bin(Key) || Key <- Keys]]),
    Recs = [binary_to_term(V) || K <- KBs,
                                 {ok, V} <- [fraghash_redb_nif:check(fraghash_redb_nif:read(Db, Name, K))]],
    matches(Recs, CMS).

%% Chunks from S#sel.start until Limit matches, the end of the table or
%% the end of the prefix's range; the continuation resumes after the last
%% record looked at.
scan(#sel{name = Name, start = Start, limit = Limit, cms = CMS, prefix = Prefix,
          chunk = Chunk, keypos = KeyPos, bag = IsBag} = S, Acc, N) ->
    Db = fraghash_redb_db:handle(),
    {ok, Vals, LastKey, More, Undecoded} =
        fraghash_redb_nif:check(fraghash_redb_nif:records(Db, Name, Prefix, Start, Chunk)),
    case run(records(Vals, Undecoded), CMS, Acc, N, Limit) of
        {Acc2, _N2, all} when More =:= done, Acc2 =:= [] ->
            '$end_of_table';
        {Acc2, _N2, all} when More =:= done ->
            {lists:reverse(Acc2), S#sel{start = done}};
        {Acc2, N2, all} ->
            S2 = S#sel{start = {'after', LastKey},
                       chunk = min(Chunk * 4, ?CHUNK)},
            case is_integer(Limit) andalso N2 >= Limit of
                true -> {lists:reverse(Acc2), S2};
                false -> scan(S2, Acc2, N2)
            end;
        {Acc2, _N2, {stopped_at, Rec}} ->
            Key = fraghash_redb_bag:row_key(IsBag, KeyPos, Rec),
            {lists:reverse(Acc2), S#sel{start = {'after', Key}}}
    end.

%% The values the NIF left as bytes decoded (see
%% fraghash_redb_nif:records/5).
records(Vals, 0) -> Vals;
records(Vals, _) -> [record(V) || V <- Vals].

record(V) when is_binary(V) -> binary_to_term(V);
record(R) -> R.

%% -> {Matches, Count, all | {stopped_at, LastRecordLookedAt}}
%% The records go through the match spec in one call when all of their
%% matches fit under the limit (a select without a limit always), else one
%% by one, to stop at the limit's last match.
run(Recs, CMS, Acc, N, Limit) ->
    case Limit =:= infinity orelse N + length(Recs) =< Limit of
        true ->
            Matches = matches(Recs, CMS),
            {lists:reverse(Matches, Acc), N + length(Matches), all};
        false ->
            one_by_one(Recs, CMS, Acc, N, Limit)
    end.

one_by_one([], _CMS, Acc, N, _Limit) ->
    {Acc, N, all};
one_by_one([R | Rest], CMS, Acc, N, Limit) ->
    {Acc2, N2} = case matches([R], CMS) of
                     [] -> {Acc, N};
                     [M] -> {[M | Acc], N + 1}
                 end,
    case N2 >= Limit andalso Rest =/= [] of
        true -> {Acc2, N2, {stopped_at, R}};
        false -> one_by_one(Rest, CMS, Acc2, N2, Limit)
    end.

