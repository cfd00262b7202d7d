%% @doc The hash state of the fraghash Mnesia hash modules: the binary
%% Mnesia holds (see `include/fraghash.hrl' for its layout and why it is one
%% binary) and its decoded form, `#fraghash_state{}'.
%%
%% Decoding checks the layout and that the key fields are the recipe's
%% digest, so a damaged or forged state is refused before the NIF reads it.
-module(fraghash_state).

-include("fraghash.hrl").

-export([encode/2, decode/1, decode_or_abort/1, digest_mismatch/0, key_of_digest/1]).

-type encoded() :: binary().
-export_type([encoded/0]).

%% @doc The binary Mnesia holds for a decoded state and the lookup it
%% carries.
-spec encode(#fraghash_state{}, fraghash_nif:inline()) -> encoded().
encode(#fraghash_state{scheme = Scheme, table = Tab, n = N, opts = Opts, digest = D,
                       bytes = B}, Inline) ->
    {Key, Check} = key_of_digest(D),
    TabBin = atom_to_binary(Tab, utf8),
    OptsBin = case Opts of
                  [] -> <<>>;
                  _ -> term_to_binary(Opts)
              end,
    Body = <<(byte_size(TabBin)):16, TabBin/binary, (byte_size(OptsBin)):16, OptsBin/binary,
             (byte_size(B)):32, B/binary>>,
    Head = fun(Kind, A, Z) ->
                   <<"fh", ?FRAGHASH_STATE_LAYOUT, (scheme_code(Scheme)):8, Key:64, Check:64,
                     N:32, Kind:8, A:32, Z:32>>
           end,
    case Inline of
        none ->
            <<(Head(?FRAGHASH_INLINE_NONE, 0, 0))/binary, Body/binary>>;
        {low_bits, Mask, Half, N} ->
            <<(Head(?FRAGHASH_INLINE_LOW_BITS, Mask, Half))/binary, Body/binary>>;
        {slot_words, Params, Words} ->
            %% Words after the body; `A' is the layout's numbers, `Z' the
            %% words' offset.
            Off = ?FRAGHASH_STATE_HEAD_BYTES + byte_size(Body),
            <<(Head(?FRAGHASH_INLINE_SLOT_WORDS, Params, Off))/binary, Body/binary,
              Words/binary>>
    end.

%% @doc The decoded form of a state: `{ok, State}', or `{error, Why}' when
%% the term is not a fraghash hash state or is damaged. Needs the NIF (for
%% the recipe's digest).
-spec decode(term()) -> {ok, #fraghash_state{}} | {error, term()}.
decode(<<"fh", ?FRAGHASH_STATE_LAYOUT, Code:8, Key:64, Check:64, N:32, Kind:8, _A:32, Z:32,
         TabLen:16, TabBin:TabLen/binary, OptsLen:16, OptsBin:OptsLen/binary,
         BLen:32, B:BLen/binary, Inline/binary>> = S) when N >= 1 ->
    %% Words follow the body exactly where the head says; other kinds
    %% carry none.
    InlineOk = case Kind of
                   ?FRAGHASH_INLINE_SLOT_WORDS -> Z =:= byte_size(S) - byte_size(Inline);
                   _ -> Inline =:= <<>>
               end,
    case {scheme(Code), opts(OptsBin), InlineOk} of
        {{ok, Scheme}, {ok, Opts}, true} when Kind =:= ?FRAGHASH_INLINE_NONE,
                                              Scheme =:= chash orelse Scheme =:= jump;
                                              Kind =:= ?FRAGHASH_INLINE_SLOT_WORDS,
                                              Scheme =:= slots;
                                              Kind =:= ?FRAGHASH_INLINE_LOW_BITS,
                                              Scheme =:= linear ->
            D = fraghash_nif:digest(B),
            case key_of_digest(D) of
                {Key, Check} ->
                    {ok, #fraghash_state{scheme = Scheme,
                                         table = binary_to_atom(TabBin, utf8),
                                         n = N, opts = Opts, digest = D, bytes = B}};
                _ ->
                    {error, digest_mismatch}
            end;
        _ ->
            {error, bad_layout}
    end;
decode(_) ->
    {error, not_a_fraghash_state}.

%% @doc As {@link decode/1}, for a state Mnesia holds: the decoded state,
%% or the transaction aborted with `{bad_hash_state, State}' (or a damaged
%% state's `{fraghash, digest_mismatch, Text}').
-spec decode_or_abort(term()) -> #fraghash_state{}.
decode_or_abort(State) ->
    case fraghash_nif:call(fun() -> decode(State) end) of
        {ok, S} -> S;
        {error, digest_mismatch} -> digest_mismatch();
        {error, _} -> mnesia:abort({bad_hash_state, State})
    end.

%% @doc Aborts the transaction: a state whose recipe does not match its key.
-spec digest_mismatch() -> no_return().
digest_mismatch() ->
    mnesia:abort(fraghash_error:new(digest_mismatch, "the hash state's recipe does not match "
                                    "its key: damaged state", [])).

%% @doc The two small integers a lookup identifies a state by: the top 59
%% bits of each half of its 128-bit digest.
-spec key_of_digest(<<_:128>>) -> {non_neg_integer(), non_neg_integer()}.
key_of_digest(<<A:64, B:64>>) -> {A bsr 5, B bsr 5}.

scheme_code(slots) -> 1;
scheme_code(chash) -> 2;
scheme_code(jump) -> 3;
scheme_code(linear) -> 4.

scheme(1) -> {ok, slots};
scheme(2) -> {ok, chash};
scheme(3) -> {ok, jump};
scheme(4) -> {ok, linear};
scheme(_) -> error.

opts(<<>>) ->
    {ok, []};
opts(Bin) ->
    try binary_to_term(Bin, [safe]) of
        L when is_list(L) -> {ok, L};
        _ -> error
    catch
        error:badarg -> error
    end.
