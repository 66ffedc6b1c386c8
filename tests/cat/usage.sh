#!/usr/bin/env bash
# uwarp-cat command-line mistakes exit 1 with a message on stderr and nothing
# on stdout; --help exits 0 and documents the interface, the flow-control
# assumption and the exit codes.
# usage: usage.sh UWARP-CAT UWARP-RPING SILENT-PEER
CAT=${1:-} RPING=${2:-} PEER=${3:-}
. "$(dirname "$0")/lib.sh"

usage_err() { # usage_err NAME STDERR_NEEDLE ARGS...
    local name=$1 needle=$2
    shift 2
    "$CAT" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    expect_eq "$name: rc" 1 "$rc"
    expect_eq "$name: stdout" "" "$(cat "$TMP/out")"
    expect_contains "$name: stderr" "$needle" "$(cat "$TMP/err")"
}

usage_err "no arguments" "HOST PORT"
usage_err "host only" "HOST PORT" 127.0.0.1
usage_err "too many" "too many" 127.0.0.1 1 2
usage_err "listen plus host" "no HOST PORT" -l 0 127.0.0.1 1
usage_err "listen without port" "-l needs" -l
usage_err "unknown option" "unknown option '--bogus'" --bogus 127.0.0.1 1
usage_err "initiator --reject" "--reject is for the responder" --reject 127.0.0.1 1
usage_err "initiator --accept-rev0" "--accept-rev0" --accept-rev0 127.0.0.1 1
usage_err "rev 3" "--rev must be 1 or 2" --rev 3 127.0.0.1 1
usage_err "rev missing" "needs a value" 127.0.0.1 1 --rev
usage_err "p2p bad type" "--p2p takes" --p2p send,fetch 127.0.0.1 1
usage_err "p2p trailing comma" "--p2p takes" --p2p send, 127.0.0.1 1
usage_err "p2p with rev 1" "--p2p needs --rev 2" --rev 1 --p2p write 127.0.0.1 1
usage_err "ird too big" "--ird" --ird 16384 127.0.0.1 1
usage_err "ird zero" "--ird 0" --ird 0 127.0.0.1 1
usage_err "ord not a number" "--ord" --ord x 127.0.0.1 1
usage_err "ird with rev 1" "--rev 2" --rev 1 --ird 4 127.0.0.1 1
usage_err "pd not hex" "--pd: not hex" --pd 0g 127.0.0.1 1
usage_err "pd odd" "--pd" --pd abc 127.0.0.1 1
usage_err "pd too long for rev 2" "at most 508" --pd "$(printf '%01018d' 0)" 127.0.0.1 1
usage_err "pd too long" "at most 512" --rev 1 --pd "$(printf '%01026d' 0)" 127.0.0.1 1
usage_err "timeout zero" "--timeout" --timeout 0 127.0.0.1 1
usage_err "timeout negative" "--timeout" --timeout -1 127.0.0.1 1
usage_err "timeout exponent" "--timeout" --timeout 1e3 127.0.0.1 1
usage_err "msg-size zero" "--msg-size" --msg-size 0 127.0.0.1 1
usage_err "msg-size too big" "--msg-size" --msg-size 1048577 127.0.0.1 1
usage_err "bad port" "invalid port" 127.0.0.1 65536
usage_err "port zero to connect" "port 0" 127.0.0.1 0
usage_err "bad listen address" "IPv6" -l ::1:5000
usage_err "unresolvable host" "cannot resolve" no-such-host.invalid 1

"$CAT" --help >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_eq "--help rc" 0 "$rc"
H=$(cat "$TMP/out")
for needle in "-l [ADDR:]PORT" "HOST PORT" "--rev 1|2" "--markers" "--no-crc" "--p2p LIST" \
    "--ird N" "--pd HEX" "--reject" "--accept-rev0" "--timeout S" "--msg-size N" \
    "64 receives posted" "3 rejected by the peer" "4 timeout"; do
    expect_contains "--help mentions $needle" "$needle" "$H"
done
"$CAT" -h >"$TMP/out2" 2>&1
expect_eq "-h is --help" "$H" "$(cat "$TMP/out2")"

finish
