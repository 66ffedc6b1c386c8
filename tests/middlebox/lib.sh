# Shared by the middlebox scripts: start a receiver and a proxy in front of it
# on free loopback ports, then run a sender through the proxy.
set -euo pipefail
PEER=$1
PROXY=$2
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

# run_case NAME BYTES "RECV OPTS" "SEND OPTS" "PROXY OPTS"
run_case() {
  local name=$1 bytes=$2 ropts=$3 sopts=$4 popts=$5
  # The receiver listens on a port the kernel picks and says which.
  local rport rpid
  timeout 300 "$PEER" recv 0 $ropts >"$TMP/$name.recv" 2>&1 &
  rpid=$!; PIDS+=($rpid)
  for _ in $(seq 200); do
    grep -q LISTENING "$TMP/$name.recv" 2>/dev/null && break
    kill -0 "$rpid" 2>/dev/null || break
    sleep 0.05
  done
  rport=$(awk '/^LISTENING/{print $2}' "$TMP/$name.recv")
  [ -n "$rport" ] || { cat "$TMP/$name.recv"; echo "FAIL: $name: receiver did not start"; exit 1; }
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
