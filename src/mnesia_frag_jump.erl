%% @doc `mnesia_frag_hash' callbacks for fraghash's `jump' scheme:
%% jump consistent hashing.
%%
%% Use with `{frag_properties, [{hash_module, mnesia_frag_jump}, ...]}';
%% see `fraghash_mnesia' for the options and docs/mnesia.md for a guide.
-module(mnesia_frag_jump).

-define(SCHEME, jump).

-include("fraghash.hrl").
-include("fraghash_callbacks.hrl").
