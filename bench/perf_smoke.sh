#!/usr/bin/env bash
# Smoke test of uwarp-perf: a server and a short client run of every
# operation against uwarp and TCP on loopback. It checks that each run
# completes and prints well-formed JSON with positive figures; it never
# judges speed (that is the benchmark's job, not a pass/fail test's).
set -euo pipefail
PERF=$1
tmp=$(mktemp -d)
SRV=
trap '[ -n "$SRV" ] && kill $SRV 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
perf_server "$PERF" "$tmp/srv.log"
run() {
  timeout 60 "$PERF" 127.0.0.1 $PORT --json --iters 200 "$@" >"$tmp/out.json"
  n=$(grep -c '"transport"' "$tmp/out.json")
  [ "$n" -ge 1 ] || { echo "FAIL: no output for $*"; cat "$tmp/srv.log"; exit 1; }
  if grep -q '"bw_gbps":0.0000' "$tmp/out.json"; then echo "FAIL: zero throughput for $*"; cat "$tmp/out.json"; exit 1; fi
  echo "ok: $* ($n lines)"
}
run --op write --size 64K --vs-tcp --cpu
grep -q '"host_steal":' "$tmp/out.json" || { echo "FAIL: no host_steal"; cat "$tmp/out.json"; exit 1; }
run --op read --size 4K --vs-tcp
run --op send --size 1K --vs-tcp
run --op send --size 64 --lat --vs-tcp
run --op write --size 64K --markers
run --op write --size 64K --no-crc --qps 4 --depth 4
# Many large marked Writes: each transmit pass is short (few copy slots);
# queued requests must still go out once a pass runs out of rounds.
run --op write --size 1M --markers --depth 32
run --op write --size 64K --fpdu 1448 --markers
grep -q '"fpdu":1448' "$tmp/out.json" || { echo "FAIL: --fpdu not reported"; exit 1; }
timeout 60 "$PERF" 127.0.0.1 $PORT --json --iters 100 --repeat 2 --op send --size 64 --lat --vs-tcp >"$tmp/out.json"
grep -q '"ratio_lat_p50_paired"' "$tmp/out.json" || { echo "FAIL: no paired ratio with --repeat"; cat "$tmp/out.json"; exit 1; }
echo "ok: --repeat 2 paired ratios"
# Lists of requests per call: every message is counted once, on both
# transports, when the count is not a multiple of the list length.
run --op write --size 4K --vs-tcp --post-list 0 --iters 203
[ "$(grep -c '"bytes":831488,' "$tmp/out.json")" -eq 2 ] || { echo "FAIL: --post-list 0 did not move 203 messages on both"; cat "$tmp/out.json"; exit 1; }
run --op send --size 1K --vs-tcp --post-list 5 --iters 203
[ "$(grep -c '"bytes":207872,' "$tmp/out.json")" -eq 2 ] || { echo "FAIL: --post-list 5 did not move 203 messages on both"; cat "$tmp/out.json"; exit 1; }
# --max-steal 0 may measure a run again, at most --repeat times more: it
# must still end with one figure per transport.
run --op write --size 4K --vs-tcp --repeat 2 --max-steal 0
[ "$(grep -c '"transport":"\(uwarp\|tcp\)"' "$tmp/out.json")" -eq 2 ] || { echo "FAIL: --max-steal"; cat "$tmp/out.json"; exit 1; }
run --op write --size 16K --vs-tcp --tcp-crc
grep -q '"transport":"tcp+crc"' "$tmp/out.json" || { echo "FAIL: no tcp+crc line"; exit 1; }
grep -q '"baseline":"tcp+crc"' "$tmp/out.json" || { echo "FAIL: ratio not against tcp+crc"; exit 1; }
echo "perf smoke: all runs completed"
