%% @doc Creates a fragmented table whose fragments are of an external
%% storage type (`redb_copies'), in one call.
%%
%% Mnesia 4.21.3 cannot: its `mnesia_frag' places a backend's copies as
%% bare nodes where `{{Alias, Module}, Nodes}' belongs, and `create_table'
%% aborts. So the table is made here as Mnesia can make it: fragment 1 as
%% a plain table on the backend, fragmentation activated on it, and each
%% further fragment added by `fraghash_frag:add_frag/2', which gives a new
%% fragment the copies of fragment 1, of the same types, on the next
%% nodes of the pool. The table is empty meanwhile, so no record moves.
%%
%% A crash part way leaves the table with fewer fragments than asked, each
%% complete: grow it with `fraghash_frag:add_frag/2' (after
%% `fraghash_frag:recover/0').
-module(fraghash_frag_create).

-export([create_table/2]).

%% @doc As `mnesia:create_table(Tab, Opts)', and when `frag_properties'
%% holds `{n_redb_copies, K}', every fragment gets `K' copies of type
%% `redb_copies' (on `K' nodes of `node_pool', fragment after fragment
%% round the pool) and no copy of another type. Other options, `type',
%% `attributes', `index' and the rest of `frag_properties'
%% (`n_fragments', `node_pool', `hash_module', `hash_state') are
%% Mnesia's. The backend must be registered
%% (`fraghash_redb_copies:register/0').
-spec create_table(atom(), [tuple()]) -> {atomic, ok} | {aborted, term()}.
create_table(Tab, Opts) when is_atom(Tab), is_list(Opts) ->
    Props = proplists:get_value(frag_properties, Opts, []),
    case is_list(Props) andalso lists:keyfind(n_redb_copies, 1, Props) of
        {n_redb_copies, K} -> create_external(Tab, Opts, Props, redb_copies, K);
        _ -> mnesia:create_table(Tab, Opts)
    end;
create_table(Tab, Opts) ->
    bad(Tab, "create_table/2 takes a table name (an atom) and a list of options, not ~0p",
        [Opts]).

create_external(Tab, Opts, Props, Alias, K) ->
    N = proplists:get_value(n_fragments, Props, 1),
    Pool = proplists:get_value(node_pool, Props, [node()]),
    Others = [C || {C, V} <- Props, lists:member(C, [n_ram_copies, n_disc_copies,
                                                     n_disc_only_copies, n_external_copies]),
                   V =/= 0],
    if
        not (is_integer(K) andalso K >= 1) ->
            bad(Tab, "n_redb_copies is ~0p: give a whole number of copies, 1 or more", [K]);
        not (is_integer(N) andalso N >= 1) ->
            bad(Tab, "n_fragments is ~0p: give a whole number, 1 or more", [N]);
        not is_list(Pool) orelse length(Pool) < K ->
            bad(Tab, "node_pool ~0p has fewer nodes than n_redb_copies (~b)", [Pool, K]);
        Others =/= [] ->
            bad(Tab, "~0p cannot be given with n_redb_copies: every fragment's copies are "
                "redb_copies", [Others]);
        true ->
            Base = [O || O <- Opts, element(1, O) =/= frag_properties],
            Activate = [P || {Key, _} = P <- Props,
                             not lists:member(Key, [n_fragments, n_redb_copies])],
            case mnesia:create_table(Tab, [{Alias, lists:sublist(Pool, K)} | Base]) of
                {atomic, ok} -> activate(Tab, Activate, Pool, K, N);
                Aborted -> Aborted
            end
    end.

%% Fragmentation on the new table; undone (the table deleted) if Mnesia
%% refuses it, so that a refused call leaves nothing.
activate(Tab, Props, Pool, K, N) ->
    case mnesia:change_table_frag(Tab, {activate, Props}) of
        {atomic, ok} ->
            grow(Tab, Pool, K, 2, N);
        Aborted ->
            _ = mnesia:delete_table(Tab),
            Aborted
    end.

%% Fragments `I' to `N', fragment `I''s copies on the `K' nodes of `Pool'
%% starting at place (I - 1) * K round it.
grow(_Tab, _Pool, _K, I, N) when I > N ->
    {atomic, ok};
grow(Tab, Pool, K, I, N) ->
    At = ((I - 1) * K) rem length(Pool),
    {Front, Back} = lists:split(At, Pool),
    case fraghash_frag:add_frag(Tab, Back ++ Front) of
        {atomic, ok} -> grow(Tab, Pool, K, I + 1, N);
        Aborted -> Aborted
    end.

bad(Tab, Format, Args) ->
    {aborted, fraghash_error:new(bad_frag_properties, "~0p: " ++ Format, [Tab | Args])}.
