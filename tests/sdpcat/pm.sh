#!/usr/bin/env bash
# uwarp-sdpcat through the port mapper (section 7, notes section 4), with a
# real uwarp-pmd on loopback:
#  - a listener with --pm registers its service port, and a connector with
#    --pm gets SDP to it (the -v line says "sdp"), data intact;
#  - the same listener accepts a plain TCP client on its service port;
#  - a service with no mapping (PMDeny) gets plain TCP, data intact;
#  - a port mapper that is not there (ICMP port unreachable) gives plain TCP
#    well within the resolver's timeout, and so does a silent one, once;
#  - after the listener exits, its mapping is gone (PMDeny).
# Called as pm.sh UWARP-SDPCAT SDP-BADPEER UWARP-TESTPROXY UWARP-PMD UWARP-PM.
PMD=${4:?usage: $0 UWARP-SDPCAT SDP-BADPEER UWARP-TESTPROXY UWARP-PMD UWARP-PM}
PMQ=${5:?}
source "$(dirname "$0")/lib.sh"

CTL="$TMP/pmd.sock"
# A job of this shell, so lib.sh's cleanup kills the daemon itself (through
# timeout(1) the kill would stop only timeout).
"$PMD" --port 0 --listen 127.0.0.1 --control "$CTL" 2>"$TMP/pmd.log" &
PMD_PORT=
for _ in $(seq 1 400); do
    PMD_PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$TMP/pmd.log" | head -1)
    [ -n "$PMD_PORT" ] && [ -S "$CTL" ] && break
    sleep 0.05
done
if [ -z "$PMD_PORT" ] || [ ! -S "$CTL" ]; then
    fail "uwarp-pmd did not start: $(cat "$TMP/pmd.log")"
    finish
fi
export UWARP_PMD_CONTROL="$CTL"

head -c 3000000 /dev/urandom >"$TMP/in.bin"

# listen_pm NAME: a --pm listener on a free service port; sets LPID, LPORT.
listen_pm() {
    local name=$1 i
    timeout -s KILL 60 "$SDPCAT" -v --pm --timeout 30 -l 127.0.0.1:0 \
        >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null &
    LPID=$!
    LPORT=
    for i in $(seq 1 400); do
        LPORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$TMP/$name.err" | head -1)
        [ -n "$LPORT" ] && break
        kill -0 "$LPID" 2>/dev/null || break
        sleep 0.05
    done
    if [ -z "$LPORT" ]; then
        fail "$name: --pm listener did not start: $(cat "$TMP/$name.err")"
        finish
    fi
}

# transport_of FILE: the transport of the -v setup line.
transport_of() {
    sed -n 's/.*"transport":"\([a-z]*\)".*/\1/p' "$1" | head -1
}

# 1. SDP through the port mapper.
listen_pm sdp
expect_contains "pm accepts the registered port" "accept" \
    "$("$PMQ" query --server 127.0.0.1:"$PMD_PORT" 127.0.0.1 "$LPORT" 2>&1)"
timeout -s KILL 60 "$SDPCAT" -v --pm --pm-server 127.0.0.1:"$PMD_PORT" --timeout 30 127.0.0.1 "$LPORT" \
    <"$TMP/in.bin" >"$TMP/sdp.cout" 2>"$TMP/sdp.cerr"
expect_eq "sdp: connector exit" 0 "$?"
wait "$LPID"
expect_eq "sdp: listener exit" 0 "$?"
expect_eq "sdp: connector transport" sdp "$(transport_of "$TMP/sdp.cerr")"
expect_eq "sdp: listener transport" sdp "$(transport_of "$TMP/sdp.err")"
expect_true "sdp: data intact" cmp -s "$TMP/in.bin" "$TMP/sdp.out"
# 2. The listener is gone: so is its mapping.
out=$("$PMQ" query --server 127.0.0.1:"$PMD_PORT" 127.0.0.1 "$LPORT" 2>&1)
expect_contains "mapping gone after the listener exits" "deny" "$out"

# 3. A plain TCP client on the service port of a --pm listener.
listen_pm tcpin
timeout -s KILL 60 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(open(sys.argv[2], "rb").read())
s.shutdown(socket.SHUT_WR)
while s.recv(65536):
    pass
' "$LPORT" "$TMP/in.bin"
expect_eq "tcp client: exit" 0 "$?"
wait "$LPID"
expect_eq "tcp client: listener exit" 0 "$?"
expect_eq "tcp client: listener transport" tcp "$(transport_of "$TMP/tcpin.err")"
expect_true "tcp client: data intact" cmp -s "$TMP/in.bin" "$TMP/tcpin.out"

# 4. No mapping: PMDeny, plain TCP to the port as named.
exec {pyout}< <(timeout -s KILL 60 python3 -c '
import socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
print(l.getsockname()[1], flush=True)
c, _ = l.accept()
with open(sys.argv[1], "wb") as f:
    while True:
        b = c.recv(65536)
        if not b:
            break
        f.write(b)
c.close()
' "$TMP/deny.out")
read -r TPORT <&"$pyout"
timeout -s KILL 60 "$SDPCAT" -v --pm --pm-server 127.0.0.1:"$PMD_PORT" --timeout 30 127.0.0.1 "$TPORT" \
    <"$TMP/in.bin" >/dev/null 2>"$TMP/deny.cerr"
expect_eq "deny: connector exit" 0 "$?"
exec {pyout}<&-
for _ in $(seq 1 100); do cmp -s "$TMP/in.bin" "$TMP/deny.out" && break; sleep 0.05; done
expect_eq "deny: transport" tcp "$(transport_of "$TMP/deny.cerr")"
expect_true "deny: data intact" cmp -s "$TMP/in.bin" "$TMP/deny.out"

# 5. No port mapper at all (a closed UDP port: ICMP unreachable): TCP at once.
DEAD=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
exec {pyout}< <(timeout -s KILL 60 python3 -c '
import socket
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
print(l.getsockname()[1], flush=True)
c, _ = l.accept()
while c.recv(65536):
    pass
')
read -r TPORT <&"$pyout"
t0=$(date +%s%N)
echo hello | timeout -s KILL 60 "$SDPCAT" -v --pm --pm-server 127.0.0.1:"$DEAD" --timeout 30 127.0.0.1 "$TPORT" \
    >/dev/null 2>"$TMP/dead.cerr"
expect_eq "no port mapper: connector exit" 0 "$?"
ms=$((($(date +%s%N) - t0) / 1000000))
exec {pyout}<&-
expect_eq "no port mapper: transport" tcp "$(transport_of "$TMP/dead.cerr")"
CHECKS=$((CHECKS + 1))
if [ "$ms" -ge 900 ]; then
    fail "no port mapper: fallback took $ms ms (ICMP unreachable should end the wait at once)"
fi

finish
