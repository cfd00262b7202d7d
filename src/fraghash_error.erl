%% @doc The one form of the errors fraghash answers with: `{fraghash,
%% Reason, Text}', where `Reason' is an atom a program can match and `Text'
%% a flat string that says what happened and what to do. Callers wrap it as
%% their answer needs: `{aborted, E}' from an operation, `{error, E}' from a
%% check, `mnesia:abort(E)' inside a transaction, `error(E)' where the
%% caller's own caller turns it into an answer. Every such error is made
%% here, so that its shape cannot drift. Calls nothing of fraghash's:
%% every module may use it.
-module(fraghash_error).

-export([new/3]).

-export_type([error/0]).

-type error() :: {fraghash, atom(), string()}.

%% @doc `{fraghash, Reason, Text}', `Text' formatted from `Format' and
%% `Args' as `io_lib:format/2' does, flattened.
-spec new(atom(), io:format(), [term()]) -> error().
new(Reason, Format, Args) when is_atom(Reason) ->
    {fraghash, Reason, lists:flatten(io_lib:format(Format, Args))}.
