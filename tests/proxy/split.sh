#!/usr/bin/env bash
# --split: 64 MiB each way through random re-segmentation arrive unchanged,
# in many writes of very different sizes; --max-seg bounds them; a direction
# left out by --dir is relayed as read; --count serves several connections
# at once, each to its own upstream connection.
. "$(dirname "$0")/lib.sh"

# 64 MiB echoed: the client checks every byte that comes back.
N=$((64 << 20))
start_pair big --echo -- --split --seed 11 --stats
bg big_cli "$PEER" connect "$PORT" --timeout 50 --send $N
wait_bg big_cli
expect_eq "64M: client rc" 0 "$RC"
L=$(done_line big_cli)
expect_eq "64M: client sent" $N "$(field sent "$L")"
expect_eq "64M: client received" $N "$(field received "$L")"
expect_eq "64M: client diffs" 0 "$(field diffs "$L")"
expect_eq "64M: client end" fin "$(field end "$L")"
wait_bg big_srv
L=$(done_line big_srv)
expect_eq "64M: server received" $N "$(field received "$L")"
expect_eq "64M: server diffs" 0 "$(field diffs "$L")"
wait_bg big_px
expect_eq "64M: proxy rc" 0 "$RC"
expect_contains "64M: seed printed" "seed 11" "$(cat "$TMP/big_px.err")"
for d in c2s s2c; do
    expect_eq "64M $d: bytes" $N "$(json big_px $d bytes)"
    # Log-uniform sizes up to 4096 average about 315 bytes: ~200000 writes.
    expect_cmp "64M $d: many writes" "$(json big_px $d writes)" -gt 100000
    expect_cmp "64M $d: tiny writes" "$(json big_px $d min_write)" -le 2
    expect_cmp "64M $d: large writes" "$(json big_px $d max_write)" -ge 4000
    expect_cmp "64M $d: at most --max-seg" "$(json big_px $d max_write)" -le 4096
    expect_cmp "64M $d: reads merged" "$(json big_px $d merged)" -gt 0
    expect_eq "64M $d: corruptions" 0 "$(json big_px $d corruptions)"
done

# A small --max-seg, and split only client to server.
N=$((1 << 20))
start_pair small --echo -- --split --max-seg 7 --dir c2s --seed 12 --stats
bg small_cli "$PEER" connect "$PORT" --timeout 50 --send $N
wait_bg small_cli
L=$(done_line small_cli)
expect_eq "max-seg 7: received" $N "$(field received "$L")"
expect_eq "max-seg 7: diffs" 0 "$(field diffs "$L")"
wait_bg small_px
expect_eq "max-seg 7: proxy rc" 0 "$RC"
expect_eq "max-seg 7: c2s max write" 7 "$(json small_px c2s max_write)"
expect_cmp "max-seg 7: c2s writes" "$(json small_px c2s writes)" -gt $((N / 7))
# s2c is a clean relay: one write per read unless the socket was full.
expect_eq "max-seg 7: s2c merged" 0 "$(json small_px s2c merged)"
expect_cmp "max-seg 7: s2c unsplit" "$(json small_px s2c max_write)" -gt 4096
wait_bg small_srv

# One-byte segments to a silent sink: 4096 queued chunks fill the queue long
# before the ring, and the FIN is read while it is full. Nothing else on the
# connection wakes the proxy, so the bytes behind the queue must be
# scheduled as it drains (this once stalled at 12288 bytes).
start_pair one -- --split --max-seg 1 --seed 14 --stats
bg one_cli "$PEER" connect "$PORT" --timeout 50 --send 100000
wait_bg one_cli
wait_bg one_srv
L=$(done_line one_srv)
expect_eq "max-seg 1: received" 100000 "$(field received "$L")"
expect_eq "max-seg 1: diffs" 0 "$(field diffs "$L")"
wait_bg one_px
expect_eq "max-seg 1: proxy rc" 0 "$RC"
expect_eq "max-seg 1: writes" 100000 "$(json one_px c2s writes)"

# Three clients at once through one proxy (--count 3) to a target serving
# them in turn: the proxy buffers for the ones waiting, and exits after all.
N=$((512 << 10))
start_pair multi --echo --conns 3 -- --count 3 --split --seed 13 --stats --log "$TMP/multi.log"
for i in 1 2 3; do
    bg "multi_cli$i" "$PEER" connect "$PORT" --timeout 50 --send $N --seed $i
done
for i in 1 2 3; do
    wait_bg "multi_cli$i"
    L=$(done_line "multi_cli$i")
    expect_eq "count 3: client $i received" $N "$(field received "$L")"
    expect_eq "count 3: client $i diffs" 0 "$(field diffs "$L")"
done
wait_bg multi_px
expect_eq "count 3: proxy rc" 0 "$RC"
expect_eq "count 3: stats lines" 6 "$(grep -c '"bytes":524288,' "$TMP/multi_px.err")"
expect_eq "count 3: log summaries" 6 "$(grep -c '^dir=... bytes=524288 corruptions=0 conn=[012]$' "$TMP/multi.log")"
wait_bg multi_srv
expect_eq "count 3: server connections" 3 "$(grep -c '^done ' "$TMP/multi_srv.out")"
# The proxy stopped listening after its third client.
expect_eq "count 3: listener closed" 1 "$( (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; echo $?)"

finish
