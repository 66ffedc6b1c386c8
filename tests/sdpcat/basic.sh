#!/usr/bin/env bash
# uwarp-sdpcat basics over loopback: a small file each way at once, empty
# stdin, one direction only, Read Zcopy (--zcopy-min), Write Zcopy
# (--sink-avail, --mode pipelined), IPv6, the -v JSON
# lines, and a refused connection (nothing listening: exit 3).
. "$(dirname "$0")/lib.sh"

head -c 100000 /dev/urandom >"$TMP/a.bin"
head -c 77777 /dev/urandom >"$TMP/b.bin"

# Small files both ways, -v on both sides.
pair small "$TMP/b.bin" "$TMP/a.bin" "-v --timeout 10" "-v --timeout 10"
expect_eq "small: connector rc ($(errs small))" 0 "$CRC"
expect_eq "small: listener rc ($(errs small))" 0 "$LRC"
expect_true "small: connector -> listener intact" same "$TMP/a.bin" "$(f small.l).out"
expect_true "small: listener -> connector intact" same "$TMP/b.bin" "$(f small.c).out"

# The -v lines parse as JSON and carry every field.
for side in l c; do
    err=$(f "small.$side").err
    setup=$(json_line "$err" role)
    exitl=$(json_line "$err" sent)
    expect_true "small.$side: setup line is JSON ($setup)" \
        python3 -c 'import json,sys; json.loads(sys.argv[1])' "$setup"
    expect_true "small.$side: exit line is JSON ($exitl)" \
        python3 -c 'import json,sys; json.loads(sys.argv[1])' "$exitl"
    for k in role majv minv max_adverts local_rcv_size remote_rcv_size ird ord bufs transport; do
        CHECKS=$((CHECKS + 1))
        [ -n "$(json_get "$setup" "$k")" ] || fail "small.$side: setup line lacks $k: $setup"
    done
    for k in sent received data_msgs_sent data_msgs_received credit_updates_sent sendsm_sent \
        oob_sent oob_received chrcvbuf srcavail_sent srcavail_received sinkavail_sent \
        sinkavail_received rdma_read_bytes rdma_write_bytes rdmardcompl rdmawrcompl \
        sendsm_received cancels mode_changes bcopy_bytes zcopy_bytes zcopy_threshold close; do
        CHECKS=$((CHECKS + 1))
        [ -n "$(json_get "$exitl" "$k")" ] || fail "small.$side: exit line lacks $k: $exitl"
    done
    expect_eq "small.$side: majv" 1 "$(json_get "$setup" majv)"
    expect_eq "small.$side: transport" sdp "$(json_get "$setup" transport)"
    expect_eq "small.$side: close" graceful "$(json_get "$exitl" close)"
    CHECKS=$((CHECKS + 1))
    [ "$(json_get "$setup" max_adverts)" -ge 1 ] 2>/dev/null ||
        fail "small.$side: max_adverts >= 1: $setup"
done
expect_eq "small: role of the listener" accepting \
    "$(json_get "$(json_line "$(f small.l).err" role)" role)"
expect_eq "small: role of the connector" connecting \
    "$(json_get "$(json_line "$(f small.c).err" role)" role)"
expect_eq "small: connector sent" 100000 "$(json_get "$(json_line "$(f small.c).err" sent)" sent)"
expect_eq "small: connector received" 77777 \
    "$(json_get "$(json_line "$(f small.c).err" sent)" received)"
expect_eq "small: listener received" 100000 \
    "$(json_get "$(json_line "$(f small.l).err" sent)" received)"
# Each side's receive buffers are the other's send limit.
lsetup=$(json_line "$(f small.l).err" role)
csetup=$(json_line "$(f small.c).err" role)
expect_eq "small: listener local_rcv_size = connector remote_rcv_size" \
    "$(json_get "$lsetup" local_rcv_size)" "$(json_get "$csetup" remote_rcv_size)"
expect_eq "small: connector local_rcv_size = listener remote_rcv_size" \
    "$(json_get "$csetup" local_rcv_size)" "$(json_get "$lsetup" remote_rcv_size)"

# Empty stdin on both sides: setup, two DisConns, exit 0, nothing out.
pair empty /dev/null /dev/null "--timeout 10" "--timeout 10"
expect_eq "empty: connector rc ($(errs empty))" 0 "$CRC"
expect_eq "empty: listener rc ($(errs empty))" 0 "$LRC"
expect_eq "empty: nothing to the listener" 0 "$(stat -c %s "$(f empty.l).out")"
expect_eq "empty: nothing to the connector" 0 "$(stat -c %s "$(f empty.c).out")"

# One way each: the side with empty stdin shuts down at once and keeps
# receiving.
pair oneway /dev/null "$TMP/a.bin" "--timeout 10" "--timeout 10"
expect_eq "one way: connector rc ($(errs oneway))" 0 "$CRC"
expect_eq "one way: listener rc ($(errs oneway))" 0 "$LRC"
expect_true "one way: data" same "$TMP/a.bin" "$(f oneway.l).out"
pair otherway "$TMP/b.bin" /dev/null "--timeout 10" "--timeout 10"
expect_eq "other way: connector rc ($(errs otherway))" 0 "$CRC"
expect_eq "other way: listener rc ($(errs otherway))" 0 "$LRC"
expect_true "other way: data" same "$TMP/b.bin" "$(f otherway.c).out"

# Read Zcopy (section 9.2): 8 MiB one way with a threshold on both ends. The
# counters must show that SrcAvails went out and the receiver RDMA-Read the
# data, so a silent fall back to Bcopy fails here.
head -c $((8 << 20)) /dev/urandom >"$TMP/z.bin"
zopts="-v --timeout 10 --zcopy-min 65536 --recv-size 1048576"
pair zcopy /dev/null "$TMP/z.bin" "$zopts" "$zopts"
expect_eq "zcopy: connector rc ($(errs zcopy))" 0 "$CRC"
expect_eq "zcopy: listener rc ($(errs zcopy))" 0 "$LRC"
expect_eq "zcopy: sha256 of what arrived" "$(sha256sum <"$TMP/z.bin" | cut -d' ' -f1)" \
    "$(sha256sum <"$(f zcopy.l).out" | cut -d' ' -f1)"
zc=$(json_line "$(f zcopy.c).err" sent)
zl=$(json_line "$(f zcopy.l).err" sent)
expect_eq "zcopy: connector zcopy_threshold" 65536 "$(json_get "$zc" zcopy_threshold)"
expect_eq "zcopy: listener zcopy_threshold" 65536 "$(json_get "$zl" zcopy_threshold)"
CHECKS=$((CHECKS + 1))
[ "$(json_get "$zc" srcavail_sent)" -gt 0 ] 2>/dev/null ||
    fail "zcopy: sender's srcavail_sent > 0: $zc"
CHECKS=$((CHECKS + 1))
[ "$(json_get "$zl" rdma_read_bytes)" -gt 0 ] 2>/dev/null ||
    fail "zcopy: receiver's rdma_read_bytes > 0: $zl"

# Write Zcopy (9.3): the sender asks for Pipelined Mode, the receiver
# waits in blocking receives (--sink-avail), so they are advertised with
# SinkAvail and the sender RDMA-Writes into them. A SinkAvail that the
# sender's SrcAvail crosses is ignored (11.3), so some data may go by Read.
sopts="-v --timeout 10 --zcopy-min 65536"
pair sink /dev/null "$TMP/z.bin" "$sopts --recv-size 1048576 --sink-avail" \
    "$sopts --chunk 1048576 --mode pipelined"
expect_eq "sink: connector rc ($(errs sink))" 0 "$CRC"
expect_eq "sink: listener rc ($(errs sink))" 0 "$LRC"
expect_eq "sink: sha256 of what arrived" "$(sha256sum <"$TMP/z.bin" | cut -d' ' -f1)" \
    "$(sha256sum <"$(f sink.l).out" | cut -d' ' -f1)"
sc=$(json_line "$(f sink.c).err" sent)
sl=$(json_line "$(f sink.l).err" sent)
CHECKS=$((CHECKS + 1))
[ "$(json_get "$sl" sinkavail_sent)" -gt 0 ] 2>/dev/null ||
    fail "sink: receiver's sinkavail_sent > 0: $sl"
CHECKS=$((CHECKS + 1))
[ "$(json_get "$sc" rdma_write_bytes)" -gt 0 ] 2>/dev/null ||
    fail "sink: sender's rdma_write_bytes > 0: $sc"
expect_eq "sink: sender's mode_changes" 1 "$(json_get "$sc" mode_changes)"

# IPv6 loopback: [::1]:PORT to listen, plain ::1 to connect.
if python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    listener v6.l "$TMP/b.bin" -l '[::1]:0' -v --timeout 10
    if [ -n "$LPORT" ]; then
        expect_contains "v6: listens on [::1]" "listening on [::1]:" "$(cat "$(f v6.l).err")"
        connector v6.c "$TMP/a.bin" ::1 "$LPORT" --timeout 10
        wait_rc "$CPID" 60
        expect_eq "v6: connector rc ($(errs v6))" 0 "$WRC"
        wait_rc "$LPID" 60
        expect_eq "v6: listener rc ($(errs v6))" 0 "$WRC"
        expect_true "v6: connector -> listener" same "$TMP/a.bin" "$(f v6.l).out"
        expect_true "v6: listener -> connector" same "$TMP/b.bin" "$(f v6.c).out"
    fi
else
    echo "note: no IPv6 loopback here; IPv6 case skipped" >&2
fi

# Nothing listens: refused at once, exit 3, and the message says what to do.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
t0=$EPOCHREALTIME
connector refused /dev/null 127.0.0.1 "$port" --timeout 5
wait_rc "$CPID" 30
err=$(cat "$(f refused).err")
expect_eq "refused: rc ($err)" 3 "$WRC"
expect_contains "refused: says refused" "refused" "$err"
CHECKS=$((CHECKS + 1))
[ "$(ms_since "$t0")" -le 4000 ] || fail "refused: took $(ms_since "$t0") ms"

finish
