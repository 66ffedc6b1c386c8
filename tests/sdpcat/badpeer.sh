#!/usr/bin/env bash
# uwarp-sdpcat against a misbehaving SDP peer (sdp_badpeer.c: verbs only,
# every SDP header built by hand). Each misbehaviour ends in the documented
# exit status of uwarp-sdpcat, in bounded time; the bad peer confirms that
# uwarp-sdpcat ended the connection (its own exit 0). First the bad peer's
# "good" mode, so a failure below is not a flaw of the bad peer's wire format.
. "$(dirname "$0")/lib.sh"

head -c 200000 /dev/urandom >"$TMP/a.bin"
head -c 150000 /dev/urandom >"$TMP/b.bin"

# bad_accepting NAME MODE WANT_RC MAX_MS [SDPCAT OPTS...]: the bad peer
# listens, uwarp-sdpcat connects with stdin STDIN_FILE (default /dev/null).
bad_accepting() {
    local name=$1 mode=$2 want=$3 max=$4 stem
    shift 4
    stem=$(f "$name")
    "$BADPEER" --mode "$mode" --timeout 10 -l 127.0.0.1:0 <"${BP_IN:-/dev/null}" \
        >"$stem.bp.out" 2>"$stem.bp.err" &
    local bpid=$!
    local port
    port=$(wait_port "$stem.bp.err")
    if [ -z "$port" ]; then
        fail "$name: the bad peer did not listen: $(cat "$stem.bp.err")"
        kill -9 "$bpid" 2>/dev/null
        wait "$bpid" 2>/dev/null
        return
    fi
    local t0=$EPOCHREALTIME
    connector "$name" "${SC_IN:-/dev/null}" 127.0.0.1 "$port" --timeout 3 "$@"
    wait_rc "$CPID" 30
    local rc=$WRC took
    took=$(ms_since "$t0")
    expect_eq "$name: uwarp-sdpcat rc ($(tail -n2 "$stem.err" | tr '\n' ' '))" "$want" "$rc"
    CHECKS=$((CHECKS + 1))
    [ "$took" -le "$max" ] || fail "$name: uwarp-sdpcat took $took ms (limit $max)"
    wait_rc "$bpid" 30
    BPRC=$WRC
    if [ "$mode" != die ]; then
        expect_eq "$name: the bad peer saw the connection end ($(tail -n1 "$stem.bp.err"))" 0 "$BPRC"
    fi
}

# bad_connecting NAME MODE WANT_RC MAX_MS [SDPCAT OPTS...]: uwarp-sdpcat
# listens, the bad peer connects.
bad_connecting() {
    local name=$1 mode=$2 want=$3 max=$4 stem
    shift 4
    stem=$(f "$name")
    listener "$name" "${SC_IN:-/dev/null}" --timeout 3 "$@"
    [ -n "$LPORT" ] || return
    local t0=$EPOCHREALTIME
    "$BADPEER" --mode "$mode" --timeout 10 127.0.0.1 "$LPORT" <"${BP_IN:-/dev/null}" \
        >"$stem.bp.out" 2>"$stem.bp.err" &
    local bpid=$!
    wait_rc "$LPID" 30
    local rc=$WRC took
    took=$(ms_since "$t0")
    expect_eq "$name: uwarp-sdpcat rc ($(tail -n2 "$stem.err" | tr '\n' ' '))" "$want" "$rc"
    CHECKS=$((CHECKS + 1))
    [ "$took" -le "$max" ] || fail "$name: uwarp-sdpcat took $took ms (limit $max)"
    wait_rc "$bpid" 30
    BPRC=$WRC
    if [ "$mode" != die ]; then
        expect_eq "$name: the bad peer saw the connection end ($(tail -n1 "$stem.bp.err"))" 0 "$BPRC"
    fi
}

# The bad peer's good mode: data both ways, DisConns, exit 0 on both ends.
BP_IN=$TMP/b.bin SC_IN=$TMP/a.bin bad_accepting "good (bad peer accepting)" good 0 10000
expect_true "good accepting: data to uwarp-sdpcat" same "$TMP/b.bin" "$(f "good (bad peer accepting)").out"
expect_true "good accepting: data to the bad peer" same "$TMP/a.bin" "$(f "good (bad peer accepting)").bp.out"
BP_IN=$TMP/b.bin SC_IN=$TMP/a.bin bad_connecting "good (bad peer connecting)" good 0 10000
expect_true "good connecting: data to uwarp-sdpcat" same "$TMP/b.bin" "$(f "good (bad peer connecting)").out"
expect_true "good connecting: data to the bad peer" same "$TMP/a.bin" "$(f "good (bad peer connecting)").bp.out"

# Protocol violations after setup: exit 2, within a few seconds, both roles.
for mode in garbage overrun mseq-gap reserved-mid; do
    bad_accepting "$mode (bad peer accepting)" "$mode" 2 6000
    bad_connecting "$mode (bad peer connecting)" "$mode" 2 6000
done
# The message names the rule that was broken.
for mode in garbage overrun mseq-gap reserved-mid; do
    expect_contains "$mode: says protocol error" "protocol error" \
        "$(cat "$(f "$mode (bad peer accepting)").err")"
done

# HelloAck with MaxAdverts 0 (8.1.1 step 7a): the Connecting Peer fails the
# setup with a protocol error.
bad_accepting "HelloAck MaxAdverts 0" maxadverts0 2 6000

# Hello with MaxAdverts 0 (step 3a): refused with an MPA Reject (the bad
# peer exits 0 only on a Reject); the listener never sees that attempt and
# keeps serving: a good connection after it goes through.
listener "Hello MaxAdverts 0" "$TMP/b.bin" --timeout 10
if [ -n "$LPORT" ]; then
    stem=$(f "Hello MaxAdverts 0")
    timeout 30 "$BADPEER" --mode maxadverts0 --timeout 10 127.0.0.1 "$LPORT" \
        </dev/null >"$stem.bp.out" 2>"$stem.bp.err"
    expect_eq "Hello MaxAdverts 0: refused with an MPA Reject ($(cat "$stem.bp.err"))" 0 "$?"
    CHECKS=$((CHECKS + 1))
    kill -0 "$LPID" 2>/dev/null || fail "Hello MaxAdverts 0: the listener gave up"
    connector "after MaxAdverts 0" "$TMP/a.bin" 127.0.0.1 "$LPORT" --timeout 10
    wait_rc "$CPID" 30
    expect_eq "after MaxAdverts 0: connector rc ($(tail -n2 "$(f "after MaxAdverts 0").err"))" 0 "$WRC"
    wait_rc "$LPID" 30
    expect_eq "after MaxAdverts 0: listener rc ($(tail -n2 "$stem.err"))" 0 "$WRC"
    expect_true "after MaxAdverts 0: data" same "$TMP/a.bin" "$stem.out"
fi

# No HelloAck: the Connecting Peer gives up after its --timeout (3 s): exit 4.
bad_accepting "no HelloAck" no-helloack 4 6500
expect_contains "no HelloAck: says timed out" "timed out" "$(cat "$(f "no HelloAck").err")"

# The peer vanishes after 3000 octets of Data, without DisConn or close:
# uwarp-sdpcat reports a reset (exit 5) and wrote the data it got.
SC_IN=<(sleep 20) bad_accepting "die (bad peer accepting)" die 5 6000
expect_eq "die accepting: the data before the end" 3000 \
    "$(stat -c %s "$(f "die (bad peer accepting)").out")"
SC_IN=<(sleep 20) bad_connecting "die (bad peer connecting)" die 5 6000
expect_eq "die connecting: the data before the end" 3000 \
    "$(stat -c %s "$(f "die (bad peer connecting)").out")"
# Same with uwarp-sdpcat's stdin already done (its DisConn sent first).
bad_accepting "die after our DisConn" die 5 6000

# A peer that RDMA-Reads 4 KiB straddling the end of the buffer a SrcAvail
# advertised (9.2): the engine's bounds check answers with a Terminate, the
# Read fails and places nothing (the bad peer checks its buffer), and
# uwarp-sdpcat reports a protocol error (exit 2), not a reset.
head -c $((2 << 20)) /dev/urandom >"$TMP/z.bin"
for role in accepting connecting; do
    name="read outside the SrcAvail ($role)"
    SC_IN=$TMP/z.bin "bad_$role" "$name" read-outside 2 6000 --zcopy-min 65536 --chunk 1048576
    expect_contains "$name: a Terminate for the bounds" "base or bounds violation" \
        "$(cat "$(f "$name").bp.err")"
    expect_contains "$name: nothing placed" "the Read failed; our buffer untouched" \
        "$(cat "$(f "$name").bp.err")"
    expect_contains "$name: sdpcat names the cause" "Terminate sent" "$(cat "$(f "$name").err")"
done

finish
