%% @doc The documents name only what exists: every `Module:Function/Arity'
%% and `Module:Function(' call in README.md and docs/*.md names an exported
%% function of a module that loads (this application's, Mnesia's, OTP's);
%% every repository path in a code span, a code block or a link is a file
%% or directory of the checkout, and every link's `#anchor' a heading of its
%% page; every `fraghash ...' command names a subcommand of the CLI (read
%% from its clap definitions in crates/fraghash-cli/src), every `-p CRATE' a
%% crate of the workspace, `--test NAME' a test of it, and `--module=NAME' a
%% test module. Needs no Mnesia. Reads the pages under the current
%% directory, the checkout's root when rebar3 runs the tests.
-module(fraghash_docs_tests).

-include_lib("eunit/include/eunit.hrl").

%% The top directories of the checkout that a repository path starts with.
-define(TOP_DIRS, "crates|src|test|scripts|docs|bench|repro|examples|fuzz|include").

docs_name_what_exists_test_() ->
    Pages = pages(),
    [?_assertNotEqual([], Pages),
     {"functions named in the docs are exported", ?_assertEqual([], bad_functions(Pages))},
     {"paths and links in the docs exist", ?_assertEqual([], bad_paths(Pages))},
     {"commands in the docs exist", ?_assertEqual([], bad_commands(Pages))},
     {"the checks can fail", fun checks_can_fail/0}].

%% Each check finds a reference that names nothing.
checks_can_fail() ->
    Page = [{"docs/fake.md", 1, text, "see `fraghash_frag:no_such/3` and lists:nosuch(x)"},
            {"docs/fake.md", 2, text, "`scripts/no-such.sh --module=no_such_tests` and [x](no-such.md)"},
            {"docs/fake.md", 3, text, "`fraghash bench` and `fraghash table frobnicate DIR`"},
            {"docs/fake.md", 4, text, "`cargo test -p no-such-crate` and [y](mnesia.md#no-such-heading)"}],
    Pages = [{"docs/fake.md", Page}],
    ?assertMatch([_, _], bad_functions(Pages)),
    ?assertMatch([_, _, _, _], bad_paths(Pages)),
    ?assertMatch([_, _, _], bad_commands(Pages)).

%% Pages, each as its lines: {Page, LineNumber, text | code, Line}.
pages() ->
    [{P, lines(P)} || P <- ["README.md" | lists:sort(filelib:wildcard("docs/*.md"))]].

lines(Page) ->
    {ok, Bin} = file:read_file(Page),
    Lines = string:split(unicode:characters_to_list(Bin), "\n", all),
    {Tagged, _} = lists:mapfoldl(
                    fun({N, L}, InCode) ->
                            case string:prefix(string:trim(L, leading), "```") of
                                nomatch -> {{Page, N, mode(InCode), L}, InCode};
                                _ -> {{Page, N, fence, L}, not InCode}
                            end
                    end, false, lists:zip(lists:seq(1, length(Lines)), Lines)),
    Tagged.

mode(true) -> code;
mode(false) -> text.

%% What a line says in code: the whole line in a code block, its code spans
%% elsewhere.
code_parts({_, _, code, L}) -> [L];
code_parts({_, _, text, L}) ->
    [S || [S] <- matches(L, "`([^`]+)`")];
code_parts({_, _, fence, _}) -> [].

matches(S, Re) ->
    case re:run(S, Re, [global, unicode, {capture, all_but_first, list}]) of
        {match, Ms} -> Ms;
        nomatch -> []
    end.

%%% Functions

bad_functions(Pages) ->
    [{Page, N, Ref, Why}
     || {_, Lines} <- Pages, {Page, N, Kind, L} <- Lines, Kind =/= fence,
        [M, F, Tail] <- matches(L, "(?<![\\w:.$@?#-])([a-z][a-z0-9_]*):([a-z][a-zA-Z0-9_]*)(/[0-9]+|\\()"),
        Ref <- [M ++ ":" ++ F ++ Tail],
        Why <- [function_problem(list_to_atom(M), list_to_atom(F), Tail)], Why =/= ok].

function_problem(M, F, Tail) ->
    case code:ensure_loaded(M) of
        {module, M} ->
            Exports = M:module_info(exports),
            Found = case Tail of
                        "(" -> lists:keymember(F, 1, Exports);
                        "/" ++ A -> lists:member({F, list_to_integer(A)}, Exports)
                    end,
            case Found of
                true -> ok;
                false -> not_exported
            end;
        {error, _} -> no_such_module
    end.

%%% Paths and links

bad_paths(Pages) ->
    Paths = [{Page, N, P} || {_, Lines} <- Pages, Line = {Page, N, _, _} <- Lines,
                             Part <- code_parts(Line), P <- repo_paths(Part)],
    Modules = [{Page, N, "test/" ++ M ++ ".erl"}
               || {_, Lines} <- Pages, Line = {Page, N, _, _} <- Lines,
                  Part <- code_parts(Line), [M] <- matches(Part, "--module=([a-z0-9_]+)")],
    [{Page, N, P, missing} || {Page, N, P} <- Paths ++ Modules, not filelib:is_file(P)]
        ++ [{Page, N, Link, Why} || {_, Lines} <- Pages, {Page, N, K, L} <- Lines, K =/= fence,
                                    [Link] <- matches(L, "\\]\\(([^)\\s]+)\\)"),
                                    Why <- [link_problem(Page, Link)], Why =/= ok].

%% The words of a piece of code that are paths inside the checkout.
repo_paths(Code) ->
    [string:trim(W, trailing, ",;:.)")
     || W <- string:lexemes(Code, " \t\"'()="),
        re:run(W, "^(" ?TOP_DIRS ")/[A-Za-z0-9_.+/-]*$", [unicode]) =/= nomatch].

link_problem(Page, Link) ->
    case re:run(Link, "^[a-z]+:", [unicode]) of
        {match, _} -> ok;                          % a URL
        nomatch ->
            {File, Anchor} = case string:split(Link, "#") of
                                 [F, A] -> {F, A};
                                 [F] -> {F, ""}
                             end,
            Target = case File of
                         "" -> Page;
                         _ -> normalize(filename:join(filename:dirname(Page), File))
                     end,
            case filelib:is_file(Target) of
                false -> missing;
                true when Anchor =:= "" -> ok;
                true ->
                    case lists:member(Anchor, anchors(Target)) of
                        true -> ok;
                        false -> no_such_heading
                    end
            end
    end.

normalize(Path) ->
    filename:join(lists:reverse(lists:foldl(fun("..", [_ | Acc]) -> Acc;
                                               (".", Acc) -> Acc;
                                               (P, Acc) -> [P | Acc]
                                            end, [], filename:split(Path)))).

%% The anchors GitHub gives a page's headings: lower case, punctuation but
%% `-' and `_' dropped, spaces as `-', repeats numbered.
anchors(Page) ->
    case filelib:is_file(Page) andalso filename:extension(Page) =:= ".md" of
        false -> [];
        true ->
            Slugs = [slug(H) || {_, _, text, L} <- lines(Page), [H] <- matches(L, "^#+\\s+(.*)$")],
            number_repeats(Slugs, #{})
    end.

slug(Heading) ->
    Lower = string:lowercase(Heading),
    Kept = re:replace(Lower, "[^\\w\\- ]", "", [global, unicode, ucp, {return, list}]),
    lists:flatten(string:replace(Kept, " ", "-", all)).

number_repeats([], _) -> [];
number_repeats([S | Rest], Seen) ->
    case maps:get(S, Seen, 0) of
        0 -> [S | number_repeats(Rest, Seen#{S => 1})];
        K -> [S ++ "-" ++ integer_to_list(K) | number_repeats(Rest, Seen#{S => K + 1})]
    end.

%%% Commands

bad_commands(Pages) ->
    {Top, Table} = cli_commands(),
    Crates = [filename:basename(filename:dirname(C)) || C <- filelib:wildcard("crates/*/Cargo.toml")],
    lists:usort(
      [{Page, N, Ref, Why}
       || {_, Lines} <- Pages, Line = {Page, N, _, _} <- Lines, Part <- code_parts(Line),
          {Ref, Why} <- command_problems(Part, Top, Table, Crates)]).

command_problems(Code, Top, Table, Crates) ->
    Sub = "(?:^|[\\s/$])fraghash(?:-cli\\s+--)?\\s+([a-z][a-z-]*)(?:\\s+([a-z][a-z-]*))?",
    [{"fraghash " ++ C, no_such_command} || [C | _] <- matches(Code, Sub), not lists:member(C, Top)]
        ++ [{"fraghash table " ++ C, no_such_command}
            || ["table", C] <- matches(Code, Sub), not lists:member(C, Table)]
        ++ [{"-p " ++ C, no_such_crate} || [C] <- matches(Code, "(?:^|\\s)-p\\s+([a-z0-9_-]+)"),
                                          not lists:member(C, Crates)]
        ++ [{"-p " ++ C ++ " --test " ++ T, no_such_test}
            || [C, T] <- matches(Code, "-p\\s+([a-z0-9_-]+).*--test\\s+([a-z0-9_]+)"),
               not filelib:is_file(filename:join(["crates", C, "tests", T ++ ".rs"]))].

%% The CLI's subcommands as clap names them: the variants of `enum Command'
%% in main.rs and of `enum TableCommand' in table/mod.rs, in kebab case.
cli_commands() ->
    {variants("crates/fraghash-cli/src/main.rs", "Command"),
     variants("crates/fraghash-cli/src/table/mod.rs", "TableCommand")}.

variants(File, Enum) ->
    {ok, Bin} = file:read_file(File),
    [_, After] = string:split(binary_to_list(Bin), "enum " ++ Enum ++ " {"),
    [Body | _] = string:split(After, "\n}"),
    ["help" | [kebab(V) || [V] <- matches(Body, "(?m)^    ([A-Z][A-Za-z]*)")]].

kebab([C | Rest]) ->
    [string:to_lower(C) | lists:flatmap(fun(X) when X >= $A, X =< $Z -> [$-, X + 32];
                                           (X) -> [X]
                                        end, Rest)].
