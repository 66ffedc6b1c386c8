#!/usr/bin/env bash
# --corrupt / --corrupt-every: exactly the logged bytes arrive changed, with
# the logged old and new values, and the same seed gives the same damage.
. "$(dirname "$0")/lib.sh"

# log_pairs FILE DIR: "offset old new" of each logged corruption in DIR.
log_pairs() {
    awk -v d="dir=$2" '$1 == d && $2 ~ /^offset=/ {
        split($2, o, "="); split($4, a, "="); split($5, b, "=");
        print o[2], a[2], b[2] }' "$1"
}
# diff_pairs NAME: "offset expected got" of each byte the peer saw changed.
diff_pairs() {
    awk '$1 == "diff" { split($2, o, "="); split($3, a, "="); split($4, b, "=");
        print o[2], a[2], b[2] }' "$TMP/$1.out"
}
# bits_ok FILE: how many lines do not flip exactly the logged bit (0 is good).
bits_ok() {
    local bad=0 d o bit old new
    while read -r d o bit old new; do
        case "$o" in offset=*) ;; *) continue ;; esac
        [ $((0x${old#old=} ^ 0x${new#new=})) -eq $((1 << ${bit#bit=})) ] || bad=$((bad + 1))
    done <"$1"
    echo "$bad"
}

# --corrupt 10 on client-to-server, spread over 1 MiB after 100 bytes, with
# --split so corrupted bytes also land in partial writes.
N=$((1 << 20))
start_pair c1 -- --split --seed 5 --dir c2s --corrupt 10 --corrupt-span 1000000 \
    --corrupt-after 100 --log "$TMP/c1.log"
bg c1_cli "$PEER" connect "$PORT" --timeout 50 --send $N
wait_bg c1_cli
wait_bg c1_px
expect_eq "corrupt 10: proxy rc" 0 "$RC"
wait_bg c1_srv
L=$(done_line c1_srv)
expect_eq "corrupt 10: server received" $N "$(field received "$L")"
expect_eq "corrupt 10: server diffs" 10 "$(field diffs "$L")"
expect_eq "corrupt 10: logged" 10 "$(log_pairs "$TMP/c1.log" c2s | wc -l)"
expect_eq "corrupt 10: log = what arrived" "$(log_pairs "$TMP/c1.log" c2s)" "$(diff_pairs c1_srv)"
expect_eq "corrupt 10: one bit each" 0 "$(bits_ok "$TMP/c1.log")"
expect_eq "corrupt 10: none s2c" "" "$(log_pairs "$TMP/c1.log" s2c)"
expect_eq "corrupt 10: c2s summary" 1 "$(grep -c "^dir=c2s bytes=$N corruptions=10\$" "$TMP/c1.log")"
expect_eq "corrupt 10: s2c summary" 1 "$(grep -c '^dir=s2c bytes=0 corruptions=0$' "$TMP/c1.log")"
# Stratified: one corruption in each tenth of [100, 1000100).
expect_eq "corrupt 10: spread" "0 1 2 3 4 5 6 7 8 9" \
    "$(log_pairs "$TMP/c1.log" c2s | awk '{ printf "%s%d", (NR > 1 ? " " : ""), int(($1 - 100) / 100000) }')"

# Same seed without --split: the same bytes, bits and values.
start_pair c2 -- --seed 5 --dir c2s --corrupt 10 --corrupt-span 1000000 \
    --corrupt-after 100 --log "$TMP/c2.log"
bg c2_cli "$PEER" connect "$PORT" --timeout 50 --send $N
wait_bg c2_cli
wait_bg c2_px
wait_bg c2_srv
expect_eq "same seed: same corruptions" "$(log_pairs "$TMP/c1.log" c2s)" "$(log_pairs "$TMP/c2.log" c2s)"
expect_eq "same seed: receiver agrees" "$(log_pairs "$TMP/c2.log" c2s)" "$(diff_pairs c2_srv)"

# --corrupt-every on server-to-client after 1000 bytes: one in each 64 KiB
# window; the last, partial window may or may not reach its byte.
W=65536
N=$((1000 + 8 * W + 5000))
start_pair c3 --send $N -- --seed 6 --dir s2c --corrupt-every $W --corrupt-after 1000 \
    --log "$TMP/c3.log" --stats
bg c3_cli "$PEER" connect "$PORT" --timeout 50 --max-diffs 1000
wait_bg c3_cli
wait_bg c3_px
expect_eq "every: proxy rc" 0 "$RC"
wait_bg c3_srv
L=$(done_line c3_cli)
K=$(log_pairs "$TMP/c3.log" s2c | wc -l)
expect_cmp "every: at least 8" "$K" -ge 8
expect_cmp "every: at most 9" "$K" -le 9
expect_eq "every: client diffs" "$K" "$(field diffs "$L")"
expect_eq "every: log = what arrived" "$(log_pairs "$TMP/c3.log" s2c)" "$(diff_pairs c3_cli)"
expect_eq "every: one per window" "" \
    "$(log_pairs "$TMP/c3.log" s2c | awk -v w=$W '$1 < 1000 || int(($1 - 1000) / w) != NR - 1')"
expect_eq "every: stats" "$K" "$(json c3_px s2c corruptions)"
expect_eq "every: one bit each" 0 "$(bits_ok "$TMP/c3.log")"

# A span longer than the stream: only the offsets reached are corrupted, and
# the log, the summary and the receiver agree on how many.
start_pair c4 -- --seed 8 --corrupt 50 --corrupt-span 1M --log "$TMP/c4.log"
bg c4_cli "$PEER" connect "$PORT" --timeout 50 --send 100000
wait_bg c4_cli
wait_bg c4_px
wait_bg c4_srv
K=$(log_pairs "$TMP/c4.log" c2s | wc -l)
expect_cmp "short stream: some" "$K" -ge 2
expect_cmp "short stream: not all" "$K" -le 8
expect_eq "short stream: summary" 1 "$(grep -c "^dir=c2s bytes=100000 corruptions=$K\$" "$TMP/c4.log")"
expect_eq "short stream: receiver" "$K" "$(field diffs "$(done_line c4_srv)")"

finish
