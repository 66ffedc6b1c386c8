#!/usr/bin/env bash
# Bidirectional bulk transfer between two uwarp-cat processes over loopback:
# an 8 MiB random file from the initiator to the responder and another from
# the responder to the initiator at the same time, byte-identical at the far
# end, for MPA Rev 1 and 2, CRC on and off, markers off and on both sides.
# Both sides also half-close independently (each at its own stdin EOF) and
# must still exit 0.
# usage: roundtrip.sh UWARP-CAT UWARP-RPING SILENT-PEER
CAT=${1:-} RPING=${2:-} PEER=${3:-}
. "$(dirname "$0")/lib.sh"

head -c $((8 * 1024 * 1024)) /dev/urandom >"$TMP/a.bin"
head -c $((8 * 1024 * 1024)) /dev/urandom >"$TMP/b.bin"

# case NAME OPTS...: the same options on both sides.
case_rt() {
    local name=$1
    shift
    responder "$name.r" "$TMP/b.bin" -v --timeout 10 "$@"
    [ -n "$RPORT" ] || return
    initiator "$name.i" "$TMP/a.bin" "$RPORT" -v --timeout 10 "$@"
    wait_rc "$RPID" 30
    local rrc=$WRC
    expect_eq "$name: initiator rc ($(tail -n2 "$TMP/$name.i.err"))" 0 "$IRC"
    expect_eq "$name: responder rc ($(tail -n2 "$TMP/$name.r.err"))" 0 "$rrc"
    expect_true "$name: initiator -> responder data" cmp -s "$TMP/a.bin" "$TMP/$name.r.out"
    expect_true "$name: responder -> initiator data" cmp -s "$TMP/b.bin" "$TMP/$name.i.out"
    rm -f "$TMP/$name.r.out" "$TMP/$name.i.out"
}

for rev in 1 2; do
    for crc in on off; do
        for mk in off on; do
            opts=(--rev "$rev")
            [ "$crc" = off ] && opts+=(--no-crc)
            [ "$mk" = on ] && opts+=(--markers)
            case_rt "rev$rev-crc$crc-markers$mk" "${opts[@]}"
            # The negotiated parameters are what was asked for.
            j=$(json_of "rev$rev-crc$crc-markers$mk.i")
            want_crc=true
            [ "$crc" = off ] && want_crc=false
            want_mk=false
            [ "$mk" = on ] && want_mk=true
            expect_contains "rev$rev crc$crc markers$mk: rev" "\"rev\":$rev," "$j"
            expect_contains "rev$rev crc$crc markers$mk: crc" "\"crc\":$want_crc," "$j"
            expect_contains "rev$rev crc$crc markers$mk: markers" \
                "\"markers_rx\":$want_mk,\"markers_tx\":$want_mk," "$j"
        done
    done
done

# One direction only (the other side's stdin is empty: it half-closes at
# once and keeps receiving).
responder oneway.r /dev/null --timeout 20
initiator oneway.i "$TMP/a.bin" "$RPORT" --timeout 20
expect_eq "one way: initiator rc ($(cat "$TMP/oneway.i.err"))" 0 "$IRC"
wait_rc "$RPID" 30
expect_eq "one way: responder rc ($(cat "$TMP/oneway.r.err"))" 0 "$WRC"
expect_true "one way: data" cmp -s "$TMP/a.bin" "$TMP/oneway.r.out"
expect_eq "one way: nothing back" 0 "$(wc -c <"$TMP/oneway.i.out")"

# The other way only: the initiator has nothing to say, yet the responder's
# data flows (RFC 5044 7.1.2 lets a responder send only after the
# initiator's first FPDU: uwarp-cat's initiator opens with an empty Send).
responder otherway.r "$TMP/b.bin" --timeout 20
initiator otherway.i /dev/null "$RPORT" --timeout 20
wait_rc "$RPID" 30
expect_eq "other way: initiator rc ($(cat "$TMP/otherway.i.err"))" 0 "$IRC"
expect_eq "other way: responder rc ($(cat "$TMP/otherway.r.err"))" 0 "$WRC"
expect_true "other way: data" cmp -s "$TMP/b.bin" "$TMP/otherway.i.out"
expect_eq "other way: nothing to the responder" 0 "$(wc -c <"$TMP/otherway.r.out")"

# Empty both ways: setup, two half-closes, exit 0.
responder empty.r /dev/null --timeout 20
initiator empty.i /dev/null "$RPORT" --timeout 20
expect_eq "empty: initiator rc" 0 "$IRC"
wait_rc "$RPID" 30
expect_eq "empty: responder rc" 0 "$WRC"

finish
