#!/usr/bin/env bash
# uwarp-sdpcat options: --nodelay, --chunk, --rcvbuf-size and --bufs (seen in
# the -v lines of both sides), --chrcvbuf (the exit line counts the ChRcvBuf
# and the data stays intact), --linger 0 (abortive: the peer exits 5) and
# --linger S > 0 (graceful).
. "$(dirname "$0")/lib.sh"

head -c 300000 /dev/urandom >"$TMP/a.bin"
head -c 200000 /dev/urandom >"$TMP/b.bin"

# rt NAME "LOPTS" "COPTS": both ways at once, both exit 0, data intact.
rt() {
    local name=$1
    pair "$name" "$TMP/b.bin" "$TMP/a.bin" "-v --timeout 10 $2" "-v --timeout 10 $3"
    expect_eq "$name: connector rc ($(errs "$name"))" 0 "$CRC"
    expect_eq "$name: listener rc ($(errs "$name"))" 0 "$LRC"
    expect_true "$name: connector -> listener intact" same "$TMP/a.bin" "$(f "$name.l").out"
    expect_true "$name: listener -> connector intact" same "$TMP/b.bin" "$(f "$name.c").out"
}

rt nodelay "--nodelay --chunk 100" "--nodelay --chunk 1"
rt chunk "--chunk 4097" "--chunk 65535"

# Receive buffers: 4 of 4096 octets on the listener, 5 of 8192 on the
# connector; each side's setup line shows its own and the other's size.
rt rcvbuf "--rcvbuf-size 4096 --bufs 4" "--rcvbuf-size 8192 --bufs 5"
ls=$(json_line "$(f rcvbuf.l).err" role)
cs=$(json_line "$(f rcvbuf.c).err" role)
expect_eq "rcvbuf: listener local_rcv_size" 4096 "$(json_get "$ls" local_rcv_size)"
expect_eq "rcvbuf: listener bufs" 4 "$(json_get "$ls" bufs)"
expect_eq "rcvbuf: listener remote_rcv_size" 8192 "$(json_get "$ls" remote_rcv_size)"
expect_eq "rcvbuf: connector local_rcv_size" 8192 "$(json_get "$cs" local_rcv_size)"
expect_eq "rcvbuf: connector bufs" 5 "$(json_get "$cs" bufs)"
expect_eq "rcvbuf: connector remote_rcv_size" 4096 "$(json_get "$cs" remote_rcv_size)"
cx=$(json_line "$(f rcvbuf.c).err" sent)
# 300000 octets in messages of at most 4096 - 16 octets of payload.
CHECKS=$((CHECKS + 1))
[ "$(json_get "$cx" data_msgs_sent)" -ge 74 ] 2>/dev/null ||
    fail "rcvbuf: the connector's Data messages fit the listener's 4096-octet buffers: $cx"

# --chrcvbuf: one side asks the other to resize; the exit line counts the
# ChRcvBuf and the data is intact. A decrease asked by the connector, an
# increase asked by the listener, a decrease to tiny buffers.
rt chrcvbuf-down "" "--chrcvbuf 16384"
expect_eq "chrcvbuf down: connector sent one" 1 \
    "$(json_get "$(json_line "$(f chrcvbuf-down.c).err" sent)" chrcvbuf)"
rt chrcvbuf-up "--chrcvbuf 131072" ""
expect_eq "chrcvbuf up: listener sent one" 1 \
    "$(json_get "$(json_line "$(f chrcvbuf-up.l).err" sent)" chrcvbuf)"
rt chrcvbuf-small "--rcvbuf-size 8192" "--chrcvbuf 1024 --chunk 3000"
expect_eq "chrcvbuf small: connector sent one" 1 \
    "$(json_get "$(json_line "$(f chrcvbuf-small.c).err" sent)" chrcvbuf)"
# Both at once (10.6.1): the Accepting Peer disregards the Connecting Peer's;
# the Connecting Peer answers and may send its own again. Which one goes
# first is a race, so only the data and the bounds are checked.
rt chrcvbuf-both "--chrcvbuf 16384" "--chrcvbuf 131072"
expect_in "chrcvbuf both: listener sent at most one" "0 1" \
    "$(json_get "$(json_line "$(f chrcvbuf-both.l).err" sent)" chrcvbuf)"
expect_in "chrcvbuf both: connector sent one or two" "1 2" \
    "$(json_get "$(json_line "$(f chrcvbuf-both.c).err" sent)" chrcvbuf)"

# --linger 0: at its stdin EOF the connector closes abortively; the
# listener, whose stdin stays open, sees the reset and exits 5.
listener linger0.l <(sleep 15) --timeout 10
if [ -n "$LPORT" ]; then
    connector linger0.c "$TMP/a.bin" 127.0.0.1 "$LPORT" -v --timeout 10 --linger 0
    wait_rc "$CPID" 30
    expect_eq "linger 0: connector rc ($(errs linger0))" 0 "$WRC"
    t0=$EPOCHREALTIME
    wait_rc "$LPID" 30
    expect_eq "linger 0: listener rc ($(errs linger0))" 5 "$WRC"
    CHECKS=$((CHECKS + 1))
    [ "$(ms_since "$t0")" -le 5000 ] || fail "linger 0: the listener took $(ms_since "$t0") ms"
    expect_contains "linger 0: the listener says reset" "reset" "$(cat "$(f linger0.l).err")"
    expect_eq "linger 0: connector's exit line" abortive \
        "$(json_get "$(json_line "$(f linger0.c).err" sent)" close)"
    expect_true "linger 0: what arrived is a prefix" is_prefix "$(f linger0.l).out" "$TMP/a.bin"
fi

# --linger 2: the close waits for the data and ends with a DisConn.
pair linger2 /dev/null "$TMP/a.bin" "--timeout 10" "--timeout 10 --linger 2"
expect_eq "linger 2: connector rc ($(errs linger2))" 0 "$CRC"
expect_eq "linger 2: listener rc ($(errs linger2))" 0 "$LRC"
expect_true "linger 2: data intact" same "$TMP/a.bin" "$(f linger2.l).out"

finish
