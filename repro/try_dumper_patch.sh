#!/bin/sh
# Runs mnesia_frag_disc_loss.escript against the installed Mnesia with one
# module replaced: mnesia_dumper, patched with mnesia_dumper_rec_ops.patch
# (the {op, rec, ...} steps of a schema transaction always go to the
# fragment's .DCL, as transform_table and clear_table already do).
#
#     sh repro/try_dumper_patch.sh
#
# Needs erl, erlc, escript, patch and the Mnesia sources (Debian: erlang-src).
# The patched module is built in a temporary directory, removed afterwards.
# Exit status: the reproduction's (0 not reproduced, 1 reproduced, 2 failed),
# or 2 when the patch does not apply or does not compile.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(erl -noshell -eval 'io:format("~s", [code:lib_dir(mnesia, src)]), halt().')
if [ ! -f "$src/mnesia_dumper.erl" ]; then
    echo "no Mnesia sources in $src: install them (Debian: apt-get install erlang-src)" >&2
    exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnesia_dumper_patch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/ebin"
if ! patch -s -o "$tmp/mnesia_dumper.erl" "$src/mnesia_dumper.erl" \
        "$here/mnesia_dumper_rec_ops.patch"; then
    echo "the patch does not apply to $src/mnesia_dumper.erl" >&2
    exit 2
fi
erlc -I "$src" -o "$tmp/ebin" "$tmp/mnesia_dumper.erl" || exit 2
status=0
ERL_FLAGS="${ERL_FLAGS:-} -pa $tmp/ebin" escript "$here/mnesia_frag_disc_loss.escript" || status=$?
exit $status
