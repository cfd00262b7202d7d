%% @doc The child VM of the kill -9 torture test (`fraghash_torture_tests'):
%% started as an OS process, it starts Mnesia on a disc schema, recovers
%% (`fraghash_frag:recover/0'), checks every table against the
%% acknowledgement logs, then runs writers and a controller that grows and
%% shrinks the tables through `fraghash_frag' (on the `mnesia_frag_slots'
%% tables, one grow in three is a `relieve' of the largest fragment; on the
%% `mnesia_frag_hash' ones, one operation in five changes the hash module,
%% to `mnesia_frag_jump' and back) until the parent kills it.
%%
%% Files in the run directory (all appended with single writes, which a
%% kill -9 of this process cannot lose once they returned: they are in the
%% kernel):
%% <ul>
%% <li>`ack_<table>.log': per writer, framed terms (32-bit size, then
%% `term_to_binary'): `{intent, Seq, Key, Value}' before a
%% transaction and `{ack, Seq, Key, Value}' once the transaction returned
%% and a later `mnesia:sync_log()' returned (`Value' is `deleted' for a
%% delete), each followed by `file:datasync/1';</li>
%% <li>`marks.log': where the child is (start, recovery, each step of a
%% migration), which the parent reads to aim its kills;</li>
%% <li>`results.log': one `{check, Run, Table, Counts}' term per table and
%% start.</li>
%% </ul>
-module(fraghash_torture_child).

-export([main/1, cases/0, tables/0, table/1, control/1]).
%% Shared with the two-node torture (fraghash_torture2_tests).
-export([log_line/2, read_terms/1, expected_terms/1, found/2, replace_bag_key/3]).

-define(KEYS, 600).
-define(MIN_FRAGS, 2).
-define(MAX_FRAGS, 7).

%% @doc The cases: `{HashModule, CopyType, Kind}', `Kind' one of `set'; `bag'
%% (written as a set: each write replaces the key's record, see
%% put_value/3);
%% `master' and `foreigner', a table and its foreign-key table (field
%% `mkey', a function of the key), which grow together through the master;
%% `indexed', a set with an index on its value, checked against its
%% records. `redb_copies' tables (fraghash_redb_copies) are created with
%% `disc_copies' fragments, each then moved to `redb_copies'.
-spec cases() -> [{module(), atom(), set | bag | master | foreigner | indexed}].
cases() ->
    [{M, T, set} || M <- [mnesia_frag_hash, mnesia_frag_slots, mnesia_frag_chash],
                    T <- [disc_copies, disc_only_copies]]
        ++ [{mnesia_frag_slots, disc_copies, K} || K <- [bag, master, foreigner]]
        ++ [{M, redb_copies, set} || M <- [mnesia_frag_hash, mnesia_frag_slots]]
        ++ [{mnesia_frag_slots, redb_copies, bag}, {mnesia_frag_hash, redb_copies, indexed}].

%% @doc The migrated table of each case.
-spec tables() -> [atom()].
tables() -> [table(C) || C <- cases()].

%% @doc The migrated table of a case.
-spec table({module(), atom(), atom()}) -> atom().
table({Mod, Type, Kind}) ->
    list_to_atom(lists:concat([tt_, short(Mod), "_", short(Type), suffix(Kind)])).

suffix(set) -> "";
suffix(bag) -> "_bag";
suffix(master) -> "_fkm";
suffix(foreigner) -> "_fkf";
suffix(indexed) -> "_ix".

kind(Tab) ->
    hd([K || {_, _, K} = C <- cases(), table(C) =:= Tab]).

%% A foreigner record's master key: a permutation of 1..?KEYS, so that
%% placing a record by it differs from placing it by its key.
mkey(Key) -> (Key * 7919) rem ?KEYS + 1.

%% @doc The never-migrated control table of a case table.
-spec control(atom()) -> atom().
control(Tab) -> list_to_atom("ctl_" ++ atom_to_list(Tab)).

short(mnesia_frag_hash) -> hash;
short(mnesia_frag_slots) -> slots;
short(mnesia_frag_chash) -> chash;
short(disc_copies) -> dc;
short(disc_only_copies) -> doc;
short(redb_copies) -> rdb.

%% @doc Entry point: `[Dir, Run, Mode]' with Mode `work' (recover, check,
%% then write and migrate until killed) or `check' (recover, check, stop).
-spec main([string()]) -> no_return().
main([Dir, RunS, Mode]) ->
    Run = list_to_integer(RunS),
    %% Stop when the parent goes away (its port closes our stdin).
    spawn(fun() -> _ = io:get_line(""), halt(3) end),
    rand:seed(exsss, {Run, 17, 4242}),
    mark(Dir, "start ~b ~s", [Run, os:getpid()]),
    Fresh = not filelib:is_file(filename:join([Dir, "mnesia", "schema.DAT"])),
    ok = application:set_env(mnesia, dir, filename:join(Dir, "mnesia")),
    ok = application:set_env(mnesia, dump_log_write_threshold, 200),
    case Fresh of
        true -> ok = mnesia:create_schema([node()]);
        false -> ok
    end,
    ok = mnesia:start(),
    case Fresh of
        true ->
            {atomic, ok} = fraghash_redb_copies:register(),
            create_tables();
        false ->
            ok
    end,
    ok = mnesia:wait_for_tables(mnesia:system_info(tables), 120000),
    fraghash_frag:set_step_hook(fun(Tab, Step) ->
                                        mark(Dir, "step ~s ~s", [Tab, Step]),
                                        linger(Step)
                                end),
    mark(Dir, "recover_start ~w", [pending()]),
    ok = fraghash_frag:recover(),
    mark(Dir, "recover_end", []),
    [check_case(Dir, Run, Tab) || Tab <- tables()],
    mark(Dir, "checked", []),
    case Mode of
        "check" ->
            stopped = mnesia:stop(),
            halt(0);
        "work" ->
            work(Dir, Run)
    end.

pending() ->
    case lists:member(fraghash_journal, mnesia:system_info(tables)) of
        true -> fraghash_journal:pending();
        false -> []
    end.

create_tables() ->
    lists:foreach(
      fun({Mod, Type, Kind} = C) ->
              Tab = table(C),
              Copies = case Type of
                           disc_only_copies -> n_disc_only_copies;
                           _ -> n_disc_copies
                       end,
              Frag = [{n_fragments, ?MIN_FRAGS + 1}, {hash_module, Mod}, {node_pool, [node()]},
                      {Copies, 1}],
              Def = fun(Props) ->
                            [{attributes, attributes(Kind)}, {frag_properties, Props}]
                                ++ [{type, bag} || Kind =:= bag]
                                ++ [{index, [val]} || Kind =:= indexed]
                    end,
              Own = case Kind of
                        foreigner ->
                            Master = table({Mod, Type, master}),
                            [{foreign_key, {Master, mkey}}, {hash_module, Mod},
                             {hash_state, [{master, Master}]}];
                        _ ->
                            Frag
                    end,
              {atomic, ok} = mnesia:create_table(Tab, Def(Own)),
              {atomic, ok} = mnesia:create_table(control(Tab), Def(Frag)),
              [{atomic, ok} = mnesia:change_table_copy_type(F, node(), redb_copies)
               || Type =:= redb_copies, T <- [Tab, control(Tab)], F <- frags(T)]
      end, cases()),
    ok = fraghash_journal:ensure().

attributes(foreigner) -> [key, val, mkey];
attributes(_) -> [key, val].

%%% Work: writers and the controller, until killed.

work(Dir, Run) ->
    [spawn_link(fun() -> writer(Dir, Run, Tab) end) || Tab <- tables()],
    mark(Dir, "running", []),
    %% A foreign-key table grows with its master.
    controller(Dir, [table(C) || {_, _, K} = C <- cases(), K =/= foreigner]).

writer(Dir, Run, Tab) ->
    {ok, Log} = file:open(ack_file(Dir, Tab), [append, raw, binary]),
    writer(Log, Run, Tab, 1).

writer(Log, Run, Tab, I) ->
    Key = rand:uniform(?KEYS),
    Seq = {Run, I},
    Value = case rand:uniform(5) of
                1 -> deleted;
                _ -> Seq
            end,
    log_line(Log, {intent, Seq, Key, Value}),
    ok = mnesia:activity(transaction, fun() -> put_value(Tab, Key, Value) end, [], mnesia_frag),
    ok = mnesia:sync_log(),
    ok = dets_sync([Tab, control(Tab)]),
    log_line(Log, {ack, Seq, Key, Value}),
    writer(Log, Run, Tab, I + 1).

%% Writes (or deletes) `Key''s value in a case table and its control, in
%% the caller's transaction: a foreigner's record is deleted through its
%% master key (the fragment its records are placed in); a bag's key gets
%% its new record, then loses its others by delete_object/1, the way
%% docs/mnesia-redb.md says to replace a bag key's records (a backend
%% applies a transaction record by record, so a kill -9 in its commit
%% leaves a prefix of it: the old record, or both, never neither).
put_value(Tab, Key, Value) ->
    Kind = kind(Tab),
    lists:foreach(
      fun(T) ->
              Control = T =/= Tab,
              case {Value, Kind} of
                  {deleted, foreigner} when not Control -> mnesia:delete({T, mkey(Key)}, Key, write);
                  {deleted, _} -> mnesia:delete({T, Key});
                  {_, bag} -> replace_bag_key(T, Key, Value);
                  {_, foreigner} -> mnesia:write({T, Key, Value, mkey(Key)});
                  _ -> mnesia:write({T, Key, Value})
              end
      end, [Tab, control(Tab)]),
    ok.

%% @doc Makes `{T, Key, Value}' the only record of `Key' in bag `T', in the
%% caller's transaction: written first, then each other record of the key
%% deleted by delete_object/1.
-spec replace_bag_key(atom(), term(), term()) -> ok.
replace_bag_key(T, Key, Value) ->
    Old = mnesia:read(T, Key, write),
    ok = mnesia:write({T, Key, Value}),
    lists:foreach(fun(R) -> ok = mnesia:delete_object(R) end, Old -- [{T, Key, Value}]).

%% Mnesia's durability line for disc_only_copies (measured by this test's
%% controls, explained in docs/mnesia-disc-safety.md): a write survives a
%% kill -9 once `mnesia:sync_log()' returned and then the dets file of the
%% fragment written was flushed (`dets:sync/1'); `sync_log' alone keeps it
%% only until Mnesia next dumps its log, while dets may still hold the
%% write in its delayed-write cache (up to 3 s by default).
dets_sync(Tabs) ->
    [[_ = (catch dets:sync(F)) || F <- frags(T)]
     || T <- Tabs, mnesia:table_info(T, storage_type) =:= disc_only_copies],
    ok.

frags(Tab) ->
    mnesia:activity(async_dirty, fun() -> mnesia:table_info(Tab, frag_names) end, [], mnesia_frag).

%% @doc Appends one framed term and syncs it (a torn last entry is ignored
%% when read).
-spec log_line(file:io_device(), term()) -> ok.
log_line(Log, Term) ->
    Bin = term_to_binary(Term),
    ok = file:write(Log, <<(byte_size(Bin)):32, Bin/binary>>),
    ok = file:datasync(Log).

controller(Dir, Tabs) ->
    Tab = lists:nth(rand:uniform(length(Tabs)), Tabs),
    {_, _, N} = fraghash_frag:hash(Tab),
    Grow = case {fraghash_frag:hash(Tab), rand:uniform(3)} of
               %% slots tables: one add in three relieves the largest fragment.
               {{mnesia_frag_slots, _, _}, 1} -> relieve;
               _ -> add
           end,
    {Mod, _, _} = fraghash_frag:hash(Tab),
    Rehash = lists:member(Mod, [mnesia_frag_hash, mnesia_frag_jump]) andalso rand:uniform(5) =:= 1,
    Op = if
             Rehash -> rehash;
             N =< ?MIN_FRAGS -> Grow;
             N >= ?MAX_FRAGS -> del;
             true -> case rand:uniform(2) of 1 -> Grow; 2 -> del end
         end,
    mark(Dir, "enter ~s ~s ~b", [Tab, Op, N]),
    Res = case {Op, os:getenv("FRAGHASH_TORTURE_PLAIN")} of
              %% The negative control: Mnesia's own change_table_frag, to
              %% show that this test finds what goes wrong without the
              %% safe path.
              {add, "1"} -> mnesia:change_table_frag(Tab, {add_frag, [node()]});
              {del, "1"} -> mnesia:change_table_frag(Tab, del_frag);
              {add, _} -> fraghash_frag:add_frag(Tab, [node()]);
              {relieve, "1"} -> mnesia:change_table_frag(Tab, {add_frag, [node()]});
              {relieve, _} -> fraghash_frag:relieve(Tab, [node()], largest);
              {del, _} -> fraghash_frag:del_frag(Tab);
              {rehash, _} -> fraghash_frag:change_hash_module(Tab, other_module(Mod))
          end,
    case Res of
        {atomic, ok} -> mark(Dir, "leave ~s ~s", [Tab, Op]);
        Other -> mark(Dir, "failed ~s ~s ~w", [Tab, Op, Other])
    end,
    timer:sleep(rand:uniform(40)),
    controller(Dir, Tabs).

other_module(mnesia_frag_hash) -> mnesia_frag_jump;
other_module(mnesia_frag_jump) -> mnesia_frag_hash.

%%% Checks

ack_file(Dir, Tab) -> filename:join(Dir, "ack_" ++ atom_to_list(Tab) ++ ".log").

%% Key => {LastAckedValue, [ValuesOfLaterIntents]} from the ack log.
expected(Dir, Tab) ->
    expected_terms(read_terms(ack_file(Dir, Tab))).

%% @doc Key => {LastAckedValue, [ValuesOfLaterIntents]} from the terms of
%% an acknowledgement log, in the order they were written.
-spec expected_terms([tuple()]) -> #{term() => {term(), [term()]}}.
expected_terms(Terms) ->
    lists:foldl(
      fun({ack, _Seq, K, V}, Acc) -> Acc#{K => {V, []}};
         ({intent, _Seq, K, V}, Acc) ->
              {Last, Maybe} = maps:get(K, Acc, {deleted, []}),
              Acc#{K => {Last, [V | Maybe]}}
      end, #{}, Terms).

%% @doc The framed terms of a log, in order; a torn last one is left out.
-spec read_terms(file:filename()) -> [term()].
read_terms(File) ->
    case file:read_file(File) of
        {ok, Bin} -> frames(Bin, []);
        {error, enoent} -> []
    end.

frames(<<Size:32, Bin:Size/binary, Rest/binary>>, Acc) ->
    frames(Rest, [binary_to_term(Bin) | Acc]);
frames(_Torn, Acc) ->
    lists:reverse(Acc).

%% Checks a case table and its control; repairs what Mnesia lost, so that
%% the next check counts only new losses.
check_case(Dir, Run, Tab) ->
    Exp = expected(Dir, Tab),
    {Case, CaseBad} = check_table(Tab, kind(Tab), Exp),
    {Ctl, CtlBad} = check_table(control(Tab), kind(Tab), Exp),
    %% Ours: what the migrated table lost or got wrong that the control
    %% kept (for disc_copies the control keeps everything Mnesia promises).
    Ours = [K || K <- CaseBad, not lists:member(K, CtlBad)],
    Counts = maps:merge(Case, #{ours => length(Ours),
                                ours_keys => [{K, maps:get(K, Exp, none), found(Tab, K),
                                               found(control(Tab), K)}
                                              || K <- lists:sublist(Ours, 5)],
                                control => Ctl}),
    {ok, F} = file:open(filename:join(Dir, "results.log"), [append, raw]),
    ok = file:write(F, io_lib:format("~w.~n", [{check, Run, Tab, Counts}])),
    ok = file:datasync(F),
    ok = file:close(F),
    repair(Dir, Run, Tab, Exp, lists:usort(CaseBad ++ CtlBad)).

%% @doc Key `K''s records in each fragment of `Tab' read from this node
%% (those that hold it), and the fragment the state routes it to: for a
%% failed check's report.
-spec found(atom(), term()) -> [{pos_integer() | routed, term()}].
found(Tab, K) ->
    {Mod, S, N} = fraghash_frag:hash(Tab),
    [{F, Rs} || F <- lists:seq(1, N),
                Rs <- [mnesia:dirty_read(fraghash_frag:frag_name(Tab, F), K)], Rs =/= []]
        ++ [{routed, Mod:key_to_frag_number(S, K)}].

%% Returns {Counts, BadKeys}: keys whose value is not one of those allowed,
%% plus structural faults counted in Counts. A bag key may hold its old
%% record beside its new one (a kill in the commit of a replacement, see
%% put_value/3): each of its records must then have an allowed value.
check_table(Tab, Kind, Exp) ->
    {Mod, S, N} = fraghash_frag:hash(Tab),
    %% A record's fragment: its key's, or a foreigner's master key's.
    Pos = case fraghash_tab:foreign_key(Tab) of
              none -> 2;
              {_Master, P} -> P
          end,
    Rows = lists:append(
             [[{element(2, R), F, element(3, R), element(Pos, R)}
               || Frag <- [fraghash_frag:frag_name(Tab, F)],
                  R <- mnesia:dirty_match_object(Frag, mnesia:table_info(Frag, wild_pattern))]
              || F <- lists:seq(1, N)]),
    Keys = lists:usort([K || {K, _, _, _} <- Rows]),
    %% A key in two fragments; in a set, a key twice at all.
    Dups = case Kind of
               bag -> length(lists:usort([{K, F} || {K, F, _, _} <- Rows])) - length(Keys);
               _ -> length(Rows) - length(Keys)
           end,
    Misplaced = length([K || {K, F, _, P} <- Rows, Mod:key_to_frag_number(S, P) =/= F]),
    Found = lists:foldl(fun({K, _, V, _}, M) -> maps:update_with(K, fun(Vs) -> [V | Vs] end, [V], M)
                        end, #{}, Rows),
    Bad = [K || {K, {Last, Maybe}} <- maps:to_list(Exp),
                not lists:all(fun(V) -> lists:member(V, [Last | Maybe]) end,
                              maps:get(K, Found, [deleted]))]
        ++ [K || K <- maps:keys(Found), not maps:is_key(K, Exp)],
    Lost = length([K || K <- Bad, not maps:is_key(K, Found)]),
    Sizes = [mnesia:table_info(fraghash_frag:frag_name(Tab, F), size) || F <- lists:seq(1, N)],
    Size = mnesia:activity(async_dirty, fun() -> mnesia:table_info(Tab, size) end, [], mnesia_frag),
    Names = mnesia:activity(async_dirty, fun() -> mnesia:table_info(Tab, frag_names) end,
                            [], mnesia_frag),
    Orphans = [T || T <- mnesia:system_info(tables),
                    lists:prefix(atom_to_list(Tab) ++ "_frag", atom_to_list(T)),
                    not lists:member(T, Names)],
    Journal = length([T || T <- fraghash_journal:pending(), T =:= Tab]),
    %% Each fragment's index rows and index reads against its records.
    IndexBad = [F || F <- lists:seq(1, N),
                     fraghash_redb_index_tests:check(fraghash_frag:frag_name(Tab, F)) =/= ok],
    {#{n => N, records => length(Rows), checked => maps:size(Exp), duplicates => Dups,
       misplaced => Misplaced, wrong_or_lost => length(Bad), lost => Lost,
       sizes_add_up => (lists:sum(Sizes) =:= length(Rows) andalso Size =:= length(Rows)),
       frag_names_match => length(Names) =:= N, orphans => length(Orphans),
       journal_left => Journal, index_bad => length(IndexBad)},
     Bad}.

%% Makes both tables hold the last acknowledged value of every bad key (and
%% logs that as acknowledged), and puts misplaced copies right.
repair(_Dir, _Run, _Tab, _Exp, []) ->
    ok;
repair(Dir, Run, Tab, Exp, Bad) ->
    [{atomic, _} = fraghash_frag:repair(T) || T <- [Tab, control(Tab)]],
    {ok, Log} = file:open(ack_file(Dir, Tab), [append, raw, binary]),
    lists:foreach(
      fun(K) ->
              {Last, _} = maps:get(K, Exp, {deleted, []}),
              ok = mnesia:activity(transaction, fun() -> put_value(Tab, K, Last) end,
                                   [], mnesia_frag),
              ok = mnesia:sync_log(),
              ok = dets_sync([Tab, control(Tab)]),
              log_line(Log, {ack, {Run, repair}, K, Last})
      end, Bad),
    ok = file:close(Log).

%% An add that moves records in ordinary transactions takes milliseconds on
%% these tables, so a kill rarely lands inside it: each of its steps
%% lingers a little, so that kills find every one of them.
linger(Step) ->
    case atom_to_list(Step) of
        "grow_" ++ _ -> timer:sleep(rand:uniform(25) - 1);
        _ -> ok
    end.

mark(Dir, Fmt, Args) ->
    {ok, F} = file:open(filename:join(Dir, "marks.log"), [append, raw]),
    ok = file:write(F, [io_lib:format(Fmt, Args), $\n]),
    ok = file:close(F).
