#!/usr/bin/env bash
# 256 MiB through uwarp-cat from one namespace to the other at MTU 1500 and
# 9000, markers off and on, and 64 MiB at MTU 1500 through the test proxy
# holding every chunk 0-2 ms: the data arrives identical (SHA-256).
# usage: bulk.sh UWARP-CAT UWARP-TESTPROXY
CAT=$1 PROXY=$2
. "$(dirname "$0")/lib.sh"

head -c $((256 << 20)) /dev/urandom >"$TMP/big.bin"
WANT=$(sha256sum "$TMP/big.bin" | cut -d' ' -f1)

for mtu in 1500 9000; do
    up "$mtu"
    for mk in off on; do
        opts=()
        [ "$mk" = on ] && opts=(--markers)
        name=mtu$mtu-markers$mk
        start=$EPOCHREALTIME
        serve "$name" "${opts[@]}"
        [ -n "$SPORT" ] || continue
        send "$name" "$TMP/big.bin" "$ADDR_A" "$SPORT" "${opts[@]}"
        wait_rc "$SPID" 60
        echo "$name: 256 MiB in $(( (${EPOCHREALTIME/./} - ${start/./}) / 1000 )) ms"
        expect_eq "$name: rcs ($(tail -n1 "$TMP/$name.i.err"))" "0 0" "$CRC $WRC"
        expect_eq "$name: data" "$WANT" "$(cat "$TMP/$name.sha")"
    done
done

# Through the proxy in A: B -> proxy on ADDR_A -> responder on 127.0.0.1.
up 1500
head -c $((64 << 20)) "$TMP/big.bin" >"$TMP/mid.bin"
WANT=$(sha256sum "$TMP/mid.bin" | cut -d' ' -f1)
LADDR=127.0.0.1 serve proxy
if [ -n "$SPORT" ]; then
    in_a "$PROXY" --listen "$ADDR_A" --delay-ms 0-2 --seed 5 --timeout 240 0 127.0.0.1 "$SPORT" \
        >"$TMP/proxy.out" 2>"$TMP/proxy.err" &
    PPID_=$!
    BG_PIDS+=("$PPID_")
    for _ in $(seq 100); do
        grep -q '^PORT' "$TMP/proxy.out" 2>/dev/null && break
        sleep 0.05
    done
    PPORT=$(sed -n 's/^PORT \([0-9]*\)/\1/p' "$TMP/proxy.out")
    send proxy "$TMP/mid.bin" "$ADDR_A" "$PPORT"
    wait_rc "$SPID" 60
    expect_eq "proxy: rcs ($(tail -n1 "$TMP/proxy.i.err"))" "0 0" "$CRC $WRC"
    expect_eq "proxy: data" "$WANT" "$(cat "$TMP/proxy.sha")"
    wait_rc "$PPID_" 30
    expect_eq "proxy: proxy rc ($(tail -n2 "$TMP/proxy.err"))" 0 "$WRC"
fi
summary
