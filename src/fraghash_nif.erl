%% @doc Loader and stubs for the fraghash NIF (`priv/libfraghash_nif.so').
%%
%% The library is looked for in `code:priv_dir(fraghash)' when fraghash is
%% installed as an application, else in `../priv' next to this module's
%% `ebin' directory, else in the directory named by the environment variable
%% `FRAGHASH_NIF_DIR'. Fragment numbers are Mnesia's (1-based). Errors raise
%% `{fraghash, Reason, Message}' with `Reason' one of `corrupt_state',
%% `digest_mismatch', `bad_spec', `refused' and `Message' a binary.
-module(fraghash_nif).

-export([fresh_state/3, locate/2, load_locate/3, add_frag/4, del_frag/2,
         info/2, cache_stats/0, digest/1, set_built_dir/1, lookup_table/2]).

-on_load(init/0).

-type digest() :: <<_:128>>.
-type change() :: {digest(), binary(), [pos_integer()], [pos_integer()]}.
-type lookup_table() :: {ranges, 0..32, tuple()}
                      | {low_bits, non_neg_integer(), pos_integer(), pos_integer()}
                      | none.
-export_type([digest/0, change/0, lookup_table/0]).

-spec init() -> ok | {error, term()}.
init() ->
    erlang:load_nif(filename:join(priv_dir(), "libfraghash_nif"), 0).

priv_dir() ->
    case os:getenv("FRAGHASH_NIF_DIR") of
        Dir when is_list(Dir), Dir =/= "" -> Dir;
        _ ->
            case code:priv_dir(fraghash) of
                Dir when is_list(Dir) -> Dir;
                _ ->
                    Ebin = filename:dirname(code:which(?MODULE)),
                    filename:join(filename:dirname(Ebin), "priv")
            end
    end.

-define(NIF, erlang:nif_error({not_loaded, ?MODULE})).

%% @doc The recipe of a new table of `N' fragments for a core spec
%% (`<<"slots">>', `<<"ring:100">>', `<<"jump">>', `<<"linear">>';
%% `Weights': `[]' or one per fragment, slots only) and its digest. The NIF
%% builds the scheme on first use. O(N), normal scheduler.
-spec fresh_state(binary(), pos_integer(), [pos_integer()]) -> {digest(), binary()}.
fresh_state(_Spec, _N, _Weights) -> ?NIF.

%% @doc The fragment of `H = erlang:phash2(Key, 1 bsl 32)', or `miss' when
%% the state is not cached (then call {@link load_locate/3}). O(1), normal
%% scheduler.
-spec locate(digest(), 0..4294967295) -> pos_integer() | miss.
locate(_Digest, _H) -> ?NIF.

%% @doc As {@link locate/2}, decoding and caching `Bytes' on a miss. Dirty CPU.
-spec load_locate(digest(), binary(), 0..4294967295) -> pos_integer().
load_locate(_Digest, _Bytes, _H) -> ?NIF.

%% @doc Adds a fragment of weight `Weight', taking slots from at most
%% `MaxDonors' fragments (0: no bound; slots only). Returns the new state,
%% the fragments that can lose records and the new fragment. Dirty CPU.
-spec add_frag(digest(), binary(), pos_integer(), non_neg_integer()) -> change().
add_frag(_Digest, _Bytes, _Weight, _MaxDonors) -> ?NIF.

%% @doc Removes the last fragment. Returns the new state, `[Last]' and the
%% fragments that can receive its records. Dirty CPU.
-spec del_frag(digest(), binary()) -> change().
del_frag(_Digest, _Bytes) -> ?NIF.

%% @doc A description of a state: spec, fragments, memory and, for slots,
%% slot bits, slots per fragment and weights. Dirty CPU.
-spec info(digest(), binary()) -> map().
info(_Digest, _Bytes) -> ?NIF.

%% @doc Sets the directory where the NIF keeps node-local files of schemes
%% it built by replaying a recipe, so that the next miss (after a restart)
%% reads the file instead of replaying; `undefined' turns them off. The
%% files are only a cache: missing or damaged ones cost a replay, never an
%% error.
-spec set_built_dir(binary() | undefined) -> ok.
set_built_dir(_Dir) -> ?NIF.

%% @doc Entries and decoded bytes in the NIF's state cache.
-spec cache_stats() -> {non_neg_integer(), non_neg_integer()}.
cache_stats() -> ?NIF.

%% @doc The digest (xxh3-128) the NIF keys a state's recipe by.
-spec digest(binary()) -> digest().
digest(_Bytes) -> ?NIF.


%% @doc What Erlang reads instead of calling {@link locate/2} for a state,
%% built from the core's scheme: `{ranges, Shift, Buckets}' for slots and
%% ring (the owner of `H' is element `(H bsr Shift) + 1' of `Buckets' when
%% that is an integer; a tuple `{Owner0, Start1, Owner1, ...}' when owners
%% change inside the bucket: the owner of the last start at or below `H'),
%% `{low_bits, Mask, Half, N}' for linear, `none' for jump. O(table), dirty
%% CPU.
-spec lookup_table(digest(), binary()) -> lookup_table().
lookup_table(_Digest, _Bytes) -> ?NIF.
