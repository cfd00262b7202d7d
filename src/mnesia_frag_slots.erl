%% @doc `mnesia_frag_hash' callbacks for fraghash's `slots' scheme:
%% balanced slot table (the recommended module).
%%
%% Use with `{frag_properties, [{hash_module, mnesia_frag_slots}, ...]}';
%% see `fraghash_mnesia' for the options and docs/mnesia.md for a guide.
-module(mnesia_frag_slots).

-define(SCHEME, slots).

-include("fraghash.hrl").
-include("fraghash_callbacks.hrl").
