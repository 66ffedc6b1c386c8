#!/usr/bin/env bash
# --delay-ms holds every chunk but never reorders them.
. "$(dirname "$0")/lib.sh"

# Many small segments, each with its own random delay, both ways: the echo
# must come back byte for byte in order.
N=$((2 << 20))
start_pair d1 --echo -- --split --max-seg 512 --delay-ms 0-3 --seed 9 --stats
bg d1_cli "$PEER" connect "$PORT" --timeout 50 --send $N
wait_bg d1_cli
L=$(done_line d1_cli)
expect_eq "order: received" $N "$(field received "$L")"
expect_eq "order: diffs" 0 "$(field diffs "$L")"
expect_eq "order: hash" "$(field hash "$(done_line d1_cli)")" "$(field hash "$L")"
wait_bg d1_px
expect_eq "order: proxy rc" 0 "$RC"
expect_cmp "order: many chunks" "$(json d1_px c2s writes)" -gt 5000
wait_bg d1_srv

# The delay really holds data: a round trip crosses it twice.
start_pair d2 --echo -- --delay-ms 150-200 --seed 10
bg d2_cli "$PEER" connect "$PORT" --timeout 50 --send 1000
wait_bg d2_cli
L=$(done_line d2_cli)
expect_eq "latency: received" 1000 "$(field received "$L")"
expect_eq "latency: diffs" 0 "$(field diffs "$L")"
expect_cmp "latency: two delays" "$(field elapsed_ms "$L")" -ge 300
expect_cmp "latency: bounded" "$(field elapsed_ms "$L")" -lt 10000
wait_bg d2_px
expect_eq "latency: proxy rc" 0 "$RC"
wait_bg d2_srv

# Only one direction delayed.
start_pair d3 --echo -- --delay-ms 200 --dir s2c --seed 10
bg d3_cli "$PEER" connect "$PORT" --timeout 50 --send 1000
wait_bg d3_cli
L=$(done_line d3_cli)
expect_eq "one way: diffs" 0 "$(field diffs "$L")"
expect_cmp "one way: delayed" "$(field elapsed_ms "$L")" -ge 200
wait_bg d3_px
wait_bg d3_srv

finish
