%% The hash_state of every fraghash Mnesia hash module, and its decoded form.
%%
%% Mnesia copies a table's hash state out of ets on every read and write
%% (`mnesia_frag' reads `{Tab, frag_hash}' from `mnesia_gvar'), so the state
%% Mnesia holds is one binary, which is copied as one object, where a record
%% costs a copy of each field (measured on OTP 25, ets copy plus a published
%% lookup, per operation: a 51-byte binary 18 ns above `mnesia_frag_hash''s
%% state, a record of the same fields 28 ns, a record that also held the
%% options list and two binaries 58 ns).
%%
%% Layout (`fraghash_state:encode/2', `fraghash_state:decode/1'):
%%
%%   <<"fh", 1, Scheme:8, Key:64, Check:64, N:32, Kind:8, A:32, Z:32,
%%     TabLen:16, Tab:TabLen/binary, OptsLen:16, Opts:OptsLen/binary,
%%     RecipeLen:32, Recipe:RecipeLen/binary, Words/binary>>
%%
%% `Key' and `Check' are the top 59 bits of the two halves of the recipe's
%% digest, so both are small integers. `Scheme' is 1 slots, 2 chash, 3
%% jump, 4 linear; `Opts' is `term_to_binary' of the options that differ
%% from the defaults, or empty; `Recipe' is the NIF's recipe (the new table
%% the state started as, then its add_frags and del_frags; a few dozen
%% bytes).
%%
%% `Kind' says where a lookup finds the fragment of a hash; each scheme
%% has one kind, and a state of another is refused as damaged:
%% <ul>
%% <li>slot words (4), `slots': in the state itself. `Words' are the
%% 64-bit words of the NIF's `lookup_slot_words' layout, then its overflow
%% records; `A' is the bucket count (high 16 bits) and the slots per bucket
%% (low 16), and `Z' the words' byte offset in the state. One word per
%% bucket names the owners and the slot offsets of up to two segment
%% starts inside it, in fields of fixed widths (owners 13 bits, starts 9),
%% so a lookup reads one word of the binary Mnesia has just copied for it,
%% finds its bucket and slot offset by multiplication and unpacks the word
%% with literal shifts, which the JIT inlines (a shift by a count read from
%% the state it does not); only a bucket where three or more segments
%% start reads an overflow record. The owner field holds fragments up to
%% 8,191: a `slots' table grows no further. The words aim at 64 KiB (a new
%% table of 4,096 fragments); larger tables take fewer buckets with more
%% overflow records.</li>
%% <li>low bits (2), `linear': `Mask' (`A') and `Half' (`Z'): no
%% table.</li>
%% <li>none (0), `chash' and `jump': in the lookup published under `Key'
%% (a persistent term, see `fraghash_lookup'), whose value repeats
%% `Check'. A ring's 32-bit words (the NIF's `lookup_words' layout,
%% `points' segments per fragment) are too many to copy with every state;
%% jump's published value names the digest the NIF's `locate' takes.</li>
%% </ul>
%% A state over 64 bytes is reference-counted, so Mnesia's copy is a
%% pointer, but it adds the binary's size to the copying process's binary
%% heap. Measured through `mnesia_frag' (`bench/mnesia', one scheduler,
%% a pure-Erlang lookup in states of several sizes): 1,000 bytes cost
%% nothing measurable against 132 at 50 fragments, nor 16,000 bytes at 400
%% fragments.

-define(FRAGHASH_STATE_LAYOUT, 1).
-define(FRAGHASH_STATE_HEAD_BYTES, 33).
-define(FRAGHASH_INLINE_NONE, 0).
-define(FRAGHASH_INLINE_LOW_BITS, 2).
-define(FRAGHASH_INLINE_SLOT_WORDS, 4).

%% A state, decoded (cold paths only: add_frag, del_frag, publishing, info).
%% `digest' is the xxh3-128 digest of `bytes', the recipe, which is what the
%% NIF keys its built schemes by.
-record(fraghash_state, {
    scheme :: slots | chash | jump | linear,
    table :: atom(),
    n :: pos_integer(),
    opts :: [{atom(), term()}],
    digest :: binary(),
    bytes :: binary()
}).
