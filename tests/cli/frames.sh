#!/usr/bin/env bash
# `frame` builds startup frames byte for byte (RFC 5044 7.1.1, RFC 6581 9);
# `parse-frame` reads them back as JSON and rejects invalid ones with exit 2.
BIN=${1:-}
. "$(dirname "$0")/lib.sh"

REQ=4d504120494420526571204672616d65 # "MPA ID Req Frame"
REP=4d504120494420526570204672616d65 # "MPA ID Rep Frame"

# case NAME "FRAME OPTIONS" EXPECTED_HEX EXPECTED_JSON
case_() {
    local name=$1 opts=$2 hex=$3 json=$4
    # shellcheck disable=SC2086  # the options are split on purpose
    RUN_HEX=1 run "$BIN" frame $opts
    expect_eq "$name: frame rc ($ERR)" 0 "$RC"
    expect_eq "$name: frame bytes" "$hex" "$OUT"
    cp "$TMP/out" "$TMP/frame"
    IN=$TMP/frame run "$BIN" parse-frame
    expect_eq "$name: parse-frame rc ($ERR)" 0 "$RC"
    expect_eq "$name: parse-frame JSON" "$json" "$OUT"
}

NOWORD='"ird":null,"ord":null,"a":null,"b":null,"c_rtr":null,"d":null'

# What Linux siw sends as Initiator.
case_ "siw request" "--req --rev 2 --no-crc --ird 1 --ord 1" "${REQ}1002000400010001" \
    '{"key":"req","m":false,"c":false,"r":false,"s":true,"rev":2,"pd_length":4,"ird":1,"ord":1,"a":false,"b":false,"c_rtr":false,"d":false,"pd":"","res":0}'
case_ "plain request" "--req" "${REQ}40010000" \
    '{"key":"req","m":false,"c":true,"r":false,"s":false,"rev":1,"pd_length":0,'"$NOWORD"',"pd":"","res":0}'
case_ "reject reply with markers and pd" "--rep --markers --reject --pd 0102AbCd" \
    "${REP}e00100040102abcd" \
    '{"key":"rep","m":true,"c":true,"r":true,"s":false,"rev":1,"pd_length":4,'"$NOWORD"',"pd":"0102abcd","res":0}'
case_ "p2p send,read, ird only" "--rep --p2p send,read --ird 5 --pd ff" "${REP}50020005c0057fffff" \
    '{"key":"rep","m":false,"c":true,"r":false,"s":true,"rev":2,"pd_length":5,"ird":5,"ord":16383,"a":true,"b":true,"c_rtr":false,"d":true,"pd":"ff","res":0}'
case_ "p2p without RTR" "--req --p2p=" "${REQ}50020004bfff3fff" \
    '{"key":"req","m":false,"c":true,"r":false,"s":true,"rev":2,"pd_length":4,"ird":16383,"ord":16383,"a":true,"b":false,"c_rtr":false,"d":false,"pd":"","res":0}'
case_ "p2p write, rev 3, markers, no crc" "--req --p2p write --ord 0 --ird 0x3fff --rev 3 --no-crc --markers" \
    "${REQ}90030004bfff8000" \
    '{"key":"req","m":true,"c":false,"r":false,"s":true,"rev":3,"pd_length":4,"ird":16383,"ord":0,"a":true,"b":false,"c_rtr":true,"d":false,"pd":"","res":0}'
case_ "all RTR types, ord only" "--req --p2p read,write,send --ord 16" "${REQ}50020004ffffc010" \
    '{"key":"req","m":false,"c":true,"r":false,"s":true,"rev":2,"pd_length":4,"ird":16383,"ord":16,"a":true,"b":true,"c_rtr":true,"d":true,"pd":"","res":0}'
case_ "enhanced reject reply" "--rep --reject --ird 0 --ord 7 --pd 00" "${REP}7002000500000007""00" \
    '{"key":"rep","m":false,"c":true,"r":true,"s":true,"rev":2,"pd_length":5,"ird":0,"ord":7,"a":false,"b":false,"c_rtr":false,"d":false,"pd":"00","res":0}'
case_ "rev 2 without the word" "--rep --rev 2" "${REP}40020000" \
    '{"key":"rep","m":false,"c":true,"r":false,"s":false,"rev":2,"pd_length":0,'"$NOWORD"',"pd":"","res":0}'
PD512=$(printf '%01024d' 0)
case_ "512 octets of private data" "--req --pd $PD512" "${REQ}40010200$PD512" \
    '{"key":"req","m":false,"c":true,"r":false,"s":false,"rev":1,"pd_length":512,'"$NOWORD"',"pd":"'"$PD512"'","res":0}'
case_ "word plus 508 octets" "--req --ird 2 --ord 3 --pd ${PD512:8}" \
    "${REQ}500202000002""0003${PD512:8}" \
    '{"key":"req","m":false,"c":true,"r":false,"s":true,"rev":2,"pd_length":512,"ird":2,"ord":3,"a":false,"b":false,"c_rtr":false,"d":false,"pd":"'"${PD512:8}"'","res":0}'

# Too much private data cannot be framed: protocol error, exit 2.
RUN_HEX=1 run "$BIN" frame --req --pd "${PD512}00"
expect_eq "513 octets of pd: rc" 2 "$RC"
expect_eq "513 octets of pd: no output" "" "$OUT"
expect_contains "513 octets of pd: says why" "512" "$ERR"
RUN_HEX=1 run "$BIN" frame --req --ird 1 --pd "${PD512:6}"
expect_eq "word plus 509 octets: rc" 2 "$RC"
expect_eq "word plus 509 octets: no output" "" "$OUT"

# parse-frame reports every bit as on the wire: reserved bits, S below Rev 2
# (no word then), flags B-D with A clear.
pf() { # pf NAME HEX EXPECTED_RC EXPECTED_STDOUT [STDERR_NEEDLE]
    unhex "$2" >"$TMP/pf"
    IN=$TMP/pf run "$BIN" parse-frame
    expect_eq "$1: rc ($ERR)" "$3" "$RC"
    expect_eq "$1: stdout" "$4" "$OUT"
    [ -z "${5:-}" ] || expect_contains "$1: stderr" "$5" "$ERR"
}
pf "reserved bits, S at rev 1" "${REQ}5f010002beef" 0 \
    '{"key":"req","m":false,"c":true,"r":false,"s":true,"rev":1,"pd_length":2,'"$NOWORD"',"pd":"beef","res":15}'
pf "B C D without A" "${REP}1002000640054003aabb" 0 \
    '{"key":"rep","m":false,"c":false,"r":false,"s":true,"rev":2,"pd_length":6,"ird":5,"ord":3,"a":false,"b":true,"c_rtr":false,"d":true,"pd":"aabb","res":0}'
pf "trailing octets" "${REQ}40010000002a4143" 0 \
    '{"key":"req","m":false,"c":true,"r":false,"s":false,"rev":1,"pd_length":0,'"$NOWORD"',"pd":"","res":0}' \
    "4 octets"

# Invalid and incomplete frames: exit 2, nothing on stdout, a reason on stderr.
pf "bad key" "4d504120494420526578204672616d6540010000" 2 "" "invalid key"
pf "garbage" "474554202f20485454502f312e310d0a0d0a0000" 2 "" "invalid key"
pf "PD_Length 513" "${REQ}40010201$PD512""00" 2 "" "513"
pf "S at rev 2 without the word" "${REQ}500200020000" 2 "" "RFC 6581"
pf "truncated header" "${REQ}4001" 2 "" "truncated: frame needs 20 octets, got 18"
pf "truncated private data" "${REQ}40010003aabb" 2 "" "truncated: frame needs 23 octets, got 22"
pf "empty input" "" 2 "" "truncated: frame needs 20 octets, got 0"

finish
