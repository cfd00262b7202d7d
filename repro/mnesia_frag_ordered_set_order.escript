#!/usr/bin/env escript
%% -*- erlang -*-
%%! -noshell
%%
%% Standalone reproduction: on a fragmented ordered_set table whose
%% fragments are all on the calling node, mnesia:match_object/3 and
%% mnesia:select/3 through mnesia_frag return the records fragment by
%% fragment, not in key order: mnesia_frag appends the fragments' results
%% (it merges them in key order only for fragments read on other nodes),
%% and a transaction's own writes are merged into that unsorted list.
%% Plain OTP only: the default hash module mnesia_frag_hash, one node,
%% ram_copies.
%%
%% Run (about a second):
%%
%%     escript repro/mnesia_frag_ordered_set_order.escript
%%
%% It creates an ordered_set of 4 fragments holding keys 1..20, then, for
%% each call (match_object, select), checks the order of what it returns
%%   committed   in a transaction that has written nothing;
%%   own_write   in a transaction that has just written key 21;
%%   dirty       in an async_dirty activity;
%% and prints one line per case: the keys returned, and whether they are
%% sorted. Exit status 1 when a case returns them out of key order (the
%% problem is present), 0 otherwise.
%%
%% What to do about it: do not rely on the order of match_object or select
%% over a fragmented ordered_set; sort what they return (lists:keysort/2
%% on the key position), or read by key (mnesia:read/3). Every hash module
%% shows it, the default included.

main(_) ->
    ok = mnesia:start(),
    {atomic, ok} = mnesia:create_table(
                     os_repro,
                     [{type, ordered_set}, {attributes, [k, v]},
                      {frag_properties, [{n_fragments, 4}, {node_pool, [node()]}]}]),
    Frag = fun(F) -> mnesia:activity(transaction, F, [], mnesia_frag) end,
    Dirty = fun(F) -> mnesia:activity(async_dirty, F, [], mnesia_frag) end,
    Frag(fun() -> [mnesia:write({os_repro, K, K}) || K <- lists:seq(1, 20)] end),
    Pat = {os_repro, '_', '_'},
    Spec = [{Pat, [], ['$_']}],
    Calls = [{match_object, fun() -> mnesia:match_object(os_repro, Pat, read) end},
             {select, fun() -> mnesia:select(os_repro, Spec, read) end}],
    Results =
        [begin
             Recs = case Case of
                        dirty -> Dirty(Call);
                        _ -> Frag(fun() ->
                                          case Case of
                                              own_write -> ok = mnesia:write({os_repro, 21, 21});
                                              committed -> ok
                                          end,
                                          Call()
                                  end)
                    end,
             Keys = [K || {os_repro, K, _} <- Recs],
             Sorted = Keys =:= lists:sort(Keys),
             io:format("~-12s ~-10s sorted=~-5s keys=~w~n", [Name, Case, Sorted, Keys]),
             Frag(fun() -> mnesia:delete({os_repro, 21}) end),
             Sorted
         end || {Name, Call} <- Calls, Case <- [committed, own_write, dirty]],
    stopped = mnesia:stop(),
    case lists:all(fun(S) -> S end, Results) of
        true -> io:format("every case in key order: the problem is not present~n"), halt(0);
        false -> io:format("out of key order: the problem is present~n"), halt(1)
    end.
