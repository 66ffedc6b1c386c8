#!/usr/bin/env bash
# A python3 asyncio echo server and client (echo.py; asyncio's event loop is
# epoll): 200 connections open at once, 10,000 messages each written while
# the echo is read back, every connection's octets checked (length and
# SHA-256); both ends preloaded, every connection over SDP (log, wire). With
# one end preloaded and under --tcp-only: 50 connections x 2,000 messages
# over TCP.
# Called as echo.sh PORT-BASE PRELOAD-LIB UWARP-RUN UWARP-PMD UWARP-PM.
source "$(dirname "$0")/lib.sh"

# echo_case NAME MODE CONNS MSGS
echo_case() {
    local name=$1 mode=$2 conns=$3 msgs=$4 p g
    port
    p=$PORT
    spawn "$name.s" "$mode" server python3 "$APPS_DIR/echo.py" server "$p" --expect "$conns"
    g=$SPGID
    if ! server_ready "$name" "$mode" "$p" "$g"; then
        stop "$g" KILL
        tail_of "$TMP/$name.s.out" "$TMP/$name.s.err" >&2
        return
    fi
    run "$name.c" "$mode" client 120 python3 "$APPS_DIR/echo.py" client "$p" --conns "$conns" --msgs "$msgs"
    expect_eq "$name: client exit" 0 "$RC"
    expect_contains "$name: client result" "$conns connections x $msgs messages" "$(cat "$TMP/$name.c.out")"
    wait_group "$g" 20
    expect_eq "$name: server exit" 0 "$SRC"
    expect_contains "$name: server saw every connection at once" \
        "$conns connections, peak $conns concurrent" "$(cat "$TMP/$name.s.out")"
    case_failed && tail_of "$TMP/$name.c.err" "$TMP/$name.s.err" >&2
    note "$name: $(cat "$TMP/$name.c.out")"
    log_check "$name" "$mode" "$name.s" "$name.c" "$conns"
    wire_expect "$name" "$mode" "$p" "$SDPPORT" "$conns"
}

for mode in "${MODES[@]}"; do
    begin_phase "$mode" || continue
    case $mode in
    sdp | plain) echo_case "$mode" "$mode" 200 10000 ;;
    *) echo_case "$mode" "$mode" 50 2000 ;;
    esac
done
finish
