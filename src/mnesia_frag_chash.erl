%% @doc `mnesia_frag_hash' callbacks for fraghash's `chash' scheme:
%% consistent-hash ring, 100 points per fragment unless {points, P}.
%%
%% Use with `{frag_properties, [{hash_module, mnesia_frag_chash}, ...]}';
%% see `fraghash_mnesia' for the options and docs/mnesia.md for a guide.
-module(mnesia_frag_chash).

-define(SCHEME, chash).

-include("fraghash.hrl").
-include("fraghash_callbacks.hrl").
