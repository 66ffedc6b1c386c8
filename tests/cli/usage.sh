#!/usr/bin/env bash
# Command-line mistakes exit 1 with a message on stderr and nothing on stdout;
# --help exits 0 and documents the formats and exit codes.
BIN=${1:-}
. "$(dirname "$0")/lib.sh"

usage_err() { # usage_err NAME STDERR_NEEDLE ARGS...
    local name=$1 needle=$2
    shift 2
    run "$BIN" "$@"
    expect_eq "$name: rc" 1 "$RC"
    expect_eq "$name: stdout" "" "$OUT"
    expect_contains "$name: stderr" "$needle" "$ERR"
}

usage_err "no command" "missing command"
usage_err "unknown command" "unknown command"  frobnicate
usage_err "help for unknown command" "no help" help frobnicate
usage_err "encode unknown option" "unknown option '--bogus'" encode --bogus
usage_err "encode stray argument" "unexpected argument" encode file.hex
usage_err "offset too big" "bad --offset" encode --offset 4294967296
usage_err "hex offset too big" "bad --offset" decode --offset 0x100000000
usage_err "negative offset" "bad --offset" encode --offset -1
usage_err "empty hex offset" "bad --offset" encode --offset 0x
usage_err "offset not a number" "bad --offset" decode --offset 12ab
usage_err "offset missing" "needs a value" decode --offset
usage_err "frame without type" "--req" frame
usage_err "frame req and rep" "exclude" frame --req --rep
usage_err "reject in a request" "--reject" frame --req --reject
usage_err "word with rev 1" "--rev 2" frame --req --rev 1 --ird 1
usage_err "p2p with rev 0" "--rev 2" frame --rep --rev 0 --p2p send
usage_err "ird too big" "bad --ird" frame --req --ird 16384
usage_err "ord not a number" "bad --ord" frame --req --ord x
usage_err "rev too big" "bad --rev" frame --req --rev 256
usage_err "p2p unknown type" "bad --p2p" frame --req --p2p send,fetch
usage_err "p2p trailing comma" "bad --p2p" frame --req --p2p send,
usage_err "pd not hex" "bad --pd" frame --req --pd 0g
usage_err "pd odd" "odd" frame --req --pd abc
usage_err "parse-frame option" "unknown option" parse-frame --req
usage_err "demo option" "unknown option" demo --fast

# Bad hex on an input line names the line; FPDUs before it are written.
printf '0102\n\n zz \n0304\n' >"$TMP/in"
IN=$TMP/in RUN_HEX=1 run "$BIN" encode
expect_eq "bad hex line: rc" 1 "$RC"
expect_contains "bad hex line: names line 3" "line 3" "$ERR"
BADOUT=$OUT
printf '0102\n\n' >"$TMP/in"
IN=$TMP/in RUN_HEX=1 run "$BIN" encode
expect_eq "bad hex line: the two good FPDUs are written" "$OUT" "$BADOUT"
expect_eq "bad hex line: 16 octets before it" 32 "${#BADOUT}"
printf '010\n' >"$TMP/in"
IN=$TMP/in run "$BIN" encode --markers
expect_eq "odd digits: rc" 1 "$RC"
expect_contains "odd digits: names line 1" "line 1" "$ERR"
printf '01 02\n' >"$TMP/in"
IN=$TMP/in run "$BIN" encode
expect_eq "space inside a line: rc" 1 "$RC"

# A ULPDU too long to frame is a protocol error (exit 2).
awk 'BEGIN { s = "00"; while (length(s) < 131072) s = s s; print "ab"; print s }' >"$TMP/in"
IN=$TMP/in RUN_HEX=1 run "$BIN" encode
expect_eq "65536-octet ULPDU: rc" 2 "$RC"
expect_contains "65536-octet ULPDU: reason" "message too long" "$ERR"
expect_contains "65536-octet ULPDU: line" "line 2" "$ERR"

# Help.
run "$BIN" --help
expect_eq "--help rc" 0 "$RC"
for word in encode decode frame parse-frame demo '"mpa_error"' '"ulpdu_len"' '"c_rtr"' \
    'Exit codes' crc_mismatch marker_mismatch truncated 16383; do
    expect_contains "--help mentions $word" "$word" "$OUT"
done
for cmd in encode decode frame parse-frame demo; do
    run "$BIN" "$cmd" --help
    expect_eq "$cmd --help rc" 0 "$RC"
    expect_contains "$cmd --help shows its usage" "uwarp-mpa $cmd" "$OUT"
    expect_contains "$cmd --help shows exit codes" "Exit codes" "$OUT"
    run "$BIN" help "$cmd"
    expect_eq "help $cmd rc" 0 "$RC"
done
run "$BIN" encode --bogus --help
expect_eq "--help wins over a bad option" 0 "$RC"

finish
