%% @doc A control hash module for the benchmark: the same state shape as
%% the fraghash modules (`#fraghash_state{}'), but the lookup is
%% `erlang:phash2(Key, N) + 1' in pure Erlang. It separates what the NIF
%% costs from what the state's shape and the key spread cost inside Mnesia.
%% Not for real tables: add_frag and del_frag move nothing sensibly.
-module(fraghash_bench_control).

-include("fraghash.hrl").

-export([init_state/2, add_frag/1, del_frag/1, key_to_frag_number/2,
         match_spec_to_frag_numbers/2]).

%% @doc A state of one fragment.
-spec init_state(atom(), term()) -> #fraghash_state{}.
init_state(Tab, _) ->
    #fraghash_state{scheme = slots, table = Tab, n = 1, opts = [],
                    digest = <<0:128>>, bytes = <<"control">>}.

%% @doc One more fragment (creation only).
-spec add_frag(#fraghash_state{}) -> {#fraghash_state{}, [pos_integer()], [pos_integer()]}.
add_frag(#fraghash_state{n = N} = S) -> {S#fraghash_state{n = N + 1}, [], [N + 1]}.

%% @doc Not supported.
-spec del_frag(#fraghash_state{}) -> no_return().
del_frag(_) -> mnesia:abort(control_module_cannot_del_frag).

%% @doc `phash2(Key, N) + 1'.
-spec key_to_frag_number(#fraghash_state{}, term()) -> pos_integer().
key_to_frag_number(#fraghash_state{n = N}, Key) -> erlang:phash2(Key, N) + 1.

%% @doc All fragments.
-spec match_spec_to_frag_numbers(#fraghash_state{}, term()) -> [pos_integer()].
match_spec_to_frag_numbers(#fraghash_state{n = N}, _) -> lists:seq(1, N).
