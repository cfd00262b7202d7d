%% @doc The node's redb database under the `redb_copies' Mnesia backend
%% ({@link fraghash_redb_copies}): one process that opens `fraghash.redb'
%% in Mnesia's directory, owns the handle, and applies every write.
%%
%% == Who does what ==
%% Reads do not pass through this process: {@link handle/0} gives the open
%% handle (kept in a `persistent_term'), and the caller reads with
%% {@link fraghash_redb_nif} on a dirty I/O scheduler, concurrently with
%% other readers and with the writer.
%%
%% Writes go one of two ways. With `redb_durability' `logged' (the
%% default), {@link write/1} appends the caller's ops to the log and the
%% memtable from the calling process, on its own scheduler while that
%% cannot wait ({@link fraghash_redb_nif:write_logged/2}), and tells this
%% process only when a flush has to be armed or made: the hop through this
%% process and a dirty scheduler cost each write 20 to 30 µs, most of it
%% waiting for schedulers, about half of what a dirty write costs in
%% all. With `immediate', and while this process holds such writes
%% off (a counter's read and write, {@link update_counter/5}), the ops are
%% sent here and grouped: while one group is being committed, later
%% callers queue up in the mailbox; the next group takes all of them (up
%% to {@link max_group/0} callers) into one redb transaction, one sync,
%% and answers each. If a group fails as a whole (one caller named a table
%% deleted meanwhile, say), each caller's ops are retried alone, so that
%% one bad write fails only its caller.
%%
%% == Durability ==
%% How a group is committed is the application environment's
%% `redb_durability':
%% <ul>
%% <li>`logged' (the default): appended to the database's log file
%% (`fraghash.redb.log', one write to the operating system, no sync) and
%% applied to the database's memtable, where reads see it. A write that
%% returned survives the death of the VM (kill -9 included): the next open
%% replays the log. A flush commits the memtable to redb with a sync, in a
%% process of its own while writes go on, as soon as the memtable passes
%% `redb_memtable_bytes' (default 1 MiB) and otherwise `redb_sync_ms'
%% (default 1000) milliseconds after the first write since the last flush
%% began; the writes since the last flush can be lost to a crash of the
%% operating system or a power cut. {@link fraghash_redb_copies:sync/0}
%% syncs at once.</li>
%% <li>`immediate': each group is synced before its callers are answered:
%% a write that returned survives a power cut too. One caller alone pays
%% one sync per call; N concurrent callers share it (group commit).</li>
%% </ul>
%%
%% {@link update_counter/4} reads and writes in this process, so that no
%% other write falls between its read and its write.
%%
%% == Life ==
%% Started under Mnesia's `mnesia_ext_sup' ({@link ensure_started/0}), so
%% it stops with Mnesia; it traps exits and closes the database on the way
%% out, which syncs every committed write (empties the log) and
%% releases the file for the next open. A file that cannot be opened
%% (corrupt, not a database of this library, locked by another OS process)
%% makes {@link ensure_started/0} return `{error, {fraghash_redb, Kind,
%% Path, Message}}': one line, and the VM goes on.
-module(fraghash_redb_db).
-behaviour(gen_server).

-export([ensure_started/0, stop/0, handle/0, is_open/0, path/0, write/1, write_or_raise/1,
         write_bulk/1, drop_table/1,
         update_counter/4,
         update_counter/5,
         repair_log/1, has_room/0,
         add_aliases/1, remove_aliases/1, max_group/0, stats/0, check_file/1,
         default_cache_bytes/0]).
-export([start_link/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-define(HANDLE_KEY, {?MODULE, handle}).
%% The handle again while callers write logged batches themselves, else
%% absent (write/1).
-define(DIRECT_KEY, {?MODULE, direct}).
%% How many times 10 ms a write waits for this process's restart.
-define(RESTART_WAITS, 100).
-define(DB_FILE, "fraghash.redb").
%% Callers grouped into one transaction at most; bounds the latency a
%% caller waiting in a full group adds to the others.
-define(MAX_GROUP, 512).
%% The bounds of redb's page cache by default (default_cache_bytes/0).
-define(MIN_CACHE, 64 bsl 20).
-define(MAX_CACHE, 1 bsl 30).
%% The memtable's size past which it is flushed at once (else within
%% redb_sync_ms).
-define(MEMTABLE_BYTES, 1 bsl 20).
%% The room each log file keeps allocated past its end, so that a full
%% disc is seen while the writes under way still fit.
-define(LOG_RESERVE_BYTES, 4 bsl 20).

%% calls: write calls answered; commits: the database writes they took;
%% durability: how a group commits (logged | immediate); sync_timer: the
%% timer of the flush due for logged writes since the last one, if any;
%% dirty: whether a write came since the last flush began; flusher: the
%% process flushing the memtable (or opening the database again), if one
%% is; reopen: an I/O error left redb refusing everything, so the next
%% flush opens the database again instead.
-record(st, {db, path, aliases = [], calls = 0, commits = 0, durability = logged,
             sync_timer = none, dirty = false, flusher = none, reopen = false}).

%%% API

%% @doc Starts the process (opening the database) unless it runs already.
-spec ensure_started() -> ok | {error, term()}.
ensure_started() ->
    case whereis(?MODULE) of
        Pid when is_pid(Pid) ->
            ok;
        undefined ->
            Path = path(),
            Opts = [{restart, transient}, {shutdown, 60000}],
            case mnesia_ext_sup:start_proc(?MODULE, ?MODULE, start_link, [Path], Opts) of
                {ok, _} -> ok;
                {ok, _, _} -> ok;
                {error, {already_started, _}} -> ok;
                {error, {{fraghash_redb, _, _, _} = Why, _}} -> {error, advise(Why)};
                {error, {fraghash_redb, _, _, _} = Why} -> {error, advise(Why)};
                {error, Other} -> {error, {fraghash_redb, start_failed, Path, Other}}
            end
    end.

%% @doc Whether the database file `Path' opens: `ok', or the reason it
%% does not, as {@link ensure_started/0} gives it. For a node whose Mnesia
%% does not start (Mnesia logs the reason but returns only `{error,
%% {normal, _}}'); run it while that Mnesia is stopped (an open database
%% is `locked').
-spec check_file(file:filename()) -> ok | {error, {fraghash_redb, atom(), file:filename(), binary()}}.
check_file(Path) ->
    case fraghash_redb_nif:open(unicode:characters_to_binary(Path), #{create => false}) of
        {ok, Db} -> fraghash_redb_nif:close(Db);
        {error, {Kind, Msg}} -> {error, {fraghash_redb, Kind, Path, Msg}}
    end.

%% A damaged or missing log: the call that opens the database anyway.
advise({fraghash_redb, Kind, Path, Msg}) when Kind =:= log_damaged; Kind =:= log_missing ->
    {fraghash_redb, Kind, Path,
     <<Msg/binary, " (with Mnesia stopped on this node: fraghash_redb_copies:repair_log())">>};
advise(Why) ->
    Why.

%% @doc Opens the database in `Path' with its log repaired (see
%% {@link fraghash_redb_copies:repair_log/0}), and closes it: `{ok,
%% Dropped}', one sentence for each part of the log dropped.
-spec repair_log(file:filename()) -> {ok, [binary()]} | {error, term()}.
repair_log(Path) ->
    case fraghash_redb_nif:open(unicode:characters_to_binary(Path),
                                #{create => false, repair_log => true}) of
        {ok, Db} ->
            Dropped = fraghash_redb_nif:log_repairs(Db),
            case fraghash_redb_nif:close(Db) of
                ok -> {ok, Dropped};
                {error, {Kind, Msg}} -> {error, {fraghash_redb, Kind, Path, Msg}}
            end;
        {error, {Kind, Msg}} ->
            {error, {fraghash_redb, Kind, Path, Msg}}
    end.

%% @doc Stops the process and closes the database (no-op if not running).
-spec stop() -> ok.
stop() ->
    _ = (catch mnesia_ext_sup:stop_proc(?MODULE)),
    %% Gone from the supervisor's children too: a later ensure_started/0
    %% starts afresh rather than restarting an old child spec.
    _ = (catch supervisor:delete_child(mnesia_ext_sup, ?MODULE)),
    ok.

%% @doc The path of the node's database file: `fraghash.redb' in Mnesia's
%% directory.
-spec path() -> file:filename().
path() ->
    filename:join(mnesia_monitor:get_env(dir), ?DB_FILE).

%% @doc Whether the database is open on this node.
-spec is_open() -> boolean().
is_open() ->
    persistent_term:get(?HANDLE_KEY, undefined) =/= undefined.

%% @doc The open database handle; raises `{fraghash_redb, closed, _}' when
%% no database is open on this node.
-spec handle() -> fraghash_redb_nif:db().
handle() ->
    case persistent_term:get(?HANDLE_KEY, undefined) of
        undefined -> erlang:error({fraghash_redb, closed, <<"the redb database is not open">>});
        Db -> Db
    end.

%% @doc Commits `Ops' (see {@link fraghash_redb_nif:write/3}) as
%% `redb_durability' says (see Durability above): `ok' means kept if the VM
%% dies, and with `immediate' synced too.
-spec write([fraghash_redb_nif:op()]) -> ok | fraghash_redb_nif:error().
write([]) ->
    ok;
write(Ops) ->
    case persistent_term:get(?DIRECT_KEY, none) of
        none ->
            call_write(Ops);
        Db ->
            case fraghash_redb_nif:write_logged(Db, Ops) of
                dirty -> written_by_caller(fraghash_redb_nif:write_logged_dirty(Db, Ops), Ops);
                Answer -> written_by_caller(Answer, Ops)
            end
    end.

written_by_caller(ok, _Ops) ->
    ok;
written_by_caller(notify, _Ops) ->
    gen_server:cast(?MODULE, written);
written_by_caller(busy, Ops) ->
    call_write(Ops);
written_by_caller({error, {closed, _}}, Ops) ->
    %% This process ended, and the database with it: its restart opens it
    %% again (or, Mnesia stopping, nothing does and the call fails).
    call_restarted(Ops, ?RESTART_WAITS);
written_by_caller({error, _} = Error, _Ops) ->
    Error.

call_restarted(Ops, Waits) ->
    case whereis(?MODULE) of
        undefined when Waits > 0 ->
            timer:sleep(10),
            call_restarted(Ops, Waits - 1);
        _ ->
            call_write(Ops)
    end.

%% Writes `Ops' through this process (grouped with other callers').
call_write(Ops) ->
    gen_server:call(?MODULE, {write, Ops}, infinity).

%% @doc As {@link write/1}, for a write outside a transaction's commit
%% (loading a copy, the table of index states): a failure is logged as an
%% error and raised as `{fraghash_redb, Kind, Message}' (Mnesia's loader
%% reports it).
-spec write_or_raise([fraghash_redb_nif:op()]) -> ok.
write_or_raise(Ops) ->
    raised(write(Ops)).

%% @doc Writes `Ops' from the calling process as a logged batch that gives
%% way to the node's other writes ({@link fraghash_redb_nif:write_bulk/2}),
%% for loading a copy: written through this module's process, its chunks
%% would queue the transactions' commits behind them. A failure is logged
%% and raised as by {@link write_or_raise/1}. The logged writes are synced
%% within `redb_sync_ms', as any.
-spec write_bulk([fraghash_redb_nif:op()]) -> ok.
write_bulk(Ops) ->
    ok = raised(fraghash_redb_nif:write_bulk(handle(), Ops)),
    gen_server:cast(?MODULE, written).

%% @doc Deletes redb table `Name' and its rows, if it is there: one
%% synced commit when it is, none when it is not (a read says so first).
-spec drop_table(binary()) -> ok.
drop_table(Name) ->
    Db = handle(),
    case fraghash_redb_nif:size(Db, Name) of
        {error, {no_such_table, _}} ->
            ok;
        _ ->
            case fraghash_redb_nif:delete_table(Db, Name) of
                {error, {no_such_table, _}} -> ok;
                Other -> fraghash_redb_nif:check(Other)
            end
    end.

raised(ok) ->
    ok;
raised({error, {Kind, Msg}}) ->
    logger:error("fraghash_redb: write to ~ts failed: ~p: ~ts", [path(), Kind, Msg]),
    erlang:error({fraghash_redb, Kind, Msg}).

%% @doc Whether the node's database has room for more writes (`true'
%% when it is not open: the write then reports that). When it has none,
%% the writer is asked to flush, which tries for room again.
-spec has_room() -> boolean().
has_room() ->
    case persistent_term:get(?HANDLE_KEY, undefined) of
        undefined ->
            true;
        Db ->
            fraghash_redb_nif:has_room(Db) orelse
                begin
                    gen_server:cast(?MODULE, room),
                    false
                end
    end.

%% @doc Adds `Incr' to the integer in position 3 of the record under
%% `KeyBin' in table `Name' and commits as {@link write/1} does; returns
%% the new value.
%% `{error, badarg}' when there is no such record or it holds no integer
%% there (Mnesia then writes the record itself).
-spec update_counter(binary(), binary(), integer(), pos_integer()) ->
          {ok, integer()} | {error, term()}.
update_counter(Name, KeyBin, Incr, Pos) ->
    update_counter(Name, KeyBin, Incr, Pos, fun(_Old, _New) -> [] end).

%% @doc As {@link update_counter/4}, and writes `Also(Old, New)' (the
%% record before and after) in the same redb write: the rows of an index
%% on the counter.
-spec update_counter(binary(), binary(), integer(), pos_integer(),
                     fun((tuple(), tuple()) -> [fraghash_redb_nif:op()])) ->
          {ok, integer()} | {error, term()}.
update_counter(Name, KeyBin, Incr, Pos, Also) ->
    gen_server:call(?MODULE, {update_counter, Name, KeyBin, Incr, Pos, Also}, infinity).

%% @doc Records `Aliases' as users of the database.
add_aliases(Aliases) ->
    gen_server:call(?MODULE, {add_aliases, Aliases}, infinity).

%% @doc Forgets `Aliases'; closes the database when none is left.
remove_aliases(Aliases) ->
    case whereis(?MODULE) of
        undefined -> ok;
        _ ->
            case gen_server:call(?MODULE, {remove_aliases, Aliases}, infinity) of
                [] -> stop();
                _ -> ok
            end
    end.

%% @doc Write calls this process answered and the groups they were written
%% in since the database was opened (each group one append to the log, or
%% with `immediate' one synced commit): `commits' below `calls' means
%% callers shared them (group commit). Logged writes its callers made
%% themselves (see Who does what) are not counted.
-spec stats() -> #{calls := non_neg_integer(), commits := non_neg_integer()}.
stats() ->
    gen_server:call(?MODULE, stats, infinity).

%% @doc The most callers one group commit takes.
max_group() -> ?MAX_GROUP.

%% @doc redb's page cache when `redb_cache_bytes' is not set: an eighth of
%% the machine's memory (`MemTotal' in `/proc/meminfo'), at least 64 MiB
%% (where the machine's memory cannot be read, too) and at most 1 GiB,
%% redb's own default. It is a ceiling, not a reservation: the node's
%% resident memory grows with the pages read, up to it.
-spec default_cache_bytes() -> pos_integer().
default_cache_bytes() ->
    Eighth = case file:read_file("/proc/meminfo") of
                 {ok, Info} ->
                     case re:run(Info, "MemTotal:\\s+(\\d+) kB",
                                 [{capture, all_but_first, list}]) of
                         {match, [Kb]} -> list_to_integer(Kb) * 1024 div 8;
                         nomatch -> 0
                     end;
                 {error, _} ->
                     0
             end,
    min(max(Eighth, ?MIN_CACHE), ?MAX_CACHE).

%%% gen_server

%% @private
start_link(Path) ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, Path, []).

%% @private
init(Path) ->
    process_flag(trap_exit, true),
    ok = filelib:ensure_dir(Path),
    %% redb's page cache: reads stay at memory speed while the file fits.
    Opts = #{cache_bytes => application:get_env(fraghash, redb_cache_bytes,
                                                default_cache_bytes()),
             memtable_bytes => application:get_env(fraghash, redb_memtable_bytes,
                                                   ?MEMTABLE_BYTES),
             log_reserve_bytes => application:get_env(fraghash, redb_log_reserve_bytes,
                                                      ?LOG_RESERVE_BYTES),
             %% Key reads on the caller's scheduler while they come from
             %% memory (fraghash_redb_nif:read/3).
             normal_reads => application:get_env(fraghash, redb_normal_reads, true)},
    case durability() of
        {error, Text} -> {stop, {fraghash_redb, bad_config, Path, Text}};
        Durability -> open(Path, Opts, Durability)
    end.

open(Path, Opts, Durability) ->
    case fraghash_redb_nif:open(unicode:characters_to_binary(Path), Opts) of
        {ok, Db} ->
            %% Tables whose log replay is under way (see
            %% fraghash_redb_copies:load_table/4): owned here, so it lives
            %% as long as the database is open.
            _ = ets:new(fraghash_redb_replay, [named_table, public, set]),
            %% The indexes kept with their records (fraghash_redb_index),
            %% as long-lived.
            _ = ets:new(fraghash_redb_index, [named_table, public, ordered_set]),
            persistent_term:put(?HANDLE_KEY, Db),
            _ = Durability =:= logged andalso persistent_term:put(?DIRECT_KEY, Db),
            {ok, #st{db = Db, path = Path, durability = Durability}};
        {error, {Kind, Msg}} ->
            {stop, {fraghash_redb, Kind, Path, Msg}}
    end.

%% @private
handle_call({write, Ops}, From, #st{db = Db, calls = C, commits = K, durability = D} = S) ->
    Group = [{From, Ops} | drain(?MAX_GROUP - 1)],
    Commits = commit_group(Db, D, Group),
    {noreply, written(S#st{calls = C + length(Group), commits = K + Commits})};
handle_call(stats, _From, #st{calls = C, commits = K} = S) ->
    {reply, #{calls => C, commits => K}, S};
handle_call({update_counter, Name, KeyBin, Incr, Pos, Also}, _From, #st{db = Db, durability = D} = S) ->
    %% No write of a caller's own between the counter's read and write.
    ok = fraghash_redb_nif:hold_direct_writes(Db, true),
    try
        {reply, counter(Db, D, Name, KeyBin, Incr, Pos, Also), written(S)}
    after
        ok = fraghash_redb_nif:hold_direct_writes(Db, false)
    end;
handle_call({add_aliases, As}, _From, #st{aliases = Old} = S) ->
    New = lists:usort(Old ++ As),
    {reply, New, S#st{aliases = New}};
handle_call({remove_aliases, As}, _From, #st{aliases = Old} = S) ->
    New = Old -- As,
    {reply, New, S#st{aliases = New}}.

%% @private
handle_cast(room, S) ->
    %% A flush tries for room again; one at a time.
    {noreply, flush(S)};
handle_cast(written, S) ->
    %% A write its caller made (write/1, write_bulk/1): synced in time.
    {noreply, written(S)};
handle_cast(_Msg, S) ->
    {noreply, S}.

%% @private
handle_info(sync, #st{dirty = Dirty} = S0) ->
    S = S0#st{sync_timer = none},
    {noreply, case Dirty of
                  true -> flush(S);
                  false -> S
              end};
handle_info({'DOWN', _, process, Pid, Result}, #st{flusher = Pid, path = Path, db = Db} = S0) ->
    S = S0#st{flusher = none},
    Again = case Result of
                {flushed, Done} when is_boolean(Done) ->
                    S;
                {reopened, ok} ->
                    logger:notice("redb_copies: ~ts opened again after an I/O error", [Path]),
                    S#st{dirty = true};
                %% An I/O error (a full disc) left redb refusing everything
                %% until the database is opened again: the next flush does
                %% that (the log replays what the memtable held).
                {flushed, {error, {poisoned, _}}} ->
                    S#st{dirty = true, reopen = true};
                {reopened, Why} ->
                    logger:error("redb_copies: could not open ~ts again: ~0tp", [Path, Why]),
                    _ = fraghash_redb_nif:close(Db),
                    S;
                %% The memtable stays as it was (frozen, read as before) and
                %% its writes in the log, which the next open replays; the
                %% next flush commits it again.
                Why ->
                    logger:error("redb_copies: could not flush ~ts: ~0tp", [Path, Why]),
                    S#st{dirty = true}
            end,
    {noreply, sync_later(Again)};
handle_info(_Msg, S) ->
    {noreply, S}.

%% @private
terminate(_Reason, #st{db = Db}) ->
    persistent_term:erase(?DIRECT_KEY),
    persistent_term:erase(?HANDLE_KEY),
    _ = fraghash_redb_nif:close(Db),
    ok.

%%% Group commit

%% How groups commit: the application environment's `redb_durability'.
durability() ->
    case application:get_env(fraghash, redb_durability, logged) of
        D when D =:= logged; D =:= immediate ->
            D;
        Other ->
            {error, unicode:characters_to_binary(
                      io_lib:format("the fraghash application's redb_durability is ~0tp: "
                                    "set it to logged or immediate", [Other]))}
    end.

%% After a write: the memtable is flushed at once when it has grown past
%% its size, and within redb_sync_ms otherwise.
written(#st{db = Db} = S0) ->
    S = sync_later(S0#st{dirty = true}),
    case fraghash_redb_nif:wants_flush(Db) of
        true -> flush(S);
        false -> S
    end.

%% Arms the flush of logged writes, unless one is due already.
sync_later(#st{durability = logged, sync_timer = none, dirty = true} = S) ->
    Ms = application:get_env(fraghash, redb_sync_ms, 1000),
    S#st{sync_timer = erlang:send_after(Ms, self(), sync)};
sync_later(S) ->
    S.

%% Flushes the memtable in a process of its own (the NIF runs on a dirty
%% I/O scheduler while writes go on here), unless one is flushing already;
%% its end is the 'DOWN' message above.
flush(#st{flusher = none, db = Db, reopen = true} = S) ->
    {Pid, _} = spawn_monitor(fun() -> exit({reopened, fraghash_redb_nif:reopen(Db)}) end),
    S#st{flusher = Pid, reopen = false};
flush(#st{flusher = none, db = Db} = S) ->
    {Pid, _} = spawn_monitor(fun() -> exit({flushed, fraghash_redb_nif:flush(Db)}) end),
    S#st{flusher = Pid, dirty = false};
flush(S) ->
    S.

%% Every write call already queued, oldest first, at most N.
drain(0) ->
    [];
drain(N) ->
    receive
        {'$gen_call', From, {write, Ops}} -> [{From, Ops} | drain(N - 1)]
    after 0 -> []
    end.

%% Commits the group, answers each caller; returns the transactions taken.
commit_group(Db, D, [{From, Ops}]) ->
    gen_server:reply(From, fraghash_redb_nif:write(Db, Ops, D)),
    1;
commit_group(Db, D, Group) ->
    case fraghash_redb_nif:write(Db, lists:append([Ops || {_, Ops} <- Group]), D) of
        ok ->
            lists:foreach(fun({From, _}) -> gen_server:reply(From, ok) end, Group),
            1;
        {error, _} ->
            %% Nothing of the group was written (one transaction): each
            %% caller's ops alone, so that only the bad ones fail.
            1 + lists:sum([commit_group(Db, D, [One]) || One <- Group])
    end.

counter(Db, D, Name, KeyBin, Incr, Pos, Also) ->
    case fraghash_redb_nif:get(Db, Name, KeyBin) of
        {ok, Bin} ->
            Rec = binary_to_term(Bin),
            case tuple_size(Rec) >= Pos andalso element(Pos, Rec) of
                Old when is_integer(Old) ->
                    New = Old + Incr,
                    NewRec = setelement(Pos, Rec, New),
                    Put = {put, Name, KeyBin, term_to_binary(NewRec)},
                    case fraghash_redb_nif:write(Db, [Put | Also(Rec, NewRec)], D) of
                        ok -> {ok, New};
                        {error, _} = E -> E
                    end;
                _ ->
                    {error, badarg}
            end;
        not_found ->
            {error, badarg};
        {error, _} = E ->
            E
    end.
