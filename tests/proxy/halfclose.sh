#!/usr/bin/env bash
# FIN and reset propagation: a side that shut down writing still receives;
# a reset on one side resets the other.
. "$(dirname "$0")/lib.sh"

# Client FIN first: the target echoes only after it sees the FIN, so all of
# the echo arrives after the client's shutdown(SHUT_WR). 1 MiB is more than
# the proxy's buffers, so backpressure is part of it.
N=$((1 << 20))
start_pair h1 --collect -- --split --seed 3 --stats
bg h1_cli "$PEER" connect "$PORT" --timeout 50 --send $N
wait_bg h1_cli
expect_eq "client FIN: client rc" 0 "$RC"
L=$(done_line h1_cli)
expect_eq "client FIN: echo after shutdown" $N "$(field received "$L")"
expect_eq "client FIN: diffs" 0 "$(field diffs "$L")"
expect_eq "client FIN: end" fin "$(field end "$L")"
wait_bg h1_px
expect_eq "client FIN: proxy rc" 0 "$RC"
expect_eq "client FIN: ended by FIN" 2 "$(grep -c '"end":"fin"' "$TMP/h1_px.err")"
wait_bg h1_srv
expect_eq "client FIN: server got all" $N "$(field received "$(done_line h1_srv)")"

# Target FIN first: the client sends only after it has seen the target's
# FIN, which works only if the proxy kept the other direction open.
start_pair h2 --send 300000 -- --split --seed 4
bg h2_cli "$PEER" connect "$PORT" --timeout 50 --send 200000 --after-eof
wait_bg h2_cli
L=$(done_line h2_cli)
expect_eq "target FIN: client received" 300000 "$(field received "$L")"
expect_eq "target FIN: client sent" 200000 "$(field sent "$L")"
expect_eq "target FIN: client diffs" 0 "$(field diffs "$L")"
wait_bg h2_srv
L=$(done_line h2_srv)
expect_eq "target FIN: server received after its FIN" 200000 "$(field received "$L")"
expect_eq "target FIN: server diffs" 0 "$(field diffs "$L")"
wait_bg h2_px
expect_eq "target FIN: proxy rc" 0 "$RC"

# Client reset: the target sees a reset too, and the proxy is still done.
start_pair h3 -- --stats
bg h3_cli "$PEER" connect "$PORT" --timeout 50 --send 100000 --reset
wait_bg h3_cli
wait_bg h3_srv
expect_eq "client reset: target reset" reset "$(field end "$(done_line h3_srv)")"
wait_bg h3_px
expect_eq "client reset: proxy rc" 0 "$RC"
expect_contains "client reset: message" "resetting the target side" "$(cat "$TMP/h3_px.err")"
expect_contains "client reset: stats" '"end":"reset"' "$(cat "$TMP/h3_px.err")"

# Target reset while the client is still sending.
start_pair h4 --reset -- --delay-ms 20
bg h4_cli "$PEER" connect "$PORT" --timeout 50 --send $((8 << 20))
wait_bg h4_cli
expect_eq "target reset: client reset" reset "$(field end "$(done_line h4_cli)")"
wait_bg h4_px
expect_eq "target reset: proxy rc" 0 "$RC"
expect_contains "target reset: message" "resetting the client side" "$(cat "$TMP/h4_px.err")"
wait_bg h4_srv

finish
