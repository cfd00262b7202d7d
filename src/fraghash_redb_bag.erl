%% @doc How the `redb_copies' backend ({@link fraghash_redb_copies}) stores
%% a `bag' table: one redb row per record, never a list of a key's records
%% that each write would read and rewrite.
%%
%% == Rows ==
%% A record's row key is the order key of its Mnesia key
%% ({@link fraghash_redb_nif:order_key/1}) followed by the 32 bytes of a
%% SHA-256 digest of the record ({@link row_key/3}); its value is the record
%% as `term_to_binary/1', as in a `set'. Order keys are prefix-free (no key
%% is the start of another), so the rows of one key are exactly the rows
%% starting with its order key: a contiguous range, in which a read of the
%% key is one range scan and a delete of the key deletes the range. Writing
%% a record already there writes the same row again (no duplicate);
%% `delete_object' deletes its one row. Rows sort by key (Erlang's term
%% order), then by digest: a key's records come in no useful order.
%%
%% The digest is of the record's own order key when it has one (a stable
%% encoding: the same bytes whatever the OTP release), else, for a record
%% holding a pid, port, reference or fun, or one whose order key would pass
%% 64 KiB, of its external format with `deterministic' maps (a separate
%% domain: the two never give the same input bytes). So records equal
%% under `==' (`{t, k, 1}' and `{t, k, 1.0}') are one record here, where an
%% ets `bag' keeps both, as keys equal under `==' are one key.
-module(fraghash_redb_bag).

-export([is_bag/1, can_digest/0, row_key/3, lookup/2, delete_ops/2, next/2]).

%% Rows read per chunk when a key's range is deleted.
-define(DELETE_CHUNK, 256).
%% Records read per chunk when a key's range is read.
-define(READ_CHUNK, 64).

%% @doc Whether Mnesia table `Tab' is a `bag'; `false' for the backend's
%% other stored tables (an index or a retainer, whose tags are tuples), and
%% for a table Mnesia does not know (its type is read from Mnesia's own
%% table of table properties, an ets lookup).
-spec is_bag(atom() | tuple()) -> boolean().
is_bag(Tab) when is_atom(Tab) ->
    try ets:lookup(mnesia_gvar, {Tab, setorbag}) of
        [{_, bag}] -> true;
        _ -> false
    catch
        error:badarg -> false
    end;
is_bag(_Tag) ->
    false.

%% @doc `ok' when this node can digest records, else the reason a bag
%% cannot be created here: the digest is OTP's `crypto' (on OpenSSL), which
%% some installations leave out.
-spec can_digest() -> ok | {error, {fraghash_redb, crypto_not_available, binary()}}.
can_digest() ->
    try crypto:hash(sha256, <<>>) of
        _ -> ok
    catch
        _:_ ->
            {error, {fraghash_redb, crypto_not_available,
                     <<"redb_copies bag tables need OTP's crypto application (SHA-256): "
                       "install it (on Debian, erlang-crypto) on every node of the table">>}}
    end.

%% @doc The row key of record `Rec' (keyed in position `Pos'): in a `bag'
%% (`IsBag'), its key's order key then the record's digest; else its key's
%% order key alone. Raises `{fraghash_redb, Reason, Text}' for a key that
%% cannot be stored.
-spec row_key(boolean(), pos_integer(), tuple()) -> binary().
row_key(false, Pos, Rec) ->
    fraghash_redb_nif:order_key(element(Pos, Rec));
row_key(true, Pos, Rec) ->
    <<(fraghash_redb_nif:order_key(element(Pos, Rec)))/binary, (digest(Rec))/binary>>.

%% Stable across releases when the record has an order key (see the
%% module documentation); the leading byte keeps the two encodings apart.
digest(Rec) ->
    Canonical = try <<0, (fraghash_redb_nif:order_key(Rec))/binary>>
                catch error:{fraghash_redb, _, _} ->
                        <<1, (term_to_binary(Rec, [deterministic, {minor_version, 2}]))/binary>>
                end,
    crypto:hash(sha256, Canonical).

%% @doc Every record of the key whose order key is `Prefix' in the bag
%% stored as redb table `Name': one range scan.
-spec lookup(binary(), binary()) -> [tuple()].
lookup(Name, Prefix) ->
    read_range(fraghash_redb_db:handle(), Name, Prefix, edge, []).

read_range(Db, Name, Prefix, Start, Acc) ->
    {ok, Vals, Last, More, Undecoded} =
        fraghash_redb_nif:check(fraghash_redb_nif:records(Db, Name, Prefix, Start, ?READ_CHUNK)),
    Recs = case Undecoded of
               0 -> Vals;
               _ -> [decode(V) || V <- Vals]
           end,
    case More of
        done -> lists:append(lists:reverse([Recs | Acc]));
        more -> read_range(Db, Name, Prefix, {'after', Last}, [Recs | Acc])
    end.

%% Values the NIF left as bytes (see fraghash_redb_nif:records/5).
decode(V) when is_binary(V) -> binary_to_term(V);
decode(R) -> R.

%% @doc The writes that delete every record of the key whose order key is
%% `Prefix' from redb table `Name' (none when it has none): its range's
%% rows, read first, then deleted in one batch by the caller.
-spec delete_ops(binary(), binary()) -> [fraghash_redb_nif:op()].
delete_ops(Name, Prefix) ->
    [{delete, Name, K} || K <- range_keys(fraghash_redb_db:handle(), Name, Prefix, {at, Prefix}, [])].

range_keys(Db, Name, Prefix, Start, Acc) ->
    {ok, Items, More} =
        fraghash_redb_nif:check(fraghash_redb_nif:chunk(Db, Name, Start, forward, ?DELETE_CHUNK)),
    Size = byte_size(Prefix),
    In = lists:takewhile(fun({K, _}) -> binary:longest_common_prefix([K, Prefix]) =:= Size end,
                         Items),
    Acc2 = lists:reverse([K || {K, _} <- In], Acc),
    case More =:= more andalso length(In) =:= length(Items) of
        true -> range_keys(Db, Name, Prefix, {'after', element(1, lists:last(Items))}, Acc2);
        false -> lists:reverse(Acc2)
    end.

%% @doc The first row of redb table `Name' past every row of the key whose
%% order key is `Prefix', as `fraghash_redb_nif:next/3' answers: every row
%% of that key is `Prefix' and 32 bytes of digest, so none is above
%% `Prefix' followed by 32 bytes of 255, and every row of a larger key is.
-spec next(binary(), binary()) -> {ok, binary(), binary()} | '$end_of_table' | fraghash_redb_nif:error().
next(Name, Prefix) ->
    fraghash_redb_nif:next(fraghash_redb_db:handle(), Name, <<Prefix/binary, -1:256>>).
