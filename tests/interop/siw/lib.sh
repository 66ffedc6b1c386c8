# shellcheck shell=bash
# shellcheck disable=SC2034 # variables set here are read by the test scripts
# Shared helpers for the live Linux siw interop tests (sourced, bash).
#
# Environment (set by tests/interop/CMakeLists.txt, or by hand):
#   SIW_PEER      path of ../shared/siw-vm/siw-peer.sh
#   SIW_TOOLS     directory holding uwarp-rping, uwarp-cat (build/tools)
#   SIW_LOGS      where each test keeps its logs (default: a temp dir)
#   SIW_PORT      host port this test may use (distinct per test)
#   SIW_MPA_TOOL  path of ../shared/siw-vm/tools/mpa_tool.py
#   SIW_CAPTURE   1: record the test's TCP traffic with tcpdump (needs root)
#                 and check it with iwarp_decode.py; 0: never; auto (default):
#                 when root and tcpdump are available
#   UWARP_RPING_ARGS  extra arguments for uwarp-rping (manual experiments)
#
# Every wait is bounded; every process a test starts is stopped by its PID
# on exit (never by name), so a failing test leaves no VM behind.

set -u

SIW_PEER=${SIW_PEER:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)/shared/siw-vm/siw-peer.sh}
SIW_TOOLS=${SIW_TOOLS:-}
SIW_PORT=${SIW_PORT:-19790}
SIW_MPA_TOOL=${SIW_MPA_TOOL:-$(dirname "$SIW_PEER")/tools/mpa_tool.py}
SIW_DECODE=$(dirname "$SIW_MPA_TOOL")/iwarp_decode.py
SIW_TEST=${SIW_TEST:-$(basename "$0" .sh)}

log() { printf '[%s %s] %s\n' "$(date +%H:%M:%S)" "$SIW_TEST" "$*" >&2; }
die() {
  log "FAIL: $*"
  exit 1
}

# Per-test log directory, kept after the run for post-mortems.
siw_logdir() {
  local name=$1
  if [ -n "${SIW_LOGS:-}" ]; then
    LOGDIR=$SIW_LOGS/$name
    rm -rf "$LOGDIR"
    mkdir -p "$LOGDIR"
  else
    LOGDIR=$(mktemp -d "/tmp/siw-$name.XXXXXX")
  fi
  log "logs in $LOGDIR"
}

# ---------------------------------------------------------------------------
# Cleanup: everything started is recorded here and stopped by PID on exit.
SIW_PIDS=()
siw_cleanup() {
  local p
  for p in "${SIW_PIDS[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null
    fi
  done
  for p in "${SIW_PIDS[@]}"; do
    wait "$p" 2>/dev/null
  done
}
trap siw_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_file() {
  [ -e "$1" ] || die "$1 does not exist ($2)"
}

# The uwarp tool under test. Missing binary = clear failure, not a skip:
# the test exists to prove the tool works.
need_tool() {
  local name=$1
  [ -n "$SIW_TOOLS" ] || die "SIW_TOOLS is not set (directory with $name)"
  [ -x "$SIW_TOOLS/$name" ] ||
    die "$SIW_TOOLS/$name is missing or not executable: build the uwarp tools first (cmake --build BUILD --target $name)"
  TOOL=$SIW_TOOLS/$name
}

need_harness() {
  need_file "$SIW_PEER" "siw-vm harness; set SIW_PEER or UW_SHARED_DIR"
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: run scripts/deps-siw.sh"
  command -v python3 >/dev/null || die "python3 missing: run scripts/deps-siw.sh"
}

# Waits up to $2 seconds for command $1... to succeed (polling every 0.2 s).
wait_until() {
  local secs=$1
  shift
  local end=$((SECONDS + secs))
  while ! "$@"; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}

# Waits for PID to exit within SECS; sets WAIT_RC to its status (or 124 when
# it had to be stopped with SIGTERM).
wait_pid() {
  local pid=$1 secs=$2
  if wait_until "$secs" eval "! kill -0 $pid 2>/dev/null"; then
    wait "$pid"
    WAIT_RC=$?
  else
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    WAIT_RC=124
  fi
}

# ---------------------------------------------------------------------------
# siw as responder: siw-peer.sh server (README 3)

# siw_server_start VARIANT GUEST_CMD... : boots a fresh guest listening on
# SIW_PORT and returns once it printed SIW-PEER READY (fails otherwise).
siw_server_start() {
  local variant=$1
  shift
  SRV_OUT=$LOGDIR/server.out
  SRV_ERR=$LOGDIR/server.err
  log "siw server (variant $variant) on port $SIW_PORT: $*"
  local t0=$SECONDS
  "$SIW_PEER" server --port "$SIW_PORT" --variant "$variant" --timeout 300 --ready-timeout 180 \
    --log "$LOGDIR/server-console.log" -- "$@" >"$SRV_OUT" 2>"$SRV_ERR" &
  SRV_PID=$!
  SIW_PIDS+=("$SRV_PID")
  # READY comes at most --ready-timeout (180 s) after the launch; 200 s here
  # covers the VM start on top.
  local end=$((SECONDS + 200))
  until grep -qx 'SIW-PEER READY' "$SRV_OUT" 2>/dev/null; do
    if ! kill -0 "$SRV_PID" 2>/dev/null; then
      wait "$SRV_PID"
      local rc=$?
      cat "$SRV_ERR" >&2
      die "siw server exited with $rc before SIW-PEER READY"
    fi
    [ $SECONDS -lt $end ] || die "siw server not READY within 200 s"
    sleep 0.2
  done
  log "siw server READY after $((SECONDS - t0)) s"
}

# Stops the server with SIGTERM (README 3: exit 143) unless it already ended;
# sets SRV_RC to its exit status.
siw_server_stop() {
  if kill -0 "$SRV_PID" 2>/dev/null; then
    kill -TERM "$SRV_PID"
  fi
  wait "$SRV_PID"
  SRV_RC=$?
}

# Waits up to SECS for a one-shot guest server (e.g. rping -s -C N) to end by
# itself; SRV_RC is the guest command's status (124: it had to be stopped).
siw_server_wait() {
  wait_pid "$SRV_PID" "$1"
  SRV_RC=$WAIT_RC
}

# ---------------------------------------------------------------------------
# siw as initiator: siw-peer.sh client (README 4)

# siw_client VARIANT 'GUEST_CMD' : runs the guest command (wrap it in
# `timeout N` inside, README 8 item 3); CLI_RC and $LOGDIR/client.out.
siw_client() {
  local variant=$1
  shift
  log "siw client (variant $variant): $*"
  "$SIW_PEER" client --variant "$variant" --timeout 240 --log "$LOGDIR/client-console.log" \
    -- "$@" >"$LOGDIR/client.out" 2>"$LOGDIR/client.err"
  CLI_RC=$?
  log "siw client exited with $CLI_RC"
}

# True when something on the host listens on TCP port $1 (IPv4 or IPv6).
# Reads /proc instead of connecting: a probe connection would be taken as
# the one connection a one-shot server serves.
host_listening() {
  local hex
  hex=$(printf ':%04X' "$1")
  awk -v p="$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# ---------------------------------------------------------------------------
# rping output checks

# expected_pings COUNT SIZE : the strings rping puts in its buffer, one per
# line: "rdma-ping-N: " then printable characters starting at 'A' + N,
# cycling through 'A'..'z', NUL-terminated at SIZE - 1 (rping.c,
# rping_test_client).
expected_pings() {
  python3 - "$1" "$2" <<'EOF'
import sys
count, size = int(sys.argv[1]), int(sys.argv[2])
start = 65
for n in range(count):
    s = bytearray(f"rdma-ping-{n}: ".encode())
    s = s[:size - 1]
    c = start
    while len(s) < size - 1:
        s.append(c)
        c = c + 1 if c < 122 else 65
    print(s.decode())
    start = start + 1 if start < 122 else 65
EOF
}

# check_pings FILE PREFIX COUNT SIZE WHO : FILE must contain, in order, one
# line "<PREFIX>ping data: <expected string>" per iteration (rping -v).
check_pings() {
  local file=$1 prefix=$2 count=$3 size=$4 who=$5
  local want got
  want=$(expected_pings "$count" "$size" | sed "s/^/${prefix}ping data: /")
  got=$(grep -a "ping data: " "$file" | sed 's/\r$//')
  if [ "$got" != "$want" ]; then
    log "$who: expected $count lines of ping data, got:"
    printf '%s\n' "$got" | head -20 >&2
    log "first expected line: $(printf '%s\n' "$want" | head -1)"
    return 1
  fi
  log "$who: all $count iterations carried the expected data"
}

# ---------------------------------------------------------------------------
# Optional wire capture and decode (siw-peer.sh capture, README 5)

can_capture() {
  case "${SIW_CAPTURE:-auto}" in
  0 | no | off) return 1 ;;
  esac
  [ "$(id -u)" -eq 0 ] && command -v tcpdump >/dev/null
}

# Re-runs this script under `siw-peer.sh capture` when capturing is possible,
# then checks the capture with check_wire (defined by the script). Call it
# first thing in a script, with the script's arguments.
maybe_capture() {
  [ -z "${SIW_IN_CAPTURE:-}" ] || return 0
  can_capture || {
    log "no capture (needs root and tcpdump; SIW_CAPTURE=${SIW_CAPTURE:-auto})"
    return 0
  }
  siw_logdir "$SIW_TEST"
  local pcap=$LOGDIR/wire.pcap rc
  SIW_IN_CAPTURE=1 SIW_LOGDIR_KEEP=$LOGDIR "$SIW_PEER" capture --pcap "$pcap" --port "$SIW_PORT" \
    -- bash "$0" "$@"
  rc=$?
  [ $rc -eq 0 ] || exit $rc
  python3 "$SIW_DECODE" "$pcap" >"$LOGDIR/wire.decode.txt" 2>&1 ||
    die "iwarp_decode.py failed on $pcap"
  check_wire "$LOGDIR/wire.decode.txt"
  exit $?
}

# Inside a captured run the outer invocation chose the log directory.
siw_logdir_inner() {
  if [ -n "${SIW_LOGDIR_KEEP:-}" ]; then
    LOGDIR=$SIW_LOGDIR_KEEP
  else
    siw_logdir "$SIW_TEST"
  fi
}

# Generic wire checks on an iwarp_decode.py listing: one MPA Request and
# Reply, no reassembly gap, nothing that is not MPA, no bad CRC, CRC use
# consistent; sets WIRE_CRC to on/off and prints the frames.
check_wire_common() {
  local d=$1
  grep -q "MPA 'MPA ID Req Frame'" "$d" || die "capture: no MPA Request ($d)"
  grep -q "MPA 'MPA ID Rep Frame'" "$d" || die "capture: no MPA Reply ($d)"
  ! grep -q ' !! ' "$d" || die "capture: TCP gap ($d)"
  ! grep -q 'not MPA' "$d" || die "capture: a stream is not MPA ($d)"
  ! grep -q 'CRC BAD' "$d" || die "capture: bad CRC ($d)"
  ! grep -q 'but negotiated' "$d" || die "capture: CRC negotiated but zero ($d)"
  ! grep -q 'op=7:Terminate' "$d" || die "capture: a Terminate was sent ($d)"
  local ok off
  ok=$(grep -c '\[CRC ok\]' "$d")
  off=$(grep -c '\[CRC=0 (off)\]' "$d")
  if [ "$ok" -gt 0 ] && [ "$off" -gt 0 ]; then
    die "capture: CRC used on some FPDUs only ($ok ok, $off off)"
  fi
  WIRE_CRC=off
  [ "$ok" -eq 0 ] || WIRE_CRC=on
  log "wire: $(grep -c ' FPDU ' "$d") FPDUs, CRC $WIRE_CRC"
  grep "MPA 'MPA ID" "$d" | sed 's/^ *//' >&2
}

# check_rping_counts DECODE PORT COUNT : rping's exchange per iteration
# (siw-vm README 7): client Send (source buffer) → server RDMA Read Request →
# client Read Response → server Send (go-ahead) → client Send (sink buffer) →
# server RDMA Write → server Send. So, for COUNT iterations: client→server
# 2*COUNT Sends and COUNT Read Responses; server→client COUNT Read Requests,
# COUNT Writes, 2*COUNT Sends. A peer-to-peer RTR adds one zero-length Write
# or Read (and its Read Response) which these counts ignore.
check_rping_counts() {
  local d=$1 port=$2 count=$3
  local table
  # "  SRC > DST  OPNAME: N" lines after the decoder's summary header.
  table=$(awk -v p=":$port" '
    /^--- FPDU counts/ { on = 1; next }
    on {
      dir = (substr($3, length($3) - length(p) + 1) == p) ? "c2s" : "s2c"
      line = $0; sub(/^ *[^ ]+ > [^ ]+  /, "", line)
      n = line; sub(/.*: /, "", n); op = line; sub(/: [0-9]+$/, "", op)
      print dir "|" op "|" n
    }' "$d")
  local want bad=0
  for want in "c2s|Send|$((2 * count))" "c2s|RDMA Read Response|$count" \
    "s2c|RDMA Read Request|$count" "s2c|RDMA Write|$count" "s2c|Send|$((2 * count))"; do
    grep -qxF "$want" <<<"$table" || {
      log "capture: expected FPDU count ${want//|/ } not found"
      bad=1
    }
  done
  [ $bad -eq 0 ] || {
    printf '%s\n' "$table" >&2
    die "capture: rping FPDU counts do not match $count iterations"
  }
  log "wire: FPDU counts match $count rping iterations"
}
