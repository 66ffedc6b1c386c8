#!/usr/bin/env bash
# libuwarp-preload.so on loopback (label "preload"), with a uwarp-pmd of its
# own (free UDP port, private control socket):
#  1. pl_check: every call family over SDP in one preloaded process (the log
#     shows "sdp" for connect and accept), and the same checks on plain
#     kernel sockets (not preloaded; preloaded with UWARP_PRELOAD_TCP_ONLY=1;
#     preloaded without a uwarp-pmd, where everything falls back to TCP);
#  2. python3 processes: both ends preloaded (SDP), one end preloaded (TCP
#     fallback either way), a malformed rules file (TCP, reported once),
#     "use tcp" and "use sdp" rules, a listener's readiness after accepting
#     (select() then a blocking accept() must not hang), and an asyncio
#     (epoll) echo with 50 concurrent connections over SDP;
#  3. the library exports no uw_* symbol.
# Called as smoke.sh LIBUWARP-PRELOAD PL_CHECK UWARP-PMD SANITIZED(0|1).
set -u
export LC_ALL=C
PL=$(readlink -f "${1:?usage: $0 LIBUWARP-PRELOAD PL_CHECK UWARP-PMD SANITIZED}")
CHECK=${2:?}
PMD=${3:?}
SAN=${4:-0}
FAILS=0
CHECKS=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-preload-test.XXXXXX")
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
source "$(dirname "$0")/../lib/expect.sh"

# expect_grep NAME PATTERN FILE
expect_grep() {
    CHECKS=$((CHECKS + 1))
    if ! grep -Eq -- "$2" "$3"; then
        fail "$1"
        printf '  no line matching: %s\n  in %s:\n' "$2" "$3" >&2
        sed 's/^/    /' "$3" | head -20 >&2
    fi
}

expect_nogrep() {
    CHECKS=$((CHECKS + 1))
    if grep -Eq -- "$2" "$3"; then
        fail "$1"
        printf '  unexpected line matching: %s\n' "$2" >&2
        grep -E -- "$2" "$3" | head -5 | sed 's/^/    /' >&2
    fi
}

# pl_check_run NAME MODE ENV...: pl_check MODE with ENV, all checks must pass.
pl_check_run() {
    local name=$1 mode=$2
    shift 2
    CHECKS=$((CHECKS + 1))
    # Only pl_check is preloaded (in the sanitizer build the library needs
    # an ASan-built program: timeout(1) could not load it).
    timeout -s KILL 240 env "$@" "$CHECK" "$mode" >"$TMP/$name.out" 2>"$TMP/$name.err"
    local rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "$name: pl_check $mode exit $rc"
        sed 's/^/    /' "$TMP/$name.out" "$TMP/$name.err" | head -40 >&2
    fi
}

start_pmd() {
    CTL="$TMP/pmd.sock"
    "$PMD" --port 0 --listen 127.0.0.1 --control "$CTL" 2>"$TMP/pmd.log" &
    PMD_PID=$!
    PMD_PORT=
    local i
    for i in $(seq 1 200); do
        PMD_PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$TMP/pmd.log" | head -1)
        [ -n "$PMD_PORT" ] && [ -S "$CTL" ] && return 0
        sleep 0.05
    done
    fail "uwarp-pmd did not start: $(cat "$TMP/pmd.log")"
    finish
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS of $CHECKS checks failed" >&2
        exit 1
    fi
    echo "all $CHECKS checks passed"
    exit 0
}

# The library exports the interposed libc calls only: no uw_* symbol.
CHECKS=$((CHECKS + 1))
if nm -D --defined-only "$PL" | grep -q ' uw_'; then
    fail "libuwarp-preload.so exports uw_* symbols: $(nm -D --defined-only "$PL" | grep ' uw_' | head -3)"
fi

start_pmd
export UWARP_PM_PORT=$PMD_PORT UWARP_PM_SOCKET=$CTL UWARP_PRELOAD_CONF="$TMP/none.conf"

# 1. pl_check.
pl_check_run plain tcp
pl_check_run sdp sdp LD_PRELOAD="$PL" UWARP_PRELOAD_LOG=info
expect_grep "sdp: connect used SDP" 'fd [0-9]+: connect 127\.0\.0\.1:[0-9]+: sdp \(port mapper 127\.0\.0\.1:[0-9]+ -> [0-9]+\)' "$TMP/sdp.err"
expect_grep "sdp: accept used SDP" 'fd [0-9]+: accept from 127\.0\.0\.1:[0-9]+ on fd [0-9]+: sdp' "$TMP/sdp.err"
expect_grep "sdp: listener registered" 'listen 127\.0\.0\.1:[0-9]+: sdp\+tcp \(port mapper registered\)' "$TMP/sdp.err"
expect_nogrep "sdp: no fallback" ': tcp \(' "$TMP/sdp.err"
pl_check_run tcponly tcp LD_PRELOAD="$PL" UWARP_PRELOAD_TCP_ONLY=1 UWARP_PRELOAD_LOG=info
expect_nogrep "tcp-only: nothing decided" 'connect|listen' "$TMP/tcponly.err"
pl_check_run nopmd tcp LD_PRELOAD="$PL" UWARP_PRELOAD_LOG=info UWARP_PM_SOCKET="$TMP/absent.sock" \
    UWARP_PM_PORT=1
expect_grep "no pmd: said once" 'no uwarp-pmd at .*absent\.sock: listeners accept TCP only' "$TMP/nopmd.err"
CHECKS=$((CHECKS + 1))
n=$(grep -c 'no uwarp-pmd' "$TMP/nopmd.err")
[ "$n" -eq 1 ] || fail "no pmd: said $n times, want once"
expect_grep "no pmd: listener TCP" 'listen 127\.0\.0\.1:[0-9]+: tcp \(no port mapper daemon\)' "$TMP/nopmd.err"
expect_grep "no pmd: client TCP" 'connect 127\.0\.0\.1:[0-9]+: tcp \(pm (unreachable|deny|timeout)' "$TMP/nopmd.err"

if [ "$SAN" = 1 ]; then
    echo "sanitizer build: the python3 cases need an uninstrumented library; skipped"
    finish
fi

# 2. python3 processes.
cat >"$TMP/srv.py" <<'EOF'
import socket, sys
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 0))
l.listen(8)
print(l.getsockname()[1], flush=True)
l.settimeout(30)
c, _ = l.accept()
c.settimeout(30)
n = 0
while True:
    b = c.recv(65536)
    if not b:
        break
    n += len(b)
    c.sendall(b)
c.close()
print("server", n, flush=True)
EOF
cat >"$TMP/cli.py" <<'EOF'
import hashlib, socket, sys, threading
data = bytes(range(256)) * 8192  # 2 MiB
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
def w():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=w)
t.start()
got = bytearray()
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
t.join()
print("client", "ok" if got == data else "BAD %d" % len(got), flush=True)
EOF

# py_pair NAME SRV_PRELOAD CLI_PRELOAD [ENV...]: echo 2 MiB; logs in NAME.{s,c}.err.
py_pair() {
    local name=$1 sp=$2 cp=$3 i port
    shift 3
    local spl=() cpl=()
    [ "$sp" = 1 ] && spl=(LD_PRELOAD="$PL")
    [ "$cp" = 1 ] && cpl=(LD_PRELOAD="$PL")
    timeout -s KILL 60 env "${spl[@]}" UWARP_PRELOAD_LOG=info "$@" python3 "$TMP/srv.py" \
        >"$TMP/$name.s.out" 2>"$TMP/$name.s.err" &
    local spid=$!
    port=
    for i in $(seq 1 200); do
        port=$(head -n1 "$TMP/$name.s.out" 2>/dev/null)
        [ -n "$port" ] && break
        sleep 0.05
    done
    CHECKS=$((CHECKS + 1))
    if [ -z "$port" ]; then
        fail "$name: server did not start: $(cat "$TMP/$name.s.err")"
        return
    fi
    timeout -s KILL 60 env "${cpl[@]}" UWARP_PRELOAD_LOG=info "$@" python3 "$TMP/cli.py" "$port" \
        >"$TMP/$name.c.out" 2>"$TMP/$name.c.err"
    wait "$spid"
    expect_eq "$name: client result" "client ok" "$(cat "$TMP/$name.c.out")"
    expect_eq "$name: server count" "server 2097152" "$(tail -n1 "$TMP/$name.s.out")"
}

py_pair both 1 1 UWARP_PRELOAD_LOG=debug
expect_grep "both: client over SDP" 'connect 127\.0\.0\.1:[0-9]+: sdp \(port mapper' "$TMP/both.c.err"
# The library asks the port mapper before it creates the stack; the stack's
# connect then finds the PMAccept in the shared cache, and asks nothing.
expect_grep "both: the library asked the port mapper" 'connect 127\.0\.0\.1:[0-9]+: port mapper: PMAccept from' "$TMP/both.c.err"
expect_grep "both: the stack found the answer" 'SDP: port mapper: cached PMAccept' "$TMP/both.c.err"
expect_nogrep "both: the stack did not ask again" 'SDP: port mapper: PMAccept' "$TMP/both.c.err"
expect_grep "both: server over SDP" 'accept from .*: sdp' "$TMP/both.s.err"
py_pair srvonly 1 0
expect_grep "server only: TCP client on the service port" 'accept from .*: tcp \(TCP client on the service port\)' "$TMP/srvonly.s.err"
py_pair clionly 0 1 UWARP_PRELOAD_LOG=debug
expect_grep "client only: PMDeny, TCP" 'connect 127\.0\.0\.1:[0-9]+: tcp \(pm deny\)' "$TMP/clionly.c.err"
# A program that never meets SDP never gets a stack (no progress thread, no
# epoll or event descriptors): the port mapper is asked without one.
expect_nogrep "client only: no SDP stack" 'SDP stack created' "$TMP/clionly.c.err"
printf 'use sdp client *\nthis is not a rule\n' >"$TMP/bad.conf"
py_pair badconf 1 1 UWARP_PRELOAD_CONF="$TMP/bad.conf"
expect_grep "bad conf: reported" "bad\.conf:.*configuration not used: running everything over TCP" "$TMP/badconf.c.err"
expect_nogrep "bad conf: nothing over SDP" ': sdp' "$TMP/badconf.c.err"

# Rules (src/preload/conf.h): "use tcp" skips SDP; "use sdp" allows no TCP.
printf 'use tcp client * 127.0.0.1\n' >"$TMP/tcp.conf"
py_pair ruletcp 1 1 UWARP_PRELOAD_CONF="$TMP/tcp.conf"
expect_grep "use tcp: client by rule" 'connect 127\.0\.0\.1:[0-9]+: tcp \(rule line 1\)' "$TMP/ruletcp.c.err"
cat >"$TMP/refused.py" <<'EOF'
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
    print("connected")
except ConnectionRefusedError:
    print("refused")
EOF
printf 'use sdp client * 127.0.0.1\n' >"$TMP/sdp.conf"
timeout -s KILL 30 python3 -c '
import socket, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
print(l.getsockname()[1], flush=True)
time.sleep(10)' >"$TMP/plain_l.out" &
lpid=$!
for i in $(seq 1 100); do [ -s "$TMP/plain_l.out" ] && break; sleep 0.05; done
expect_eq "use sdp: a client to a TCP-only server is refused" refused \
    "$(timeout -s KILL 30 env LD_PRELOAD="$PL" UWARP_PRELOAD_CONF="$TMP/sdp.conf" UWARP_PRELOAD_LOG=debug \
        python3 "$TMP/refused.py" "$(head -n1 "$TMP/plain_l.out")" 2>"$TMP/sdponly.c.err")"
expect_grep "use sdp: logged" 'refused \(rule line 1: sdp only; pm deny\)' "$TMP/sdponly.c.err"
expect_nogrep "use sdp: refused without a stack" 'SDP stack created' "$TMP/sdponly.c.err"
kill "$lpid" 2>/dev/null
wait "$lpid" 2>/dev/null
printf 'use sdp server * 127.0.0.1\n' >"$TMP/sdpsrv.conf"
py_pair sdpsrv 1 1 UWARP_PRELOAD_CONF="$TMP/sdpsrv.conf"
expect_grep "use sdp server: SDP clients served" 'accept from .*: sdp' "$TMP/sdpsrv.s.err"

# A listener is readable exactly while a connection waits: select() then a
# blocking accept() for two clients (TCP ones, then SDP ones), then
# select() must say "nothing" (a blocking accept would hang).
cat >"$TMP/acc.py" <<'EOF'
import select, socket, sys
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(8)
print(l.getsockname()[1], flush=True)
cs = []
for i in range(2):
    r, _, _ = select.select([l], [], [], 20)
    assert r, "no connection"
    cs.append(l.accept()[0])
r, _, _ = select.select([l], [], [], 0.3)
print("exact" if not r else "still readable", flush=True)
for c in cs:
    c.recv(1)
EOF
cat >"$TMP/acc_cli.py" <<'EOF'
import socket, sys, time
ss = [socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20) for _ in range(2)]
time.sleep(0.6)
for s in ss:
    s.send(b"x")
EOF
for cp in 0 1; do
    cpl=()
    [ "$cp" = 1 ] && cpl=(LD_PRELOAD="$PL")
    timeout -s KILL 60 env LD_PRELOAD="$PL" UWARP_PRELOAD_LOG=info python3 "$TMP/acc.py" \
        >"$TMP/acc$cp.out" 2>"$TMP/acc$cp.err" &
    apid=$!
    port=
    for i in $(seq 1 200); do
        port=$(head -n1 "$TMP/acc$cp.out" 2>/dev/null)
        [ -n "$port" ] && break
        sleep 0.05
    done
    timeout -s KILL 60 env "${cpl[@]}" python3 "$TMP/acc_cli.py" "$port" 2>"$TMP/acc$cp.cerr"
    wait "$apid"
    expect_eq "listener readiness exact (client preloaded: $cp)" "exact" "$(sed -n 2p "$TMP/acc$cp.out")"
done
expect_grep "listener readiness: TCP clients" 'accept from .*: tcp' "$TMP/acc0.err"
expect_grep "listener readiness: SDP clients" 'accept from .*: sdp' "$TMP/acc1.err"

# asyncio (epoll) echo, 50 connections, both ends preloaded.
cat >"$TMP/aio.py" <<'EOF'
import asyncio, sys
N, MSGS = 50, 200
async def handle(r, w):
    while True:
        b = await r.read(65536)
        if not b:
            break
        w.write(b)
        await w.drain()
    w.close()
async def client(port, i):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    for k in range(MSGS):
        m = b"%d:%d|" % (i, k) * 8
        w.write(m)
        await w.drain()
        got = await r.readexactly(len(m))
        assert got == m, (got, m)
    w.close()
    await w.wait_closed()
    return MSGS
async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    res = await asyncio.wait_for(asyncio.gather(*(client(port, i) for i in range(N))), 120)
    srv.close()
    await srv.wait_closed()
    print("aio", sum(res), flush=True)
asyncio.run(main())
EOF
timeout -s KILL 150 env LD_PRELOAD="$PL" UWARP_PRELOAD_LOG=info python3 "$TMP/aio.py" >"$TMP/aio.out" 2>"$TMP/aio.err"
expect_eq "asyncio: messages echoed" "aio 10000" "$(cat "$TMP/aio.out")"
CHECKS=$((CHECKS + 1))
n=$(grep -c 'connect 127\.0\.0\.1:[0-9]*: sdp' "$TMP/aio.err")
[ "$n" -eq 50 ] || fail "asyncio: $n of 50 connections over SDP"

finish
