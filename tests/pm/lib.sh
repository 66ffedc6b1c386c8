# Helpers shared by the port mapper scripts. Every check prints what it
# expected and got; the script fails at the end, so one run reports every
# broken case. Daemons started with start_pmd are killed on exit.
set -u
export LC_ALL=C
FAILS=0
CHECKS=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-pm.XXXXXX")
PMD_PIDS=()
cleanup() {
    local p
    for p in "${PMD_PIDS[@]}"; do
        kill -CONT "$p" 2>/dev/null
        kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

# fail, expect_eq, expect_contains
source "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"

# expect_le NAME VALUE LIMIT
expect_le() {
    CHECKS=$((CHECKS + 1))
    if ! [ "$2" -le "$3" ] 2>/dev/null; then
        fail "$1: $2 > $3"
    fi
}

# child_of PID: a child process of PID, from /proc (no procps needed).
child_of() {
    local p pid comm state ppid
    for p in /proc/[0-9]*; do
        read -r pid comm state ppid _ 2>/dev/null <"$p/stat" || continue
        if [ "$ppid" = "$1" ]; then
            echo "$pid"
            return
        fi
    done
}

# start_pmd LOG ARGS...: starts uwarp-pmd on 127.0.0.1 with a port the kernel
# picks (never 3935) and sets PMD_PID and PMD_PORT. timeout(1) bounds the
# daemon's lifetime too, in case this script is killed hard; signals go to
# the daemon itself, timeout's child. Each daemon's control socket is its own
# file under $TMP (never /run/uwarp) unless ARGS has --control.
PMD_STARTS=0
start_pmd() {
    local log=$1 i
    shift
    PMD_STARTS=$((PMD_STARTS + 1))
    UWARP_PMD_CONTROL="$TMP/pmd-$PMD_STARTS.sock" \
        timeout -s KILL 110 "$PMD" --port 0 --listen 127.0.0.1 "$@" 2>"$log" &
    local tpid=$!
    PMD_PIDS+=("$tpid")
    PMD_PORT=
    for i in $(seq 1 400); do # up to 20 s: sanitizer builds on a busy machine are slow
        PMD_PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log" | head -1)
        [ -n "$PMD_PORT" ] && grep -q "ready:" "$log" && break
        sleep 0.05
    done
    PMD_PID=$(child_of "$tpid")
    if [ -z "$PMD_PORT" ] || [ -z "$PMD_PID" ]; then
        fail "uwarp-pmd did not start: $(cat "$log")"
        finish
    fi
    PMD_PIDS+=("$PMD_PID")
}

# stats_of LOG KEY: KEY's value in the last stats line of LOG.
stats_of() {
    grep 'stats:' "$1" | tail -1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# usr1_stats LOG: asks the daemon for statistics and waits for the new line.
usr1_stats() {
    local before i
    before=$(grep -c 'stats:' "$1")
    kill -USR1 "$PMD_PID"
    for i in $(seq 1 400); do
        [ "$(grep -c 'stats:' "$1")" -gt "$before" ] && return 0
        sleep 0.05
    done
    fail "no statistics after SIGUSR1"
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS of $CHECKS checks failed" >&2
        exit 1
    fi
    echo "all $CHECKS checks passed"
    exit 0
}
