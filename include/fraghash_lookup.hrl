%% The hot path of every fraghash hash module, compiled into each module
%% (see fraghash_callbacks.hrl) so that a lookup is one local call, and
%% into `fraghash_lookup'. Needs fraghash.hrl.
%%
%% No NIF call for slots, chash and linear: the NIF built the state's
%% lookup table once (from the core's scheme) and `fraghash_lookup'
%% published it as a persistent term under the state's `Key', which Erlang
%% reads in place, without copying. A lookup is then `phash2',
%% `persistent_term:get/2' (a small-integer key: 12 ns measured, against 24
%% for the 16-byte digest), a shift and one `element/2' (then a little
%% arithmetic where two owners meet inside a bucket, or a short scan of a
%% small tuple where more do; for a ring of many points, a 32-bit word read
%% from a binary). The published value repeats the state's
%% `Check', matched here, so a value published for another state (or
%% another application's term under the same key) is never read as this
%% state's. The first lookup of a state on a node finds nothing and
%% publishes it (`fraghash_lookup:publish_locate/2'). Jump's answer comes
%% from 64-bit mixing that Erlang would do in bignums: its published value
%% names the digest the NIF's `locate' takes.

%% The fragment (1-based) of hash `H' in state `S': O(1) at any fragment
%% count. The state's head is matched in the body, not the clause head: a
%% clause that both matched the binary and kept it whole for the miss path
%% made the compiler rebuild it on every call (10 ns measured).
fraghash_locate(S, H) ->
    case S of
        ?FRAGHASH_STATE_HEAD(K, C) ->
            case persistent_term:get(K, miss) of
                {fraghash_ranges, C, Shift, OffMask, W, W2, OMask, Buckets, _, _} ->
                    case element((H bsr Shift) + 1, Buckets) of
                        Frag when is_integer(Frag), Frag > 0 -> Frag;
                        Packed when is_integer(Packed) ->
                            fraghash_packed_owner(-Packed, H, OffMask, W, W2, OMask);
                        Split -> fraghash_split_owner(Split, H, 2)
                    end;
                {fraghash_words, C, Shift, OffMask, OBits, OMask, Words, _, _} ->
                    I = H bsr Shift,
                    <<_:I/binary-unit:32, E:32, _/binary>> = Words,
                    if
                        E < 16#80000000 -> E;
                        true -> fraghash_word_owner(E, I, H, OffMask, OBits, OMask, Words)
                    end;
                {fraghash_low_bits, C, Mask, Half, N, _, _} ->
                    case H band Mask of
                        A when A >= N -> A - Half + 1;
                        A -> A + 1
                    end;
                {fraghash_nif, C, D, _, _} ->
                    case fraghash_nif:locate(D, H) of
                        miss -> fraghash_lookup:load_locate(S, H);
                        Frag -> Frag
                    end;
                _ ->
                    fraghash_lookup:publish_locate(S, H)
            end;
        _ ->
            %% A state in the earlier record form, or not a state (aborts).
            fraghash_lookup:locate_legacy(S, H)
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

%% A bucket word past the first kind (see the NIF's lookup_words module):
%% one segment start inside the bucket, whose owner is the next bucket's
%% first owner, or an overflow record of several.
fraghash_word_owner(E, I, H, OffMask, OBits, OMask, Words) when E < 16#C0000000 ->
    case H band OffMask >= (E bsr OBits) band OffMask of
        true ->
            I1 = I + 1,
            <<_:I1/binary-unit:32, E1:32, _/binary>> = Words,
            fraghash_word_first_owner(E1, OMask, Words);
        false ->
            E band OMask
    end;
fraghash_word_owner(E, _I, H, _OffMask, _OBits, _OMask, Words) ->
    J = E band 16#3FFFFFFF,
    <<_:J/binary-unit:32, Owner0:32, K:32, Pairs/binary>> = Words,
    fraghash_word_scan(Pairs, K, H, Owner0).

%% The owner at a bucket's first hash, from its word.
fraghash_word_first_owner(E, _OMask, _Words) when E < 16#80000000 -> E;
fraghash_word_first_owner(E, OMask, _Words) when E < 16#C0000000 -> E band OMask;
fraghash_word_first_owner(E, _OMask, Words) ->
    J = E band 16#3FFFFFFF,
    <<_:J/binary-unit:32, Owner0:32, _/binary>> = Words,
    Owner0.

%% The owner of the last of `K' `(Start, Owner)' pairs whose start is at or
%% below `H', else `Owner'.
fraghash_word_scan(<<Start:32, Owner:32, Rest/binary>>, K, H, _) when K > 0, Start =< H ->
    fraghash_word_scan(Rest, K - 1, H, Owner);
fraghash_word_scan(_, _, _, Owner) ->
    Owner.
