#!/usr/bin/env bash
# Main demo: installs what is missing, builds (the plain packagers' way), then
# moves 256 MiB between two uwarp processes over loopback TCP as RDMAP Sends
# (MPA Rev 2, CRC32c on), shows what they negotiated, checks the data and
# prints the throughput; then an rping-style RDMA Read/Write exchange and a
# one-second uwarp-vs-TCP comparison. `./scripts/demo.sh mpa` shows the MPA
# framing demo (RFC 5044 Figures 5 and 6) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
echo "build: ok (./build)"

if [ "${1:-}" = mpa ]; then
  exec ./build/tools/uwarp-mpa demo
fi

BIN=./build/tools
MB=${DEMO_MIB:-256}
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
# lport LOG: the port of LOG's "listening on ADDR:PORT" line, once there.
lport() {
  local i
  for ((i = 0; i < 100; i++)); do
    grep -q 'listening on' "$1" 2>/dev/null && break
    sleep 0.1
  done
  sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\)$/\1/p' "$1" | head -n1
}

echo
echo "== 1. ${MB} MiB through uwarp-cat (responder and initiator are two processes)"
head -c $((MB << 20)) /dev/urandom >"$tmp/in"
: >"$tmp/empty"
"$BIN/uwarp-cat" -v -l 127.0.0.1:0 <"$tmp/empty" >"$tmp/out" 2>"$tmp/resp.err" &
pids+=($!)
port=$(lport "$tmp/resp.err")
t0=$(date +%s.%N)
"$BIN/uwarp-cat" -v 127.0.0.1 "$port" <"$tmp/in" >/dev/null 2>"$tmp/init.err"
wait "${pids[0]}"
t1=$(date +%s.%N)
echo "initiator negotiated: $(grep '^{' "$tmp/init.err")"
echo "responder negotiated: $(grep '^{' "$tmp/resp.err")"
if cmp -s "$tmp/in" "$tmp/out"; then
  echo "data: ${MB} MiB received, identical (cmp)"
else
  echo "data: MISMATCH"; exit 1
fi
awk -v a="$t0" -v b="$t1" -v mb="$MB" \
  'BEGIN { s = b - a; printf "time: %.2f s, throughput %.0f MiB/s (one stream, pipes included)\n", s, mb / s }'

echo
echo "== 2. uwarp-rping: RDMA Read + RDMA Write + Sends, 3 iterations, validated"
"$BIN/uwarp-rping" -s -a 127.0.0.1 -p 0 -C 3 >"$tmp/rping.srv" 2>&1 &
pids+=($!)
rport=$(lport "$tmp/rping.srv")
"$BIN/uwarp-rping" -c -a 127.0.0.1 -p "$rport" -C 3 -v -V
wait "${pids[1]}"

echo
echo "== 3. uwarp vs raw TCP, RDMA Write 64 KiB, 1 s each (bench/ has the full tool)"
. bench/lib.sh
perf_server ./build/bench/uwarp-perf "$tmp/perf.log"
pids+=("$SRV")
./build/bench/uwarp-perf 127.0.0.1 "$PORT" --vs-tcp --duration 1
