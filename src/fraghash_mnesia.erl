%% @doc The shared implementation of the fraghash Mnesia hash modules
%% (`mnesia_frag_slots', `mnesia_frag_chash', `mnesia_frag_jump',
%% `mnesia_frag_linear'): the `mnesia_frag_hash' callbacks, parameterised by
%% scheme. Where keys go is decided in Rust (`fraghash_nif', the same code
%% as the core crate). For slots, chash and linear the NIF exports each
%% state's lookup table once and lookups read it in Erlang, with no NIF
%% call (see "Published lookups" below); jump calls the NIF per lookup.
%%
%% A key's hash is `H = erlang:phash2(Key, 1 bsl 32)'; the NIF widens it to
%% 64 bits as `H * (2^32 + 1)', so `linear' answers exactly as
%% `mnesia_frag_hash' and `slots'/`ring' read well-mixed high bits.
%%
%% The hash state Mnesia holds is one binary (`fraghash_state', layout and
%% reasons in `include/fraghash.hrl'): plain data, so it survives restarts
%% and is the same on every node; the callbacks below decode it, and
%% `fraghash_lookup' answers lookups. Options given as the initial `hash_state' are checked
%% by `init_state/3'; anything not understood aborts the schema transaction
%% with `{bad_hash_state, Module, Detail}'.
-module(fraghash_mnesia).

-include("fraghash.hrl").

-export([init_state/3, add_frag/2, del_frag/2, key_to_frag_number/2,
         match_spec_to_frag_numbers/2, info/1, module_of/1]).
-export([encode/1, same_placement/2]).

-type scheme() :: slots | chash | jump | linear.
-export_type([scheme/0]).

%% Slots: at most this many donor fragments per add_frag unless the
%% hash_state says otherwise (see docs/mnesia.md for the trade-off).
-define(DEFAULT_DONORS, 8).
-define(DEFAULT_POINTS, 100).
-define(MAX_POINTS, 10000).
-define(TWO_32, 4294967296).

%% @doc `init_state/2' of scheme `Scheme': `State' is the user's initial
%% `hash_state': `undefined', `[]' or a list of options.
%% <ul>
%% <li>slots: `{donors, pos_integer() | all}' (default 8): the most fragments
%% one `add_frag' takes slots from, and so scans; `{weights, [pos_integer()]}':
%% the weight of fragment 1, 2, ... (fragments beyond the list weigh 1).</li>
%% <li>chash: `{points, 1..10000}' (default 100): ring points per fragment.</li>
%% <li>jump, linear: no options of their own.</li>
%% <li>every scheme: `{master, M}', for a table created with
%% `{foreign_key, {M, Attr}}' when `M' uses the same hash module: the table
%% takes `M''s placement at creation, so each of its records lands in the
%% fragment number of `M''s record for the same key from the first write
%% (see "Foreign keys" below). Its other options must be none or `M''s.</li>
%% </ul>
-spec init_state(scheme(), atom(), term()) -> fraghash_state:encoded().
init_state(Scheme, Tab, State) ->
    case options(Scheme, State) of
        [{master, M} | Own] ->
            %% Checked now, so that a wrong master refuses the create.
            Master = master_state(Scheme, Tab, M, Own),
            encode(creating_as(Master, Tab, 1));
        Opts ->
            encode(fresh(Scheme, Tab, Opts, 1))
    end.

%% A new table's state: `N' fragments, perfectly balanced.
fresh(Scheme, Tab, Opts, N) ->
    {D, B} = fraghash_nif:call(
               fun() -> fraghash_nif:fresh_state(spec(Scheme, Opts), N, weights(N, Opts)) end),
    #fraghash_state{scheme = Scheme, table = Tab, n = N, opts = Opts, digest = D, bytes = B}.

%% The state of fragment `N' of a table being created that follows
%% `Master': the master's own state once the table has as many fragments
%% (Mnesia checks that a foreign-key table is created with its master's
%% count); until then a new table's, with `{master, M}' kept in the options
%% for the next step (Mnesia reads no key through those).
creating_as(#fraghash_state{n = N} = Master, Tab, N) ->
    Master#fraghash_state{table = Tab};
creating_as(#fraghash_state{scheme = Scheme, table = M, n = MN, opts = Opts}, Tab, N)
  when N < MN ->
    fresh(Scheme, Tab, [{master, M} | Opts], N);
creating_as(#fraghash_state{table = M, n = MN}, Tab, _N) ->
    refuse(master_fragments,
           "~s is created with more fragments than its master ~s (~b): "
           "create it with the master's n_fragments", [Tab, M, MN]).

%% @doc `add_frag/1' of scheme `Scheme': `{NewState, IterFrags, LockFrags}'
%% where `IterFrags' are exactly the fragments that can lose records.
%%
%% The state is a recipe (see the NIF's `recipe' module): the new table the
%% state started as, then its `add_frag's and `del_frag's, in a few dozen
%% bytes. While a table is being created (it is not yet in
%% `mnesia:system_info(tables)'), Mnesia calls `add_frag' once per extra
%% fragment on empty fragments and moves nothing, so the recipe's starting
%% table grows instead: the table starts perfectly balanced and creating
%% 4,000 fragments stays O(fragments) per step (a table created with
%% `{master, M}' ends as `M''s state instead). Afterwards each `add_frag'
%% is appended to the recipe and honours the `donors' bound; a foreign-key
%% table's is its master's (see "Foreign keys" below).
-spec add_frag(scheme(), fraghash_state:encoded()) ->
          {fraghash_state:encoded(), [pos_integer()], [pos_integer()]}.
add_frag(Scheme, State) ->
    add_decoded(Scheme, decode(Scheme, State)).

add_decoded(Scheme, #fraghash_state{scheme = Scheme, table = Tab, n = N, opts = Opts} = S) ->
    ok = refuse_unsafe_change(S, add_frag),
    N1 = N + 1,
    case creating(Tab) of
        true ->
            %% Every fragment is empty: none can lose records.
            New = case Opts of
                      [{master, M} | Own] ->
                          creating_as(master_state(Scheme, Tab, M, Own), Tab, N1);
                      _ -> fresh(Scheme, Tab, Opts, N1)
                  end,
            {encode(New), [], [N1]};
        false ->
            ok = fraghash_nif:built_dir(),
            ok = check_foreigners(Scheme, Tab),
            follow(S, N1, fun(From) -> added(Scheme, From) end)
    end.

%% `add_frag' applied to state `From' (the table's own, or its master's):
%% `{NewDigest, NewRecipe, Iter, Lock}'.
added(Scheme, #fraghash_state{table = Tab, n = N, opts = Opts, digest = D, bytes = B}) ->
    case get(fraghash_relieve) of
        {Tab, Frag} when Scheme =:= slots ->
            %% fraghash_frag:relieve/3: the new fragment takes half of
            %% Frag's slots, nothing else moves.
            fraghash_nif:call(fun() -> fraghash_nif:split_frag(D, B, Frag) end);
        {Tab, _} ->
            mnesia:abort(fraghash_error:new(relieve_needs_slots,
                                            "only mnesia_frag_slots can relieve one fragment",
                                            []));
        _ ->
            W = weight(N + 1, Opts),
            fraghash_nif:call(fun() -> fraghash_nif:add_frag(D, B, W, donors(Opts)) end)
    end.

%% @doc `del_frag/1' of scheme `Scheme': removes the last fragment;
%% `{NewState, [Last], FragmentsThatCanReceiveItsRecords}'.
-spec del_frag(scheme(), fraghash_state:encoded()) ->
          {fraghash_state:encoded(), [pos_integer()], [pos_integer()]}.
del_frag(Scheme, State) ->
    case decode(Scheme, State) of
        #fraghash_state{n = N} = S when N > 1 -> del_decoded(S);
        %% Mnesia does not remove a table's only fragment; a direct call might.
        _ -> bad_state(Scheme, State)
    end.

del_decoded(#fraghash_state{scheme = Scheme, table = Tab, n = N} = S) ->
    ok = refuse_unsafe_change(S, del_frag),
    ok = fraghash_nif:built_dir(),
    ok = check_foreigners(Scheme, Tab),
    follow(S, N - 1, fun(#fraghash_state{digest = D, bytes = B}) ->
                      fraghash_nif:call(fun() -> fraghash_nif:del_frag(D, B) end)
              end).

%%% Foreign keys
%%
%% Mnesia keeps a table created with `{foreign_key, {Master, Attr}}'
%% beside its master: each record goes to the fragment number its master's
%% record for the same key has, and every add_frag or del_frag of the
%% master is applied to its foreigners in the same schema transaction,
%% through each one's own hash module and state. That holds for
%% `mnesia_frag_hash', whose placement depends on the fragment count alone.
%% Here placement depends on the table's history too (slots' donors,
%% relieved fragments, a ring's tokens), so a foreigner's state is its
%% master's: the same recipe (and so the same digest and placement) under
%% its own table name. A foreigner created with `{master, M}' takes M's
%% state at creation (`creating_as/3'); each later change is computed from
%% the master's committed state (`follow/2'), the one Mnesia itself still
%% holds while it runs the master's change.

%% The change `Change' (a function of the state it applies to, giving
%% `N2' fragments) of table `S': applied to the master's state when the
%% table is a foreign-key table of a table with the same hash module, else
%% to its own. `{NewState, Iter, Lock}'.
follow(#fraghash_state{scheme = Scheme, table = Tab, n = N, opts = Own, digest = D} = S,
       N2, Change) ->
    case master_of(Scheme, Tab, [O || {K, _} = O <- Own, K =/= master]) of
        none ->
            {D2, B2, Iter, Lock} = Change(S),
            {encode(S#fraghash_state{n = N2, digest = D2, bytes = B2}), Iter, Lock};
        #fraghash_state{digest = D, opts = Opts} = Master ->
            {D2, B2, Iter, Lock} = Change(Master),
            {encode(S#fraghash_state{n = N2, opts = Opts, digest = D2, bytes = B2}), Iter, Lock};
        #fraghash_state{opts = Opts} = Master ->
            %% Created without `{master, M}' after the master's placement
            %% had left a new table's: from this change on it follows the
            %% master, and Mnesia moves every record that is not where the
            %% master's would be (every fragment scanned, every one locked).
            {D2, B2, _, _} = Change(Master),
            {encode(S#fraghash_state{n = N2, opts = Opts, digest = D2, bytes = B2}),
             lists:seq(1, N), lists:seq(1, max(N, N2))}
    end.

%% The decoded state of `Tab''s master when `Tab' is a foreign-key table
%% whose master uses this module, after checking that `Tab''s own options
%% `Own' agree; `none' when the table's own state decides (not a
%% foreigner, or a `linear' foreigner of a `mnesia_frag_hash' master,
%% which place keys alike).
master_of(Scheme, Tab, Own) ->
    case lists:keyfind(foreign_key, 1, frag_properties(Tab)) of
        {foreign_key, {M, _Pos}} ->
            case lists:keyfind(hash_module, 1, frag_properties(M)) of
                {hash_module, mnesia_frag_hash} when Scheme =:= linear -> none;
                _ -> master_state(Scheme, Tab, M, Own)
            end;
        _ ->
            none
    end.

%% `M''s state, for `Tab' to follow: `M' must be a fragmented table with the
%% same hash module, and `Tab''s own options (`Own') none or `M''s.
master_state(Scheme, Tab, M, Own) ->
    Mod = module_of(Scheme),
    Props = frag_properties(M),
    case {lists:keyfind(hash_module, 1, Props), lists:keyfind(hash_state, 1, Props)} of
        {{hash_module, Mod}, {hash_state, MS}} ->
            #fraghash_state{opts = Opts} = Master = decode(Scheme, MS),
            case Own =:= [] orelse Own =:= Opts of
                true -> Master;
                false -> refuse(options_differ_from_master,
                                "~s's hash_state options ~w differ from its master ~s's ~w: "
                                "give it the master's options, or only {master, ~s}",
                                [Tab, Own, M, Opts, M])
            end;
        {{hash_module, Other}, _} ->
            refuse(master_module_differs,
                   "~s uses ~s but its master ~s uses ~s, which places keys differently: "
                   "give both the same hash_module", [Tab, Mod, M, Other]);
        _ ->
            refuse(master_not_fragmented,
                   "~s's master ~s is not a fragmented table: create ~s first, with "
                   "frag_properties", [Tab, M, M])
    end.

%% Before a table changes: every foreigner of it must follow it, so each
%% uses a fraghash module (which follows, see `follow/2') or, for a
%% `linear' table, `mnesia_frag_hash'. A foreigner with another module
%% was never co-located; the change is refused rather than made on top.
check_foreigners(Scheme, Tab) ->
    Mod = module_of(Scheme),
    Follows = [Mod | [mnesia_frag_hash || Scheme =:= linear]],
    Bad = [{F, FMod} || F <- mnesia_frag:lookup_foreigners(Tab),
                        {hash_module, FMod} <- [lists:keyfind(hash_module, 1, frag_properties(F))],
                        not lists:member(FMod, Follows)],
    case Bad of
        [] -> ok;
        [{F, FMod} | _] ->
            refuse(foreigner_module_differs,
                   "~s (a foreign-key table of ~s) uses ~s, which places keys differently "
                   "from ~s: recreate it with {hash_module, ~s}",
                   [F, Tab, FMod, Mod, Mod])
    end.

%% @doc Whether two tables with the same fragment count (as Mnesia keeps a
%% foreign-key table and its master) place every key in the same fragment
%% number, judged from their hash modules and states: the same fraghash
%% state (its digest), or schemes whose placement depends on the count
%% alone (`mnesia_frag_hash', which `mnesia_frag_linear' answers like, and
%% `mnesia_frag_jump').
-spec same_placement({module(), term()}, {module(), term()}) -> boolean().
same_placement({ModA, StateA}, {ModB, StateB}) ->
    case {count_only(ModA, StateA), count_only(ModB, StateB)} of
        {{true, Family}, {true, Family}} ->
            true;
        _ ->
            case {fraghash_state:decode(StateA), fraghash_state:decode(StateB)} of
                {{ok, #fraghash_state{digest = D}}, {ok, #fraghash_state{digest = D}}} -> true;
                _ -> false
            end
    end.

count_only(mnesia_frag_hash, _) -> {true, linear};
count_only(_, State) ->
    case fraghash_state:decode(State) of
        {ok, #fraghash_state{scheme = Scheme}} when Scheme =:= linear; Scheme =:= jump ->
            {true, Scheme};
        _ ->
            false
    end.

frag_properties(Tab) ->
    try mnesia:table_info(Tab, frag_properties)
    catch exit:{aborted, _} -> []
    end.

refuse(Reason, Format, Args) ->
    mnesia:abort(fraghash_error:new(Reason, Format, Args)).

%% @doc The fragment of a key in a state (the hash modules compile the
%% same lookup in; see `fraghash_lookup').
-spec key_to_frag_number(fraghash_state:encoded(), term()) -> pos_integer().
key_to_frag_number(S, Key) ->
    fraghash_lookup:locate_hash(S, erlang:phash2(Key, 4294967296)).

%% @doc `match_spec_to_frag_numbers/2': one fragment when the match spec's
%% key is bound, all of them otherwise.
-spec match_spec_to_frag_numbers(fraghash_state:encoded(), ets:match_spec()) ->
          [pos_integer()].
match_spec_to_frag_numbers(S, MatchSpec) ->
    #fraghash_state{n = N} = fraghash_state:decode_or_abort(S),
    case MatchSpec of
        [{HeadPat, _, _}] when is_tuple(HeadPat), tuple_size(HeadPat) > 2 ->
            KeyPat = element(2, HeadPat),
            case mnesia:has_var(KeyPat) of
                false -> [key_to_frag_number(S, KeyPat)];
                true -> lists:seq(1, N)
            end;
        _ ->
            lists:seq(1, N)
    end.

%% @doc A description of a state (spec, fragments, memory; for slots the
%% slots per fragment and weights), plus the options that differ from
%% the defaults.
-spec info(fraghash_state:encoded()) -> map().
info(State) ->
    #fraghash_state{opts = Opts, digest = D, bytes = B} = fraghash_state:decode_or_abort(State),
    maps:put(opts, Opts, fraghash_nif:call(fun() -> fraghash_nif:info(D, B) end)).

%% @doc The binary Mnesia holds for a decoded state, with the lookup its
%% scheme carries (see `include/fraghash.hrl').
-spec encode(#fraghash_state{}) -> fraghash_state:encoded().
encode(#fraghash_state{digest = D, bytes = B} = S) ->
    ok = fraghash_nif:built_dir(),
    Inline = fraghash_nif:call(fun() -> fraghash_nif:inline_table(D, B) end),
    fraghash_state:encode(S, Inline).

%% @doc The hash module of a scheme.
-spec module_of(scheme()) -> module().
module_of(slots) -> mnesia_frag_slots;
module_of(chash) -> mnesia_frag_chash;
module_of(jump) -> mnesia_frag_jump;
module_of(linear) -> mnesia_frag_linear.

%%% Internals

%% Plain `mnesia:change_table_frag/2' on a table with disc copies: refused.
%% Mnesia may not bring its record moves to disc (records lost or back
%% after a restart; see fraghash_frag and docs/mnesia-disc-safety.md), so
%% the change must go through fraghash_frag, whose schema changes do not
%% ask the hash module to move records (it calls `add_frag' and
%% `del_frag' on a state outside any transaction). Outside a transaction
%% (a direct call on a state) and while the
%% table is being created nothing moves, and ram_copies tables lose nothing
%% on disc: allowed. The application environment variable
%% `{fraghash, allow_unsafe_change_table_frag, true}' lets plain calls
%% through (to measure them against the safe path, or to accept the risk).
refuse_unsafe_change(#fraghash_state{table = Tab}, Op) ->
    InTransaction = get(mnesia_activity_state) =/= undefined,
    Allowed = application:get_env(fraghash, allow_unsafe_change_table_frag, false),
    case InTransaction andalso Allowed =/= true
        andalso not creating(Tab) andalso has_disc_copies(Tab) of
        true ->
            Safe = case Op of
                       add_frag -> "fraghash_frag:add_frag/2";
                       del_frag -> "fraghash_frag:del_frag/1"
                   end,
            mnesia:abort(fraghash_error:new(unsafe_change_table_frag,
                                            "~s has disc copies, where Mnesia may lose the "
                                            "records ~s moves; use ~s", [Tab, Op, Safe]));
        false ->
            ok
    end.

%% Copies on disc of any storage type: Mnesia's own, and those of an
%% external backend (`redb_copies') that keeps its records on disc.
has_disc_copies(Tab) ->
    fraghash_durable:disc_holders(Tab) =/= [].

options(Scheme, undefined) -> options(Scheme, []);
options(Scheme, L) when is_list(L) ->
    %% Only options that differ from the defaults are kept: the state is
    %% copied out of ets on every operation, so it stays small. A master
    %% leads (see `init_state/3').
    Opts = lists:foldl(fun(Opt, Acc) -> option(Scheme, Opt, Acc) end, [], L) -- defaults(Scheme),
    case lists:keytake(master, 1, Opts) of
        {value, Master, Rest} -> [Master | Rest];
        false -> Opts
    end;
options(Scheme, Other) ->
    mnesia:abort({bad_hash_state, module_of(Scheme),
                  {expected_option_list, Other}}).

defaults(slots) -> [{donors, ?DEFAULT_DONORS}, {weights, []}];
defaults(chash) -> [{points, ?DEFAULT_POINTS}];
defaults(_) -> [].

option(slots, {donors, D} = O, Acc)
  when (is_integer(D) andalso D >= 1 andalso D < ?TWO_32) orelse D =:= all ->
    lists:keystore(donors, 1, Acc, O);
option(slots, {weights, Ws} = O, Acc) when is_list(Ws) ->
    case lists:all(fun(W) -> is_integer(W) andalso W >= 1 andalso W < ?TWO_32 end, Ws) of
        true -> lists:keystore(weights, 1, Acc, O);
        false -> bad_option(slots, O)
    end;
option(_Scheme, {master, M} = O, Acc) when is_atom(M) ->
    lists:keystore(master, 1, Acc, O);
option(chash, {points, P} = O, Acc)
  when is_integer(P), P >= 1, P =< ?MAX_POINTS ->
    lists:keystore(points, 1, Acc, O);
option(Scheme, O, _Acc) ->
    bad_option(Scheme, O).

bad_option(Scheme, O) ->
    mnesia:abort({bad_hash_state, module_of(Scheme),
                  {bad_option, O, {valid, valid_options(Scheme)}}}).

valid_options(slots) ->
    ["{donors, pos_integer() | all}", "{weights, [pos_integer()]}", "{master, atom()}"];
valid_options(chash) -> ["{points, 1..10000}", "{master, atom()}"];
valid_options(_) -> ["{master, atom()}"].

spec(slots, _) -> <<"slots">>;
spec(chash, Opts) ->
    {points, P} = opt(points, Opts, {points, ?DEFAULT_POINTS}),
    iolist_to_binary(["ring:", integer_to_list(P)]);
spec(jump, _) -> <<"jump">>;
spec(linear, _) -> <<"linear">>.

%% The weights of fragments 1..N for a new table: `[]' when the table has
%% no weights option (all weigh 1).
weights(N, Opts) ->
    case lists:keyfind(weights, 1, Opts) of
        {weights, [_ | _]} -> [weight(I, Opts) || I <- lists:seq(1, N)];
        _ -> []
    end.

weight(Frag, Opts) ->
    case lists:keyfind(weights, 1, Opts) of
        {weights, Ws} when length(Ws) >= Frag -> lists:nth(Frag, Ws);
        _ -> 1
    end.

donors(Opts) ->
    case opt(donors, Opts, {donors, ?DEFAULT_DONORS}) of
        {donors, all} -> 0;
        {donors, D} -> D
    end.

opt(Key, Opts, Default) ->
    case lists:keyfind(Key, 1, Opts) of
        false -> Default;
        Found -> Found
    end.

creating(Tab) ->
    not lists:member(Tab, mnesia:system_info(tables)).

bad_state(Scheme, Bad) ->
    mnesia:abort({bad_hash_state, module_of(Scheme), Bad}).

%% A state of scheme `Scheme', decoded.
decode(Scheme, State) ->
    case fraghash_nif:call(fun() -> fraghash_state:decode(State) end) of
        {ok, #fraghash_state{scheme = Scheme} = S} -> S;
        {error, digest_mismatch} -> fraghash_state:digest_mismatch();
        _ -> bad_state(Scheme, State)
    end.
