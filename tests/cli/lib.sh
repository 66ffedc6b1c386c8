# Helpers shared by the uwarp-mpa CLI tests. Source after setting BIN.
# Every check prints what it expected and what it got, then the script fails
# at the end (so one run reports every broken case, not just the first).

set -u
export LC_ALL=C
FAILS=0
CHECKS=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# fail, expect_eq, expect_contains
source "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"

# Lowercase hex of stdin, no separators (od is in coreutils, xxd may be absent).
hexof() {
    od -An -tx1 -v | tr -d ' \n'
}

# Binary from a hex string on stdout.
unhex() {
    local h=$1 i chunk
    # printf's %b takes \xHH; cut into pieces so huge strings stay fast.
    for ((i = 0; i < ${#h}; i += 4096)); do
        chunk=${h:i:4096}
        printf '%b' "$(printf '%s' "$chunk" | sed 's/../\\x&/g')"
    done
}

# run CMD...: runs with stdin from $IN (default /dev/null); sets OUT, ERR, RC.
# OUT holds hex when RUN_HEX=1 (binary output), else text.
IN=/dev/null
RUN_HEX=0
run() {
    if [ "$RUN_HEX" = 1 ]; then
        "$@" <"$IN" >"$TMP/out" 2>"$TMP/err"
        RC=$?
        OUT=$(hexof <"$TMP/out")
    else
        "$@" <"$IN" >"$TMP/out" 2>"$TMP/err"
        RC=$?
        OUT=$(cat "$TMP/out")
    fi
    ERR=$(cat "$TMP/err")
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS of $CHECKS checks failed" >&2
        exit 1
    fi
    echo "all $CHECKS checks passed"
    exit 0
}

[ -x "${BIN:-}" ] || { echo "usage: $0 path/to/uwarp-mpa" >&2; exit 2; }
