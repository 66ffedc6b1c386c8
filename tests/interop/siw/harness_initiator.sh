#!/usr/bin/env bash
# Harness self-test, siw as initiator (no uwarp binary involved): siw-vm's
# scripted responder (mpa_tool.py server --reply) listens on the host, the
# guest's `rping -c` connects to 10.0.2.2:PORT; siw's Request must be
# `10 02 0004 0001 0001` (stock build) and its first FPDU the documented
# rping Send `0022 4143 00000000 00000000 00000001 00000000` + 16 octets +
# zero CRC field (siw-vm README 4).
#
# Proves: the guest reaches the host through QEMU user networking, and siw's
# initiator wire behaviour is what the rping tests assume.
set -u
. "$(dirname "$0")/lib.sh"

VARIANT=${1:-default}
SIW_TEST=harness-initiator-$VARIANT
need_harness
need_file "$SIW_MPA_TOOL" "siw-vm mpa_tool.py"
siw_logdir "$SIW_TEST"

timeout 120 python3 "$SIW_MPA_TOOL" server 127.0.0.1 "$SIW_PORT" --reply --linger 4 \
  --accept-timeout 100 --json "$LOGDIR/responder.json" >"$LOGDIR/responder.out" 2>&1 &
RPID=$!
SIW_PIDS+=("$RPID")
wait_until 20 host_listening "$SIW_PORT" || die "mpa_tool.py server does not listen on $SIW_PORT"

siw_client "$VARIANT" "timeout 30 rping -c -a 10.0.2.2 -p $SIW_PORT -v -C 1"
wait_pid "$RPID" 30
[ "$WAIT_RC" -eq 0 ] || die "mpa_tool.py server exited with $WAIT_RC: $(tail -3 "$LOGDIR/responder.out")"
# The scripted responder never answers the Send, so rping cannot finish; its
# exit status is not checked (it is 0 anyway, see rping_uwarp_server.sh).

read -r req after < <(python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).readline())
print(r["request_hex"][32:], r.get("after_hex", "") or "-")' "$LOGDIR/responder.json")
want_req=1002000400010001
[ "$VARIANT" != crc ] || want_req=5002000400010001
[ "$req" = "$want_req" ] || die "siw's Request from offset 16 is $req, expected $want_req"
case "$after" in
00224143000000000000000000000001000000000000*) ;;
*) die "siw's first FPDU is not rping's first Send: $after" ;;
esac
[ ${#after} -eq 80 ] || die "expected one 40-octet FPDU after the Reply, got $((${#after} / 2)) octets"
log "siw Request $req, first FPDU ${after:0:40}... (as documented)"
log "PASS"
