%% @doc Loader and stubs for the fraghash NIF (`priv/libfraghash_nif.so').
%%
%% The library is looked for in these directories, in order, and the first
%% that holds it is loaded:
%% <ol>
%% <li>`$FRAGHASH_NIF_DIR', when that environment variable is set;</li>
%% <li>`code:priv_dir(fraghash)', when the application is on the code path;</li>
%% <li>`../priv' next to the `ebin' directory of this module.</li>
%% </ol>
%% A directory without the library is skipped, so a stale `FRAGHASH_NIF_DIR'
%% or a code path entry that only looks like the application (any directory
%% named `fraghash-Something') costs nothing. When no directory gives a
%% library that loads, the module still loads, and every function raises
%% `{fraghash, nif_not_loaded, Tried}', where `Tried' lists each candidate as
%% `{Source, Path, Why}' (`Why' is `not_found' or `{load_failed, Reason,
%% Text}' as `erlang:load_nif/2' gave it); {@link load_status/0} tells the
%% same without raising.
%%
%% Fragment numbers are Mnesia's (1-based). Other errors raise
%% `{fraghash, Reason, Message}' with `Reason' one of `corrupt_state',
%% `digest_mismatch', `bad_spec', `refused' and `Message' a binary.
-module(fraghash_nif).

-export([fresh_state/3, locate/2, load_locate/3, add_frag/4, split_frag/3, del_frag/2,
         info/2, cache_stats/0, digest/1, set_built_dir/1, lookup_table/2,
         inline_table/2, schemes/0]).
-export([load_status/0, call/1, built_dir/0]).

-on_load(init/0).

-define(LIB, "libfraghash_nif").
-define(STATUS_KEY, {?MODULE, load_status}).

-type digest() :: <<_:128>>.
-type change() :: {digest(), binary(), [pos_integer()], [pos_integer()]}.
-type source() :: fraghash_nif_load:source().
-type tried() :: fraghash_nif_load:tried().
%% What `fraghash_lookup' publishes for a state (`lookup_table/2').
-type lookup_table() :: {words, 0..29, binary()} | none.
%% What a hash state carries of its own lookup (`inline_table/2').
-type inline() :: none | {slot_words, non_neg_integer(), binary()}
                | {low_bits, non_neg_integer(), pos_integer(), pos_integer()}.
-export_type([digest/0, change/0, source/0, tried/0, lookup_table/0, inline/0]).

%% Loads the library from the first candidate directory that holds one that
%% loads (`fraghash_nif_load'). Always `ok': a module that failed to load
%% would leave Mnesia with `undef' errors that name no cause, while the
%% stubs below name it.
-spec init() -> ok.
init() ->
    persistent_term:put(?STATUS_KEY,
                        fraghash_nif_load:load(?LIB, fun(Path) -> erlang:load_nif(Path, 0) end)),
    ok.

%% @doc Whether the NIF is loaded: `{loaded, Path, Tried}' with the
%% candidates skipped before it, or `{not_loaded, Tried}'.
-spec load_status() -> {loaded, file:filename(), tried()} | {not_loaded, tried()}.
load_status() ->
    persistent_term:get(?STATUS_KEY, {not_loaded, []}).

not_loaded() ->
    Tried = case load_status() of
                {not_loaded, T} -> T;
                %% Loaded, yet a stub ran: the library lacks this function
                %% (a library older than these modules).
                {loaded, Path, _} -> [{loaded, Path, missing_function}]
            end,
    erlang:nif_error({fraghash, nif_not_loaded, Tried}).

-define(NIF, not_loaded()).

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

%% @doc Adds a fragment that takes half of fragment `Frag''s slots and
%% nothing else (slots only): returns the new state, `[Frag]' and the new
%% fragment. Dirty CPU.
-spec split_frag(digest(), binary(), pos_integer()) -> change().
split_frag(_Digest, _Bytes, _Frag) -> ?NIF.

%% @doc Removes the last fragment. Returns the new state, `[Last]' and the
%% fragments that can receive its records. Dirty CPU.
-spec del_frag(digest(), binary()) -> change().
del_frag(_Digest, _Bytes) -> ?NIF.

%% @doc A description of a state: spec, fragments, memory and, for slots,
%% slot bits, slots per fragment and weights. Dirty CPU.
-spec info(digest(), binary()) -> map().
info(_Digest, _Bytes) -> ?NIF.

%% @doc The schemes the NIF serves, one `{ErlangName, StateCode, CoreName,
%% CoreTag}' each: the name of the Erlang side (hash module
%% `mnesia_frag_<ErlangName>'), the code naming it in a hash state's header
%% (`fraghash_state'), the core scheme behind it and that scheme's tag in a
%% core state. The Rust side's table (crates/fraghash-nif/src/schemes.rs) is
%% the source; `fraghash_state_tests' holds the Erlang modules to it.
-spec schemes() -> [{atom(), 1..255, binary(), 1..255}].
schemes() -> ?NIF.

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


%% @doc The lookup `fraghash_lookup' publishes for a state, built from the
%% core's scheme: `{words, Shift, Words}' for a ring (32-bit words, see the
%% crate's `lookup_words' module); `none' for the other schemes (jump is
%% answered by {@link locate/2}; slots and linear states carry their
%% lookup, see {@link inline_table/2}). O(table), dirty CPU.
-spec lookup_table(digest(), binary()) -> lookup_table().
lookup_table(_Digest, _Bytes) -> ?NIF.

%% @doc The lookup a hash state carries inside itself: `{slot_words, Params,
%% Words}' for slots (64-bit words with fields at fixed widths, see the
%% crate's `lookup_slot_words' module), `{low_bits, Mask, Half, N}' for
%% linear, `none' for ring and jump (nothing is built for them). A slots
%% table of more than 8,191 fragments raises `too_many_fragments'.
%% O(table), dirty CPU.
-spec inline_table(digest(), binary()) -> inline().
inline_table(_Digest, _Bytes) -> ?NIF.

%%% The Erlang side of the calls

%% @doc Runs a call of this module's NIF functions, turning their errors
%% into Mnesia aborts with a clear reason (`{fraghash, Reason, Text}').
-spec call(fun(() -> T)) -> T.
call(F) ->
    try F()
    catch
        error:{fraghash, Reason, Msg} when is_binary(Msg) ->
            mnesia:abort(fraghash_error:new(Reason, "~ts", [Msg]));
        error:{fraghash, nif_not_loaded, _Tried} = NotLoaded ->
            mnesia:abort(NotLoaded);
        error:badarg ->
            mnesia:abort(fraghash_error:new(badarg, "bad argument types for the NIF", []))
    end.

%% @doc Tells the NIF, once per node, where to keep its built-state files: the
%% directory `fraghash' under Mnesia's, when Mnesia's directory exists (a
%% node without a disc schema gets none, and replays after each restart).
-spec built_dir() -> ok.
built_dir() ->
    case persistent_term:get({?MODULE, built_dir}, unset) of
        unset ->
            Mnesia = mnesia:system_info(directory),
            Dir = case filelib:is_dir(Mnesia) of
                      true -> unicode:characters_to_binary(filename:join(Mnesia, "fraghash"));
                      false -> undefined
                  end,
            ok = set_built_dir(Dir),
            persistent_term:put({?MODULE, built_dir}, Dir);
        _ ->
            ok
    end.
