%% @doc `mnesia_frag_slots' with its lookup through the NIF (one
%% `fraghash_nif:locate/2' call per key, as before lookups were published
%% for Erlang to read): the same states and placement, so that a paired
%% run compares the two lookup paths and nothing else. Benchmark only.
-module(fraghash_bench_slots_nif).

-include("fraghash.hrl").

-export([init_state/2, add_frag/1, del_frag/1, key_to_frag_number/2,
         match_spec_to_frag_numbers/2]).

%% @doc As `mnesia_frag_slots'.
init_state(Tab, State) -> mnesia_frag_slots:init_state(Tab, State).

%% @doc As `mnesia_frag_slots'.
add_frag(State) -> mnesia_frag_slots:add_frag(State).

%% @doc As `mnesia_frag_slots'.
del_frag(State) -> mnesia_frag_slots:del_frag(State).

%% @doc The NIF's answer for the key.
-spec key_to_frag_number(#fraghash_state{}, term()) -> pos_integer().
key_to_frag_number(#fraghash_state{digest = D} = S, Key) ->
    H = erlang:phash2(Key, 4294967296),
    case fraghash_nif:locate(D, H) of
        miss -> fraghash_mnesia:load_locate(S, H);
        Frag -> Frag
    end.

%% @doc As `mnesia_frag_slots'.
match_spec_to_frag_numbers(State, MatchSpec) ->
    mnesia_frag_slots:match_spec_to_frag_numbers(State, MatchSpec).
