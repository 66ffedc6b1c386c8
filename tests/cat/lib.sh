# Helpers for the uwarp-cat / uwarp-rping tests. Source after setting CAT,
# RPING and PEER (paths of uwarp-cat, uwarp-rping and silent_peer).
#
# Every check prints what it expected and what it got; the script fails at
# the end, so one run reports every broken case. Responders listen on port 0
# (a free port chosen by the kernel, read back from their stderr), so the
# tests can run in parallel with anything else.

set -u
export LC_ALL=C
FAILS=0
CHECKS=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-cat-test.XXXXXX")
BG_PIDS=() # background jobs, for wait_rc (kept for the scripts' bookkeeping)

# Only jobs still running in this shell are stopped: a recorded PID that has
# exited may already belong to someone else.
cleanup() {
    local p
    for p in $(jobs -p); do
        kill "$p" 2>/dev/null
    done
    # KEEP_TMP=1 keeps the logs of every process for a post-mortem.
    if [ -n "${KEEP_TMP:-}" ]; then
        echo "logs kept in $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT

# fail, expect_eq, expect_contains, expect_true
source "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"
# f, wait_port, wait_rc
source "$(dirname "${BASH_SOURCE[0]}")/../lib/proc.sh"

# responder NAME STDIN OPTS...: starts "uwarp-cat -l 127.0.0.1:0 OPTS" in the
# background with stdin from STDIN; stdout/stderr go to $TMP/NAME.out/.err.
# Sets RPID and RPORT (empty if it never listened).
responder() {
    local name=$1 in=$2
    shift 2
    local stem
    stem=$(f "$name")
    "$CAT" -l 127.0.0.1:0 "$@" <"$in" >"$stem.out" 2>"$stem.err" &
    RPID=$!
    BG_PIDS+=("$RPID")
    RPORT=$(wait_port "$stem.err")
    if [ -z "$RPORT" ]; then
        fail "$name: responder did not listen: $(cat "$stem.err")"
    fi
}

# initiator NAME STDIN PORT OPTS...: runs "uwarp-cat OPTS 127.0.0.1 PORT" in
# the foreground (killed after 50 s); sets IRC.
initiator() {
    local name=$1 in=$2 port=$3
    shift 3
    local stem
    stem=$(f "$name")
    "$CAT" "$@" 127.0.0.1 "$port" <"$in" >"$stem.out" 2>"$stem.err" &
    local pid=$!
    BG_PIDS+=("$pid")
    wait_rc "$pid" 50
    IRC=$WRC
}

# The -v JSON line of a run's stderr.
json_of() {
    grep -m1 '^{"rev"' "$(f "$1").err"
}

# Lowercase hex of a file, no separators.
hexfile() {
    od -An -tx1 -v "$1" | tr -d ' \n'
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS of $CHECKS checks failed" >&2
        exit 1
    fi
    echo "all $CHECKS checks passed"
    exit 0
}
