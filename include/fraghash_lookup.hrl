%% The hot path of every fraghash hash module, compiled into each module so
%% that a lookup is one local call. Also fraghash_mnesia's own
%% `key_to_frag_number/2'. Needs fraghash.hrl.
%%
%% For slots, chash and linear the lookup needs no NIF call: the NIF built
%% the state's lookup table once (from the core's scheme) and
%% `fraghash_mnesia' published it as a persistent term keyed by the
%% state's digest, which Erlang reads in place, without copying. A lookup
%% is then `phash2', `persistent_term:get/2', a shift and one `element/2'
%% (then a little arithmetic where two owners meet inside a bucket, or a
%% short scan of a small tuple where more do).
%% The first lookup of a state on a node finds nothing and publishes it
%% (`fraghash_mnesia:publish_locate/2'). Jump keeps the NIF call: its
%% answer comes from 64-bit mixing that Erlang would do in bignums.

%% The persistent_term key of a state's published lookup is its digest
%% itself: hashing a 16-byte binary cost less, measured, than building a
%% tuple key or matching an integer out of the digest on every call, and
%% key equality is digest equality.

%% @doc The fragment (1-based) of a key: O(1) at any fragment count.
-spec key_to_frag_number(fraghash_mnesia:state(), term()) -> pos_integer().
key_to_frag_number(#fraghash_state{scheme = jump, digest = D} = S, Key) ->
    H = erlang:phash2(Key, 4294967296),
    case fraghash_nif:locate(D, H) of
        miss -> fraghash_mnesia:load_locate(S, H);
        Frag -> Frag
    end;
key_to_frag_number(#fraghash_state{digest = D} = S, Key) ->
    H = erlang:phash2(Key, 4294967296),
    case persistent_term:get(D, miss) of
        {fraghash_ranges, Shift, OffMask, W, W2, OMask, Buckets, _Table, _Published} ->
            case element((H bsr Shift) + 1, Buckets) of
                Frag when is_integer(Frag), Frag > 0 -> Frag;
                Packed when is_integer(Packed) ->
                    fraghash_packed_owner(-Packed, H, OffMask, W, W2, OMask);
                Split -> fraghash_split_owner(Split, H, 2)
            end;
        miss ->
            fraghash_mnesia:publish_locate(S, H);
        Lookup ->
            fraghash_read_lookup(Lookup, H, S)
    end;
key_to_frag_number(Bad, _Key) ->
    mnesia:abort({bad_hash_state, Bad}).

%% The fragment of `H' in a published lookup of state `S' (see
%% fraghash_nif:lookup_table/2 for the forms; `fraghash_nif' marks a state
%% whose lookup stays in the NIF, as does any other term under the key).
fraghash_read_lookup({fraghash_ranges, Shift, OffMask, W, W2, OMask, Buckets, _, _}, H, _S) ->
    case element((H bsr Shift) + 1, Buckets) of
        Frag when is_integer(Frag), Frag > 0 -> Frag;
        Packed when is_integer(Packed) ->
            fraghash_packed_owner(-Packed, H, OffMask, W, W2, OMask);
        Split -> fraghash_split_owner(Split, H, 2)
    end;
fraghash_read_lookup({fraghash_low_bits, Mask, Half, N, _, _}, H, _S) ->
    case H band Mask of
        A when A >= N -> A - Half + 1;
        A -> A + 1
    end;
fraghash_read_lookup(_Other, H, #fraghash_state{digest = D} = S) ->
    case fraghash_nif:locate(D, H) of
        miss -> fraghash_mnesia:load_locate(S, H);
        Frag -> Frag
    end.

%% A bucket of two owners: `Owner0 + (Owner1 bsl W) + (Offset bsl 2W)',
%% `Owner1' from `Offset' into the bucket on.
fraghash_packed_owner(P, H, OffMask, W, W2, OMask) ->
    case H band OffMask >= P bsr W2 of
        true -> (P bsr W) band OMask;
        false -> P band OMask
    end.

%% A bucket where more owners meet: `{Owner0, Start1, Owner1, ...}', starts
%% ascending; the owner of the last start at or below `H'.
fraghash_split_owner(Split, H, I) when I < tuple_size(Split), element(I, Split) =< H ->
    fraghash_split_owner(Split, H, I + 2);
fraghash_split_owner(Split, _H, I) ->
    element(I - 1, Split).
