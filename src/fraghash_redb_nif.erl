%% @doc Loader and stubs for the redb NIF (`priv/libfraghash_redb_nif.so'):
%% order keys of Erlang terms, and a redb database holding many tables.
%%
%% The library is looked for as {@link fraghash_nif} looks for its own: in
%% `$FRAGHASH_NIF_DIR', then `code:priv_dir(fraghash)', then `../priv' next
%% to this module's `ebin'; the first that holds one that loads is loaded.
%% When none does, the module still loads and every function raises
%% `{fraghash_redb, nif_not_loaded, Tried}'; {@link load_status/0} tells the
%% same without raising.
%%
%% Order keys ({@link order_key/1}) are binaries whose byte order is
%% Erlang's term order: `order_key(A) < order_key(B)' exactly when `A < B',
%% and `1' and `1.0' (equal under `==') have the same key, as in an ets
%% `ordered_set'. Pids, ports, references and funs are refused as keys
%% (their order is not stable across restarts), as are keys whose order key
%% would pass 64 KiB: these raise `{fraghash_redb, Reason, Message}'.
%%
%% A database is one file; its tables map keys (order keys) to values (any
%% binaries, for example `term_to_binary(Record)'). Every call that touches
%% the file runs on a dirty I/O scheduler (but {@link read/3}'s, while reads
%% come from memory) and returns `{error, {Kind,
%% Message}}' when it fails, `Kind' one of `locked' (the file is open in
%% another OS process or another handle), `foreign' (not a database of this
%% library), `corrupt', `disk_full', `not_found', `io', `storage',
%% `no_such_table', `table_exists', `bad_table_name', `closed'.
-module(fraghash_redb_nif).

-export([order_key/1, order_key_etf/1, order_key_etf_dirty/1]).
-export([key_prefix/1, key_prefix_etf/1, key_prefix_etf_dirty/1]).
-export([open/2, close/1, create_table/3, delete_table/2, replace_table/3, tables/1,
         write/3, write_logged/2, write_logged_dirty/2, hold_direct_writes/2, write_bulk/2, sync/1, flush/1, wants_flush/1, get/3, get_now/3, first/2, last/2, next/3,
         prev/3,
         chunk/5, records/5, size/2, stored_bytes/2, log_repairs/1, has_room/1,
         reopen/1]).
-export([load_status/0, key_bin/1, check/1, read/3]).

-on_load(init/0).

-define(LIB, "libfraghash_redb_nif").
-define(STATUS_KEY, {?MODULE, load_status}).
%% Terms whose external format is at most this many bytes get their key on
%% the calling scheduler (microseconds); larger ones on a dirty CPU one.
-define(SMALL_ETF, 4096).

-opaque db() :: reference().
-type kind() :: locked | foreign | corrupt | disk_full | not_found | io
              | storage | no_such_table | table_exists | bad_table_name
              | log_damaged | log_missing | poisoned | closed.
-type error() :: {error, {kind(), binary()}}.
-type op() :: {put, binary(), binary(), binary()}
            | {delete, binary(), binary()}
            | {clear, binary()}.
-type start() :: edge | {'after', binary()} | {at, binary()}.
-export_type([db/0, kind/0, error/0, op/0, start/0]).

%%% Loading

%% Loads the library as `fraghash_nif' loads its own (`fraghash_nif_load').
-spec init() -> ok.
init() ->
    persistent_term:put(?STATUS_KEY,
                        fraghash_nif_load:load(?LIB, fun(Path) -> erlang:load_nif(Path, 0) end)),
    ok.

%% @doc Whether the NIF is loaded: `{loaded, Path, Tried}' with the
%% candidates skipped before it, or `{not_loaded, Tried}'.
-spec load_status() -> fraghash_nif_load:status().
load_status() ->
    persistent_term:get(?STATUS_KEY, {not_loaded, []}).

not_loaded() ->
    Tried = case load_status() of
                {not_loaded, T} -> T;
                {loaded, Path, _} -> [{loaded, Path, missing_function}]
            end,
    erlang:nif_error({fraghash_redb, nif_not_loaded, Tried}).

-define(NIF, not_loaded()).

%%% Order keys

%% @doc The order key of `Term' (see the module documentation).
-spec order_key(term()) -> binary().
order_key(Term) ->
    by_size(term_to_binary(Term), fun order_key_etf/1, fun order_key_etf_dirty/1).

%% @doc The order key of the term whose external format is `Etf'. Normal
%% scheduler: for at most a few KiB (see {@link order_key/1}).
-spec order_key_etf(binary()) -> binary().
order_key_etf(_Etf) -> ?NIF.

%% @doc As {@link order_key_etf/1}, on a dirty CPU scheduler.
-spec order_key_etf_dirty(binary()) -> binary().
order_key_etf_dirty(_Etf) -> ?NIF.

%% @doc The bytes the order key of every term matching `Pattern' starts
%% with, `Pattern' being the key part of a match spec head: <code>'_'</code>
%% and the variables <code>'$1'</code>, <code>'$2'</code>, ... match
%% anything, a map every map holding its keys. It is the order key of
%% `Pattern' up to its first wildcard or variable (a map adds its type
%% byte there): ``key_prefix({user, 42, '_'})'' is the key of
%% `{user, 42, 0}' without the key of `0', and the prefix of a pattern
%% without wildcards, variables or maps is its whole order key. Computed
%% by the encoder of the order keys (`fraghash_redb::term::pattern_prefix'
%% in `crates/fraghash-redb'). Raises as {@link order_key/1} when the part
%% of `Pattern' before its first open place cannot be in a key.
-spec key_prefix(term()) -> binary().
key_prefix(Pattern) ->
    by_size(term_to_binary(Pattern), fun key_prefix_etf/1, fun key_prefix_etf_dirty/1).

%% `Small(Etf)' for a few KiB at most (on the calling scheduler), else
%% `Large(Etf)' (on a dirty one).
by_size(Etf, Small, Large) ->
    case byte_size(Etf) =< ?SMALL_ETF of
        true -> Small(Etf);
        false -> Large(Etf)
    end.

%% @doc {@link key_prefix/1} of the pattern whose external format is
%% `Etf'. Normal scheduler: for at most a few KiB (see {@link
%% key_prefix/1}).
-spec key_prefix_etf(binary()) -> binary().
key_prefix_etf(_Etf) -> ?NIF.

%% @doc As {@link key_prefix_etf/1}, on a dirty CPU scheduler.
-spec key_prefix_etf_dirty(binary()) -> binary().
key_prefix_etf_dirty(_Etf) -> ?NIF.

%%% The database (all on dirty I/O schedulers)

%% @doc Opens the database in file `Path', creating it unless `Opts' says
%% `create => false'. `Opts' may also hold `cache_bytes' (redb's cache,
%% default 64 MiB), `verify' (check every page on open; default false)
%% and `memtable_bytes' (the memtable's size past which {@link
%% wants_flush/1} says `true'; a write finding four times as much flushes
%% first; default 1 MiB). The database belongs to the calling process:
%% when that process ends without closing it, it is closed unsynced, as a
%% kill -9 of the node would leave it (its log replays at the next open).
-spec open(binary(), #{create => boolean(), cache_bytes => non_neg_integer(),
                       verify => boolean(), memtable_bytes => non_neg_integer()}) ->
          {ok, db()} | error().
open(_Path, _Opts) -> ?NIF.

%% @doc Closes the database (`ok' if already closed). A database that is
%% never closed is closed when its handle is garbage collected.
-spec close(db()) -> ok | error().
close(_Db) -> ?NIF.

%% @doc Creates table `Name', keeping `Props' with it. Durable on return.
-spec create_table(db(), binary(), binary()) -> ok | error().
create_table(_Db, _Name, _Props) -> ?NIF.

%% @doc Deletes table `Name' and its records. Durable on return.
-spec delete_table(db(), binary()) -> ok | error().
delete_table(_Db, _Name) -> ?NIF.

%% @doc Table `Name' takes the records of table `From', which goes (its
%% properties stay `Name''s): one synced commit, durable on return.
-spec replace_table(db(), binary(), binary()) -> ok | error().
replace_table(_Db, _Name, _From) -> ?NIF.

%% @doc Every table and its properties, by name.
-spec tables(db()) -> {ok, [{binary(), binary()}]} | error().
tables(_Db) -> ?NIF.

%% @doc Applies `Ops' in order as one batch: all or none. With
%% `immediate' the batch (with every one before it) is synced on return;
%% with `logged' it is in the memtable and the database's log file on
%% return (it survives the death of the VM, and is synced by the next
%% {@link flush/1}, `immediate' batch or {@link sync/1}); with `deferred'
%% it is in the memtable only: visible at once, on disc after the next of
%% those.
-spec write(db(), [op()], immediate | logged | deferred) -> ok | error().
write(_Db, _Ops, _Durability) -> ?NIF.

%% @doc As {@link write/3} with `logged', written by the calling process on
%% its own scheduler rather than by the node's writer process ({@link
%% fraghash_redb_db}): `ok'; `notify' when the writer process must hear of
%% it (the memtable held nothing before, so no flush is armed for it yet,
%% or it now holds enough to be flushed); `busy', nothing written, while
%% the writer process holds such writes off ({@link hold_direct_writes/2});
%% `dirty', nothing written, where the batch would wait (for another
%% writer, a flush, the disc) or is large (over 64 ops or 64 KiB), and for
%% 100 ms after a batch here took over 1 ms: then call {@link
%% write_logged_dirty/2}.
-spec write_logged(db(), [op()]) -> ok | notify | busy | dirty | error().
write_logged(_Db, _Ops) -> ?NIF.

%% @doc As {@link write_logged/2}, on a dirty I/O scheduler, waiting where
%% that one answers `dirty'.
-spec write_logged_dirty(db(), [op()]) -> ok | notify | busy | error().
write_logged_dirty(_Db, _Ops) -> ?NIF.

%% @doc With `true', makes {@link write_logged/2} answer `busy' and
%% returns once none is under way; with `false', lets it write again.
-spec hold_direct_writes(db(), boolean()) -> ok.
hold_direct_writes(_Db, _Hold) -> ?NIF.

%% @doc As {@link write/3} with `logged', once the memtable holds less than
%% twice `memtable_bytes' (waiting for a flush under way, or flushing): a
%% bulk load's batch that never brings other writers to the memtable's
%% limit.
-spec write_bulk(db(), [op()]) -> ok | error().
write_bulk(_Db, _Ops) -> ?NIF.

%% @doc Syncs every batch written so far, and empties the log.
-spec sync(db()) -> ok | error().
sync(_Db) -> ?NIF.

%% @doc Commits the memtable to redb in one synced transaction while
%% writes go on: `true' when it did, `false' when there was nothing to
%% flush or another flush was under way.
-spec flush(db()) -> boolean() | error().
flush(_Db) -> ?NIF.

%% @doc Whether the memtable has grown past its size (`memtable_bytes'):
%% time for a {@link flush/1}. Runs on the calling scheduler.
-spec wants_flush(db()) -> boolean().
wants_flush(_Db) -> ?NIF.

%% @doc The value under `Key' in table `Tab'.
-spec get(db(), binary(), binary()) -> {ok, binary()} | not_found | error().
get(_Db, _Tab, _Key) -> ?NIF.

%% @doc As {@link get/3}, on the calling scheduler, or `dirty' without
%% reading: when `Db' was opened with `normal_reads' false, while it is
%% opened again or closed, and for a second after a read here took over
%% 200 µs (it read the disc). Use {@link read/3}.
-spec get_now(db(), binary(), binary()) -> {ok, binary()} | not_found | dirty | error().
get_now(_Db, _Tab, _Key) -> ?NIF.

%% @doc The value under `Key' in table `Tab', as {@link get/3} answers: read
%% on the calling scheduler while reads come from memory (the memtable and
%% redb's page cache, microseconds), else on a dirty I/O scheduler (see
%% {@link get_now/3}).
-spec read(db(), binary(), binary()) -> {ok, binary()} | not_found | error().
read(Db, Tab, Key) ->
    case get_now(Db, Tab, Key) of
        dirty -> get(Db, Tab, Key);
        Answer -> Answer
    end.

%% @doc The record with the smallest key.
-spec first(db(), binary()) -> {ok, binary(), binary()} | '$end_of_table' | error().
first(_Db, _Tab) -> ?NIF.

%% @doc The record with the largest key.
-spec last(db(), binary()) -> {ok, binary(), binary()} | '$end_of_table' | error().
last(_Db, _Tab) -> ?NIF.

%% @doc The record with the smallest key above `Key' (present or not).
-spec next(db(), binary(), binary()) -> {ok, binary(), binary()} | '$end_of_table' | error().
next(_Db, _Tab, _Key) -> ?NIF.

%% @doc The record with the largest key below `Key' (present or not).
-spec prev(db(), binary(), binary()) -> {ok, binary(), binary()} | '$end_of_table' | error().
prev(_Db, _Tab, _Key) -> ?NIF.

%% @doc Up to `Max' records (at least one while any are left) from `Start'
%% going `forward' or `backward'; `more' when records remain past the last
%% one returned (continue from `{'after', ItsKey}').
-spec chunk(db(), binary(), start(), forward | backward, non_neg_integer()) ->
          {ok, [{binary(), binary()}], more | done} | error().
chunk(_Db, _Tab, _Start, _Dir, _Max) -> ?NIF.

%% @doc Up to `Max' records (at least one while any are left) going forward
%% from `Start' among the keys that start with `Prefix' (`<<>>' for all),
%% their values decoded: `{ok, Terms, LastKey, more | done, Undecoded}',
%% `LastKey' the key of the last one read (`none' when none was; continue
%% from `{'after', LastKey}'), `done' when the prefix's range is read. A
%% value the VM's decoder does not take whole comes as its binary (decode
%% it with `binary_to_term/1', which raises if it is not a term);
%% `Undecoded' counts them.
-spec records(db(), binary(), binary(), start(), non_neg_integer()) ->
          {ok, [term()], binary() | none, more | done, non_neg_integer()} | error().
records(_Db, _Tab, _Prefix, _Start, _Max) -> ?NIF.

%% @doc How many records table `Tab' holds.
-spec size(db(), binary()) -> {ok, non_neg_integer()} | error().
size(_Db, _Tab) -> ?NIF.

%% @doc The bytes table `Tab''s records take in the file (keys and values
%% as stored, without page overhead); walks every page of the table.
-spec stored_bytes(db(), binary()) -> {ok, non_neg_integer()} | error().
stored_bytes(_Db, _Tab) -> ?NIF.

%% @doc What opening with `repair_log' dropped from the database's log,
%% one sentence each (`[]' when the log was whole).
-spec log_repairs(db()) -> [binary()] | error().
log_repairs(_Db) -> ?NIF.

%% @doc Whether the disc has room for more writes: `false' once the log
%% could not keep its reserve or a flush failed for want of room, until a
%% flush finds room again. Reads one flag; never waits.
-spec has_room(db()) -> boolean().
has_room(_Db) -> ?NIF.

%% @doc Closes the database without a sync and opens its file again, for
%% a database an I/O error left refusing everything (`poisoned'): the log
%% replays every write since the last synced commit. If the open fails,
%% the database stays closed.
-spec reopen(db()) -> ok | error().
reopen(_Db) -> ?NIF.

%% @doc `{ok, OrderKey}' of `Key', or `none' for a key that cannot be
%% stored (so cannot be in a table either).
-spec key_bin(term()) -> {ok, binary()} | none.
key_bin(Key) ->
    try {ok, order_key(Key)}
    catch error:{fraghash_redb, _, _} -> none
    end.

%% @doc A database call's answer as it is, or raises `{fraghash_redb,
%% Kind, Message}' for `{error, {Kind, Message}}'.
-spec check(T) -> T.
check({error, {Kind, Msg}}) -> erlang:error({fraghash_redb, Kind, Msg});
check(Other) -> Other.
