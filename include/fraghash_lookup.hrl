%% The hot path of every fraghash hash module, compiled into each module
%% (see fraghash_callbacks.hrl) so that a lookup is one local call, and
%% into `fraghash_lookup'. Needs fraghash.hrl.
%%
%% One route per scheme, no NIF call but for jump. The NIF built the
%% state's lookup once, from the core's scheme, and it is read where it
%% lies:
%% <ul>
%% <li>slots, linear: in the state itself, which Mnesia has just copied for
%% this call (a slots word, read with literal shifts, names up to two
%% segment starts inside its bucket, so only a bucket where three start
%% reads an overflow record; linear's two parameters);</li>
%% <li>chash, jump: in the persistent term published under the state's
%% `Key' (a small integer; `fraghash_lookup' publishes it on the first
%% lookup of the state on the node): `persistent_term:get/2', then one
%% 32-bit word of the ring's binary (two where a segment starts inside the
%% bucket), or for jump the digest the NIF's `locate' takes (its answer
%% comes from 64-bit mixing that Erlang would do in bignums). The value
%% repeats the state's `Check', matched here, so a value published for
%% another state (or another application's term under the same key) is
%% never read as this state's.</li>
%% </ul>

%% The fragment (1-based) of hash `H' in state `S': O(1) at any fragment
%% count. The state's head is matched in the body, not the clause head: a
%% clause that both matched the binary and kept it whole for the miss path
%% made the compiler rebuild it on every call (10 ns measured).
fraghash_locate(S, H) ->
    case S of
        <<"fh", 1, _:8, _:128, _:32, ?FRAGHASH_INLINE_SLOT_WORDS, Buckets:16, PerBucket:16,
          Off:32, _:(Off - ?FRAGHASH_STATE_HEAD_BYTES + (((H * Buckets) bsr 32) bsl 3))/binary,
          Hi:32, Lo:32, _/binary>> ->
            %% The bucket by multiplication, the word's fields at fixed
            %% widths: every shift a literal. The word is read as two
            %% aligned 32-bit halves, which the JIT extracts inline: one
            %% 64-bit field may be a bignum, so the JIT reads it through a
            %% generic helper, and a 58-bit field after the 6 flag bits is
            %% unaligned (8 and 13 ns more per lookup, measured).
            %% Hi = [0:5][Flag:1][0:1][Start2:9][Owner2:13][Start1 high:3],
            %% Lo = [Start1 low:6][Owner1:13][Owner0:13].
            if
                Hi < 16#4000000 ->
                    X = (((H * Buckets) band 16#FFFFFFFF) * PerBucket) bsr 32,
                    if
                        X >= Hi bsr 16 -> (Hi bsr 3) band 16#1FFF;
                        X >= ((Hi band 7) bsl 6) bor (Lo bsr 26) -> (Lo bsr 13) band 16#1FFF;
                        true -> Lo band 16#1FFF
                    end;
                true ->
                    fraghash_slot_overflow(S, Off + (((Hi band 16#3FFFFFF) bsl 32) bor Lo), H)
            end;
        <<"fh", 1, _:8, _:128, N:32, ?FRAGHASH_INLINE_LOW_BITS, Mask:32, Half:32, _/binary>> ->
            case H band Mask of
                A when A >= N -> A - Half + 1;
                A -> A + 1
            end;
        <<"fh", 1, _:8, K:64, C:64, _/binary>> ->
            case persistent_term:get(K, miss) of
                {fraghash_words, C, Shift, Words, _, _} ->
                    P = (H bsr Shift) bsl 2,
                    <<_:P/binary, E:32, _/binary>> = Words,
                    if
                        E < 16#80000000 -> E;
                        true -> fraghash_word_owner(E, P, H, Shift, Words)
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
            %% Not a state: aborts with the reason.
            fraghash_lookup:load_locate(S, H)
    end.

%% The owner of `H' from the overflow record at byte `J' of state `S' (a
%% slot-word bucket where three or more segments start).
fraghash_slot_overflow(S, J, H) ->
    <<_:J/binary, Owner0:32, K:32, Pairs/binary>> = S,
    fraghash_word_scan(Pairs, K, H, Owner0).

%% A ring's bucket word past the first kind (see the NIF's lookup_words
%% module), `E' at byte `P' of `Words': one segment start inside the
%% bucket, whose owner is the next bucket's first owner, or an overflow
%% record of several.
fraghash_word_owner(E, P, H, Shift, Words) when E < 16#C0000000 ->
    OBits = 30 - Shift,
    OffMask = (1 bsl Shift) - 1,
    case H band OffMask >= (E bsr OBits) band OffMask of
        true ->
            P1 = P + 4,
            <<_:P1/binary, E1:32, _/binary>> = Words,
            fraghash_word_first_owner(E1, OBits, Words);
        false ->
            E band ((1 bsl OBits) - 1)
    end;
fraghash_word_owner(E, _P, H, _Shift, Words) ->
    J = (E band 16#3FFFFFFF) bsl 2,
    <<_:J/binary, Owner0:32, K:32, Pairs/binary>> = Words,
    fraghash_word_scan(Pairs, K, H, Owner0).

%% The owner at a bucket's first hash, from its word.
fraghash_word_first_owner(E, _OBits, _Words) when E < 16#80000000 -> E;
fraghash_word_first_owner(E, OBits, _Words) when E < 16#C0000000 ->
    E band ((1 bsl OBits) - 1);
fraghash_word_first_owner(E, _OBits, Words) ->
    J = (E band 16#3FFFFFFF) bsl 2,
    <<_:J/binary, Owner0:32, _/binary>> = Words,
    Owner0.

%% The owner of the last of `K' `(Start, Owner)' pairs whose start is at or
%% below `H', else `Owner'.
fraghash_word_scan(<<Start:32, Owner:32, Rest/binary>>, K, H, _) when K > 0, Start =< H ->
    fraghash_word_scan(Rest, K - 1, H, Owner);
fraghash_word_scan(_, _, _, Owner) ->
    Owner.
