#!/usr/bin/env bash
# encode | decode round trips of random ULPDUs at many stream offsets
# (including just before the 2^32 wrap), markers on and off, CRC on and off.
# The expected decode output, offsets included, is computed here from RFC 5044
# 4.1/4.3 independently of the library.
BIN=${1:-}
. "$(dirname "$0")/lib.sh"

# gen SEED OFFSET MARKERS(0|1) CRC(ok|off) COUNT: writes $TMP/in (hex lines,
# some upper case or padded with blanks/CR) and $TMP/want (decode's JSON).
gen() {
    awk -v seed="$1" -v off="$2" -v mk="$3" -v crc="$4" -v count="$5" \
        -v in_file="$TMP/in" -v want_file="$TMP/want" '
    BEGIN {
        srand(seed)
        p = off
        for (i = 0; i < count; i++) {
            r = rand()
            if (r < 0.1) n = 0
            else if (r < 0.6) n = int(rand() * 64)
            else if (r < 0.95) n = int(rand() * 1500)
            else n = int(rand() * 9000)
            h = ""
            for (j = 0; j < n; j++) h = h sprintf("%02x", int(rand() * 256))
            line = h
            s = rand()
            if (s < 0.2) line = toupper(line)
            else if (s < 0.3) line = "  " line "\t"
            else if (s < 0.4) line = line "\r"
            print line > in_file
            printf("{\"offset\":%.0f,\"ulpdu_len\":%d,\"crc\":\"%s\",\"ulpdu\":\"%s\"}\n",
                   p, n, crc, h) > want_file
            # Wire length: length field, ULPDU, pad to 4, CRC, and with
            # markers one per 512-octet boundary crossed, counting a marker at
            # the FPDU start but not one right after its CRC.
            L = 2 + n
            L = L + (4 - L % 4) % 4 + 4
            w = L
            if (mk) {
                d = (512 - p % 512) % 512
                while (d < w) { w += 4; d += 512 }
            }
            p = (p + w) % 4294967296
        }
        if (count == 0) printf("") > want_file
        close(in_file); close(want_file)
    }'
}

# check NAME OFFSET MARKERS CRC [FILTER]: encode, optionally pass the stream
# through FILTER (to split reads), decode, compare.
check() {
    local name=$1 off=$2 mk=$3 crc=$4 filter=${5:-cat}
    local opts=(--offset "$off")
    [ "$mk" = 1 ] && opts+=(--markers)
    [ "$crc" = off ] && opts+=(--no-crc)
    "$BIN" encode "${opts[@]}" <"$TMP/in" >"$TMP/stream" 2>"$TMP/err"
    local erc=$?
    expect_eq "$name: encode rc ($(cat "$TMP/err"))" 0 "$erc"
    $filter <"$TMP/stream" | "$BIN" decode "${opts[@]}" >"$TMP/got" 2>"$TMP/err"
    local drc=${PIPESTATUS[1]}
    expect_eq "$name: decode rc ($(cat "$TMP/err"))" 0 "$drc"
    CHECKS=$((CHECKS + 1))
    if ! cmp -s "$TMP/want" "$TMP/got"; then
        fail "$name: decoded JSON differs from the expected"
        diff "$TMP/want" "$TMP/got" | head -6 >&2
    fi
}

SEEDS="1 2 3 ${RANDOM_SEED:-$(date +%s)}"
echo "seeds: $SEEDS"
for seed in $SEEDS; do
    rnd=$(awk -v s="$seed" 'BEGIN { srand(s); printf("%.0f", int(rand() * 4294967296)) }')
    for off in 0 1 4 511 512 508 4294967000 4294967292 4294967295 "$rnd"; do
        for mk in 0 1; do
            for crc in ok off; do
                gen "$seed" "$off" "$mk" "$crc" 40
                check "seed $seed offset $off markers $mk crc $crc" "$off" "$mk" "$crc"
            done
        done
    done
done

# Hex offsets mean the same as decimal ones.
gen 7 4294967000 1 ok 30
check "hex offset" 0xFFFFFED8 1 ok

# Reads split anywhere: one octet, three octets at a time.
gen 11 4294966990 1 ok 25
check "one-octet reads" 4294966990 1 ok "dd bs=1 status=none"
check "three-octet reads" 4294966990 1 ok "dd bs=3 status=none"

# Zero-length input: no FPDUs, no output.
: >"$TMP/in"
: >"$TMP/want"
check "empty stream" 0 1 ok

# Only empty lines: zero-length ULPDUs.
printf '\n\n\r\n' >"$TMP/in"
printf '{"offset":0,"ulpdu_len":0,"crc":"ok","ulpdu":""}\n{"offset":12,"ulpdu_len":0,"crc":"ok","ulpdu":""}\n{"offset":20,"ulpdu_len":0,"crc":"ok","ulpdu":""}\n' >"$TMP/want"
check "empty ULPDUs" 0 1 ok

# A last line without a newline is still a ULPDU.
printf 'aa\nbb' >"$TMP/in"
printf '{"offset":5,"ulpdu_len":1,"crc":"off","ulpdu":"aa"}\n{"offset":13,"ulpdu_len":1,"crc":"off","ulpdu":"bb"}\n' >"$TMP/want"
check "no final newline" 5 0 off

finish
