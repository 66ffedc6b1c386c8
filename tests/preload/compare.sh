#!/usr/bin/env bash
# Every intercepted call against plain TCP (issue 17): pl_calls runs its table
# of call sequences
#   1. plain (the reference; it must pass its own TCP expectations),
#   2. both ends preloaded with libuwarp-preload.so and a private uwarp-pmd,
#      so the connections are SDP (checked in the library's info log),
#   3. only the server end preloaded (a preloaded listener, plain clients:
#      accepted as TCP),
#   4. only the client end preloaded (plain listeners, not mapped: the
#      preloaded client falls back to TCP),
#   5. both ends preloaded but no uwarp-pmd at all (TCP everywhere),
#   6. both ends preloaded, a port mapper for IPv4 only (IPv6 falls back:
#      SDP and TCP connections on the same listeners),
# and each preloaded run's output is compared with the reference step by
# step (check_diff.py). Differences listed in expected_diffs.txt, each with
# its reason, are allowed; any other fails the test and is printed.
#
# Called as compare.sh PL_CALLS LIBUWARP-PRELOAD.SO UWARP-PMD EXPECTED_DIFFS
# Set KEEP_TMP=1 to keep the outputs and logs.
set -u
export LC_ALL=C
PLC=${1:?usage: $0 PL_CALLS LIBUWARP-PRELOAD.SO UWARP-PMD EXPECTED_DIFFS}
LIB=${2:?}
PMD=${3:?}
ALLOW=${4:?}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-plcalls.XXXXXX")
FAILS=0

# Only jobs of this shell: timeout(1) passes the TERM on to its command.
cleanup() {
    local p
    for p in $(jobs -p); do
        kill "$p" 2>/dev/null
    done
    sleep 0.2
    for p in $(jobs -p); do
        kill -9 "$p" 2>/dev/null
    done
    # A failure keeps what each mode printed: CI shows only this output.
    if [ -n "${KEEP_TMP:-}" ] || [ "$FAILS" -ne 0 ]; then
        echo "outputs kept in $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    FAILS=$((FAILS + 1))
}

# A UDP port free on 127.0.0.1 and ::1 at once, for uwarp-pmd on both (the
# preload library asks the destination's address, so IPv6 connections need
# a port mapper on ::1 on the same port).
free_udp_port() {
    python3 -c '
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 0))
print(s.getsockname()[1])'
}

# start_pmd NAME ADDR...: a private uwarp-pmd listening on the addresses
# given; sets PM_PORT and CTL (its control socket, $TMP/NAME.sock).
start_pmd() {
    local name=$1 _try _i a
    shift
    local listen=()
    for a in "$@"; do
        listen+=(--listen "$a")
    done
    CTL="$TMP/$name.sock"
    for _try in 1 2 3 4 5; do
        PM_PORT=$(free_udp_port)
        rm -f "$CTL"
        timeout -s KILL 900 "$PMD" --port "$PM_PORT" "${listen[@]}" --control "$CTL" \
            2>"$TMP/$name.log" &
        PMD_JOB=$!
        for _i in $(seq 1 200); do
            grep -q "ready:" "$TMP/$name.log" 2>/dev/null && [ -S "$CTL" ] && return 0
            kill -0 "$PMD_JOB" 2>/dev/null || break
            sleep 0.05
        done
        kill "$PMD_JOB" 2>/dev/null
        wait "$PMD_JOB" 2>/dev/null
    done
    echo "uwarp-pmd did not start: $(cat "$TMP/$name.log")" >&2
    exit 1
}

# The environment of a preloaded process (its info log in $TMP/NAME.log).
# Only pl_calls gets it (through env(1) after timeout(1)): an ASan build's
# library can be preloaded only into a program that has the ASan runtime.
pl_env() {
    echo "LD_PRELOAD=$LIB UWARP_PRELOAD_LOG=info UWARP_PRELOAD_LOG_FILE=$TMP/$1.log" \
        "UWARP_PM_PORT=$PM_PORT UWARP_PM_SOCKET=$CTL UWARP_PMD_CONTROL=$CTL"
}

# run_split NAME SERVER-ENV CLIENT-ENV: the two halves as two processes.
run_split() {
    local name=$1 senv=$2 cenv=$3 spid rc
    # shellcheck disable=SC2086
    timeout -s KILL 600 env $senv "$PLC" --role server --ctl "$TMP/$name.ctl" \
        >"$TMP/$name.sout" 2>"$TMP/$name.serr" &
    spid=$!
    # shellcheck disable=SC2086
    timeout -s KILL 600 env $cenv "$PLC" --role client --ctl "$TMP/$name.ctl" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    rc=$?
    wait "$spid"
    echo "$name: client exit $rc, server exit $?; $(tail -n1 "$TMP/$name.err")"
}

# compare NAME MODE: the run's output against the reference.
compare() {
    local name=$1 mode=$2
    if ! python3 "$HERE/check_diff.py" "$mode" "$TMP/ref.out" "$TMP/$name.out" "$ALLOW" \
        >"$TMP/$name.diff"; then
        fail "$name: unexpected differences from plain TCP"
    fi
    cat "$TMP/$name.diff"
    if ! grep -q ' = ' "$TMP/$name.out"; then
        echo "--- $name: no output; its stderr: ---"
        tail -n 20 "$TMP/$name.err" "$TMP/$name.serr" 2>/dev/null
        return
    fi
    if grep -q '^BUG' "$TMP/$name.diff"; then
        echo "--- diff -u plain TCP vs $name (all differences) ---"
        diff -u "$TMP/ref.out" "$TMP/$name.out" | sed -n '3,$p' | grep '^[-+]'
        grep -h -E 'MISMATCH|ABORT|FATAL|TIMEOUT' "$TMP/$name.err" "$TMP/$name.serr" \
            2>/dev/null | head -n 40
    fi
}

# count_log FILE REGEX
count_log() {
    grep -c -E "$2" "$1" 2>/dev/null || true
}

# 1. The reference.
timeout -s KILL 600 "$PLC" >"$TMP/ref.out" 2>"$TMP/ref.err"
rc=$?
echo "plain TCP: exit $rc; $(tail -n1 "$TMP/ref.err")"
if [ "$rc" -ne 0 ]; then
    cat "$TMP/ref.err" >&2
    fail "the plain TCP run does not pass its own expectations"
    exit 1
fi

start_pmd pmd 127.0.0.1 ::1
echo "uwarp-pmd on 127.0.0.1 and ::1 UDP $PM_PORT, control $CTL"

# 2. Both ends preloaded, in one process: SDP.
# shellcheck disable=SC2046
timeout -s KILL 600 env $(pl_env both) "$PLC" >"$TMP/both.out" 2>"$TMP/both.err"
echo "both preloaded: exit $?; $(tail -n1 "$TMP/both.err")"
nsdp_c=$(count_log "$TMP/both.log" 'connect .*: sdp \(')
nsdp_a=$(count_log "$TMP/both.log" 'accept from .*: sdp \(')
ntcp_c=$(count_log "$TMP/both.log" 'connect .*: tcp')
echo "both preloaded: log says $nsdp_c connects and $nsdp_a accepts over sdp, $ntcp_c connects over tcp"
if [ "${nsdp_c:-0}" -lt 40 ] || [ "${nsdp_a:-0}" -lt 40 ]; then
    fail "both preloaded: fewer than 40 SDP connections in the log (not SDP?)"
    grep -m5 -E 'connect|accept|listen' "$TMP/both.log" >&2
fi
compare both both

# 3. Only the server end preloaded: plain clients, accepted over TCP.
run_split server "$(pl_env server)" ""
nsdp=$(count_log "$TMP/server.log" ': sdp \(')
ntcp=$(count_log "$TMP/server.log" 'accept from .*: tcp')
echo "server preloaded: log says $ntcp accepts over tcp, $nsdp over sdp"
[ "${nsdp:-0}" -eq 0 ] || fail "server preloaded: $nsdp SDP connections with plain clients"
[ "${ntcp:-0}" -ge 40 ] || fail "server preloaded: fewer than 40 TCP accepts in the log"
compare server server

# 4. Only the client end preloaded: unmapped ports, fallback to TCP.
run_split client "" "$(pl_env client)"
nsdp=$(count_log "$TMP/client.log" ': sdp \(')
ntcp=$(count_log "$TMP/client.log" 'connect .*: tcp')
echo "client preloaded: log says $ntcp connects over tcp, $nsdp over sdp"
[ "${nsdp:-0}" -eq 0 ] || fail "client preloaded: $nsdp SDP connections with plain servers"
[ "${ntcp:-0}" -ge 40 ] || fail "client preloaded: fewer than 40 TCP fallbacks in the log"
compare client client

# 5. Both ends preloaded, no port mapper daemon (no control socket, and
#    a closed UDP port: ICMP unreachable): listeners are TCP-only, clients
#    fall back at once.
DEAD=$(free_udp_port)
# shellcheck disable=SC2046
timeout -s KILL 600 env \
    $(pl_env nopmd | sed "s|UWARP_PM_PORT=[0-9]*|UWARP_PM_PORT=$DEAD|; s|$CTL|$TMP/none.sock|g") \
    "$PLC" >"$TMP/nopmd.out" 2>"$TMP/nopmd.err"
echo "both preloaded, no uwarp-pmd: exit $?; $(tail -n1 "$TMP/nopmd.err")"
nsdp=$(count_log "$TMP/nopmd.log" ': sdp \(')
ntcp=$(count_log "$TMP/nopmd.log" 'connect .*: tcp')
echo "no uwarp-pmd: log says $ntcp connects over tcp, $nsdp over sdp"
[ "${nsdp:-0}" -eq 0 ] || fail "no uwarp-pmd: $nsdp SDP connections"
[ "${ntcp:-0}" -ge 40 ] || fail "no uwarp-pmd: fewer than 40 TCP fallbacks in the log"
compare nopmd nopmd

# 6. Both ends preloaded, a port mapper on 127.0.0.1 only: IPv4 connections
#    are SDP, IPv6 ones fall back to TCP, and dual-stack listeners hold both.
start_pmd pmd4 127.0.0.1
# shellcheck disable=SC2046
timeout -s KILL 600 env $(pl_env mixed) "$PLC" >"$TMP/mixed.out" 2>"$TMP/mixed.err"
echo "both preloaded, port mapper on 127.0.0.1 only: exit $?; $(tail -n1 "$TMP/mixed.err")"
nsdp=$(count_log "$TMP/mixed.log" 'connect 127.*: sdp \(')
ntcp=$(count_log "$TMP/mixed.log" 'connect \[.*: tcp')
echo "mixed: log says $nsdp IPv4 connects over sdp, $ntcp IPv6 connects over tcp"
[ "${nsdp:-0}" -ge 40 ] || fail "mixed: fewer than 40 IPv4 SDP connections in the log"
[ "${ntcp:-0}" -ge 3 ] || fail "mixed: fewer than 3 IPv6 TCP fallbacks in the log"
compare mixed mixed

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS failures" >&2
    exit 1
fi
echo "preloaded runs match plain TCP (allowed differences: $ALLOW)"
exit 0
