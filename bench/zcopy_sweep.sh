#!/usr/bin/env bash
# bench/zcopy_sweep.sh: SDP sockets on loopback, one blocking send() of each
# size after the other, by Bcopy, Read Zcopy and Write Zcopy, each against
# TCP in the same run (uwarp-perf --op stream --vs-tcp). Writes, under OUT
# (default bench/out/zcopy-<timestamp>):
#   results.jsonl   every uwarp-perf JSON line, tagged with its "config"
#   table.md        GB/s, paired ratio to TCP, CPU/byte ratio, and the share
#                   of the payload each mechanism really carried
#   zcopy.png       throughput and ratio against size (gnuplot)
# Configurations (both sides get the threshold; the client asks for a mode):
#   bcopy  --zcopy-min 0                          every octet copied
#   read-zcopy  --zcopy-min 4K --sdp-mode combined     Read Zcopy (9.2) only
#   write-zcopy --zcopy-min 4K --sdp-mode pipelined    Write Zcopy (9.3) into the
#          receiver's SinkAvails; a send() that finds none held goes by
#          Read Zcopy, and receives no larger than a receive Private Buffer
#          are never advertised, so the table says what each size used
# Usage: bench/zcopy_sweep.sh [--sizes LIST] [--repeat N] [--duration S]
#                             [--cc NAME] [--out DIR] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build REPEAT=3 DUR=2 OUT='' CC=cubic SIZES=4K,16K,64K,256K,1M,4M
while [ $# -gt 0 ]; do
  case $1 in
    --sizes) SIZES=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --duration) DUR=$2; shift ;;
    --cc) CC=$2; shift ;;
    --out) OUT=$2; shift ;;
    --build) BUILD=$2; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "zcopy_sweep: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
  shift
done
PERF=$BUILD/bench/uwarp-perf
[ -x "$PERF" ] || { echo "zcopy_sweep: $PERF not found: build first (cmake --build $BUILD)" >&2; exit 1; }
OUT=${OUT:-bench/out/zcopy-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
RES=$OUT/results.jsonl
: >"$RES"
SRV=
trap '[ -n "$SRV" ] && kill $SRV 2>/dev/null; wait 2>/dev/null || true' EXIT
. bench/lib.sh
{
  echo "CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs; kernel $(uname -r)"
  echo "TCP congestion control for the baseline: $CC"
} >"$OUT/machine.txt"

NCONF=3 I=0
run() { # config, server and client options...
  local conf=$1 min=$2; shift 2
  I=$((I + 1))
  echo "zcopy_sweep: [$I/$NCONF] $conf (sizes $SIZES, $REPEAT x ${DUR}s each)" >&2
  perf_server "$PERF" "$OUT/server-$conf.log" 127.0.0.1 --zcopy-min "$min" --cc "$CC" || exit 1
  "$PERF" --op stream --sizes "$SIZES" --json --vs-tcp --cpu --cc "$CC" --repeat "$REPEAT" \
    --duration "$DUR" --zcopy-min "$min" "$@" 127.0.0.1 "$PORT" |
    sed "s/^{/{\"config\":\"$conf\",/" >>"$RES"
  kill "$SRV" 2>/dev/null || true
  wait "$SRV" 2>/dev/null || true
  SRV=
}
run bcopy 0
run read-zcopy 4096 --sdp-mode combined
run write-zcopy 4096 --sdp-mode pipelined

field() { sed -n "s/.*\"$1\":\\(\"[^\"]*\"\\|[^,}]*\\).*/\\1/p" | tr -d '"'; }
col() { grep "\"config\":\"$1\"" "$RES" | grep "\"transport\":\"$2\"" | grep "\"size\":$3," | field "$4" | head -1; }
pct() { # part of total, as a whole percentage
  awk -v a="$1" -v t="$2" 'BEGIN { if (t > 0) printf "%.0f", 100 * a / t; else printf "-" }'
}
SZ=$(grep '"config":"bcopy"' "$RES" | grep '"transport":"tcp"' | field size)
{
  echo "| size | config | SDP GB/s | TCP GB/s | paired ratio | CPU/byte ratio | Bcopy % | Read % | Write % |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for s in $SZ; do
    for conf in bcopy read-zcopy write-zcopy; do
      b=$(col $conf sdp $s bcopy_bytes) r=$(col $conf sdp $s rdma_read_bytes) w=$(col $conf sdp $s rdma_write_bytes)
      t=$((${b:-0} + ${r:-0} + ${w:-0}))
      echo "| $s | $conf | $(col $conf sdp $s bw_gbps) | $(col $conf tcp $s bw_gbps) |" \
        "$(col $conf ratio $s ratio_bw_paired) | $(col $conf ratio $s ratio_cpu_per_byte) |" \
        "$(pct "${b:-0}" $t) | $(pct "${r:-0}" $t) | $(pct "${w:-0}" $t) |"
    done
  done
  echo
  echo "GB/s are medians of $REPEAT runs of ${DUR} s; the paired ratio is the median of SDP/TCP over adjacent runs. The mechanism shares are of the client's payload in the median run."
} >"$OUT/table.md"

for s in $SZ; do
  echo "$s $(col bcopy tcp $s bw_gbps) $(col bcopy sdp $s bw_gbps) $(col read-zcopy sdp $s bw_gbps)" \
    "$(col write-zcopy sdp $s bw_gbps) $(col bcopy ratio $s ratio_bw_paired)" \
    "$(col read-zcopy ratio $s ratio_bw_paired) $(col write-zcopy ratio $s ratio_bw_paired)"
done >"$OUT/plot.dat"
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,760 noenhanced
set output "$OUT/zcopy.png"
set multiplot layout 2,1 title "SDP stream on loopback: Bcopy, Read Zcopy, Write Zcopy vs TCP (median of $REPEAT)"
set logscale x 2; set grid; set key top left
set xtics ("4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304)
set ylabel "GB/s of payload"
set title "throughput (TCP: the runs beside Bcopy)"
plot "$OUT/plot.dat" u 1:2 w lp lw 2 t "TCP", \
     "" u 1:3 w lp lw 2 t "SDP Bcopy", \
     "" u 1:4 w lp lw 2 t "SDP Read Zcopy", \
     "" u 1:5 w lp lw 2 t "SDP Pipelined (Write Zcopy where a SinkAvail is held)"
set title "paired ratio: median of SDP / TCP over adjacent runs"
set xlabel "send() size (octets)"; set ylabel "SDP / TCP"
set yrange [0:1.3]; set key top right
plot 1 w l lc "black" dt 2 t "TCP", \
     "$OUT/plot.dat" u 1:6 w lp lw 2 lc 2 t "Bcopy", \
     "" u 1:7 w lp lw 2 lc 3 t "Read Zcopy", \
     "" u 1:8 w lp lw 2 lc 4 t "Pipelined"
unset multiplot
GP
else
  echo "zcopy_sweep: gnuplot not installed (./scripts/deps.sh bench): no plot" >&2
fi
cat "$OUT/machine.txt" "$OUT/table.md"
echo "zcopy_sweep: results in $OUT" >&2
