%% @doc Mnesia's own cost of an external storage type, measured as a
%% storage type of {@link fraghash_bench_redb} (`floor_copies', asked for by
%% `bench/mnesia/disc-measure.sh redb --floor'): a backend that keeps each
%% table in an ets table and does nothing else. Its figures are what
%% Mnesia's external-table path costs by itself (the transaction, the
%% locks, the commit logged to `LATEST.LOG', one call per record), so no
%% backend of any engine can write faster than it; a target stated as a
%% ratio against another backend is out of reach where this one misses it.
%%
%% It declares the semantics `redb_copies' and `rocksdb_copies' declare
%% (`disc_only_copies'), so Mnesia logs and dumps its commits as theirs; its records live in memory only, in ets tables owned by a
%% process of this module that outlives a restart of Mnesia (the
%% benchmark's reopen), not the VM. Benchmark code only: no check, no
%% durability, one node.
-module(fraghash_bench_floor).

-behaviour(mnesia_backend_type).

-export([register/0]).
-export([add_aliases/1, remove_aliases/1, check_definition/4, create_table/3, load_table/4,
         close_table/2, sync_close_table/2, delete_table/2, info/3, insert/3, lookup/3,
         delete/3, match_delete/3, first/2, next/3, last/2, prev/3, slot/3, select/1,
         select/3, select/4, repair_continuation/2, fixtable/3, update_counter/4,
         validate_key/6, validate_record/6, index_is_consistent/3, is_index_consistent/2,
         real_suffixes/0, tmp_suffixes/0, semantics/2, init_backend/0, sender_init/4,
         sender_handle_info/5, receiver_first_message/4, receive_data/5, receive_done/4]).

-define(OWNER, fraghash_bench_floor).

%% @doc Adds storage type `floor_copies' to the running Mnesia.
-spec register() -> {atomic, ok} | {aborted, term()}.
register() ->
    mnesia:add_backend_type(floor_copies, ?MODULE).

%%% Tables: ets tables named by a registry kept by a process of their own

%% @private
init_backend() ->
    case whereis(?OWNER) of
        undefined ->
            Self = self(),
            Pid = spawn(fun() ->
                                register(?OWNER, self()),
                                ets:new(?OWNER, [named_table, public, set]),
                                Self ! {?OWNER, ready},
                                receive stop -> ok end
                        end),
            receive {?OWNER, ready} -> ok after 5000 -> exit({no_owner, Pid}) end;
        _ ->
            ok
    end.

tab(Tab) ->
    [{_, T}] = ets:lookup(?OWNER, Tab),
    T.

%% @private
add_aliases(_) -> ok.
%% @private
remove_aliases(_) -> ok.
%% @private
check_definition(_Alias, _Tab, _Nodes, _Props) -> ok.

%% @private
create_table(_Alias, Tab, Props) ->
    case ets:lookup(?OWNER, Tab) of
        [_] ->
            ok;
        [] ->
            Type = case proplists:get_value(type, Props, set) of
                       bag -> bag;
                       ordered_set -> ordered_set;
                       _ -> set
                   end,
            Owner = whereis(?OWNER),
            T = ets:new(?MODULE, [Type, public, {keypos, 2}, {heir, Owner, none}]),
            ets:give_away(T, Owner, none),
            true = ets:insert(?OWNER, {Tab, T}),
            ok
    end.

%% @private
load_table(_Alias, _Tab, _Reason, _Cs) -> ok.
%% @private
close_table(_Alias, _Tab) -> ok.
%% @private
sync_close_table(_Alias, _Tab) -> ok.

%% @private
delete_table(_Alias, Tab) ->
    case ets:lookup(?OWNER, Tab) of
        [{_, T}] -> ets:delete(T), ets:delete(?OWNER, Tab), ok;
        [] -> ok
    end.

%% @private
info(_Alias, Tab, size) -> ets:info(tab(Tab), size);
info(_Alias, Tab, memory) -> ets:info(tab(Tab), memory) * erlang:system_info(wordsize);
info(_Alias, _Tab, _Item) -> undefined.

%%% Records

%% @private
insert(_Alias, Tab, Obj) -> true = ets:insert(tab(Tab), Obj), ok.
%% @private
lookup(_Alias, Tab, Key) -> ets:lookup(tab(Tab), Key).
%% @private
delete(_Alias, Tab, Key) -> true = ets:delete(tab(Tab), Key), ok.
%% @private
match_delete(_Alias, Tab, Pat) -> true = ets:match_delete(tab(Tab), Pat), ok.
%% @private
first(_Alias, Tab) -> ets:first(tab(Tab)).
%% @private
next(_Alias, Tab, Key) -> ets:next(tab(Tab), Key).
%% @private
last(_Alias, Tab) -> ets:last(tab(Tab)).
%% @private
prev(_Alias, Tab, Key) -> ets:prev(tab(Tab), Key).
%% @private
slot(_Alias, Tab, Pos) -> ets:slot(tab(Tab), Pos).
%% @private
select(Cont) -> ets:select(Cont).
%% @private
select(_Alias, Tab, Spec) -> ets:select(tab(Tab), Spec).
%% @private
select(_Alias, Tab, Spec, Limit) -> ets:select(tab(Tab), Spec, Limit).
%% @private
repair_continuation(Cont, Spec) -> ets:repair_continuation(Cont, Spec).
%% @private
fixtable(_Alias, Tab, Bool) -> ets:safe_fixtable(tab(Tab), Bool).
%% @private
update_counter(_Alias, Tab, Key, Incr) -> ets:update_counter(tab(Tab), Key, {3, Incr}).
%% @private
validate_key(_Alias, _Tab, RecName, Arity, Type, _Key) -> {RecName, Arity, Type}.
%% @private
validate_record(_Alias, _Tab, RecName, Arity, Type, _Obj) -> {RecName, Arity, Type}.
%% @private
index_is_consistent(_Alias, _Tag, _Bool) -> ok.
%% @private
is_index_consistent(_Alias, _Tag) -> false.
%% @private
real_suffixes() -> [].
%% @private
tmp_suffixes() -> [].

%% @private
semantics(_Alias, storage) -> disc_only_copies;
semantics(_Alias, types) -> [set, ordered_set, bag];
semantics(_Alias, index_types) -> [ordered];
semantics(_Alias, index_fun) -> fun(_A, _Tab, Pos, Obj) -> [element(Pos, Obj)] end;
semantics(_Alias, _) -> undefined.

%%% Copies between nodes: Mnesia's standard sender, records received as sent

%% @private
sender_init(Alias, Tab, _Reason, _Pid) ->
    {standard,
     fun() -> select(Alias, Tab, [{'_', [], ['$_']}], 1000) end,
     fun(Cont) -> select(Cont) end}.

%% @private
sender_handle_info(_Msg, _Alias, _Tab, _ReceiverPid, Cont) -> {more, Cont}.

%% @private
receiver_first_message(_Sender, {first, Size}, _Alias, _Tab) -> {Size, undefined}.

%% @private
receive_data(Data, Alias, Tab, _Sender, State) ->
    [insert(Alias, Tab, R) || R <- Data],
    {more, State}.

%% @private
receive_done(_Alias, _Tab, _Sender, _State) -> ok.
