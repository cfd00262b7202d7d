%% Shows the order in which dets writes one change to disc: a table of 600
%% records is synced, then one record grows (its slot's collection no
%% longer fits its block and moves), and every file write of the dets
%% server process is traced. The output names each write: the header's
%% "not closed" mark, the slot pointer, the old collection's status set to
%% FREE, the new collection (status ACTIVE), then the sync's header.
%% Between the FREE mark and the new collection, the slot's records are on
%% disc only in a block marked FREE, which dets's repair skips.
%%
%% Run: repro/dets-kill/run.sh order
-module(dets_order).
-export([main/0]).

-define(ACTIVE, 16#12345678).
-define(FREE, 16#3ABCDEF).

main() ->
    File = filename:join(os:getenv("TMPDIR", "/tmp"), "dets_order.DAT"),
    _ = file:delete(File),
    {ok, t} = dets:open_file(t, [{file, File}]),
    [ok = dets:insert(t, {K, lists:duplicate(3, K)}) || K <- lists:seq(1, 600)],
    ok = dets:sync(t),
    Pid = dets:info(t, pid),
    erlang:trace(Pid, true, [call, {tracer, self()}]),
    erlang:trace_pattern({prim_file, pwrite_plain, 3}, true, [local]),
    ok = dets:insert(t, {5, lists:duplicate(40, 5)}),
    ok = dets:sync(t),
    timer:sleep(200),
    Writes = [{Off, iolist_to_binary(IoV)}
              || {trace, _, call, {prim_file, pwrite_plain, [_, Off, IoV]}} <- flush()],
    [io:format("write at ~6b, ~4b bytes: ~s~n", [Off, byte_size(B), name(Off, B)])
     || {Off, B} <- Writes],
    ok = dets:close(t),
    halt(0).

name(8, <<0:32>>) -> "header: not closed properly";
name(0, _) -> "header (sync): closed properly, free lists";
name(_, <<?FREE:32>>) -> "old collection's status := FREE";
name(_, <<_:32, ?ACTIVE:32, _/binary>>) -> "new collection (ACTIVE)";
name(_, <<Size:32, Pos:32>>) -> io_lib:format("slot pointer := {size ~b, at ~b}", [Size, Pos]);
name(_, _) -> "other".

flush() ->
    receive M -> [M | flush()] after 0 -> [] end.
