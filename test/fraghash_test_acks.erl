%% @doc Acknowledgements from writers on a node that a test kills -9.
%%
%% A writer on the doomed node tells the test what it has done with
%% {@link confirmed/2} and goes on only once a collector in the test's VM
%% has recorded it. A message merely sent could die in the killed node's
%% distribution buffer while the writer went on, and the node would then
%% rightly hold more than the test knew of (a later value, a delete that an
%% announcement lost on the way said was coming). The collector keeps
%% confirming while the kill lands, so the writers die writing, not
%% waiting.
-module(fraghash_test_acks).

-export([collector/3, await/1, recorded/1, confirmed/2]).

%% @doc Starts a collector, linked to the caller, that records each
%% acknowledgement `What' into `Acked' with `Record(What, Acked)' and
%% confirms it; once `N' came, {@link await/1} returns.
-spec collector(Acked, pos_integer(), fun((term(), Acked) -> Acked)) -> pid()
              when Acked :: term().
collector(Acked, N, Record) ->
    Parent = self(),
    spawn_link(fun() -> collect(Acked, N, Parent, Record) end).

%% @doc Waits until `Collector' has recorded its `N' acknowledgements; a
%% minute at most.
-spec await(pid()) -> ok.
await(Collector) ->
    receive
        {reached, Collector} -> ok
    after 60000 ->
            error(no_acknowledgements_for_a_minute)
    end.

%% @doc Stops `Collector' and returns what it recorded.
-spec recorded(pid()) -> term().
recorded(Collector) ->
    Collector ! {stop, self()},
    receive {acked, Collector, Acked} -> Acked end.

%% @doc Called by a writer: tells collector `To' of `What' and waits for
%% its confirmation.
-spec confirmed(pid(), term()) -> ok.
confirmed(To, What) ->
    Ref = make_ref(),
    To ! {acked, What, {self(), Ref}},
    receive Ref -> ok end.

%% Recorded, then confirmed to the writer.
collect(Acked, N, Parent, Record) ->
    receive
        {acked, What, {Writer, Ref}} ->
            N =:= 1 andalso (Parent ! {reached, self()}),
            Recorded = Record(What, Acked),
            Writer ! Ref,
            collect(Recorded, N - 1, Parent, Record);
        {stop, Parent} ->
            Parent ! {acked, self(), Acked}
    end.
