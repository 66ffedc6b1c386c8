#!/usr/bin/env bash
# `decode` on damaged streams: the first error is reported as one exact JSON
# line (after the FPDUs before it), explained on stderr, and exits 2.
BIN=${1:-}
. "$(dirname "$0")/lib.sh"

# decode_hex NAME HEX WANT_STDOUT [DECODE OPTIONS...]
decode_hex() {
    local name=$1 hex=$2 want=$3
    shift 3
    unhex "$hex" >"$TMP/bin"
    IN=$TMP/bin run "$BIN" decode "$@"
    expect_eq "$name: stdout" "$want" "$OUT"
    if [ "${want##*\"error\"*}" = "" ]; then
        expect_eq "$name: exit code" 2 "$RC"
        CHECKS=$((CHECKS + 1))
        [ -n "$ERR" ] || fail "$name: no explanation on stderr"
    else
        expect_eq "$name: exit code" 0 "$RC"
    fi
}

# Two FPDUs without markers: 00010203 (12 octets on the wire) and aabbcc.
printf '00010203\naabbcc\n' >"$TMP/in"
IN=$TMP/in RUN_HEX=1 run "$BIN" encode
S=$OUT
expect_eq "stream length" 48 "${#S}"
L1='{"offset":0,"ulpdu_len":4,"crc":"ok","ulpdu":"00010203"}'
L2='{"offset":12,"ulpdu_len":3,"crc":"ok","ulpdu":"aabbcc"}'
decode_hex "intact" "$S" "$L1
$L2"

# Flip a CRC octet of the second FPDU, then a payload octet of the first.
last=${S:46:2}
bad=$(printf '%02x' $((0x$last ^ 0x01)))
decode_hex "CRC octet flipped" "${S:0:46}$bad" "$L1
{\"error\":\"crc_mismatch\",\"mpa_error\":2,\"offset\":12}"
expect_contains "CRC error explained" "CRC32c mismatch" "$ERR"
decode_hex "payload octet flipped" "${S:0:4}ff${S:6}" '{"error":"crc_mismatch","mpa_error":2,"offset":0}'
# ...which passes unnoticed with CRCs off (and is then delivered as is).
decode_hex "payload flipped, --no-crc" "${S:0:4}ff${S:6}" \
    '{"offset":0,"ulpdu_len":4,"crc":"off","ulpdu":"ff010203"}
{"offset":12,"ulpdu_len":3,"crc":"off","ulpdu":"aabbcc"}' --no-crc

# Truncated: the last octet missing; a lone length octet; a length whose
# ULPDU never comes.
decode_hex "last octet missing" "${S:0:46}" "$L1
{\"error\":\"truncated\",\"mpa_error\":1,\"offset\":12}"
expect_contains "truncation explained" "ended inside an FPDU" "$ERR"
decode_hex "one octet" "00" '{"error":"truncated","mpa_error":1,"offset":0}'
decode_hex "length only" "ffff" '{"error":"truncated","mpa_error":1,"offset":77}' --offset 77
# With markers, a marker between FPDUs starts the next one (RFC 5044 4.3): a
# stream that ends right after it ends inside an FPDU.
decode_hex "lone leading marker" "00000000" '{"error":"truncated","mpa_error":1,"offset":0}' --markers

# Markers: RFC 5044 Figure 6 (position 0x1ec, marker at 0x200, FPDUPTR 0x14).
Z24=000000000000000000000000000000000000000000000000
HEAD=002a4143000000000000000000000002${Z24:0:8}
U6=${HEAD:4}${Z24}
fig6() { printf '%s%s%s%s' "$HEAD" "$1" "$Z24" "$2"; }
GOOD6='{"offset":492,"ulpdu_len":42,"crc":"ok","ulpdu":"'$U6'"}'
decode_hex "figure 6 intact" "$(fig6 00000014 84925898)" "$GOOD6" --markers --offset 0x1ec
decode_hex "FPDUPTR 0x18, --no-crc" "$(fig6 00000018 84925898)" \
    '{"error":"marker_mismatch","mpa_error":3,"offset":492}' --markers --no-crc --offset 0x1ec
expect_contains "marker error explained" "marker does not point" "$ERR"
# CRC first: RFC 5044 8 reports a marker error only for an FPDU whose CRC is valid.
decode_hex "FPDUPTR 0x18, CRC on" "$(fig6 00000018 84925898)" \
    '{"error":"crc_mismatch","mpa_error":2,"offset":492}' --markers --offset 0x1ec
# RFC 5044 4.2: the two low FPDUPTR bits and the reserved half are ignored on
# receive (but covered by the CRC).
decode_hex "FPDUPTR low bits set, --no-crc" "$(fig6 00000017 00000000)" \
    '{"offset":492,"ulpdu_len":42,"crc":"off","ulpdu":"'$U6'"}' --markers --no-crc --offset 492
decode_hex "marker reserved bits set, --no-crc" "$(fig6 80010014 00000000)" \
    '{"offset":492,"ulpdu_len":42,"crc":"off","ulpdu":"'$U6'"}' --markers --no-crc --offset 492
# A leading marker must carry FPDUPTR 0.
decode_hex "leading marker not zero" "00000004000100aa00000000" \
    '{"error":"marker_mismatch","mpa_error":3,"offset":0}' --markers --no-crc
# An error in a later FPDU of a marked stream near the 2^32 wrap.
printf 'aa\nbb\ncc\n' >"$TMP/in"
IN=$TMP/in RUN_HEX=1 run "$BIN" encode --markers --offset 4294967290
W=$OUT
expect_eq "wrap stream length" 56 "${#W}"
decode_hex "wrap: third FPDU cut" "${W:0:52}" \
    '{"offset":4294967290,"ulpdu_len":1,"crc":"ok","ulpdu":"aa"}
{"offset":6,"ulpdu_len":1,"crc":"ok","ulpdu":"bb"}
{"error":"truncated","mpa_error":1,"offset":14}' --markers --offset 4294967290
# The marker at position 0 sits 6 octets into the first FPDU (FPDUPTR 6,
# read as 4); 0x10 points elsewhere.
decode_hex "wrap: marker at 0 damaged" "${W:0:12}00000010${W:20}" \
    '{"error":"marker_mismatch","mpa_error":3,"offset":4294967290}' \
    --markers --no-crc --offset 4294967290

finish
