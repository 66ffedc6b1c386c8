#!/usr/bin/env bash
# Harness self-test, siw as responder (no uwarp binary involved): a fresh
# guest runs `rping -s -P`, siw-vm's mpa_tool.py sends one MPA v2 Request
# (C=1, IRD/ORD 16/16) through the host port forward, and siw's Reply must be
# the documented `50 02 0004 0010 0010` (siw-vm README 3). Then SIGTERM must
# stop the guest with exit status 143.
#
# Proves the pieces the rping tests rely on: the guest build, hostfwd,
# SIW-PEER READY only once the guest listens, and clean shutdown.
set -u
. "$(dirname "$0")/lib.sh"

VARIANT=${1:-default}
SIW_TEST=harness-responder-$VARIANT
need_harness
need_file "$SIW_MPA_TOOL" "siw-vm mpa_tool.py"
siw_logdir "$SIW_TEST"

siw_server_start "$VARIANT" rping -s -P -a 10.0.2.15 -p "$SIW_PORT" -v

timeout 30 python3 "$SIW_MPA_TOOL" client 127.0.0.1 "$SIW_PORT" --rev 2 --crc --enhanced \
  --ird 16 --ord 16 --pdata uwarp --linger 1 --json "$LOGDIR/probe.json" >"$LOGDIR/probe.out" 2>&1 ||
  die "mpa_tool.py client failed: $(tail -3 "$LOGDIR/probe.out")"

# Octets 16.. of the Reply: flags 0x50 (C, S), Rev 2, PD_Length 4, IRD 16,
# ORD 16 (mirrored).
got=$(python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(r.get("reply_hex","")[32:])' \
  "$LOGDIR/probe.json")
[ "$got" = "5002000400100010" ] || die "siw's Reply from offset 16 is '$got', expected 5002000400100010"
log "siw Reply: $got (as documented)"

siw_server_stop
[ "$SRV_RC" -eq 143 ] || die "siw-peer.sh server exited with $SRV_RC after SIGTERM (expected 143)"
! grep -q 'BUG:\|Oops\|WARNING:' "$SRV_ERR" || die "guest kernel complained: see $SRV_ERR"
log "PASS"
