#!/usr/bin/env bash
# uwarp-run: usage errors (exit 2), the program's exit status passed on, 126
# and 127 as the shells give them, the environment the program gets
# (LD_PRELOAD in front of what was there, UWARP_PRELOAD_LOG, _CONF, _TCP_ONLY),
# a rules file checked before the program runs, and where the library is
# looked for. A stand-in library (dummy_preload.c) takes the real one's place.
#   cli.sh UWARP-RUN DUMMY-LIB BUILD-ROOT BINDIR LIBDIR FULL-LIBDIR
set -u
export LC_ALL=C
RUN=${1:?usage: $0 UWARP-RUN DUMMY-LIB BUILD-ROOT BINDIR LIBDIR FULL-LIBDIR}
DUMMY=$(realpath "${2:?}")
BUILD_ROOT=${3:?}
BINDIR=${4:?}
LIBDIR=${5:?}
FULL_LIBDIR=${6:?}
FAILS=0
CHECKS=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-run-test.XXXXXX")
TMP=$(realpath "$TMP")
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"

# A clean slate: none of the variables uwarp-run sets.
unset LD_PRELOAD UWARP_PRELOAD_LIB UWARP_PRELOAD_LOG UWARP_PRELOAD_CONF UWARP_PRELOAD_TCP_ONLY \
    UW_RUN_MARK

# r ARGS...: runs uwarp-run; OUT, ERR and RC.
r() {
    OUT=$(timeout 20 "$RUN" "$@" 2>"$TMP/err" </dev/null)
    RC=$?
    ERR=$(cat "$TMP/err")
}

# var NAME: the value of NAME in OUT (an `env` listing), or "<unset>".
var() {
    local line
    line=$(printf '%s\n' "$OUT" | grep -m1 "^$1=") || {
        echo "<unset>"
        return
    }
    echo "${line#*=}"
}

# --- --help, --version -------------------------------------------------------
r --help
expect_eq "--help exits 0" 0 "$RC"
for word in "--log LEVEL" "--conf FILE" "--tcp-only" "PROGRAM" "UWARP_PRELOAD_LIB" "Exit status" \
    "127"; do
    expect_contains "--help mentions $word" "$word" "$OUT"
done
r -h
expect_eq "-h exits 0" 0 "$RC"
r --version
expect_eq "--version exits 0" 0 "$RC"
expect_contains "--version names the program" "uwarp-run (uwarp) " "$OUT"

# --- usage errors: exit 2, a message, a pointer to --help, nothing run --------
export UWARP_PRELOAD_LIB=$DUMMY
usage_case() {
    local name=$1 needle=$2
    shift 2
    r "$@"
    expect_eq "$name: exit status ($ERR)" 2 "$RC"
    expect_contains "$name: says what is wrong" "$needle" "$ERR"
    expect_contains "$name: points at --help" "--help" "$ERR"
    expect_eq "$name: nothing ran" "" "$OUT"
}
usage_case "no arguments" "missing PROGRAM"
usage_case "only options" "missing PROGRAM" --tcp-only --log info
usage_case "only --" "missing PROGRAM" --
usage_case "--log without a value" "--log needs a value" --log
usage_case "--log bogus" "unknown log level 'loud'" --log loud env
usage_case "--log=bogus" "unknown log level 'WARN'" --log=WARN env
usage_case "--log empty" "unknown log level ''" --log= env
usage_case "--conf without a value" "--conf needs a value" --conf
usage_case "--conf empty" "--conf needs a file name" --conf= env
usage_case "unknown option" "unknown option '--frobnicate'" --frobnicate env
usage_case "unknown short option" "unknown option '-x'" -x env
usage_case "--logx" "unknown option '--logx'" --logx env
# A --conf file that cannot be read: exit 2 too, saying what to give instead.
conf_case() {
    local name=$1 needle=$2
    shift 2
    r "$@"
    expect_eq "$name: exit status ($ERR)" 2 "$RC"
    expect_contains "$name: says what is wrong" "$needle" "$ERR"
    expect_contains "$name: says what to do" "give --conf a readable rules file" "$ERR"
    expect_eq "$name: nothing ran" "" "$OUT"
}
conf_case "--conf missing file" "--conf $TMP/nope.conf: No such file or directory" \
    --conf "$TMP/nope.conf" env
mkdir "$TMP/dir.conf"
conf_case "--conf a directory" "--conf $TMP/dir.conf: Is a directory" --conf "$TMP/dir.conf" env

# --- the environment the program gets ----------------------------------------
r env
expect_eq "env runs" 0 "$RC"
expect_eq "LD_PRELOAD is the library" "$DUMMY" "$(var LD_PRELOAD)"
expect_eq "no log level unless asked" "<unset>" "$(var UWARP_PRELOAD_LOG)"
expect_eq "no TCP_ONLY unless asked" "<unset>" "$(var UWARP_PRELOAD_TCP_ONLY)"
expect_eq "no CONF unless asked" "<unset>" "$(var UWARP_PRELOAD_CONF)"
expect_eq "quiet" "" "$ERR"

cp "$DUMMY" "$TMP/other.so"
OUT=$(LD_PRELOAD="$TMP/other.so" timeout 20 "$RUN" sh -c 'echo "$LD_PRELOAD"')
expect_eq "LD_PRELOAD kept behind the library" "$DUMMY:$TMP/other.so" "$OUT"
OUT=$(LD_PRELOAD="" timeout 20 "$RUN" sh -c 'echo "[$LD_PRELOAD]"')
expect_eq "empty LD_PRELOAD" "[$DUMMY]" "$OUT"

for level in error warn info debug; do
    r --log "$level" env
    expect_eq "--log $level" "$level" "$(var UWARP_PRELOAD_LOG)"
done
r --log=info env
expect_eq "--log=info" "info" "$(var UWARP_PRELOAD_LOG)"
expect_eq "--log=info: exit 0" 0 "$RC"
r --log debug env
expect_contains "--log debug: uwarp-run says what it preloads" "LD_PRELOAD=$DUMMY" "$ERR"

r --tcp-only env
expect_eq "--tcp-only" "1" "$(var UWARP_PRELOAD_TCP_ONLY)"
r --tcp-only --log warn -- env
expect_eq "options together: TCP_ONLY" "1" "$(var UWARP_PRELOAD_TCP_ONLY)"
expect_eq "options together: LOG" "warn" "$(var UWARP_PRELOAD_LOG)"
expect_eq "options together: LD_PRELOAD" "$DUMMY" "$(var LD_PRELOAD)"

# Everything from PROGRAM on is the program's, options included.
r sh -c 'echo "$*"; echo "${UWARP_PRELOAD_TCP_ONLY:-unset}"' sh --log x --tcp-only -- y
expect_eq "arguments after PROGRAM pass through" "--log x --tcp-only -- y
unset" "$OUT"

# The library really is loaded into the program, and only there: the
# stand-in's constructor speaks once (uwarp-run itself is not preloaded).
OUT=$(UW_RUN_MARK=1 timeout 20 "$RUN" true 2>&1)
expect_eq "the program loads the library, uwarp-run does not" "dummy preload loaded" "$OUT"

# A relative UWARP_PRELOAD_LIB becomes absolute (the program may chdir).
(cd "$TMP" && UWARP_PRELOAD_LIB=other.so timeout 20 "$RUN" sh -c 'echo "$LD_PRELOAD"') >"$TMP/out"
expect_eq "relative UWARP_PRELOAD_LIB made absolute" "$TMP/other.so" "$(cat "$TMP/out")"

# --- rules files --------------------------------------------------------------
printf 'use sdp server * *:5000-5999\n# comment\nuse tcp * curl *\n' >"$TMP/good.conf"
r --conf "$TMP/good.conf" env
expect_eq "good conf: exit 0" 0 "$RC"
expect_eq "good conf: UWARP_PRELOAD_CONF" "$TMP/good.conf" "$(var UWARP_PRELOAD_CONF)"
expect_eq "good conf: nothing said" "" "$ERR"
OUT=$(cd "$TMP" && timeout 20 "$RUN" --conf good.conf env)
expect_eq "relative --conf made absolute" "$TMP/good.conf" "$(var UWARP_PRELOAD_CONF)"
r --conf="$TMP/good.conf" env
expect_eq "--conf=FILE" "$TMP/good.conf" "$(var UWARP_PRELOAD_CONF)"

printf 'use sdp * * *\nuse sdp * * 10.0.0.300\n' >"$TMP/bad.conf"
r --conf "$TMP/bad.conf" sh -c 'echo ran; echo "$UWARP_PRELOAD_CONF"'
expect_eq "bad conf: the program still runs" 0 "$RC"
expect_eq "bad conf: output and UWARP_PRELOAD_CONF" "ran
$TMP/bad.conf" "$OUT"
expect_contains "bad conf: the line, the column and why" \
    "uwarp-run: $TMP/bad.conf:2:20: IPv4 number 300 is above 255, expected a number 0-255" "$ERR"
expect_contains "bad conf: what happens" "runs over TCP only until it is fixed" "$ERR"

# Larger than the library reads (1 MiB): reported, and the program runs.
yes '# a comment line' | head -c $((1024 * 1024)) >"$TMP/big.conf"
r --conf "$TMP/big.conf" sh -c 'echo ran'
expect_eq "big conf: the program runs" "0 ran" "$RC $OUT"
expect_contains "big conf: said" "$TMP/big.conf: larger than 1 MiB" "$ERR"
yes '# a comment line' | head -c $((1024 * 1024 - 1)) >"$TMP/big.conf"
r --conf "$TMP/big.conf" sh -c 'echo ran'
expect_eq "1 MiB - 1 of comment: fine" "0 ran " "$RC $OUT $ERR"

: >"$TMP/empty.conf"
r --conf "$TMP/empty.conf" env
expect_eq "empty conf: fine" "0:" "$RC:$ERR"

if [ "$(id -u)" != 0 ]; then
    printf 'use sdp * * *\n' >"$TMP/secret.conf"
    chmod 000 "$TMP/secret.conf"
    conf_case "--conf unreadable" "Permission denied" --conf "$TMP/secret.conf" env
fi

# UWARP_PRELOAD_CONF from the environment is checked too (a warning, not an
# error: uwarp-run did not choose it).
OUT=$(UWARP_PRELOAD_CONF="$TMP/bad.conf" timeout 20 "$RUN" sh -c 'echo ran' 2>"$TMP/err")
RC=$?
expect_eq "bad UWARP_PRELOAD_CONF: the program runs" "0 ran" "$RC $OUT"
expect_contains "bad UWARP_PRELOAD_CONF: reported" "$TMP/bad.conf:2:20: IPv4 number 300" \
    "$(cat "$TMP/err")"
OUT=$(UWARP_PRELOAD_CONF="$TMP/nope.conf" timeout 20 "$RUN" sh -c 'echo ran' 2>"$TMP/err")
expect_eq "missing UWARP_PRELOAD_CONF: the program runs" "ran" "$OUT"
expect_contains "missing UWARP_PRELOAD_CONF: warned" "warning: $TMP/nope.conf: No such file" \
    "$(cat "$TMP/err")"

# --- exit statuses --------------------------------------------------------------
r sh -c 'exit 7'
expect_eq "the program's status" 7 "$RC"
r sh -c 'kill -TERM $$'
expect_eq "a signal, as the shell reports it" 143 "$RC"
r no-such-program-uwarp-run-test
expect_eq "not found: 127" 127 "$RC"
expect_contains "not found: said" "no-such-program-uwarp-run-test: command not found" "$ERR"
r "$TMP/nope"
expect_eq "no such file: 127" 127 "$RC"
expect_contains "no such file: said" "$TMP/nope: no such file" "$ERR"
r -- --weird
expect_eq "-- then a dash name: looked up as a program" 127 "$RC"
printf '#!/bin/sh\necho hi\n' >"$TMP/noexec"
chmod 644 "$TMP/noexec"
r "$TMP/noexec" # no execute bit: EACCES, even for root
expect_eq "not executable: 126" 126 "$RC"
expect_contains "not executable: said" "cannot execute: Permission denied" "$ERR"
r "$TMP"
expect_eq "a directory: 126" 126 "$RC"
expect_contains "a directory: said" "cannot execute" "$ERR"

# --- where the library comes from ----------------------------------------------
UWARP_PRELOAD_LIB=$TMP/missing.so r true
expect_eq "UWARP_PRELOAD_LIB missing: 125" 125 "$RC"
expect_contains "UWARP_PRELOAD_LIB missing: names it" "UWARP_PRELOAD_LIB=$TMP/missing.so" "$ERR"
expect_contains "UWARP_PRELOAD_LIB missing: what to do" "unset it" "$ERR"
UWARP_PRELOAD_LIB=$TMP r true
expect_eq "UWARP_PRELOAD_LIB a directory: 125" 125 "$RC"
mkdir "$TMP/a:b"
cp "$DUMMY" "$TMP/a:b/lib.so"
UWARP_PRELOAD_LIB="$TMP/a:b/lib.so" r true
expect_eq "a ':' in the library path: 125" 125 "$RC"
expect_contains "a ':' in the library path: said" "LD_PRELOAD cannot carry" "$ERR"
unset UWARP_PRELOAD_LIB

# This build tree's uwarp-run uses this build tree's library (or says how to
# build it); the tests must not depend on it being built.
# The choice is read from --log debug's LD_PRELOAD line with a program that
# does not exist: a sanitizer build's library cannot be loaded into an
# uninstrumented program, and no program needs to load it here.
BUILT=$BUILD_ROOT/src/preload/libuwarp-preload.so
r --log debug no-such-program-uwarp-run-test
if [ -f "$BUILT" ]; then
    expect_eq "build tree: its library" "127" "$RC"
    expect_contains "build tree: its library" "LD_PRELOAD=$(realpath "$BUILT")" "$ERR"
else
    expect_eq "build tree, library not built: 125" 125 "$RC"
    expect_contains "build tree, library not built: where" "looked for $BUILT" "$ERR"
    expect_contains "build tree, library not built: what to do" "cmake --build $BUILD_ROOT" "$ERR"
fi

# An installed copy: the library next to it (PREFIX/LIBDIR/uwarp/), as
# `cmake --install --prefix PREFIX` lays them out.
mkdir -p "$TMP/prefix/$BINDIR" "$TMP/prefix/$LIBDIR/uwarp"
cp "$RUN" "$TMP/prefix/$BINDIR/uwarp-run"
cp "$DUMMY" "$TMP/prefix/$LIBDIR/uwarp/libuwarp-preload.so"
OUT=$(timeout 20 "$TMP/prefix/$BINDIR/uwarp-run" sh -c 'echo "$LD_PRELOAD"' 2>"$TMP/err")
expect_eq "installed: the library of its prefix" "$TMP/prefix/$LIBDIR/uwarp/libuwarp-preload.so" \
    "$OUT"
rm "$TMP/prefix/$LIBDIR/uwarp/libuwarp-preload.so"
if [ ! -e "$FULL_LIBDIR/uwarp/libuwarp-preload.so" ]; then
    OUT=$(timeout 20 "$TMP/prefix/$BINDIR/uwarp-run" true 2>"$TMP/err")
    RC=$?
    ERR=$(cat "$TMP/err")
    expect_eq "installed, no library: 125" 125 "$RC"
    expect_contains "installed, no library: where" \
        "looked for $TMP/prefix/$LIBDIR/uwarp/libuwarp-preload.so and $FULL_LIBDIR/uwarp/libuwarp-preload.so" \
        "$ERR"
    expect_contains "installed, no library: what to do" "cmake --install" "$ERR"
fi

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS of $CHECKS checks failed" >&2
    exit 1
fi
echo "all $CHECKS checks passed"
