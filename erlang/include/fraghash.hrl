%% The hash_state of every fraghash Mnesia hash module: plain data that
%% survives restarts, other nodes and Mnesia's copying it out of ets on
%% every operation.
%%
%% `bytes' is the core crate's versioned scheme state as ONE binary: above
%% 64 bytes it is reference-counted, so copying the record copies a pointer.
%% `digest' (xxh3-128 of `bytes', 16 bytes) is what the NIF looks the decoded
%% scheme up by; `bytes' is only read on a cache miss, and then checked
%% against `digest'.
-record(fraghash_state, {
    scheme :: slots | chash | jump | linear,
    table :: atom(),
    n :: pos_integer(),
    opts :: [{atom(), term()}],
    digest :: binary(),
    bytes :: binary()
}).
