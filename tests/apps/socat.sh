#!/usr/bin/env bash
# socat relaying a 32 MiB file between a listener (TCP-LISTEN) and a client
# (TCP), once each way (upload: client to listener; download: listener to
# client), SHA-256 checked; both ends preloaded over SDP (log, wire), then
# with one end preloaded and under --tcp-only over TCP.
# Called as socat.sh PORT-BASE PRELOAD-LIB UWARP-RUN UWARP-PMD UWARP-PM.
source "$(dirname "$0")/lib.sh"

head -c $((32 << 20)) /dev/urandom >"$TMP/in.bin"
IN_SHA=$(sha "$TMP/in.bin")

# relay NAME MODE up|down
relay() {
    local name=$1 mode=$2 dir=$3 p g out=$TMP/$1.got
    port
    p=$PORT
    if [ "$dir" = up ]; then
        spawn "$name.s" "$mode" server socat -b 65536 -u \
            "TCP-LISTEN:$p,bind=127.0.0.1,reuseaddr" "CREATE:$out"
    else
        spawn "$name.s" "$mode" server socat -b 65536 -u \
            "OPEN:$TMP/in.bin" "TCP-LISTEN:$p,bind=127.0.0.1,reuseaddr"
    fi
    g=$SPGID
    if ! server_ready "$name" "$mode" "$p" "$g"; then
        stop "$g" KILL
        tail_of "$TMP/$name.s.err" >&2
        return
    fi
    if [ "$dir" = up ]; then
        run "$name.c" "$mode" client 60 socat -b 65536 -u "OPEN:$TMP/in.bin" "TCP:127.0.0.1:$p"
    else
        run "$name.c" "$mode" client 60 socat -b 65536 -u "TCP:127.0.0.1:$p" "CREATE:$out"
    fi
    expect_eq "$name: client exit" 0 "$RC"
    wait_group "$g" 20
    expect_eq "$name: listener exit" 0 "$SRC"
    expect_eq "$name: sha256 of the relayed file" "$IN_SHA" "$(sha "$out" 2>/dev/null)"
    case_failed && tail_of "$TMP/$name.c.err" "$TMP/$name.s.err" >&2
    rm -f "$out"
    log_check "$name" "$mode" "$name.s" "$name.c" 1
    wire_expect "$name" "$mode" "$p" "$SDPPORT" 1
}

for mode in "${MODES[@]}"; do
    begin_phase "$mode" || continue
    relay "$mode-up" "$mode" up
    relay "$mode-down" "$mode" down
done
finish
