%% @doc The tables one growth operation changes together, and where their
%% records go. Mnesia grows and shrinks a fragmented table together with
%% the tables created with `{foreign_key, {Tab, Attr}}' on it (its
%% foreigners), in one schema transaction, so that each foreigner record
%% stays in the fragment number of its master's record for the key held in
%% its `Attr' field. The growth path does the same: an operation on `Tab'
%% changes each table of its group (`Tab' first, then its foreigners), and
%% all of their states switch in one schema change.
%%
%% Each table of the group is a part: its name, hash module, the record
%% field its placement reads (2, the key, for `Tab'; `Attr''s position for
%% a foreigner) and its hash state. A record's fragment under a state is
%% {@link place/2}'s; records are named by `{Fragment, Key}' items, since a
%% foreigner's key alone does not say where its record is.
%%
%% Limits: a `bag' foreign-key table is refused (records of one key may sit
%% in several fragments, which the copies by key in `fraghash_grow_copy'
%% would merge); a foreigner is grown through its master.
-module(fraghash_grow_group).

-export([parts/1, place/2]).

-export_type([part/0, item/0]).

-type part() :: #{tab := atom(), mod := module(), pos := pos_integer(), from := term(),
                  n := pos_integer(), atom() => term()}.
%% A record of fragment `Frag' under key `Key': `{Frag, Key}'.
-type item() :: {atom(), term()}.

%% @doc The group of `Tab' (which must be a fragmented table that is not a
%% foreigner): a part per table, `Tab''s first, each with its hash state
%% as this node holds it; or a refusal with a one-line reason.
-spec parts(atom()) -> {ok, [part()]} | {aborted, term()}.
parts(Tab) ->
    case fraghash_tab:foreign_key(Tab) of
        {Master, _Pos} ->
            refuse(grow_the_master,
                   "~s is a foreign-key table of ~s and grows with it: grow ~s instead",
                   [Tab, Master, Master]);
        none ->
            Tabs = [Tab | lists:sort(fraghash_grow_schema:foreigners(Tab))],
            Bags = [T || T <- tl(Tabs), mnesia:table_info(T, type) =:= bag],
            case Bags of
                [] ->
                    {ok, [part(T) || T <- Tabs]};
                [Bag | _] ->
                    refuse(bag_foreign_key_table,
                           "~s is a bag table with a foreign key on ~s, which the safe path "
                           "does not move: make it a set, or grow ~s with ram_copies",
                           [Bag, Tab, Tab])
            end
    end.

part(T) ->
    {Mod, State, N} = fraghash_tab:hash(T),
    Pos = case fraghash_tab:foreign_key(T) of
              none -> 2;
              {_Master, P} -> P
          end,
    #{tab => T, mod => Mod, pos => Pos, from => State, n => N}.

%% @doc Where each record of part `Part' goes under hash state `State': a
%% function from a record to its fragment's name.
-spec place(part(), term()) -> fun((tuple()) -> atom()).
place(#{tab := T, mod := Mod, pos := Pos}, State) ->
    fun(Rec) -> fraghash_tab:frag_name(T, Mod:key_to_frag_number(State, element(Pos, Rec))) end.

refuse(Reason, Format, Args) ->
    {aborted, fraghash_error:new(Reason, Format, Args)}.
