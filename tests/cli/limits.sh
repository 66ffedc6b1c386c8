#!/usr/bin/env bash
# Sizes at the edges: the largest ULPDUs (131070-digit lines), the largest
# marked ULPDU at every kind of offset, and many lines.
BIN=${1:-}
. "$(dirname "$0")/lib.sh"

# big N SEED: one line of N pseudo-random octets in hex.
big() {
    awk -v n="$1" -v seed="$2" 'BEGIN {
        srand(seed)
        # Build in 1 KiB pieces: appending octet by octet is quadratic in mawk.
        for (i = 0; i < n; ) {
            piece = ""
            for (j = 0; j < 1024 && i < n; j++) { piece = piece sprintf("%02x", int(rand() * 256)); i++ }
            printf("%s", piece)
        }
        printf("\n")
    }'
}

roundtrip() { # roundtrip NAME INFILE OPTIONS...
    local name=$1 in=$2
    shift 2
    "$BIN" encode "$@" <"$in" >"$TMP/stream" 2>"$TMP/err"
    expect_eq "$name: encode rc ($(cat "$TMP/err"))" 0 "$?"
    "$BIN" decode "$@" <"$TMP/stream" >"$TMP/got" 2>"$TMP/err"
    expect_eq "$name: decode rc ($(cat "$TMP/err"))" 0 "$?"
    # The ULPDUs must come back in order, lowercase.
    sed 's/.*"ulpdu":"\([0-9a-f]*\)"}$/\1/' "$TMP/got" >"$TMP/ulpdus"
    tr -d ' \r' <"$in" | tr A-F a-f >"$TMP/norm"
    CHECKS=$((CHECKS + 1))
    cmp -s "$TMP/norm" "$TMP/ulpdus" || fail "$name: ULPDUs differ after the round trip"
}

big 65535 1 >"$TMP/max"
expect_eq "65535-octet line length" 131071 "$(wc -c <"$TMP/max")"
roundtrip "65535 octets" "$TMP/max"
roundtrip "65535 octets, no CRC, near wrap" "$TMP/max" --no-crc --offset 4294967200

# UW_MPA_MULPDU_MAX (64768) always fits with markers, wherever it starts.
big 64768 2 >"$TMP/m"
for off in 0 2 4 508 510 4294967292 4294966784 123456788; do
    roundtrip "64768 octets with markers at $off" "$TMP/m" --markers --offset "$off"
done
# ...several in a row, so they start at assorted positions.
{ cat "$TMP/m"; big 1000 3; cat "$TMP/m"; big 77 4; cat "$TMP/m"; } >"$TMP/mm"
roundtrip "64768-octet ULPDUs in a row" "$TMP/mm" --markers --offset 4294967000

# 65535 octets with markers never fit: a marker would be more than 65535
# octets past the length field.
"$BIN" encode --markers <"$TMP/max" >"$TMP/stream" 2>"$TMP/err"
expect_eq "65535 octets with markers: rc" 2 "$?"
expect_contains "65535 octets with markers: reason" "FPDUPTR" "$(cat "$TMP/err")"
expect_eq "65535 octets with markers: no output" 0 "$(wc -c <"$TMP/stream")"

# Many lines.
awk 'BEGIN { for (i = 0; i < 30000; i++) printf("%02x%02x\n", i % 256, int(i / 256)) }' >"$TMP/many"
roundtrip "30000 lines" "$TMP/many" --markers --offset 4294960000
expect_eq "30000 lines: 30000 FPDUs" 30000 "$(wc -l <"$TMP/got")"

finish
