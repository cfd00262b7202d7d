%% @doc What a fragmented table looks like, for people and monitoring:
%% records and bytes per fragment and how even they are
%% ({@link distribution/1}), and the hash module, state and fragment count
%% ({@link info/1}), and whether every copy of each fragment holds the same
%% records ({@link replicas/1}); and the growth operations pending or under
%% way ({@link operations/0}). Reads only; `fraghash_frag' offers all of
%% them (the replicas as `check_replicas/1').
-module(fraghash_frag_info).

-export([distribution/1, info/1, fragment_size/1, replicas/1, operations/0]).

-include("fraghash.hrl").

%% @doc Records and bytes per fragment, and how even they are: `records',
%% `bytes' (totals), `mean' (records per fragment), `stddev' (population
%% standard deviation of the records per fragment), `binomial_floor'
%% (`sqrt(M * p * (1 - p))' with `p = 1/N': the spread a perfect hash still
%% shows by chance; a stddev near it is as even as hashing can be),
%% `min', `max', `max_over_mean', and `fragments', one map per fragment
%% (`fragment', `table', `records', `bytes', `storage', `node'). Bytes are
%% memory for `ram_copies' and `disc_copies' fragments, the file for
%% `disc_only_copies' ones, and the records' bytes in the database for
%% `redb_copies' ones (keys and values as stored; `storage' is then
%% `{ext, redb_copies, fraghash_redb_copies}'). Each fragment is measured
%% where Mnesia reads it; the counts are Mnesia's, so they are exact only
%% while nobody writes.
-spec distribution(atom()) -> map() | {error, {fraghash, no_such_table, string()}}.
distribution(Tab) ->
    case fraghash_tab:inspect_hash(Tab) of
        {error, _} = Error -> Error;
        {_Mod, _State, N} -> distribution(Tab, N)
    end.

distribution(Tab, N) ->
    Frags = [fragment_info(I, fraghash_tab:frag_name(Tab, I)) || I <- lists:seq(1, N)],
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
%% `hash_module', `n_fragments', `hash_state_bytes' (the size of the state,
%% which Mnesia copies on every read and write), and for fraghash's
%% modules `scheme' (`slots', `chash', `jump' or `linear') and `state' (the
%% scheme's own description: spec, fragments, memory of the built table;
%% for `slots' its slot count and slots per fragment). A table created with
%% `{foreign_key, {Master, Attr}}' also has `master' and `co_located':
%% whether its hash module and state place every key where the master's
%% do (see docs/mnesia-foreign-keys.md).
-spec info(atom()) -> map() | {error, {fraghash, no_such_table, string()}}.
info(Tab) ->
    case fraghash_tab:inspect_hash(Tab) of
        {error, _} = Error -> Error;
        {none, none, 1} -> #{table => Tab, hash_module => none, n_fragments => 1};
        {Mod, State, N} -> info(Tab, Mod, State, N)
    end.

info(Tab, Mod, State, N) ->
    Base0 = #{table => Tab,
              hash_module => Mod,
              n_fragments => N,
              hash_state_bytes => state_bytes(State)},
    Base = case lists:keyfind(foreign_key, 1, mnesia:table_info(Tab, frag_properties)) of
               {foreign_key, {Master, _}} ->
                   {MMod, MState, _} = fraghash_tab:hash(Master),
                   Base0#{master => Master,
                          co_located => fraghash_mnesia:same_placement({Mod, State},
                                                                       {MMod, MState})};
               _ ->
                   Base0
           end,
    case fraghash_state:decode(State) of
        {ok, #fraghash_state{scheme = Scheme}} ->
            Base#{scheme => Scheme, state => fraghash_mnesia:info(State)};
        {error, _} ->
            Base
    end.

%% The hash state's size: a binary's bytes (fraghash's states), else the
%% term's heap size.
state_bytes(State) when is_binary(State) -> byte_size(State);
state_bytes(State) -> erts_debug:flat_size(State) * erlang:system_info(wordsize).

%% @doc One fragment's records, bytes and storage type on this node
%% (`{Records, Bytes, Storage}'); called on the node that holds it.
-spec fragment_size(atom()) -> {non_neg_integer(), non_neg_integer(), atom()}.
fragment_size(Frag) ->
    Storage = mnesia:table_info(Frag, storage_type),
    Records = mnesia:table_info(Frag, size),
    Memory = mnesia:table_info(Frag, memory),
    %% ets reports words; dets and the storage backends (redb_copies),
    %% bytes on disc.
    Bytes = case Storage of
                disc_copies -> Memory * erlang:system_info(wordsize);
                ram_copies -> Memory * erlang:system_info(wordsize);
                _ -> Memory
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

%% @doc Whether every copy of each fragment of `Tab' holds the same
%% records: each node holding a copy counts its records and sums a hash of
%% each (order does not count), reading its own copy. `ok', or `{error,
%% {fraghash, replicas_differ, Text}, [{Fragment, [{Node, Records,
%% Digest}]}]}' for the fragments whose copies differ, or `{error,
%% {fraghash, node_unreachable, Text}}' for a holder that did not answer.
%% For after a partition is healed, and any time the table is quiet: with
%% writers going on, copies differ for the moment a commit takes to reach
%% every one. O(records) on every holder.
-spec replicas(atom()) -> ok | {error, term()} | {error, term(), list()}.
replicas(Tab) ->
    case fraghash_tab:inspect_hash(Tab) of
        {error, _} = Error ->
            Error;
        {_Mod, _State, N} ->
            Frags = [fraghash_tab:frag_name(Tab, I) || I <- lists:seq(1, N)],
            Per = [{F, [{Node, rpc:call(Node, fraghash_replicas, local_digest, [F], 600000)}
                        || Node <- lists:usort(mnesia:table_info(F, all_nodes))]}
                   || F <- Frags],
            Down = [{F, Node} || {F, Ds} <- Per, {Node, {badrpc, _}} <- Ds],
            Differ = [{F, [{Node, C, D} || {Node, {C, D}} <- Ds]}
                      || {F, Ds} <- Per, length(lists:usort([D || {_, D} <- Ds])) > 1],
            if
                Down =/= [] ->
                    {error, fraghash_error:new(node_unreachable,
                                               "could not read ~0p", [Down])};
                Differ =:= [] ->
                    ok;
                true ->
                    {error, fraghash_error:new(replicas_differ,
                                               "the copies of ~0p of ~s differ: read "
                                               "each copy, keep the right records "
                                               "and write them again",
                                               [[F || {F, _} <- Differ], Tab]),
                     Differ}
            end
    end.

%% @doc The growth operations pending or under way, on every table with a
%% journal entry: one map each, with `table', `op' (`add', a relieve among
%% them, `del', `rehash', or `move', a fragment copy moving between nodes),
%% `phase' (`fraghash_grow_machine'), `node' (the node that
%% began it), `started' (`erlang:system_time(millisecond)') and `running':
%% `true' while that node runs it, with its progress (`elapsed_ms',
%% `scanned' and `to_scan', the records of its sources read in this phase
%% and held when it began, `written', those copied or deleted; see
%% `fraghash_grow_progress'); `false' for one a crash interrupted, which
%% `fraghash_frag:recover/0' finishes or undoes.
-spec operations() -> [map()].
operations() ->
    case lists:member(fraghash_journal, mnesia:system_info(tables)) of
        false ->
            [];
        true ->
            [operation(T, E) || T <- fraghash_journal:pending(),
                                E <- [catch fraghash_journal:read(T)], is_map(E)]
    end.

operation(Tab, Entry) ->
    Node = maps:get(node, Entry, undefined),
    Base = #{table => Tab, op => maps:get(op, Entry), phase => maps:get(phase, Entry),
             node => Node, started => maps:get(started, Entry, undefined)},
    Running = case lists:member(Node, mnesia:system_info(running_db_nodes)) of
                  true -> catch erpc:call(Node, fraghash_grow_progress, read, [Tab], 5000);
                  false -> none
              end,
    case Running of
        #{} = Progress -> maps:merge(Base, Progress#{running => true});
        _ -> Base#{running => false}
    end.
