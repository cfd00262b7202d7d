%% The hash_state of every fraghash Mnesia hash module, and its decoded form.
%%
%% Mnesia copies a table's hash state out of ets on every read and write
%% (`mnesia_frag' reads `{Tab, frag_hash}' from `mnesia_gvar'), so the state
%% Mnesia holds is one binary: a binary of at most 64 bytes is copied as one
%% flat object, where a record costs a copy of each field. Measured on OTP 25
%% (ets copy plus the lookup, per operation): 18 ns above
%% `mnesia_frag_hash''s state, against 28 ns for a record of the same fields
%% and 58 ns for a record that also held the options list and two binaries.
%%
%% Layout (`fraghash_mnesia:encode/1', `fraghash_mnesia:decode/1'):
%%
%%   <<"fh", 1, Scheme:8, Key:64, Check:64, N:32,
%%     TabLen:16, Tab:TabLen/binary, OptsLen:16, Opts:OptsLen/binary,
%%     Recipe/binary>>
%%
%% `Key' and `Check' are the top 59 bits of the two halves of the recipe's
%% digest, so both are small integers: `Key' is the persistent_term key of
%% the state's published lookup and `Check' is repeated in the published
%% value, so a lookup reads only the first 20 bytes and checks 118 bits of
%% the digest. `Scheme' is 1 slots, 2 chash, 3 jump, 4 linear; `Opts' is
%% `term_to_binary' of the options that differ from the defaults, or empty;
%% `Recipe' is the NIF's recipe (the new table the state started as, then
%% its add_frags and del_frags; a few dozen bytes). A fresh table whose name
%% is up to 16 bytes long has a state of at most 64 bytes.

-define(FRAGHASH_STATE_LAYOUT, 1).

%% The part of a state a lookup reads.
-define(FRAGHASH_STATE_HEAD(Key, Check), <<"fh", 1, _:8, Key:64, Check:64, _/binary>>).

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
