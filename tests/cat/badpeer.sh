#!/usr/bin/env bash
# uwarp-cat against misbehaving peers (tests/cat/silent_peer.c, plain TCP):
# silence and stalls end in exit 4 within --timeout, garbage and malformed
# startup frames in exit 2 naming the RFC 5044 error, and the connection is
# closed in every case. A peer that vanishes mid-transfer is an error within
# the timeout, never a hang.
# usage: badpeer.sh UWARP-CAT UWARP-RPING SILENT-PEER
CAT=${1:-} RPING=${2:-} PEER=${3:-}
. "$(dirname "$0")/lib.sh"

ms_since() { # ms_since START (an $EPOCHREALTIME value)
    local now=$EPOCHREALTIME
    echo $(((${now/./} - ${1/./}) / 1000))
}

# peer_listen MODE: starts silent_peer as a listener; sets PPORT, PPID_ and
# POUT (its output file, fresh for each peer so an old port is never read).
NPEER=0
peer_listen() {
    NPEER=$((NPEER + 1))
    POUT=$TMP/peer$NPEER.out
    "$PEER" listen "$1" >"$POUT" 2>"$TMP/peer$NPEER.err" &
    PPID_=$!
    BG_PIDS+=("$PPID_")
    local i
    for ((i = 0; i < 100; i++)); do
        PPORT=$(head -n1 "$POUT" 2>/dev/null)
        [ -n "$PPORT" ] && return
        sleep 0.05
    done
    fail "silent_peer did not listen"
}

# Initiator against bad responders.
# bad_responder NAME MODE WANT_RC NEEDLE MAX_MS
bad_responder() {
    local name=$1 mode=$2 want=$3 needle=$4 max=$5 t0
    peer_listen "$mode"
    t0=$EPOCHREALTIME
    initiator "$name" /dev/null "$PPORT" --timeout 1
    local took
    took=$(ms_since "$t0")
    local err
    err=$(cat "$(f "$name").err")
    expect_eq "$name: rc ($err)" "$want" "$IRC"
    expect_contains "$name: message" "$needle" "$err"
    CHECKS=$((CHECKS + 1))
    [ "$took" -le "$max" ] || fail "$name: took $took ms (limit $max)"
    wait_rc "$PPID_" 25
    expect_eq "$name: connection closed ($(tail -n1 "$POUT"))" 0 "$WRC"
}
bad_responder "silent responder" silent 4 "timed out" 3500
bad_responder "half Reply" half-reply 4 "timed out" 3500
bad_responder "garbage Reply" garbage-reply 2 "MPA error 4" 3000

# Responder against bad initiators.
# bad_initiator NAME MODE WANT_RC NEEDLE MAX_MS
bad_initiator() {
    local name=$1 mode=$2 want=$3 needle=$4 max=$5 t0
    responder "$name" /dev/null --timeout 1
    [ -n "$RPORT" ] || return
    t0=$EPOCHREALTIME
    "$PEER" connect "$RPORT" "$mode" >"$TMP/peer.out" 2>"$TMP/peer.err"
    local prc=$?
    wait_rc "$RPID" 10
    local took
    took=$(ms_since "$t0")
    local err
    err=$(cat "$(f "$name").err")
    expect_eq "$name: rc ($err)" "$want" "$WRC"
    expect_contains "$name: message" "$needle" "$err"
    expect_eq "$name: connection closed ($(cat "$TMP/peer.out" "$TMP/peer.err"))" 0 "$prc"
    CHECKS=$((CHECKS + 1))
    [ "$took" -le "$max" ] || fail "$name: took $took ms (limit $max)"
}
# RFC 5044 7.1.2: an invalid key is error 4 (the library closes, no Reply).
bad_initiator "garbage Request" garbage 2 "MPA error 4" 3000
bad_initiator "PD_Length 600" pd600 2 "EMPA_PD_LENGTH" 3000
bad_initiator "stalled Request" stall 4 "timed out" 3500
bad_initiator "silent initiator" silent 4 "timed out" 3500

# Nobody connects: --timeout bounds the wait for a connection too.
t0=$EPOCHREALTIME
responder "no client" /dev/null --timeout 0.5
wait_rc "$RPID" 10
expect_eq "no client: rc" 4 "$WRC"
CHECKS=$((CHECKS + 1))
[ "$(ms_since "$t0")" -le 3000 ] || fail "no client: took too long"

# Nothing listens: the connection is refused at once.
peer_listen silent
kill "$PPID_" 2>/dev/null
wait "$PPID_" 2>/dev/null
initiator refused /dev/null "$PPORT" --timeout 5
expect_eq "refused: rc ($(cat "$(f refused).err"))" 2 "$IRC"

# The peer vanishes mid-transfer (SIGKILL: the kernel resets the
# connection): the other side reports an error well within its timeout.
vanish() { # vanish NAME WHO(responder|initiator)
    local name=$1 who=$2
    responder "$name.r" /dev/zero --timeout 5
    "$CAT" --timeout 5 127.0.0.1 "$RPORT" </dev/zero >/dev/null 2>"$(f "$name.i").err" &
    local ipid=$!
    BG_PIDS+=("$ipid")
    sleep 0.5
    local t0=$EPOCHREALTIME
    if [ "$who" = responder ]; then
        kill -9 "$RPID"
        wait_rc "$ipid" 10
    else
        kill -9 "$ipid"
        wait_rc "$RPID" 10
    fi
    expect_eq "$name: survivor rc ($(cat "$(f "$name.i").err" "$(f "$name.r").err" | tail -n1))" \
        2 "$WRC"
    CHECKS=$((CHECKS + 1))
    [ "$(ms_since "$t0")" -le 3000 ] || fail "$name: survivor took too long"
    wait "$ipid" "$RPID" 2>/dev/null
}
vanish "responder vanishes" responder
vanish "initiator vanishes" initiator

finish
