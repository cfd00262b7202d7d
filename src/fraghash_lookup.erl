%% @doc Published lookups: how `mnesia_frag_chash' and `mnesia_frag_jump'
%% answer `key_to_frag_number' (the states of `slots' and `linear' carry
%% their lookup, see `include/fraghash.hrl').
%%
%% A state's lookup is published as the persistent term keyed by the
%% state's `Key' (a small integer from its digest, see
%% `include/fraghash.hrl') by the first lookup that misses it on this node,
%% never per operation. The value is what the hot path
%% (`include/fraghash_lookup.hrl') reads, led by the state's `Check' and
%% followed by the table name and the publishing time: `{fraghash_words,
%% Check, Shift, Words, Table, Published}' for a ring (32-bit words in a
%% binary, built by `fraghash_nif:lookup_table/2' from the core's scheme),
%% `{fraghash_nif, Check, Digest, Table, Published}' for jump (the NIF
%% answers).
%%
%% Replacing or erasing a persistent term makes the VM scan every
%% process's heap, so publishing is rare and bounded:
%% <ul>
%% <li>One publisher at a time per node: the publisher holds the local
%% registered name `fraghash_lookup_publisher' (freed by the VM if it
%% dies). A lookup that misses while another process publishes asks the
%% NIF instead, so a burst of lookups of a new state builds and publishes
%% its table once.</li>
%% <li>A table keeps its two most recently published lookups (the current
%% state and the one before it, which lookups under way during a change
%% and `fraghash_frag''s follow-up still use); publishing a third erases
%% the oldest. A table's states never come back (each change extends the
%% recipe), so the two do not alternate.</li>
%% <li>Lookups of tables that no longer exist in Mnesia are erased by the
%% next publish once they are a minute old.</li>
%% <li>A key held by anything else (another application's term, or a
%% state whose digest shares the 59 bits of `Key' but not those of
%% `Check') is never replaced: that state's lookups ask the NIF.</li>
%% </ul>
%% So the memory held is at most two lookups per table, plus those of
%% tables deleted within the last minute or since the last publish.
-module(fraghash_lookup).

-include("fraghash.hrl").

-export([locate_hash/2, publish_locate/2, load_locate/2, published/0]).

-define(KEEP_PER_TABLE, 2).
-define(STALE_MS, 60000).
-define(PUBLISHER, fraghash_lookup_publisher).
-define(TAGS, [fraghash_words, fraghash_nif]).

-include("fraghash_lookup.hrl").

%% @doc The fragment of a 32-bit hash `H' (`erlang:phash2(Key, 1 bsl 32)')
%% through the path `key_to_frag_number/2' takes: the lookup the state
%% carries, or the published one (published on a miss).
-spec locate_hash(fraghash_state:encoded(), 0..4294967295) -> pos_integer().
locate_hash(S, H) -> fraghash_locate(S, H).

%% @doc The miss path of a lookup: publishes the state's lookup table (when
%% no other process is publishing one), then answers through the NIF, which
%% has just built the scheme.
-spec publish_locate(fraghash_state:encoded(), 0..4294967295) -> pos_integer().
publish_locate(S, H) ->
    R = fraghash_state:decode_or_abort(S),
    case catch register(?PUBLISHER, self()) of
        true ->
            try publish(R) after unregister(?PUBLISHER) end;
        _ ->
            case process_info(self(), registered_name) of
                %% A process registered under its own name cannot take
                %% this one: it publishes unguarded.
                {registered_name, Own} when Own =/= ?PUBLISHER -> publish(R);
                _ -> ok
            end
    end,
    locate_decoded(R, H).

%% @doc The NIF's answer for a state (decoding and caching its scheme on a
%% dirty scheduler, checking its digest, when it is not cached); aborts
%% with the reason on anything that is not a state.
-spec load_locate(fraghash_state:encoded(), 0..4294967295) -> pos_integer().
load_locate(S, H) ->
    locate_decoded(fraghash_state:decode_or_abort(S), H).

%% @doc The lookups published on this node: `{Table, Key, Words}' per
%% lookup, `Words' its size in memory words.
-spec published() -> [{atom(), non_neg_integer(), non_neg_integer()}].
published() ->
    [{T, K, erts_debug:flat_size(V)} || {K, T, _, V} <- published_entries()].

%%% Internals

locate_decoded(#fraghash_state{digest = D, bytes = B}, H) ->
    ok = fraghash_nif:built_dir(),
    fraghash_nif:call(fun() -> fraghash_nif:load_locate(D, B, H) end).

%% Builds and publishes the lookup of a state, unless its key holds a term
%% already, then erases the lookups that are no longer kept.
publish(#fraghash_state{table = T, digest = D, bytes = B}) ->
    {K, C} = fraghash_state:key_of_digest(D),
    case persistent_term:get(K, miss) of
        miss ->
            ok = fraghash_nif:built_dir(),
            Now = erlang:monotonic_time(millisecond),
            Value = case fraghash_nif:call(fun() -> fraghash_nif:lookup_table(D, B) end) of
                        {words, Shift, Words} ->
                            {fraghash_words, C, Shift, Words, T, Now};
                        none ->
                            %% jump; or a state whose kind the hot path
                            %% did not read, which the NIF still answers.
                            {fraghash_nif, C, D, T, Now}
                    end,
            ok = persistent_term:put(K, Value),
            retire(T, Now);
        _ ->
            %% Published meanwhile, or held by another term: left alone.
            ok
    end.

%% Erases the lookups of table `T' beyond the newest ?KEEP_PER_TABLE, and
%% those of tables Mnesia no longer has that are over ?STALE_MS old.
retire(T, Now) ->
    Entries = published_entries(),
    Mine = lists:reverse(lists:keysort(3, [E || {_, T1, _, _} = E <- Entries, T1 =:= T])),
    Old = lists:nthtail(min(?KEEP_PER_TABLE, length(Mine)), Mine),
    Stale = case catch mnesia:system_info(tables) of
                Tabs when is_list(Tabs) ->
                    [E || {_, T1, P, _} = E <- Entries, T1 =/= T, Now - P > ?STALE_MS,
                          not lists:member(T1, Tabs)];
                _ ->
                    []
            end,
    _ = [persistent_term:erase(K) || {K, _, _, _} <- Old ++ Stale],
    ok.

%% `{Key, Table, PublishedMs, Value}' of every published lookup.
published_entries() ->
    [{K, element(tuple_size(V) - 1, V), element(tuple_size(V), V), V}
     || {K, V} <- persistent_term:get(), is_integer(K), is_tuple(V), tuple_size(V) >= 5,
        lists:member(element(1, V), ?TAGS)].
