%% @doc Durable `add_frag' and `del_frag' for fragmented `disc_copies'
%% tables, and a repair for tables already hit by the Mnesia problem below.
%% Works with any hash module, `mnesia_frag_hash' included.
%%
%% Mnesia 4.21.3 (OTP 25) does not always make durable the record moves
%% that `mnesia:change_table_frag/2' does inside its schema transaction:
%% after a restart (or a node's restart in a cluster), records that a
%% `del_frag' merged into other fragments can be gone, and records that an
%% `add_frag' moved out of a fragment can be back in it as stale copies
%% (which a later `add_frag' then aborts on with "Fragment not locked").
%% The in-memory tables are right; only what is on disc is not.
%%
%% {@link add_frag/2} and {@link del_frag/1} run the schema change and then
%% repeat its record moves as ordinary transactions, which Mnesia logs and
%% replays correctly: after `add_frag', each record now in the new fragment
%% is deleted from the fragment it came from (a no-op in memory); after
%% `del_frag', each record that came from the removed fragment is written
%% again where it now lives. The cost is one operation per moved record.
-module(fraghash_frag).

-export([add_frag/2, del_frag/1, stale_copies/1, repair/1, hash/1]).
-export([distribution/1, info/1, fragment_size/1]).

-include("fraghash.hrl").

-define(BATCH, 500).

%% @doc `mnesia:change_table_frag(Tab, {add_frag, Nodes})', then the moved
%% records' deletions from their old fragments, made durable.
-spec add_frag(atom(), [node()]) -> {atomic, ok} | {aborted, term()}.
add_frag(Tab, Nodes) ->
    {Mod, Old, N} = hash(Tab),
    case mnesia:change_table_frag(Tab, {add_frag, Nodes}) of
        {atomic, ok} ->
            New = frag_name(Tab, N + 1),
            Keys = mnesia:dirty_all_keys(New),
            Dels = [{frag_name(Tab, Mod:key_to_frag_number(Old, K)), K} || K <- Keys],
            batches(fun({F, K}) -> mnesia:delete(F, K, write) end, Dels);
        Aborted ->
            Aborted
    end.

%% @doc `mnesia:change_table_frag(Tab, del_frag)', then the merged records
%% written again where they now live, made durable.
-spec del_frag(atom()) -> {atomic, ok} | {aborted, term()}.
del_frag(Tab) ->
    {Mod, Old, N} = hash(Tab),
    {_, _, Dests} = Mod:del_frag(Old),
    case mnesia:change_table_frag(Tab, del_frag) of
        {atomic, ok} ->
            Moved = [{frag_name(Tab, D), K}
                     || D <- lists:usort(Dests), D < N,
                        K <- mnesia:dirty_all_keys(frag_name(Tab, D)),
                        Mod:key_to_frag_number(Old, K) =:= N],
            batches(fun({F, K}) ->
                            [mnesia:write(F, R, write) || R <- mnesia:read(F, K, write)],
                            ok
                    end, Moved);
        Aborted ->
            Aborted
    end.

%% @doc How many records sit in a fragment other than the one
%% `key_to_frag_number' names (0 for a healthy table).
-spec stale_copies(atom()) -> non_neg_integer().
stale_copies(Tab) ->
    length(misplaced(Tab)).

%% @doc Removes stale copies: a misplaced record whose key is also in its
%% right fragment is deleted; one that is not is moved there. Returns how
%% many records it fixed.
-spec repair(atom()) -> {atomic, non_neg_integer()} | {aborted, term()}.
repair(Tab) ->
    Bad = misplaced(Tab),
    Fix = fun({From, To, K}) ->
                  case mnesia:read(To, K, write) of
                      [] ->
                          [mnesia:write(To, R, write) || R <- mnesia:read(From, K, write)];
                      _ ->
                          ok
                  end,
                  mnesia:delete(From, K, write)
          end,
    case batches(Fix, Bad) of
        {atomic, ok} -> {atomic, length(Bad)};
        Aborted -> Aborted
    end.

%% @doc A fragmented table's hash module, hash state and fragment count, as
%% its `frag_properties' give them on this node.
-spec hash(atom()) -> {module(), term(), pos_integer()}.
hash(Tab) ->
    Props = mnesia:table_info(Tab, frag_properties),
    {hash_module, Mod} = lists:keyfind(hash_module, 1, Props),
    {hash_state, S} = lists:keyfind(hash_state, 1, Props),
    {n_fragments, N} = lists:keyfind(n_fragments, 1, Props),
    {Mod, S, N}.

%%% What a table looks like

%% @doc Records and bytes per fragment, and how even they are: `records',
%% `bytes' (totals), `mean' (records per fragment), `stddev' (population
%% standard deviation of the records per fragment), `binomial_floor'
%% (`sqrt(M * p * (1 - p))' with `p = 1/N': the spread a perfect hash still
%% shows by chance; a stddev near it is as even as hashing can be),
%% `min', `max', `max_over_mean', and `fragments', one map per fragment
%% (`fragment', `table', `records', `bytes', `storage', `node'). Bytes are
%% memory for `ram_copies' and `disc_copies' fragments, the file for
%% `disc_only_copies' ones. Each fragment is measured where Mnesia reads
%% it; the counts are Mnesia's, so they are exact only while nobody writes.
-spec distribution(atom()) -> map().
distribution(Tab) ->
    {_Mod, _State, N} = hash(Tab),
    Frags = [fragment_info(I, frag_name(Tab, I)) || I <- lists:seq(1, N)],
    Counts = [maps:get(records, F) || F <- Frags],
    M = lists:sum(Counts),
    Mean = M / N,
    Var = lists:sum([(C - Mean) * (C - Mean) || C <- Counts]) / N,
    P = 1 / N,
    #{table => Tab,
      n_fragments => N,
      records => M,
      bytes => lists:sum([maps:get(bytes, F) || F <- Frags]),
      mean => Mean,
      stddev => math:sqrt(Var),
      binomial_floor => math:sqrt(M * P * (1 - P)),
      min => lists:min(Counts),
      max => lists:max(Counts),
      max_over_mean => case M of 0 -> 0.0; _ -> lists:max(Counts) / Mean end,
      fragments => Frags}.

%% @doc A fragmented table's hash module, fragment count and hash state:
%% `hash_module', `n_fragments', `hash_state_bytes' (the heap size of the
%% state, which Mnesia copies on every read and write), and for fraghash's
%% modules `scheme' (`slots', `chash', `jump' or `linear') and `state' (the
%% scheme's own description: spec, fragments, memory of the built table;
%% for `slots' its slot count and slots per fragment).
-spec info(atom()) -> map().
info(Tab) ->
    {Mod, State, N} = hash(Tab),
    Base = #{table => Tab,
             hash_module => Mod,
             n_fragments => N,
             hash_state_bytes => erts_debug:flat_size(State) * erlang:system_info(wordsize)},
    case State of
        #fraghash_state{scheme = Scheme} ->
            Base#{scheme => Scheme, state => fraghash_mnesia:info(State)};
        _ ->
            Base
    end.

%% @doc One fragment's records, bytes and storage type on this node
%% (`{Records, Bytes, Storage}'); called on the node that holds it.
-spec fragment_size(atom()) -> {non_neg_integer(), non_neg_integer(), atom()}.
fragment_size(Frag) ->
    Storage = mnesia:table_info(Frag, storage_type),
    Records = mnesia:table_info(Frag, size),
    Memory = mnesia:table_info(Frag, memory),
    Bytes = case Storage of
                disc_only_copies -> Memory;
                _ -> Memory * erlang:system_info(wordsize)
            end,
    {Records, Bytes, Storage}.

fragment_info(I, Frag) ->
    Node = mnesia:table_info(Frag, where_to_read),
    {Records, Bytes, Storage} =
        case Node =:= node() of
            true -> fragment_size(Frag);
            false ->
                case rpc:call(Node, ?MODULE, fragment_size, [Frag]) of
                    {badrpc, Reason} -> error({fraghash, unreachable, {Frag, Node, Reason}});
                    Size -> Size
                end
        end,
    #{fragment => I, table => Frag, records => Records, bytes => Bytes,
      storage => Storage, node => Node}.

%%% Internals

misplaced(Tab) ->
    {Mod, S, N} = hash(Tab),
    lists:append(
      [[{frag_name(Tab, F), frag_name(Tab, Right), K}
        || {K, Right} <- [{K, Mod:key_to_frag_number(S, K)}
                          || K <- mnesia:dirty_all_keys(frag_name(Tab, F))],
           Right =/= F]
       || F <- lists:seq(1, N)]).

frag_name(Tab, 1) -> Tab;
frag_name(Tab, N) -> list_to_atom(atom_to_list(Tab) ++ "_frag" ++ integer_to_list(N)).

%% Runs F over Items in transactions of ?BATCH items.
batches(_F, []) ->
    {atomic, ok};
batches(F, Items) ->
    {Batch, Rest} = lists:split(min(?BATCH, length(Items)), Items),
    case mnesia:transaction(fun() -> lists:foreach(F, Batch) end) of
        {atomic, ok} -> batches(F, Rest);
        Aborted -> Aborted
    end.
