#!/usr/bin/env bash
# curl to `python3 -m http.server` (a threading server): a 16 MiB file
# (SHA-256 checked) and the directory listing; both ends preloaded over SDP
# (log, wire), then with one end preloaded and under --tcp-only over TCP.
# Called as http_server.sh PORT-BASE PRELOAD-LIB UWARP-RUN UWARP-PMD UWARP-PM.
source "$(dirname "$0")/lib.sh"

WWW=$TMP/www
mkdir -p "$WWW"
head -c $((16 << 20)) /dev/urandom >"$WWW/file.bin"
FILE_SHA=$(sha "$WWW/file.bin")

# http_case NAME MODE
http_case() {
    local name=$1 mode=$2 p g
    port
    p=$PORT
    spawn "$name.s" "$mode" server python3 -u -m http.server "$p" --bind 127.0.0.1 --directory "$WWW"
    g=$SPGID
    if ! server_ready "$name" "$mode" "$p" "$g"; then
        stop "$g" KILL
        tail_of "$TMP/$name.s.out" "$TMP/$name.s.err" >&2
        return
    fi
    run "$name.get" "$mode" client 60 curl -fsS --max-time 50 -o "$TMP/$name.got" "http://127.0.0.1:$p/file.bin"
    expect_eq "$name: curl file exit" 0 "$RC"
    expect_eq "$name: sha256 of the 16 MiB file" "$FILE_SHA" "$(sha "$TMP/$name.got" 2>/dev/null)"
    run "$name.ls" "$mode" client 30 curl -fsS --max-time 20 "http://127.0.0.1:$p/"
    expect_eq "$name: curl listing exit" 0 "$RC"
    expect_contains "$name: the listing names the file" 'href="file.bin"' "$(cat "$TMP/$name.ls.out")"
    stop "$g" INT 10
    expect_eq "$name: requests the server logged with status 200" 2 "$(grep -c '" 200 ' "$TMP/$name.s.err")"
    case_failed && tail_of "$TMP/$name.get.err" "$TMP/$name.s.err" >&2
    rm -f "$TMP/$name.got"
    cat "$TMP/$name".{get,ls}.plog >"$TMP/$name.c.plog" 2>/dev/null
    log_check "$name" "$mode" "$name.s" "$name.c" 2
    wire_expect "$name" "$mode" "$p" "$SDPPORT" 2
}

for mode in "${MODES[@]}"; do
    begin_phase "$mode" || continue
    http_case "$mode" "$mode"
done
finish
