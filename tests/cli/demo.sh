#!/usr/bin/env bash
# `demo` reproduces RFC 5044 Figures 5 and 6 and says so (exit 0).
BIN=${1:-}
. "$(dirname "$0")/lib.sh"

run "$BIN" demo --no-bench
expect_eq "demo rc ($ERR)" 0 "$RC"
expect_contains "figure 5 matches" "identical to RFC 5044 Figure 5" "$OUT"
expect_contains "figure 6 matches" "identical to RFC 5044 Figure 6" "$OUT"
expect_contains "figure 6 marker annotated" "0200    00 00 00 14" "$OUT"
expect_contains "figure 5 CRC annotated" "0030    52 23 99 83" "$OUT"
expect_contains "decoded back" "payload identical" "$OUT"

# The JSON variant, with the (short) CRC32c measurement.
run "$BIN" demo --json
expect_eq "demo --json rc ($ERR)" 0 "$RC"
expect_eq "demo --json is one line" 1 "$(printf '%s\n' "$OUT" | wc -l)"
expect_contains "demo --json ok" ',"ok":true}' "$OUT"
expect_contains "demo --json figure 5" '"figure":5,"offset":0,"match":true' "$OUT"
expect_contains "demo --json figure 6" '"figure":6,"offset":492,"match":true' "$OUT"
expect_contains "demo --json figure 6 bytes" \
    '"wire":"002a41430000000000000000000000020000000000000014000000000000000000000000000000000000000000000000849258' "$OUT"
expect_contains "demo --json table CRC" '"impl":"table","check_ok":true' "$OUT"
CHECKS=$((CHECKS + 1))
case "$OUT" in *'"check_ok":false'*) fail "an implementation computes a wrong CRC32c" ;; esac

finish
