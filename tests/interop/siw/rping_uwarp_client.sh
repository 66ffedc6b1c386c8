#!/usr/bin/env bash
# uwarp-rping -c on the host against rping -s in the guest: Linux siw is the
# MPA responder and the RDMA Read/Write target side of rping.
#
#   rping_uwarp_client.sh VARIANT        (VARIANT: default, crc, p2p, ...)
#
# Proves: uwarp's MPA Request is accepted by siw; uwarp answers siw's RDMA
# Read Requests with Read Responses carrying its buffer (the guest prints the
# data it read), accepts siw's RDMA Writes and Sends; COUNT iterations end
# cleanly on both sides. With a capture (root): every FPDU's CRC is good and
# no Terminate is sent.
#
# Note (siw-vm README 2): as responder the crc and p2p builds behave like the
# stock one (C is echoed from the Request; P2P is only used when the
# initiator asks), so these variants check that uwarp is not affected by the
# other compile-time knobs rather than different wire behaviour.
set -u
. "$(dirname "$0")/lib.sh"

VARIANT=${1:?usage: $0 VARIANT}
COUNT=${SIW_COUNT:-10}
SIZE=64 # rping's default -S
SIW_TEST=rping-uwarp-client-$VARIANT

check_wire() {
  check_wire_common "$1"
  check_rping_counts "$1" "$SIW_PORT" "$COUNT"
  # uwarp asks for CRCs by default (RFC 5044 4.4) and siw echoes C, so CRC
  # must be on unless uwarp-rping was told otherwise.
  if [ -z "${UWARP_RPING_ARGS:-}" ] && [ "$WIRE_CRC" != on ]; then
    die "capture: CRC off although uwarp requests it by default"
  fi
}

need_harness
need_tool uwarp-rping
maybe_capture "$@"
siw_logdir_inner

siw_server_start "$VARIANT" rping -s -a 10.0.2.15 -p "$SIW_PORT" -v -C "$COUNT"

log "uwarp-rping -c -a 127.0.0.1 -p $SIW_PORT -C $COUNT -v ${UWARP_RPING_ARGS:-}"
# shellcheck disable=SC2086 # UWARP_RPING_ARGS is a word list on purpose
timeout 120 "$TOOL" -c -a 127.0.0.1 -p "$SIW_PORT" -C "$COUNT" -v ${UWARP_RPING_ARGS:-} \
  >"$LOGDIR/uwarp.out" 2>"$LOGDIR/uwarp.err"
URC=$?
log "uwarp-rping exited with $URC"

# The one-shot guest server ends by itself after the connection; its exit
# status is rping -s's (README 3).
siw_server_wait 90
log "siw server exited with $SRV_RC"

fail=0
if [ $URC -ne 0 ]; then
  log "uwarp-rping failed (exit $URC); stderr:"
  tail -20 "$LOGDIR/uwarp.err" >&2
  fail=1
fi
check_pings "$LOGDIR/uwarp.out" "" "$COUNT" "$SIZE" "uwarp-rping -c -v (stdout)" || fail=1
# The guest's output reaches the server's stderr when it ends.
check_pings "$SRV_ERR" "server " "$COUNT" "$SIZE" "guest rping -s -v" || fail=1
if [ "$SRV_RC" -ne 0 ]; then
  log "guest rping -s exited with $SRV_RC; guest output:"
  sed -n '/guest output/,/---- end/p' "$SRV_ERR" | tail -30 >&2
  fail=1
fi
[ $fail -eq 0 ] || die "see $LOGDIR"
log "PASS"
