%% @doc `mnesia_frag_hash' callbacks for fraghash's `linear' scheme:
%% Mnesia's linear hashing computed in Rust (for cross-checks).
%%
%% Use with `{frag_properties, [{hash_module, mnesia_frag_linear}, ...]}';
%% see `fraghash_mnesia' for the options and docs/mnesia.md for a guide.
-module(mnesia_frag_linear).

-define(SCHEME, linear).

-include("fraghash.hrl").
-include("fraghash_callbacks.hrl").
