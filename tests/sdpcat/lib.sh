# Helpers for the uwarp-sdpcat tests. Each script is called as
#   SCRIPT UWARP-SDPCAT SDP-BADPEER UWARP-TESTPROXY
# and sources this file. Checks count in CHECKS, failures in FAILS (each
# prints what it expected and what it got); `finish` sets the exit status, so
# one run reports every broken case. Listeners take port 0 (a free port, read
# back from their "listening on ADDR:PORT" line), and every wait is bounded.

set -u
export LC_ALL=C
SDPCAT=${1:?usage: $0 UWARP-SDPCAT SDP-BADPEER UWARP-TESTPROXY}
BADPEER=${2:?}
PROXY=${3:?}
FAILS=0
CHECKS=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-sdpcat-test.XXXXXX")

# Only jobs of this shell still running are stopped: a remembered PID that
# has exited may belong to someone else by now.
cleanup() {
    local p
    for p in $(jobs -p); do
        kill -9 "$p" 2>/dev/null
    done
    if [ -n "${KEEP_TMP:-}" ]; then
        echo "logs kept in $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT

source "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"
# f, wait_port, wait_rc
source "$(dirname "${BASH_SOURCE[0]}")/../lib/proc.sh"

# expect_in NAME "A B ..." ACTUAL: ACTUAL is one of the listed values.
expect_in() {
    CHECKS=$((CHECKS + 1))
    case " $2 " in
    *" $3 "*) ;;
    *)
        fail "$1"
        printf '  expected one of: %s\n  actual: %s\n' "$2" "$3" >&2
        ;;
    esac
}

# ms_since START: milliseconds since START (an $EPOCHREALTIME value).
ms_since() {
    local now=$EPOCHREALTIME
    echo $(((${now/./} - ${1/./}) / 1000))
}

# listener NAME STDIN OPTS...: "uwarp-sdpcat -l 127.0.0.1:0 OPTS" in the
# background (OPTS may hold another -l, which wins), stdout/stderr in
# $(f NAME).out/.err. Sets LPID and LPORT (empty when it never listened).
listener() {
    local name=$1 in=$2 stem
    shift 2
    stem=$(f "$name")
    "$SDPCAT" -l 127.0.0.1:0 "$@" <"$in" >"$stem.out" 2>"$stem.err" &
    LPID=$!
    LPORT=$(wait_port "$stem.err")
    [ -n "$LPORT" ] || fail "$name: no 'listening on' line: $(cat "$stem.err")"
}

# connector NAME STDIN HOST PORT OPTS...: "uwarp-sdpcat OPTS HOST PORT" in the
# background; sets CPID.
connector() {
    local name=$1 in=$2 host=$3 port=$4 stem
    shift 4
    stem=$(f "$name")
    "$SDPCAT" "$@" "$host" "$port" <"$in" >"$stem.out" 2>"$stem.err" &
    CPID=$!
}

# pair NAME LIN CIN "LOPTS" "COPTS" [SECS]: a listener and a connector on
# 127.0.0.1, both waited for (SECS each, default 60); sets LRC and CRC and
# leaves NAME.l.{out,err} and NAME.c.{out,err}.
pair() {
    local name=$1 lin=$2 cin=$3 lopts=$4 copts=$5 secs=${6:-60}
    # shellcheck disable=SC2086
    listener "$name.l" "$lin" $lopts
    LRC=x CRC=x
    [ -n "$LPORT" ] || { kill -9 "$LPID" 2>/dev/null; wait "$LPID" 2>/dev/null; return; }
    # shellcheck disable=SC2086
    connector "$name.c" "$cin" 127.0.0.1 "$LPORT" $copts
    wait_rc "$CPID" "$secs"
    CRC=$WRC
    wait_rc "$LPID" "$secs"
    LRC=$WRC
}

# proxied NAME "PROXY OPTS" LISTENER_IN CONNECTOR_IN "LISTENER OPTS"
# "CONNECTOR OPTS": as pair, with uwarp-testproxy between the two (its
# log and port files under NAME); sets CRC and LRC.
proxied() {
    local name=$1 popts=$2 lin=$3 cin=$4 lopts=$5 copts=$6 stem
    stem=$(f "$name")
    CRC=x LRC=x
    # shellcheck disable=SC2086
    listener "$name.l" "$lin" $lopts
    [ -n "$LPORT" ] || return
    # shellcheck disable=SC2086
    "$PROXY" --timeout 200 --stats --log "$stem.plog" $popts 0 127.0.0.1 "$LPORT" \
        >"$stem.pport" 2>"$stem.perr" &
    local ppid=$! pport="" i
    for ((i = 0; i < 200; i++)); do
        pport=$(awk '/^PORT/{print $2}' "$stem.pport" 2>/dev/null)
        [ -n "$pport" ] && break
        sleep 0.05
    done
    if [ -z "$pport" ]; then
        fail "$name: the proxy did not start: $(cat "$stem.perr")"
        return
    fi
    # shellcheck disable=SC2086
    connector "$name.c" "$cin" 127.0.0.1 "$pport" $copts
    wait_rc "$CPID" 200
    CRC=$WRC
    wait_rc "$LPID" 200
    LRC=$WRC
    wait_rc "$ppid" 30
}

# errs NAME: both sides' stderr, for failure messages.
errs() {
    tail -n3 "$(f "$1.l").err" "$(f "$1.c").err" 2>/dev/null | tr '\n' ' '
}

# same FILE1 FILE2: identical contents.
same() {
    cmp -s "$1" "$2"
}

# is_prefix OUT IN: OUT is a prefix of IN (possibly empty).
is_prefix() {
    local n
    n=$(stat -c %s "$1")
    cmp -s -n "$n" "$1" "$2"
}

# json_line FILE KEY: the first line of FILE that is a JSON object with KEY.
json_line() {
    grep -m1 "^{\"$2\"" "$1"
}

# json_get LINE FIELD: the field's value (python3 parses the line).
json_get() {
    python3 -c 'import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]; print(v)' "$1" "$2" 2>/dev/null
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS of $CHECKS checks failed" >&2
        exit 1
    fi
    echo "all $CHECKS checks passed"
    exit 0
}
