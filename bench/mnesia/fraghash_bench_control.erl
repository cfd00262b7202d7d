%% @doc A control hash module for the benchmark: the same state as
%% `mnesia_frag_slots' (the binary of `include/fraghash.hrl', copied by
%% Mnesia on every operation), but the lookup is `erlang:phash2(Key, N) + 1'
%% in pure Erlang, `N' read from the state. It separates what fraghash's
%% lookup costs from what the state and the key spread cost inside Mnesia.
%% Not for real tables: add_frag and del_frag move nothing sensibly.
-module(fraghash_bench_control).

-include("fraghash.hrl").

-export([init_state/2, add_frag/1, del_frag/1, key_to_frag_number/2,
         match_spec_to_frag_numbers/2]).

%% @doc A state of one fragment.
-spec init_state(atom(), term()) -> fraghash_state:encoded().
init_state(Tab, State) -> mnesia_frag_slots:init_state(Tab, State).

%% @doc One more fragment (creation only): the count grows, nothing else.
-spec add_frag(fraghash_state:encoded()) ->
          {fraghash_state:encoded(), [pos_integer()], [pos_integer()]}.
add_frag(<<Head:20/binary, N:32, Rest/binary>>) -> {<<Head/binary, (N + 1):32, Rest/binary>>, [], [N + 1]}.

%% @doc Not supported.
-spec del_frag(fraghash_state:encoded()) -> no_return().
del_frag(_) -> mnesia:abort(control_module_cannot_del_frag).

%% @doc `phash2(Key, N) + 1'.
-spec key_to_frag_number(fraghash_state:encoded(), term()) -> pos_integer().
key_to_frag_number(<<_:20/binary, N:32, _/binary>>, Key) -> erlang:phash2(Key, N) + 1.

%% @doc All fragments.
-spec match_spec_to_frag_numbers(fraghash_state:encoded(), term()) -> [pos_integer()].
match_spec_to_frag_numbers(<<_:20/binary, N:32, _/binary>>, _) -> lists:seq(1, N).
