#!/usr/bin/env bash
# --timeout: exit 4 with a message, whether nobody connected or a connection
# is still open (its summary is still written).
. "$(dirname "$0")/lib.sh"

bg t1_srv "$PEER" listen --timeout 50
SP=$(port_of t1_srv)
T0=$SECONDS
bg t1_px "$PROXY" --timeout 1 0 127.0.0.1 "$SP"
wait_bg t1_px
expect_eq "no client: rc" 4 "$RC"
expect_contains "no client: message" "timeout after 1 s: 0 of 1 connections finished" \
    "$(cat "$TMP/t1_px.err")"
expect_cmp "no client: quick" $((SECONDS - T0)) -le 5
expect_eq "no client: stdout" "PORT" "$(cut -d' ' -f1 "$TMP/t1_px.out")"

# An idle connection held open by this shell.
bg t2_px "$PROXY" --timeout 1 --stats --log "$TMP/t2.log" 0 127.0.0.1 "$SP"
PORT=$(port_of t2_px)
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'hello' >&3
wait_bg t2_px
exec 3>&-
expect_eq "idle: rc" 4 "$RC"
expect_contains "idle: message" "timeout after 1 s: 0 of 1 connections finished, 1 accepted" \
    "$(cat "$TMP/t2_px.err")"
expect_contains "idle: stats" '{"dir":"c2s","bytes":5,' "$(cat "$TMP/t2_px.err")"
expect_eq "idle: log summary" "dir=c2s bytes=5 corruptions=0" "$(head -n1 "$TMP/t2.log")"
wait_bg t1_srv
expect_eq "idle: target got the bytes" 5 "$(field received "$(done_line t1_srv)")"

finish
