#!/usr/bin/env bash
# rping -c in the guest against uwarp-rping -s on the host: Linux siw is the
# MPA initiator (and, in the p2p build, sends an RTR first).
#
#   rping_uwarp_server.sh VARIANT        (VARIANT: default, crc, p2p, ...)
#
# Proves: uwarp's MPA responder accepts siw's Request (Rev 2, S=1, IRD/ORD
# 1/1; C=1 in the crc build; A=1 with Write and Read RTRs offered in the p2p
# build) and siw accepts uwarp's Reply; uwarp RDMA-Reads the client's buffer
# and RDMA-Writes it back, COUNT times; the guest prints the data that came
# back, which must be exactly what it sent. In the p2p build uwarp consumes
# siw's RTR without a completion. With a capture (root): CRCs good, no
# Terminate, the p2p RTR really on the wire.
set -u
. "$(dirname "$0")/lib.sh"

VARIANT=${1:?usage: $0 VARIANT}
COUNT=${SIW_COUNT:-10}
SIZE=64
SIW_TEST=rping-uwarp-server-$VARIANT

check_wire() {
  local d=$1
  check_wire_common "$d"
  check_rping_counts "$d" "$SIW_PORT" "$COUNT"
  case "$VARIANT" in
  crc | crc_p2p)
    [ "$WIRE_CRC" = on ] || die "capture: the crc build requests C=1 but CRCs are off"
    ;;
  esac
  case "$VARIANT" in
  p2p | crc_p2p)
    grep "MPA 'MPA ID Rep Frame'" "$d" | grep -q 'A(p2p)=1' ||
      die "capture: the Reply does not accept peer-to-peer (A=0)"
    # RFC 6581 9.2: siw's first FPDU is the zero-length RTR uwarp selected.
    local first
    first=$(grep ' FPDU ' "$d" | head -1)
    case "$first" in
    *"len=14 DDP[T=1"*"op=0:RDMA Write"*"payload=0B"*) log "wire: RTR = zero-length RDMA Write" ;;
    *"op=1:RDMA Read Request"*"size=0 "*) log "wire: RTR = zero-length RDMA Read Request" ;;
    *) die "capture: first FPDU is not a zero-length Write/Read RTR: $first" ;;
    esac
    ;;
  esac
}

need_harness
need_tool uwarp-rping
maybe_capture "$@"
siw_logdir_inner

log "uwarp-rping -s -a 127.0.0.1 -p $SIW_PORT -C $COUNT -v ${UWARP_RPING_ARGS:-}"
# shellcheck disable=SC2086
timeout 240 "$TOOL" -s -a 127.0.0.1 -p "$SIW_PORT" -C "$COUNT" -v ${UWARP_RPING_ARGS:-} \
  >"$LOGDIR/uwarp.out" 2>"$LOGDIR/uwarp.err" &
UPID=$!
SIW_PIDS+=("$UPID")
wait_until 20 host_listening "$SIW_PORT" || {
  kill -0 $UPID 2>/dev/null || { wait $UPID; log "uwarp-rping exited with $?"; }
  tail -20 "$LOGDIR/uwarp.err" >&2
  die "uwarp-rping -s does not listen on 127.0.0.1:$SIW_PORT within 20 s"
}

# README 8 item 3: rping can hang after a failed connect; timeout inside.
siw_client "$VARIANT" "timeout 120 rping -c -a 10.0.2.2 -p $SIW_PORT -C $COUNT -v"

wait_pid "$UPID" 30
URC=$WAIT_RC
log "uwarp-rping exited with $URC"

fail=0
# rping -c's own exit status is 0 even when the connection broke (seen with
# rdma-core 44), so the data lines are what counts.
if [ "$CLI_RC" -ne 0 ]; then
  log "guest rping -c exited with $CLI_RC"
  fail=1
fi
check_pings "$LOGDIR/client.out" "" "$COUNT" "$SIZE" "guest rping -c -v" || {
  tail -30 "$LOGDIR/client.out" >&2
  fail=1
}
if [ "$URC" -ne 0 ]; then
  log "uwarp-rping -s failed (exit $URC); stderr:"
  tail -20 "$LOGDIR/uwarp.err" >&2
  fail=1
fi
check_pings "$LOGDIR/uwarp.out" "server " "$COUNT" "$SIZE" "uwarp-rping -s -v (stdout)" || fail=1
[ $fail -eq 0 ] || die "see $LOGDIR"
log "PASS"
