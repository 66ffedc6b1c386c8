#!/usr/bin/env bash
# Receive-side flow control: RDMAP has none, so a Send that finds no posted
# receive ends the stream (RFC 5040 5.1). uwarp-cat keeps 64 receives posted
# and lets the library stop reading while its receive CQ is full, so TCP
# holds the sender back. These cases pile up many more messages than 64 in
# the receiver's socket: tiny messages, and a consumer that does not read
# stdout for a while. A message larger than the receiver's buffers must fail
# cleanly on both sides.
# usage: flow.sh UWARP-CAT UWARP-RPING SILENT-PEER
CAT=${1:-} RPING=${2:-} PEER=${3:-}
. "$(dirname "$0")/lib.sh"

head -c $((1024 * 1024)) /dev/urandom >"$TMP/m.bin"
head -c $((512 * 1024)) /dev/urandom >"$TMP/n.bin"

# Tiny messages both ways: 1 MiB in 64-octet Sends one way, 512 KiB in
# 100-octet Sends the other (8192 and 5243 messages).
responder tiny.r "$TMP/n.bin" --msg-size 100 --timeout 20
initiator tiny.i "$TMP/m.bin" "$RPORT" --msg-size 64 --timeout 20
wait_rc "$RPID" 30
expect_eq "tiny: initiator rc ($(tail -n1 "$TMP/tiny.i.err"))" 0 "$IRC"
expect_eq "tiny: responder rc ($(tail -n1 "$TMP/tiny.r.err"))" 0 "$WRC"
expect_true "tiny: initiator -> responder" cmp -s "$TMP/m.bin" "$TMP/tiny.r.out"
expect_true "tiny: responder -> initiator" cmp -s "$TMP/n.bin" "$TMP/tiny.i.out"

# A stalled consumer: the responder's stdout is a pipe nobody reads for 2 s,
# so the responder blocks in write() while 8 MiB of 512-octet Sends (16384
# messages) arrive. Nothing may be lost and no Terminate may happen.
head -c $((8 * 1024 * 1024)) /dev/urandom >"$TMP/big.bin"
"$CAT" -l 127.0.0.1:0 --timeout 20 </dev/null 2>"$TMP/slow.r.err" |
    { sleep 2; cat >"$TMP/slow.r.out"; } &
SLOWPID=$!
BG_PIDS+=("$SLOWPID")
RPORT=$(wait_port "$TMP/slow.r.err")
initiator slow.i "$TMP/big.bin" "$RPORT" --msg-size 512 --timeout 20
wait_rc "$SLOWPID" 30
expect_eq "slow reader: initiator rc ($(tail -n1 "$TMP/slow.i.err"))" 0 "$IRC"
expect_eq "slow reader: pipeline rc ($(tail -n1 "$TMP/slow.r.err"))" 0 "$WRC"
expect_true "slow reader: data" cmp -s "$TMP/big.bin" "$TMP/slow.r.out"

# stdin from a pipe: reads return whatever the pipe holds, so message sizes
# vary; the data still arrives in order.
responder pipe.r /dev/null --timeout 20
cat "$TMP/m.bin" "$TMP/n.bin" "$TMP/m.bin" | "$CAT" --timeout 20 127.0.0.1 "$RPORT" \
    >/dev/null 2>"$TMP/pipe.i.err"
prc=$?
expect_eq "pipe: initiator rc ($(tail -n1 "$TMP/pipe.i.err"))" 0 "$prc"
wait_rc "$RPID" 30
expect_eq "pipe: responder rc" 0 "$WRC"
cat "$TMP/m.bin" "$TMP/n.bin" "$TMP/m.bin" >"$TMP/pipe.want"
expect_true "pipe: data" cmp -s "$TMP/pipe.want" "$TMP/pipe.r.out"

# A message longer than the receiver's buffers (the receiver posts
# max(--msg-size, 64 KiB)): both sides fail with exit 2 and say why. The
# responder keeps its own sending direction open (stdin still open) so that
# it can send its Terminate: after a FIN it could only reset the connection.
head -c 200000 /dev/urandom >"$TMP/long.bin"
responder long.r <(sleep 4) --timeout 10
initiator long.i "$TMP/long.bin" "$RPORT" --msg-size 200000 --timeout 10
wait_rc "$RPID" 20
expect_eq "too long: initiator rc ($(tail -n1 "$TMP/long.i.err"))" 2 "$IRC"
expect_eq "too long: responder rc ($(tail -n1 "$TMP/long.r.err"))" 2 "$WRC"
expect_contains "too long: initiator names the Terminate" "Terminate received" \
    "$(cat "$TMP/long.i.err")"
expect_contains "too long: responder names the fault" "too long" "$(cat "$TMP/long.r.err")"
expect_eq "too long: nothing delivered" 0 "$(wc -c <"$TMP/long.r.out")"

finish
