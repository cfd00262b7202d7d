%% The five `mnesia_frag_hash' callbacks of a fraghash hash module, for
%% scheme `?SCHEME' (define it, then include this after fraghash.hrl). Each
%% module (`mnesia_frag_slots', `mnesia_frag_chash', `mnesia_frag_jump',
%% `mnesia_frag_linear') is its name, its docs and these lines: Mnesia
%% needs one module per hash scheme, the logic is in `fraghash_mnesia'.

-export([init_state/2, add_frag/1, del_frag/1, key_to_frag_number/2,
         match_spec_to_frag_numbers/2]).

%% @doc Called by Mnesia when a fragmented table is created.
-spec init_state(atom(), term()) -> fraghash_state:encoded().
init_state(Tab, State) -> fraghash_mnesia:init_state(?SCHEME, Tab, State).

%% @doc `{NewState, IterFrags, AdditionalLockFrags}' for one more fragment.
-spec add_frag(fraghash_state:encoded()) ->
          {fraghash_state:encoded(), [pos_integer()], [pos_integer()]}.
add_frag(State) -> fraghash_mnesia:add_frag(?SCHEME, State).

%% @doc `{NewState, IterFrags, AdditionalLockFrags}' without the last fragment.
-spec del_frag(fraghash_state:encoded()) ->
          {fraghash_state:encoded(), [pos_integer()], [pos_integer()]}.
del_frag(State) -> fraghash_mnesia:del_frag(?SCHEME, State).

%% @doc The fragment (1-based) of a key: `erlang:phash2(Key, 1 bsl 32)',
%% then the state's lookup, carried in the state or published (see
%% fraghash_lookup.hrl).
-spec key_to_frag_number(fraghash_state:encoded(), term()) -> pos_integer().
key_to_frag_number(S, Key) -> fraghash_locate(S, erlang:phash2(Key, 4294967296)).

-include("fraghash_lookup.hrl").

%% @doc The fragments a match spec must search.
-spec match_spec_to_frag_numbers(fraghash_state:encoded(), ets:match_spec()) ->
          [pos_integer()].
match_spec_to_frag_numbers(State, MatchSpec) ->
    fraghash_mnesia:match_spec_to_frag_numbers(State, MatchSpec).
