#!/usr/bin/env bash
# uwarp-perf between two network namespaces joined by a veth pair with a
# real MTU: the server in one, the client in the other, as two hosts on an
# Ethernet segment (loopback's MTU of 65,536 hides the per-FPDU costs that
# MTU 1500 exposes). Needs root. Everything it creates is removed on exit,
# Ctrl-C included.
#
#   bench/netns.sh [--mtu N] [--delay MS] [--loss PCT] [--cc NAME]
#                  [--build DIR] [--server-opt OPT]... [--] CLIENT-ARGS...
#
# --cc sets both namespaces' default TCP congestion control, so that every
# socket in them uses it, SDP's and a preloaded program's included. A
# namespace may only default to a control the host allows; one it does not
# is allowed for the run (tests/lib/netns.sh, netns_cc).
# --server-opt passes one option to the server (-l), e.g. --no-crc or
# --markers, which the receiving side must ask for too.
# CLIENT-ARGS go to the client after "ADDR PORT", e.g.
#   sudo bench/netns.sh --mtu 1500 -- --vs-tcp --op write --sizes 64K,1M --repeat 3
#   sudo bench/netns.sh --mtu 9000 -- --op stream --sizes 1M --vs-tcp --cpu
# Delay and loss use tc netem when the kernel has it; the script says when
# it does not and runs without.
set -euo pipefail
cd "$(dirname "$0")/.."

MTU=1500 DELAY=0 LOSS=0 BUILD=build PORT=24100 SRV_OPTS=() CC=""
usage() {
    sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}
while [ $# -gt 0 ]; do
    case "$1" in
    --mtu) MTU=$2; shift 2 ;;
    --delay) DELAY=$2; shift 2 ;;
    --loss) LOSS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --server-opt) SRV_OPTS+=("$2"); shift 2 ;;
    --cc) CC=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    --) shift; break ;;
    -*) echo "bench/netns.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
PERF=$BUILD/bench/uwarp-perf
if [ ! -x "$PERF" ]; then
    echo "bench/netns.sh: $PERF not found: build first (cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "bench/netns.sh: network namespaces need root: run it with sudo" >&2
    exit 1
fi

. tests/lib/netns.sh
SRV=""
cleanup() {
    [ -n "$SRV" ] && kill "$SRV" 2>/dev/null
    netns_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

netns_up "$MTU" "$DELAY" "$LOSS" || { echo "bench/netns.sh: $(netns_why)" >&2; exit 1; }
if [ -n "$CC" ] && ! netns_cc "$CC"; then
    echo "bench/netns.sh: $(netns_why)" >&2
    exit 1
fi
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
echo "# netns: MTU $MTU, veth, delay/loss: $NETEM, cc $(in_a cat /proc/sys/net/ipv4/tcp_congestion_control); CPU: $CPU ($(nproc) CPUs)"
in_a "$PERF" -l "$ADDR_A:$PORT" "${SRV_OPTS[@]}" >"/tmp/uwarp-netns-server.$$.log" 2>&1 &
SRV=$!
for _ in $(seq 50); do
    grep -q "listening" "/tmp/uwarp-netns-server.$$.log" 2>/dev/null && break
    sleep 0.1
done
set +e
in_b "$PERF" "$ADDR_A" "$PORT" "$@"
rc=$?
set -e
if [ $rc -ne 0 ]; then
    echo "# server log:" >&2
    cat "/tmp/uwarp-netns-server.$$.log" >&2
fi
rm -f "/tmp/uwarp-netns-server.$$.log"
exit $rc
