# Helpers shared by the uwarp-testproxy self-tests. Source with the proxy and
# the peer program as $1 and $2. Like tests/cli/lib.sh, every check prints
# what it expected and what it got, and the script fails at the end.
#
# Processes run in the background with their stdout and stderr in
# $TMP/NAME.out and $TMP/NAME.err; servers print "PORT <n>" first, which
# port_of waits for, so every port is ephemeral. Each program also bounds
# itself (--timeout), and the EXIT trap ends whatever this script started.

set -u
export LC_ALL=C
PROXY=${1:-}
PEER=${2:-}
FAILS=0
CHECKS=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-proxy.XXXXXX")
BG_PIDS=()

cleanup() {
    local p
    for p in "${BG_PIDS[@]}"; do
        kill "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

# fail, expect_eq, expect_contains
source "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"

# expect_cmp NAME A OP B: numeric comparison, OP one of -lt -le -gt -ge -eq.
expect_cmp() {
    CHECKS=$((CHECKS + 1))
    if ! [ "${2:-x}" "$3" "${4:-x}" ] 2>/dev/null; then
        fail "$1"
        printf '  expected: %s %s %s\n' "$2" "$3" "$4" >&2
    fi
}

# bg NAME CMD...: starts CMD in the background; its pid goes to PID_NAME
# (so NAME is letters, digits and underscores).
bg() {
    local name=$1
    shift
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    BG_PIDS+=($!)
    printf -v "PID_$name" '%s' "$!"
}

# port_of NAME: prints the port from NAME's "PORT <n>" line, waiting up to
# 10 s for it; prints nothing if it never came (the checks then fail).
port_of() {
    local i tag port
    for ((i = 0; i < 200; i++)); do
        # read fails until the file exists and holds the whole line.
        if { read -r tag port <"$TMP/$1.out"; } 2>/dev/null && [ "$tag" = PORT ]; then
            echo "$port"
            return 0
        fi
        sleep 0.05
    done
    echo "no PORT line from $1: $(cat "$TMP/$1.err")" >&2
    return 1
}

# wait_bg NAME: waits for NAME to exit and sets RC to its exit status.
wait_bg() {
    local v="PID_$1"
    wait "${!v}"
    RC=$?
}

# field KEY LINE: the value of KEY=VALUE in a space-separated line.
field() {
    local w
    for w in $2; do
        case "$w" in
        "$1="*) echo "${w#*=}" ;;
        esac
    done
}

# done_line NAME: the peer's final summary line.
done_line() {
    grep '^done ' "$TMP/$1.out" | tail -n1
}

# json NAME DIR KEY: a number from the proxy's --stats line for DIR.
json() {
    grep "\"dir\":\"$2\"" "$TMP/$1.err" | tail -n1 | sed -n "s/.*\"$3\":\([0-9]*\).*/\1/p"
}

# start_pair NAME PEER_ARGS -- PROXY_ARGS: a listening peer NAME_srv and the
# proxy NAME_px in front of it; sets PORT to the proxy's port.
start_pair() {
    local name=$1 sp
    shift
    local peer_args=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        peer_args+=("$1")
        shift
    done
    shift
    bg "${name}_srv" "$PEER" listen --timeout 50 "${peer_args[@]}"
    sp=$(port_of "${name}_srv")
    bg "${name}_px" "$PROXY" --timeout 50 "$@" 0 127.0.0.1 "${sp:-1}"
    PORT=$(port_of "${name}_px")
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        # What every program said, for a failure seen only in CI.
        local f
        for f in "$TMP"/*.err; do
            [ -s "$f" ] && { echo "--- $(basename "$f"):"; tail -n 20 "$f"; } >&2
        done
        echo "$FAILS of $CHECKS checks failed" >&2
        exit 1
    fi
    echo "all $CHECKS checks passed"
    exit 0
}

[ -x "$PROXY" ] && [ -x "$PEER" ] ||
    { echo "usage: $0 path/to/uwarp-testproxy path/to/uwarp-tp-peer" >&2; exit 2; }
