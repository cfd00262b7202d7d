%% @doc The hash state of the fraghash Mnesia hash modules: the binary
%% Mnesia holds (see `include/fraghash.hrl' for its layout and why it is one
%% binary) and its decoded form, `#fraghash_state{}'.
%%
%% Decoding checks the layout and that the key fields are the recipe's
%% digest, so a damaged or forged state is refused before the NIF reads it.
%% A state in the earlier form (the `#fraghash_state{}' record itself, as
%% tables created by earlier versions hold it) still decodes; the next
%% `add_frag' or `del_frag' of such a table writes the binary form.
-module(fraghash_state).

-include("fraghash.hrl").

-export([encode/1, decode/1, key_of_digest/1]).

-type encoded() :: binary().
-export_type([encoded/0]).

%% @doc The binary Mnesia holds for a decoded state.
-spec encode(#fraghash_state{}) -> encoded().
encode(#fraghash_state{scheme = Scheme, table = Tab, n = N, opts = Opts, digest = D,
                       bytes = B}) ->
    {Key, Check} = key_of_digest(D),
    TabBin = atom_to_binary(Tab, utf8),
    OptsBin = case Opts of
                  [] -> <<>>;
                  _ -> term_to_binary(Opts)
              end,
    <<"fh", ?FRAGHASH_STATE_LAYOUT, (scheme_code(Scheme)):8, Key:64, Check:64, N:32,
      (byte_size(TabBin)):16, TabBin/binary, (byte_size(OptsBin)):16, OptsBin/binary,
      B/binary>>.

%% @doc The decoded form of a state: `{ok, State}', or `{error, Why}' when
%% the term is not a fraghash hash state or is damaged. Needs the NIF (for
%% the recipe's digest).
-spec decode(term()) -> {ok, #fraghash_state{}} | {error, term()}.
decode(<<"fh", ?FRAGHASH_STATE_LAYOUT, Code:8, Key:64, Check:64, N:32,
         TabLen:16, TabBin:TabLen/binary, OptsLen:16, OptsBin:OptsLen/binary,
         B/binary>>) when N >= 1 ->
    case {scheme(Code), opts(OptsBin)} of
        {{ok, Scheme}, {ok, Opts}} ->
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
decode(#fraghash_state{scheme = Scheme, table = Tab, n = N, opts = Opts, digest = D,
                       bytes = B} = S)
  when is_atom(Tab), is_integer(N), N >= 1, is_list(Opts), is_binary(D),
       byte_size(D) =:= 16, is_binary(B) ->
    case lists:member(Scheme, [slots, chash, jump, linear]) of
        true -> {ok, S};
        false -> {error, bad_layout}
    end;
decode(_) ->
    {error, not_a_fraghash_state}.

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
