#!/usr/bin/env bash
# redis-server with `redis-benchmark -t set,get -n 100000 -c 50` (every SET
# and GET counted in the server's own statistics) and redis-cli storing a
# value of 1 MiB and reading it back (SHA-256); both ends preloaded over SDP
# (log, wire), then with one end preloaded and under --tcp-only over TCP
# (20,000 requests).
# Called as redis.sh PORT-BASE PRELOAD-LIB UWARP-RUN UWARP-PMD UWARP-PM.
source "$(dirname "$0")/lib.sh"

head -c $((1 << 20)) /dev/urandom >"$TMP/big.bin"
BIG_SHA=$(sha "$TMP/big.bin")

# cmdstat FILE CMD: the calls of CMD in an INFO commandstats reply.
cmdstat() {
    sed -n "s/^cmdstat_$2:calls=\([0-9]*\),.*/\1/p" "$1" | tr -d '\r'
}

# redis_case NAME MODE REQUESTS
redis_case() {
    local name=$1 mode=$2 n=$3 p g cli
    port
    p=$PORT
    mkdir -p "$TMP/$name.dir"
    spawn "$name.s" "$mode" server redis-server --port "$p" --bind 127.0.0.1 --save "" \
        --appendonly no --dir "$TMP/$name.dir" --daemonize no --protected-mode no --logfile ""
    g=$SPGID
    if ! server_ready "$name" "$mode" "$p" "$g"; then
        stop "$g" KILL
        tail_of "$TMP/$name.s.out" "$TMP/$name.s.err" >&2
        return
    fi
    cli=(redis-cli -h 127.0.0.1 -p "$p")
    run "$name.bench" "$mode" client 120 redis-benchmark -h 127.0.0.1 -p "$p" -t set,get -n "$n" -c 50 --csv
    expect_eq "$name: redis-benchmark exit" 0 "$RC"
    local set get
    set=$(sed -n 's/^"SET","\([0-9.]*\)".*/\1/p' "$TMP/$name.bench.out")
    get=$(sed -n 's/^"GET","\([0-9.]*\)".*/\1/p' "$TMP/$name.bench.out")
    CHECKS=$((CHECKS + 1))
    if [ -z "$set" ] || [ -z "$get" ]; then
        fail "$name: redis-benchmark printed no SET and GET rates"
        tail_of "$TMP/$name.bench.out" "$TMP/$name.bench.err" >&2
    else
        note "$name: redis-benchmark -c 50: SET $set requests/s, GET $get requests/s"
    fi
    RUN_IN=$TMP/big.bin run "$name.set" "$mode" client 30 "${cli[@]}" -x SET big
    expect_eq "$name: redis-cli -x SET of 1 MiB" "0 OK" "$RC $(cat "$TMP/$name.set.out")"
    run "$name.get" "$mode" client 30 "${cli[@]}" --raw GET big
    expect_eq "$name: redis-cli GET exit" 0 "$RC"
    # --raw ends the value with a newline of its own
    expect_eq "$name: redis-cli GET: sha256 of the 1 MiB value" "$BIG_SHA" \
        "$(head -c $((1 << 20)) "$TMP/$name.get.out" | sha256sum | cut -d' ' -f1)"
    expect_eq "$name: redis-cli GET: length" $(((1 << 20) + 1)) "$(stat -c %s "$TMP/$name.get.out")"
    run "$name.info" "$mode" client 30 "${cli[@]}" INFO commandstats
    expect_ge "$name: SETs the server executed" "$(cmdstat "$TMP/$name.info.out" set)" $((n + 1))
    expect_ge "$name: GETs the server executed" "$(cmdstat "$TMP/$name.info.out" get)" $((n + 1))
    stop "$g" TERM 20
    expect_eq "$name: redis-server exit after SIGTERM" 0 "$SRC"
    case_failed && tail_of "$TMP/$name.s.out" "$TMP/$name.bench.err" >&2
    # The client logs are of four programs: redis-benchmark's 50 connections
    # (and one for its CONFIG GET), then three redis-cli runs.
    cat "$TMP/$name".{bench,set,get,info}.plog >"$TMP/$name.c.plog" 2>/dev/null
    log_check "$name" "$mode" "$name.s" "$name.c" 53
    wire_expect "$name" "$mode" "$p" "$SDPPORT" 53
}

for mode in "${MODES[@]}"; do
    begin_phase "$mode" || continue
    case $mode in
    sdp | plain) redis_case "$mode" "$mode" 100000 ;;
    *) redis_case "$mode" "$mode" 20000 ;;
    esac
done
finish
