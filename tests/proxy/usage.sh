#!/usr/bin/env bash
# Command-line mistakes exit 1, runtime failures 2, each with a message on
# stderr; --help exits 0.
. "$(dirname "$0")/lib.sh"

run() {
    "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

usage_err() { # usage_err NAME STDERR_NEEDLE ARGS...
    local name=$1 needle=$2
    shift 2
    run "$PROXY" "$@"
    expect_eq "$name: rc" 1 "$RC"
    expect_eq "$name: stdout" "" "$OUT"
    expect_contains "$name: stderr" "$needle" "$ERR"
}

usage_err "no arguments" "expected LISTEN_PORT"
usage_err "two arguments" "expected LISTEN_PORT" 0 localhost
usage_err "extra argument" "unexpected argument" 0 localhost 1 2
usage_err "unknown option" "unknown option '--bogus'" --bogus 0 localhost 1
usage_err "bad listen port" "bad LISTEN_PORT" 65536 localhost 1
usage_err "hex port" "bad LISTEN_PORT" 0x10 localhost 1
usage_err "target port 0" "bad TARGET_PORT" 0 localhost 0
usage_err "missing value" "needs a value" 0 localhost 1 --count
usage_err "count 0" "at least 1" --count 0 0 localhost 1
usage_err "count word" "bad --count" --count many 0 localhost 1
usage_err "bad dir" "bad --dir" --dir up 0 localhost 1
usage_err "delay reversed" "bad --delay-ms" --delay-ms 5-2 0 localhost 1
usage_err "delay junk" "bad --delay-ms" --delay-ms 5- 0 localhost 1
usage_err "max-seg 0" "--max-seg" --max-seg 0 0 localhost 1
usage_err "max-seg over buffer" "--max-seg" --buffer 8K --max-seg 9K 0 localhost 1
usage_err "both corrupt modes" "exclude" --corrupt 1 --corrupt-every 10 0 localhost 1
usage_err "span without corrupt" "needs --corrupt" --corrupt-span 10 0 localhost 1
usage_err "span below count" "--corrupt-span" --corrupt 11 --corrupt-span 10 0 localhost 1
usage_err "bad suffix" "bad --corrupt-after" --corrupt-after 1T 0 localhost 1
usage_err "bad listen address" "bad --listen" --listen nowhere 0 localhost 1

run "$PROXY" --help
expect_eq "help: rc" 0 "$RC"
expect_contains "help: usage" "usage: uwarp-testproxy [OPTIONS] LISTEN_PORT" "$OUT"
expect_contains "help: exit codes" "4 timeout" "$OUT"

# --opt=value works like --opt value; K suffixes; the seed is echoed.
bg eq_srv "$PEER" listen --echo --timeout 50
SP=$(port_of eq_srv)
bg eq_px "$PROXY" --timeout=20 --seed=0x10 --max-seg=1K --split 0 127.0.0.1 "$SP"
PORT=$(port_of eq_px)
run "$PEER" connect "$PORT" --timeout 50 --send 5000
expect_eq "equals form: echo" 5000 "$(field received "$(grep '^done' "$TMP/out")")"
wait_bg eq_px
expect_eq "equals form: rc" 0 "$RC"
expect_contains "equals form: seed" "seed 16" "$(cat "$TMP/eq_px.err")"
wait_bg eq_srv

# A target that refuses: exit 2 and say so. The port was just closed.
bg gone "$PEER" listen --timeout 50
GONE=$(port_of gone)
kill "$PID_gone"
wait "$PID_gone" 2>/dev/null
bg ref_px "$PROXY" --timeout 20 0 127.0.0.1 "$GONE"
PORT=$(port_of ref_px)
run "$PEER" connect "$PORT" --timeout 50 --send 10
wait_bg ref_px
expect_eq "refused: rc" 2 "$RC"
expect_contains "refused: message" "cannot connect to 127.0.0.1 port $GONE" "$(cat "$TMP/ref_px.err")"

# Unwritable log, unresolvable target: runtime errors, not usage errors.
run "$PROXY" --log "$TMP/no/such/dir/log" 0 127.0.0.1 1
expect_eq "bad log: rc" 2 "$RC"
expect_contains "bad log: message" "cannot open --log" "$ERR"
run "$PROXY" 0 no-such-host.invalid 1
expect_eq "bad host: rc" 2 "$RC"
expect_contains "bad host: message" "cannot resolve no-such-host.invalid" "$ERR"

finish
