#!/usr/bin/env bash
# Smoke test of uwarp-perf's SDP socket tests: a server and short stream and
# rr runs (SDP against TCP, blocking and busy-polling) plus a small idle-memory
# run on loopback. It checks that every run completes and prints JSON that
# parses, with nonzero figures for both transports; it never judges speed.
set -euo pipefail
PERF=$1
tmp=$(mktemp -d)
SRV=
trap '[ -n "$SRV" ] && kill $SRV 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
perf_server "$PERF" "$tmp/srv.log"

# check FILE KIND: every line is JSON; the sdp and tcp lines have positive
# figures; the ratio line is there and positive.
check() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
path, kind = sys.argv[1], sys.argv[2]
lines = [json.loads(l) for l in open(path) if l.strip()]
by = {}
for l in lines:
    by.setdefault(l["transport"], []).append(l)
def fail(msg):
    print("FAIL:", msg); print(open(path).read()); sys.exit(1)
if kind == "idle":
    for t in ("sdp", "tcp"):
        if t not in by: fail("no %s line" % t)
        b = by[t][0]["bytes_per_conn"]
        if by[t][0]["conns"] <= 0: fail("%s: no connections" % t)
    if by["sdp"][0]["bytes_per_conn"]["client_rss"] <= 0 or by["sdp"][0]["bytes_per_conn"]["server_rss"] <= 0:
        fail("sdp idle connections took no memory")
    if "diff" not in by: fail("no diff line")
    sys.exit(0)
for t in ("sdp", "tcp"):
    if t not in by: fail("no %s line" % t)
    for l in by[t]:
        if l["op"] != kind: fail("op %s, not %s" % (l["op"], kind))
        # (bw_gbps has four decimals: slow runs print 0.0000)
        if not (l["bytes"] > 0 and l["msg_rate"] > 0 and l["secs"] > 0):
            fail("zero figures for %s" % t)
        cpu = l["cpu_ns_per_byte"]
        if not (cpu["client"] > 0 and cpu["server"] > 0): fail("no CPU figures for %s" % t)
        if "nodelay" not in l: fail("no nodelay field")
        if kind == "rr" and not (l["lat_us"]["p50"] > 0 and l["lat_us"]["p999"] > 0):
            fail("no latency for %s" % t)
    if t == "sdp" and not all(l.get("sdp_data_msgs", 0) > 0 for l in by[t]):
        fail("no SDP message count")
if "ratio" not in by: fail("no ratio line")
for r in by["ratio"]:
    if not r["ratio_bw"] > 0: fail("zero ratio")
    if kind == "rr" and not r["ratio_lat_p50"] > 0: fail("no latency ratio")
EOF
}

run() {
  kind=$1; shift
  timeout 60 "$PERF" 127.0.0.1 $PORT --json "$@" >"$tmp/out.json" || {
    echo "FAIL: uwarp-perf $* exited $?"; cat "$tmp/out.json" "$tmp/srv.log"; exit 1; }
  check "$tmp/out.json" "$kind"
  echo "ok: $*"
}
run stream --op stream --sizes 100,64K --vs-tcp --cpu --duration 0.2
grep -q '"nodelay":false' "$tmp/out.json" || { echo "FAIL: stream is not without TCP_NODELAY by default"; exit 1; }
run rr --op rr --size 64 --vs-tcp --cpu --duration 0.2
grep -q '"nodelay":true' "$tmp/out.json" || { echo "FAIL: rr is not with TCP_NODELAY by default"; exit 1; }
run rr --op rr --size 64 --vs-tcp --cpu --busy-poll --duration 0.2
grep -q '"busy_poll":true' "$tmp/out.json" || { echo "FAIL: --busy-poll not reported"; exit 1; }
run rr --op rr --size 64 --vs-tcp --cpu --no-nodelay --iters 50
grep -q '"nodelay":false' "$tmp/out.json" || { echo "FAIL: --no-nodelay not reported"; exit 1; }
run stream --op stream --size 4K --vs-tcp --cpu --busy-poll --nodelay --no-crc --iters 500
run idle --idle-mem 10
# Text output too (the default), and --tcp-only of a socket op.
timeout 60 "$PERF" 127.0.0.1 $PORT --op rr --size 1K --vs-tcp --iters 200 --repeat 2 >"$tmp/out.txt"
grep -q '^paired rr ' "$tmp/out.txt" || { echo "FAIL: no paired line"; cat "$tmp/out.txt"; exit 1; }
timeout 60 "$PERF" 127.0.0.1 $PORT --op stream --size 1K --tcp-only --iters 200 --json >"$tmp/out.json"
[ "$(grep -c '"transport":"tcp"' "$tmp/out.json")" -eq 1 ] || { echo "FAIL: --tcp-only"; exit 1; }
# Options that make no sense for socket ops are refused.
if "$PERF" 127.0.0.1 $PORT --op stream --markers >/dev/null 2>&1; then echo "FAIL: stream --markers accepted"; exit 1; fi
if "$PERF" 127.0.0.1 $PORT --op write --nodelay >/dev/null 2>&1; then echo "FAIL: write --nodelay accepted"; exit 1; fi
echo "perf sdp smoke: all runs completed"
