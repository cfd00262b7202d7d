%% The hot path of every fraghash hash module, compiled into each module so
%% that a lookup is one local call: phash2, then one NIF call that finds the
%% built scheme by digest. Also fraghash_mnesia's own `key_to_frag_number/2'.
%% Needs fraghash.hrl.

%% @doc The fragment (1-based) of a key: O(1) at any fragment count.
-spec key_to_frag_number(fraghash_mnesia:state(), term()) -> pos_integer().
key_to_frag_number(#fraghash_state{digest = D} = S, Key) ->
    H = erlang:phash2(Key, 4294967296),
    case fraghash_nif:locate(D, H) of
        miss -> fraghash_mnesia:load_locate(S, H);
        Frag -> Frag
    end;
key_to_frag_number(Bad, _Key) ->
    mnesia:abort({bad_hash_state, Bad}).
