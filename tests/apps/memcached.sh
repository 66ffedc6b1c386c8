#!/usr/bin/env bash
# memcached, threaded (-t 4), with a client (memcache_client.py, raw sockets,
# four connections from four threads) storing 1,000 keys and reading them
# back, every value checked; both ends preloaded over SDP (log, wire), then
# with one end preloaded and under --tcp-only over TCP.
# Called as memcached.sh PORT-BASE PRELOAD-LIB UWARP-RUN UWARP-PMD UWARP-PM.
source "$(dirname "$0")/lib.sh"

# mc_case NAME MODE
mc_case() {
    local name=$1 mode=$2 p g
    port
    p=$PORT
    # -U 0: no UDP; -u root: memcached refuses to run as root otherwise
    spawn "$name.s" "$mode" server memcached -l 127.0.0.1 -p "$p" -U 0 -t 4 -m 64 -c 1024 -u root
    g=$SPGID
    if ! server_ready "$name" "$mode" "$p" "$g"; then
        stop "$g" KILL
        tail_of "$TMP/$name.s.out" "$TMP/$name.s.err" >&2
        return
    fi
    run "$name.c" "$mode" client 60 python3 "$APPS_DIR/memcache_client.py" "$p" --keys 1000 --conns 4
    expect_eq "$name: client exit" 0 "$RC"
    expect_contains "$name: every key stored and read back" "stored 1000 keys, read back 1000, threads 4" \
        "$(cat "$TMP/$name.c.out")"
    note "$name: $(cat "$TMP/$name.c.out")"
    stop "$g" TERM 10
    expect_eq "$name: memcached exit after SIGTERM" 0 "$SRC"
    case_failed && tail_of "$TMP/$name.c.err" "$TMP/$name.s.err" >&2
    log_check "$name" "$mode" "$name.s" "$name.c" 5
    wire_expect "$name" "$mode" "$p" "$SDPPORT" 5
}

for mode in "${MODES[@]}"; do
    begin_phase "$mode" || continue
    mc_case "$mode" "$mode"
done
finish
