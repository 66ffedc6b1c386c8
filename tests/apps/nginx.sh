#!/usr/bin/env bash
# nginx in the foreground (daemon off; master_process off; a private prefix,
# configuration, logs and temporary directories) serving a 64 MiB file to
# curl twice: with sendfile on (/sf/) and off (/rw/: read and writev),
# SHA-256 checked; both ends preloaded over SDP (log, wire), then with one
# end preloaded and under --tcp-only over TCP.
# Called as nginx.sh PORT-BASE PRELOAD-LIB UWARP-RUN UWARP-PMD UWARP-PM.
source "$(dirname "$0")/lib.sh"

WWW=$TMP/www
mkdir -p "$WWW/sf" "$WWW/rw"
head -c $((64 << 20)) /dev/urandom >"$WWW/sf/big.bin"
ln "$WWW/sf/big.bin" "$WWW/rw/big.bin"
BIG_SHA=$(sha "$WWW/sf/big.bin")

# nginx_conf PREFIX PORT: writes PREFIX/nginx.conf.
nginx_conf() {
    local pre=$1 p=$2
    mkdir -p "$pre/tmp" "$pre/logs"
    cat >"$pre/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $pre/nginx.pid;
error_log $pre/logs/error.log info;
events { worker_connections 256; }
http {
    access_log $pre/logs/access.log;
    client_body_temp_path $pre/tmp/body;
    proxy_temp_path $pre/tmp/proxy;
    fastcgi_temp_path $pre/tmp/fastcgi;
    uwsgi_temp_path $pre/tmp/uwsgi;
    scgi_temp_path $pre/tmp/scgi;
    types { application/octet-stream bin; }
    server {
        listen 127.0.0.1:$p;
        root $WWW;
        location /sf/ { sendfile on; }
        location /rw/ { sendfile off; }
    }
}
CONF
}

# nginx_case NAME MODE
nginx_case() {
    local name=$1 mode=$2 p g pre=$TMP/$1.nginx loc
    port
    p=$PORT
    nginx_conf "$pre" "$p"
    spawn "$name.s" "$mode" server nginx -p "$pre" -c "$pre/nginx.conf" -e "$pre/logs/error.log"
    g=$SPGID
    if ! server_ready "$name" "$mode" "$p" "$g"; then
        stop "$g" KILL
        tail_of "$TMP/$name.s.err" "$pre/logs/error.log" >&2
        return
    fi
    for loc in sf rw; do
        run "$name.$loc" "$mode" client 60 curl -fsS --max-time 50 -o "$TMP/$name.$loc.got" \
            "http://127.0.0.1:$p/$loc/big.bin"
        expect_eq "$name: curl /$loc/ exit" 0 "$RC"
        expect_eq "$name: sha256 of the 64 MiB file from /$loc/" "$BIG_SHA" "$(sha "$TMP/$name.$loc.got" 2>/dev/null)"
        rm -f "$TMP/$name.$loc.got"
    done
    stop "$g" TERM 20
    expect_eq "$name: nginx exit after SIGTERM" 0 "$SRC"
    expect_eq "$name: requests nginx logged with status 200" 2 "$(grep -c '" 200 ' "$pre/logs/access.log")"
    case_failed && tail_of "$TMP/$name.sf.err" "$TMP/$name.rw.err" "$pre/logs/error.log" >&2
    cat "$TMP/$name".{sf,rw}.plog >"$TMP/$name.c.plog" 2>/dev/null
    log_check "$name" "$mode" "$name.s" "$name.c" 2
    wire_expect "$name" "$mode" "$p" "$SDPPORT" 2
}

for mode in "${MODES[@]}"; do
    begin_phase "$mode" || continue
    nginx_case "$mode" "$mode"
done
finish
