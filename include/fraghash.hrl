%% The hash_state of every fraghash Mnesia hash module: plain data that
%% survives restarts, other nodes and Mnesia's copying it out of ets on
%% every operation.
%%
%% `bytes' is the state's recipe (the NIF's `recipe' module: the new table
%% the state started as, then its add_frags and del_frags), a few dozen
%% bytes: a binary of at most 64 bytes is copied with the record, while a
%% bigger, reference-counted one would add its size to the copying
%% process's binary heap on every operation and cost garbage collections.
%% `digest' (xxh3-128 of `bytes', 16 bytes) is what the NIF looks the built
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
