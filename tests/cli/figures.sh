#!/usr/bin/env bash
# RFC 5044 Figures 5 and 6 byte for byte through `encode`, and the RFC's own
# octets through `decode`.
BIN=${1:-}
. "$(dirname "$0")/lib.sh"

# The 42-octet ULPDUs: DDP untagged Send with Last (41 43), queue 0, MSN 1 or
# 2, MO 0, 24 zero octets.
Z4=00000000
ZEROS24=${Z4}${Z4}${Z4}${Z4}${Z4}${Z4}
U5=4143${Z4}${Z4}00000001${Z4}${ZEROS24}
U6=4143${Z4}${Z4}00000002${Z4}${ZEROS24}
# The octets printed in the RFC (Figure 5 from position 0, Figure 6 from 0x1ec).
FIG5=00000000002a${U5}52239983
FIG6=002a41430000000000000000000000020000000000000014${ZEROS24}84925898

expect_eq "ULPDU is 42 octets" 84 "${#U5}"

printf '%s\n' "$U5" >"$TMP/u5"
printf '%s\n' "$U6" >"$TMP/u6"

RUN_HEX=1
IN=$TMP/u5 run "$BIN" encode --markers
expect_eq "figure 5 encode rc" 0 "$RC"
expect_eq "figure 5 encode bytes" "$FIG5" "$OUT"

IN=$TMP/u6 run "$BIN" encode --markers --offset 0x1ec
expect_eq "figure 6 encode rc" 0 "$RC"
expect_eq "figure 6 encode bytes" "$FIG6" "$OUT"

# Decimal offset, upper-case hex and surrounding blanks/CR give the same.
printf '  %s \r\n' "$(tr a-f A-F <<<"$U6")" >"$TMP/u6u"
IN=$TMP/u6u run "$BIN" encode --markers --offset 492
expect_eq "figure 6 encode, upper case, decimal offset" "$FIG6" "$OUT"

# Figure 6 as the second FPDU of a stream from position 0: after a 492-octet
# first FPDU (leading marker 4 + length 2 + 482-octet ULPDU + CRC 4), the
# stream's last 52 octets are the figure.
Z482=$(printf '%0964d' 0)
printf '%s\n%s\n' "$Z482" "$U6" >"$TMP/two"
IN=$TMP/two run "$BIN" encode --markers
expect_eq "figure 6 as second FPDU: stream length" $(((492 + 52) * 2)) "${#OUT}"
expect_eq "figure 6 as second FPDU: tail" "$FIG6" "${OUT:984}"

RUN_HEX=0

unhex "$FIG5" >"$TMP/f5.bin"
unhex "$FIG6" >"$TMP/f6.bin"
IN=$TMP/f5.bin run "$BIN" decode --markers
expect_eq "figure 5 decode rc" 0 "$RC"
expect_eq "figure 5 decode" "{\"offset\":0,\"ulpdu_len\":42,\"crc\":\"ok\",\"ulpdu\":\"$U5\"}" "$OUT"

IN=$TMP/f6.bin run "$BIN" decode --markers --offset 0x1ec
expect_eq "figure 6 decode rc" 0 "$RC"
expect_eq "figure 6 decode" "{\"offset\":492,\"ulpdu_len\":42,\"crc\":\"ok\",\"ulpdu\":\"$U6\"}" "$OUT"

# Without markers the same stream is misread: the checks must notice.
IN=$TMP/f6.bin run "$BIN" decode --offset 0x1ec
expect_eq "figure 6 without --markers rc" 2 "$RC"
expect_eq "figure 6 without --markers" '{"error":"crc_mismatch","mpa_error":2,"offset":492}' "$OUT"

finish
