%% Lists every block of a dets (format 9) file that holds a key, marked
%% ACTIVE or FREE, without opening the file with dets (which would repair
%% it): what dets's repair will keep (ACTIVE) and what it will skip
%% (FREE). The header's "closed properly" flag says whether a repair will
%% run at all. For the files a kill -9 left, e.g. the copies the torture
%% test keeps with FRAGHASH_TORTURE_KEEP_FILES=1.
%%
%% Run: repro/dets-kill/run.sh scan File.DAT Key (an integer key, or any
%% Erlang term as text, e.g. '{a,1}')
-module(dets_scan).
-export([main/1]).

-define(ACTIVE, 16#12345678).
-define(FREE, 16#3ABCDEF).
%% Where the objects start: the header (312 bytes) and the 256 pointers to
%% segment array parts (dets_v9's ?BASE).
-define(BASE, 1336).
%% Collections and blocks start at multiples of 16 (dets_v9's ?BUMP).
-define(BUMP, 16).

main([File, KeyText]) ->
    Key = parse(KeyText),
    {ok, Bin} = file:read_file(File),
    <<_:64, Closed:32, _/binary>> = Bin,
    io:format("~s: ~b bytes, ~s~n",
              [File, byte_size(Bin),
               case Closed of 1 -> "closed properly (no repair)";
                   _ -> "not properly closed (repaired at the next open)" end]),
    scan(Bin, ?BASE, Key),
    halt(0).

parse(Text) ->
    {ok, Tokens, _} = erl_scan:string(Text ++ "."),
    {ok, Term} = erl_parse:parse_term(Tokens),
    Term.

scan(Bin, Pos, _Key) when Pos + 8 > byte_size(Bin) ->
    ok;
scan(Bin, Pos, Key) ->
    <<_:Pos/binary, Size:32, Status:32, _/binary>> = Bin,
    case (Status =:= ?ACTIVE orelse Status =:= ?FREE)
        andalso Size > 8 andalso Pos + Size =< byte_size(Bin) of
        true ->
            Len = Size - 8,
            <<_:(Pos + 8)/binary, Coll:Len/binary, _/binary>> = Bin,
            [io:format("  at ~b, ~s, ~b bytes: ~p~n", [Pos, status(Status), Size, T])
             || T <- objects(Coll), is_tuple(T), tuple_size(T) >= 2, element(2, T) =:= Key];
        false ->
            ok
    end,
    scan(Bin, Pos + ?BUMP, Key).

status(?ACTIVE) -> "ACTIVE";
status(?FREE) -> "FREE".

%% The objects of a `set' collection: each a 4-byte size (itself
%% included) and the term's external format.
objects(<<Size:32, Rest/binary>>) when Size >= 4, Size - 4 =< byte_size(Rest) ->
    Len = Size - 4,
    <<T:Len/binary, More/binary>> = Rest,
    case catch binary_to_term(T) of
        {'EXIT', _} -> [];
        Term -> [Term | objects(More)]
    end;
objects(_) ->
    [].
