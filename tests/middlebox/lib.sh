# Shared by the middlebox scripts: start a receiver and a proxy in front of it
# on free loopback ports, then run a sender through the proxy.
set -euo pipefail
PEER=$1
PROXY=$2
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

free_port() {
  local p
  for _ in $(seq 50); do
    p=$(( 20000 + RANDOM % 30000 ))
    if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then echo $p; return; fi
  done
  echo "no free port" >&2; exit 1
}

# run_case NAME BYTES "RECV OPTS" "SEND OPTS" "PROXY OPTS"
run_case() {
  local name=$1 bytes=$2 ropts=$3 sopts=$4 popts=$5
  # A port free of listeners can still be another socket's local port (a
  # parallel test's connection): the receiver's bind then fails, and a
  # fresh port is tried (a CI run lost corrupt-4 to this).
  local rport rpid try
  for try in 1 2 3 4 5; do
    rport=$(free_port)
    timeout 300 "$PEER" recv "$rport" $ropts >"$TMP/$name.recv" 2>&1 &
    rpid=$!; PIDS+=($rpid)
    for _ in $(seq 200); do
      grep -q LISTENING "$TMP/$name.recv" 2>/dev/null && break
      kill -0 "$rpid" 2>/dev/null || break
      sleep 0.05
    done
    grep -q LISTENING "$TMP/$name.recv" && break
    grep -q "listen failed" "$TMP/$name.recv" || break
  done
  grep -q LISTENING "$TMP/$name.recv" || { cat "$TMP/$name.recv"; echo "FAIL: $name: receiver did not start"; exit 1; }
  timeout 300 "$PROXY" --timeout 200 --stats --log "$TMP/$name.log" $popts 0 127.0.0.1 "$rport" \
    >"$TMP/$name.pport" 2>"$TMP/$name.proxy" &
  local ppid=$!; PIDS+=($ppid)
  for _ in $(seq 100); do grep -q '^PORT' "$TMP/$name.pport" 2>/dev/null && break; sleep 0.05; done
  local pport; pport=$(awk '/^PORT/{print $2}' "$TMP/$name.pport")
  local t0=$SECONDS
  local src=0 rrc=0
  timeout 300 "$PEER" send 127.0.0.1 "$pport" "$bytes" $sopts >"$TMP/$name.send" 2>&1 || src=$?
  wait $rpid || rrc=$?
  wait $ppid || true
  echo "--- $name ($((SECONDS - t0)) s): sender rc=$src receiver rc=$rrc"
  sed 's/^/  send: /' "$TMP/$name.send"
  sed 's/^/  recv: /' "$TMP/$name.recv" | grep -v LISTENING || true
  grep -h '"dir"' "$TMP/$name.proxy" | sed 's/^/  proxy: /' || true
  grep -h 'offset=' "$TMP/$name.log" | sed 's/^/  corrupted: /' || true
  if [ $src -ne 0 ] || [ $rrc -ne 0 ]; then echo "FAIL: $name"; exit 1; fi
}
