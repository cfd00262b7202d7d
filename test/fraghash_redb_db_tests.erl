%% @doc The node's redb database settings that need no database: the
%% default size of redb's page cache.
-module(fraghash_redb_db_tests).

-include_lib("eunit/include/eunit.hrl").

%% An eighth of the machine's memory, read here line by line from
%% /proc/meminfo, between 64 MiB and 1 GiB; 64 MiB where it cannot be read.
default_cache_test() ->
    Expected = case file:read_file("/proc/meminfo") of
                   {ok, Info} ->
                       [Total] = [list_to_integer(string:trim(string:trim(Rest), trailing, " kB"))
                                  || Line <- string:split(binary_to_list(Info), "\n", all),
                                     ["MemTotal", Rest] <- [string:split(Line, ":")]],
                       min(max(Total * 1024 div 8, 64 bsl 20), 1 bsl 30);
                   {error, _} ->
                       64 bsl 20
               end,
    ?assertEqual(Expected, fraghash_redb_db:default_cache_bytes()).
