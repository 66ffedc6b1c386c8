#!/usr/bin/env bash
# The data path at a real MTU, against TCP: every row of the MTU targets in
# docs/performance.md, each in its own pair of network namespaces
# (bench/netns.sh), uwarp and TCP taking turns in the same run, under each
# congestion control asked for. Needs root. About 20 s per row and control.
#
#   bench/mtu_table.sh [--cc "cubic bbr"] [--repeat N] [--duration S]
#                      [--build DIR] [--json]
#
# Rows: Write 64 KiB and 1 MiB, Read 1 MiB, Send 64 KiB and 1 MiB, SDP
# sockets streaming 64 KiB and 1 MiB send() calls (uwarp-perf --op stream,
# against TCP sockets running the same loop), Write
# 1 MiB without CRC and with markers, Write 1 MiB against TCP plus a CRC32c
# pass over the same octets (the most any CRC-checking transport over this
# TCP could reach), all at MTU 1500; Write and Send 1 MiB at MTU 9000.
# Both namespaces run the asked congestion control as their default
# (bench/netns.sh --cc), so SDP's sockets use it too. The table gives uwarp/TCP
# throughput and CPU per byte (both sides); --json passes uwarp-perf's JSON
# lines through, each with "mtu" and "row" added.
set -euo pipefail
cd "$(dirname "$0")/.."

CCS="cubic bbr" REPEAT=3 DURATION=2 BUILD=build JSON=0
while [ $# -gt 0 ]; do
    case "$1" in
    --cc) CCS=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --json) JSON=1; shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/mtu_table.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    esac
done

# row name | MTU | server options | client options
ROWS=(
    "write 64K|1500||--op write --sizes 64K"
    "write 1M|1500||--op write --sizes 1M"
    "read 1M|1500||--op read --sizes 1M"
    "send 64K|1500||--op send --sizes 64K"
    "send 1M|1500||--op send --sizes 1M"
    "SDP stream 64K|1500||--op stream --sizes 64K"
    "SDP stream 1M|1500||--op stream --sizes 1M"
    "write 1M no CRC|1500|--no-crc|--op write --sizes 1M --no-crc"
    "write 1M markers|1500|--markers|--op write --sizes 1M --markers"
    "write 1M vs TCP+CRC|1500||--op write --sizes 1M --tcp-crc"
    "write 1M|9000||--op write --sizes 1M"
    "send 1M|9000||--op send --sizes 1M"
)

CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
[ $JSON = 1 ] || printf '# %s (%s CPUs), %s, repeat %s x %s s\n' "$CPU" "$(nproc)" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$REPEAT" "$DURATION"
[ $JSON = 1 ] || printf '%-6s %-5s %-22s %9s %9s %11s\n' cc MTU row "uwarp GB/s" "ratio" "CPU/B ratio"
rc=0
for cc in $CCS; do
    for r in "${ROWS[@]}"; do
        IFS='|' read -r name mtu sopt copt <<<"$r"
        srv=(--cc "$cc")
        [ -n "$sopt" ] && srv+=(--server-opt "$sopt")
        # shellcheck disable=SC2086 # copt is a list of words
        if ! out=$(bench/netns.sh --mtu "$mtu" --build "$BUILD" "${srv[@]}" -- \
            --vs-tcp --cpu --repeat "$REPEAT" --duration "$DURATION" \
            $( [ $JSON = 1 ] && echo --json ) $copt 2>/tmp/uwarp-mtu-table.$$.err); then
            echo "bench/mtu_table.sh: $name at MTU $mtu ($cc) failed:" >&2
            cat /tmp/uwarp-mtu-table.$$.err >&2
            rc=1
            continue
        fi
        if [ $JSON = 1 ]; then
            sed -n "s/^{/{\"mtu\":$mtu,\"row\":\"$name\",/p" <<<"$out"
            continue
        fi
        gbs=$(awk '$1 == "uwarp" || $1 == "sdp" {print $5}' <<<"$out")
        ratio=$(awk '$1 == "ratio" {print $5}' <<<"$out")
        cpur=$(awk '$1 == "ratio" {for (i = 1; i < NF; i++) if ($i == "CPU/byte") print $(i + 1)}' <<<"$out")
        printf '%-6s %-5s %-22s %9s %8sx %10sx\n' "$cc" "$mtu" "$name" "$gbs" "$ratio" "$cpur"
    done
done
rm -f /tmp/uwarp-mtu-table.$$.err
exit $rc
