#!/usr/bin/env bash
# The preload library against plain TCP, with real programs (issue 17,
# "Performance"): each figure is measured over plain TCP and with both ends
# preloaded (SDP through a private uwarp-pmd), in the same run, alternating
# plain and preloaded, and the median of --repeat runs is compared:
#   iperf3     one stream, 10 s: throughput (target: preloaded >= 0.90x), and
#              CPU time per GiB moved on the sender and on the receiver
#              (iperf3's --json cpu_utilization_percent)
#   redis      redis-benchmark -t set,get -c 50: requests/s (target >= 0.80x)
#   sockperf   ping-pong over TCP, 64-octet messages: p50 latency (target
#              <= 1.3x)
#   curl       a preloaded curl to a server that has no SDP (it never uses
#              SDP): wall time per run (target <= 1.05x), with hyperfine
#              when it is installed, else an interleaved loop
# The preloaded runs are checked to have used SDP (the library's log) and
# marked otherwise: a figure that fell back to TCP says nothing about SDP.
# Not a test (its figures depend on the machine); the latest results and how
# to reproduce them go in docs/performance.md, earlier runs in
# docs/perf-log.md.
#
# usage: bench/preload/run.sh [--build DIR] [--repeat N] [--time S] [--json]
#                             [--only iperf3,redis,sockperf,curl] [--pin]
#                             [--mtu N [--cc NAME]]
#   --build DIR   the build with src/preload/libuwarp-preload.so, tools/uwarp-run
#                 and tools/uwarp-pmd (default: build); UWARP_PRELOAD_LIB
#                 overrides the library
#   --repeat N    runs of each figure per mode; the median counts (default 3)
#   --time S      iperf3 seconds (default 10) and sockperf seconds (S/2)
#   --json        one JSON object on stdout instead of the table
#   --port-base P the 100 TCP ports from P on are used (default 28900)
#   --pin         servers on CPU 0, clients on CPU 1 (taskset; the library's
#                 threads inherit it): steadier latency figures on a machine
#                 where the scheduler moves the two ends around
#   --mtu N       servers and the port mapper in one network namespace,
#                 clients in another, joined by a veth pair with MTU N, as
#                 two hosts on an Ethernet segment (root needed; iperf3,
#                 redis and sockperf only: curl's figure is about loading
#                 the library, not the path)
#   --cc NAME     with --mtu: the namespaces' congestion control (bbr with
#                 no fq qdisc paces inside TCP at a high CPU cost; cubic
#                 shows what each transport itself costs)
# Needs iperf3, redis-server, redis-benchmark, sockperf, curl, python3
# (scripts/deps.sh; `scripts/deps.sh bench` adds hyperfine). Loopback, or
# the namespaces of --mtu.
set -u
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
REPEAT=3
SECS=10
JSON=
ONLY=iperf3,redis,sockperf,curl
PORT_BASE=28900
PIN=
MTU= CC=
usage() { # usage [STATUS]: the usage text; to stderr unless STATUS is 0
    if [ "${1:-1}" = 0 ]; then
        sed -n '/^# usage:/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//'
    else
        sed -n '/^# usage:/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//' >&2
    fi
    exit "${1:-1}"
}
while [ $# -gt 0 ]; do
    case $1 in
    --build) BUILD=${2:?}; shift 2 ;;
    --repeat) REPEAT=${2:?}; shift 2 ;;
    --time) SECS=${2:?}; shift 2 ;;
    --json) JSON=1; shift ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --port-base) PORT_BASE=${2:?}; shift 2 ;;
    --pin) PIN=1; shift ;;
    --mtu) MTU=${2:?}; shift 2 ;;
    --cc) CC=${2:?}; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "unknown option $1" >&2; usage ;;
    esac
done
case $REPEAT in '' | *[!0-9]* | 0) echo "--repeat: a positive number" >&2; exit 1 ;; esac
case $SECS in '' | *[!0-9]* | 0) echo "--time: a positive number of seconds" >&2; exit 1 ;; esac
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "no build directory" >&2; exit 1; }
SPIN=() CPIN=()
if [ -n "$PIN" ]; then
    [ "$(nproc)" -ge 2 ] || { echo "--pin needs two CPUs" >&2; exit 1; }
    SPIN=(taskset -c 0) CPIN=(taskset -c 1)
fi
# Servers run with NSA, clients with NSB, both at SADDR: loopback unless --mtu.
SADDR=127.0.0.1 NSA=() NSB=()
[ -z "$CC" ] || [ -n "$MTU" ] || { echo "--cc needs --mtu" >&2; exit 1; }
if [ -n "$MTU" ]; then
    [ "$(id -u)" = 0 ] || { echo "--mtu needs root (network namespaces)" >&2; exit 1; }
    ONLY=$(echo ",$ONLY," | sed 's/,curl,/,/; s/^,//; s/,$//')
    # shellcheck source=../../tests/lib/netns.sh
    . "$ROOT/tests/lib/netns.sh"
    netns_up "$MTU" || { echo "--mtu: $(netns_why)" >&2; exit 1; }
    if [ -n "$CC" ] && ! netns_cc "$CC"; then
        echo "--cc: $(netns_why)" >&2
        netns_down
        exit 1
    fi
    SADDR=$ADDR_A NSA=(ip netns exec "$NS_A") NSB=(ip netns exec "$NS_B")
    SPIN=("${NSA[@]}" "${SPIN[@]}") CPIN=("${NSB[@]}" "${CPIN[@]}")
fi
LIB=${UWARP_PRELOAD_LIB:-$BUILD/src/preload/libuwarp-preload.so}
URUN=$BUILD/tools/uwarp-run
PMD=$BUILD/tools/uwarp-pmd
[ -f "$LIB" ] || { echo "no preload library at $LIB (build the uwarp-preload target)" >&2; exit 1; }
[ -x "$PMD" ] || { echo "no uwarp-pmd at $PMD" >&2; exit 1; }
for p in python3 curl; do
    command -v "$p" >/dev/null || { echo "$p is missing (scripts/deps.sh)" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-bench-preload.XXXXXX")
GROUPS_STARTED=()
cleanup() {
    local g
    for g in "${GROUPS_STARTED[@]}"; do
        kill -KILL -- "-$g" 2>/dev/null
        wait "$g" 2>/dev/null
    done
    rm -rf "$TMP"
    [ -n "$MTU" ] && netns_down
}
trap cleanup EXIT
trap 'exit 143' TERM INT
say() { [ -n "$JSON" ] && echo "$*" >&2 || echo "$*"; }
log() { echo "  $*" >&2; }
SAMPLES=$TMP/samples # lines: METRIC MODE VALUE
NOTES=$TMP/notes     # lines of remarks for the report
: >"$SAMPLES"
: >"$NOTES"

# mode prefixes: plain (no library) and preloaded (uwarp-run when it exists)
# PFX_FOR MODE LOGFILE: sets PFX.
PFX_FOR() {
    if [ "$1" = plain ]; then
        PFX=(env -u LD_PRELOAD)
    elif [ -x "$URUN" ]; then
        PFX=(env UWARP_PRELOAD_LIB="$LIB" UWARP_PRELOAD_LOG=info UWARP_PRELOAD_LOG_FILE="$2" "$URUN")
    else
        PFX=(env UWARP_PRELOAD_LOG=info UWARP_PRELOAD_LOG_FILE="$2" LD_PRELOAD="$LIB")
    fi
}

# spawn LOG CMD...: in its own process group, bounded; sets SPGID.
spawn() {
    local out=$1
    shift
    setsid timeout -s KILL 3600 "$@" >"$out" 2>&1 </dev/null &
    SPGID=$!
    GROUPS_STARTED+=("$SPGID")
    # until the child has called setsid(): its group exists from then on
    local i st pg
    for ((i = 0; i < 500; i++)); do
        st=$(cat "/proc/$SPGID/stat" 2>/dev/null) || break
        st=${st##*) }
        read -r _ _ pg _ <<<"$st"
        [ "$pg" = "$SPGID" ] && break
        sleep 0.01
    done
}
stop_group() {
    kill -TERM -- "-$1" 2>/dev/null
    local i
    for ((i = 0; i < 100; i++)); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL -- "-$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

# port: sets PORT to the next free port of the range, round and round
# (never run in $(...): NEXT_PORT must move on).
NEXT_PORT=$PORT_BASE
port() {
    local p i
    for ((i = 0; i < 100; i++)); do
        p=$NEXT_PORT
        NEXT_PORT=$((PORT_BASE + (NEXT_PORT - PORT_BASE + 1) % 100))
        [ -z "$("${NSA[@]}" ss -Htan "( sport = :$p or dport = :$p )")" ] && { PORT=$p; return; }
    done
    echo "no free port in $PORT_BASE..$((PORT_BASE + 99))" >&2
    exit 1
}

# wait_listen PORT [PREGISTERED]: until SADDR:PORT listens and, with a
# second argument, until the port mapper maps it (the preloaded server).
wait_listen() {
    local i
    for ((i = 0; i < 200; i++)); do
        [ -n "$("${NSA[@]}" ss -Hltn "sport = :$1")" ] && break
        sleep 0.05
    done
    [ $# -lt 2 ] && return 0
    for ((i = 0; i < 100; i++)); do
        timeout 5 "${NSB[@]}" "$BUILD/tools/uwarp-pm" query --server "$SADDR:$PMD_PORT" --timeout 100 \
            --retries 1 "$SADDR" "$1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "note: the preloaded server on port $1 never registered with the port mapper" >>"$NOTES"
}

# used_sdp LOGFILE WHAT: notes when a preloaded client's log has no SDP connect.
used_sdp() {
    if ! grep -qE 'connect [^ ]*: sdp( |$)' "$1" 2>/dev/null; then
        echo "note: $2: the preloaded run did not connect over SDP ($(grep -m1 -E 'connect ' "$1" 2>/dev/null || echo 'no log line'))" >>"$NOTES"
        echo "$2" >>"$TMP/fell_back"
    fi
}

# Machine facts, and the steal over the run.
CPU_MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
[ -n "$CPU_MODEL" ] || CPU_MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
NCPU=$(nproc)
KERNEL=$(uname -r)
REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
cpu_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $9 }' /proc/stat; }
read -r TICKS0 STEAL0 < <(cpu_ticks)
LOAD0=$(cut -d' ' -f1 /proc/loadavg)

# A private port mapper; every process of this run uses it.
CTL=$TMP/pmd.sock
spawn "$TMP/pmd.log" "${NSA[@]}" "$PMD" --port 0 --listen "$SADDR" --control "$CTL" --rate off
for _ in $(seq 1 200); do
    PMD_PORT=$(sed -n "s/.*listening on ${SADDR//./\\.}:\([0-9][0-9]*\).*/\1/p" "$TMP/pmd.log" | head -1)
    [ -n "$PMD_PORT" ] && [ -S "$CTL" ] && break
    sleep 0.05
done
[ -n "${PMD_PORT:-}" ] || { echo "uwarp-pmd did not start: $(cat "$TMP/pmd.log")" >&2; exit 1; }
export UWARP_PM_PORT=$PMD_PORT UWARP_PM_SOCKET=$CTL UWARP_PMD_CONTROL=$CTL UWARP_PM_SERVER=$SADDR:$PMD_PORT

say "uwarp preload benchmark: plain TCP vs both ends preloaded, median of $REPEAT, alternating$([ -n "$MTU" ] && echo ", two namespaces at MTU $MTU (cc $("${NSA[@]}" cat /proc/sys/net/ipv4/tcp_congestion_control))")"
say "CPU: $CPU_MODEL ($NCPU CPUs$([ -n "$PIN" ] && echo ", servers pinned to CPU 0, clients to CPU 1")), Linux $KERNEL; library $LIB (source $REV)"

want() { case ",$ONLY," in *",$1,"*) return 0 ;; esac; return 1; }
# The order of the modes alternates from one repeat to the next.
order() { [ $(($1 % 2)) -eq 1 ] && echo "plain preloaded" || echo "preloaded plain"; }

# ---------------------------------------------------------------- iperf3
if want iperf3; then
    if ! command -v iperf3 >/dev/null; then
        echo "note: iperf3 missing, skipped" >>"$NOTES"
    else
        # A one-off server (-s -1) per run: a server that fails to listen
        # again after a test (as the preloaded one sometimes did) costs one
        # figure, not the rest of the series.
        for r in $(seq 1 "$REPEAT"); do
            for m in $(order "$r"); do
                log "iperf3 $m run $r/$REPEAT (${SECS} s)"
                port
                PFX_FOR "$m" "$TMP/iperf3.$m.s.plog"
                spawn "$TMP/iperf3.$m.s.out" "${SPIN[@]}" "${PFX[@]}" iperf3 -s -1 -B "$SADDR" -p "$PORT"
                if [ "$m" = preloaded ]; then wait_listen "$PORT" pm; else wait_listen "$PORT"; fi
                PFX_FOR "$m" "$TMP/iperf3.$m.c.plog"
                timeout $((SECS + 30)) "${CPIN[@]}" "${PFX[@]}" iperf3 -c "$SADDR" -p "$PORT" -t "$SECS" -i 0 --json \
                    >"$TMP/iperf3.json" 2>"$TMP/iperf3.err"
                stop_group "$SPGID"
                python3 - "$TMP/iperf3.json" "$m" >>"$SAMPLES" 2>>"$NOTES" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    e = d["end"]
    secs = e["sum_sent"]["seconds"]
    got = e["sum_received"]["bytes"]
    cpu = e["cpu_utilization_percent"]
except Exception as ex:
    why = d.get("error") if isinstance(locals().get("d"), dict) else None
    print(f"note: iperf3 {sys.argv[2]}: no result ({why or repr(ex)})", file=sys.stderr)
    sys.exit(0)
gib = got / 2**30
print("iperf3_gbps", sys.argv[2], got * 8 / secs / 1e9)
print("iperf3_sender_cpu_ms_per_gib", sys.argv[2], cpu["host_total"] / 100 * secs * 1000 / gib)
print("iperf3_receiver_cpu_ms_per_gib", sys.argv[2], cpu["remote_total"] / 100 * secs * 1000 / gib)
PY
            done
        done
        used_sdp "$TMP/iperf3.preloaded.c.plog" iperf3
    fi
fi

# ---------------------------------------------------------------- redis
if want redis; then
    if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
        echo "note: redis-server or redis-benchmark missing, skipped" >>"$NOTES"
    else
        declare -A RPORT
        for m in plain preloaded; do
            port
            RPORT[$m]=$PORT
            mkdir -p "$TMP/redis.$m"
            PFX_FOR "$m" "$TMP/redis.$m.s.plog"
            spawn "$TMP/redis.$m.s.out" "${SPIN[@]}" "${PFX[@]}" redis-server --port "${RPORT[$m]}" --bind "$SADDR" \
                --save "" --appendonly no --dir "$TMP/redis.$m" --daemonize no --protected-mode no
            if [ "$m" = preloaded ]; then wait_listen "${RPORT[$m]}" pm; else wait_listen "${RPORT[$m]}"; fi
        done
        for r in $(seq 1 "$REPEAT"); do
            for m in $(order "$r"); do
                log "redis-benchmark $m run $r/$REPEAT"
                PFX_FOR "$m" "$TMP/redis.$m.c.plog"
                timeout 300 "${CPIN[@]}" "${PFX[@]}" redis-benchmark -h "$SADDR" -p "${RPORT[$m]}" -t get,set -c 50 \
                    -n 200000 --csv >"$TMP/redis.csv" 2>"$TMP/redis.err"
                sed -n 's/^"\(SET\|GET\)","\([0-9.]*\)".*/\1 \2/p' "$TMP/redis.csv" |
                    while read -r t v; do
                        echo "redis_${t,,}_rps $m $v"
                    done >>"$SAMPLES"
                grep -q '^"GET"' "$TMP/redis.csv" || echo "note: redis $m: no result: $(tail -n2 "$TMP/redis.err")" >>"$NOTES"
            done
        done
        used_sdp "$TMP/redis.preloaded.c.plog" redis
    fi
fi

# ---------------------------------------------------------------- sockperf
if want sockperf; then
    if ! command -v sockperf >/dev/null; then
        echo "note: sockperf missing, skipped" >>"$NOTES"
    else
        declare -A SPORT
        for m in plain preloaded; do
            port
            SPORT[$m]=$PORT
            PFX_FOR "$m" "$TMP/sockperf.$m.s.plog"
            spawn "$TMP/sockperf.$m.s.out" "${SPIN[@]}" "${PFX[@]}" sockperf server --tcp -i "$SADDR" -p "${SPORT[$m]}"
            if [ "$m" = preloaded ]; then wait_listen "${SPORT[$m]}" pm; else wait_listen "${SPORT[$m]}"; fi
        done
        ST=$(((SECS + 1) / 2))
        for r in $(seq 1 "$REPEAT"); do
            for m in $(order "$r"); do
                log "sockperf ping-pong $m run $r/$REPEAT (${ST} s)"
                PFX_FOR "$m" "$TMP/sockperf.$m.c.plog"
                timeout $((ST + 30)) "${CPIN[@]}" "${PFX[@]}" sockperf ping-pong --tcp -i "$SADDR" -p "${SPORT[$m]}" \
                    -m 64 -t "$ST" >"$TMP/sockperf.out" 2>&1
                v=$(sed -n 's/.*percentile 50\.000 = *\([0-9.]*\).*/\1/p' "$TMP/sockperf.out" | head -1)
                if [ -n "$v" ]; then
                    echo "sockperf_p50_us $m $v" >>"$SAMPLES"
                else
                    echo "note: sockperf $m: no result: $(tail -n2 "$TMP/sockperf.out")" >>"$NOTES"
                fi
            done
        done
        used_sdp "$TMP/sockperf.preloaded.c.plog" sockperf
    fi
fi

# ---------------------------------------------------------------- curl
if want curl; then
    mkdir -p "$TMP/www"
    head -c 4096 /dev/urandom >"$TMP/www/small.bin"
    port
    CPORT=$PORT
    # a plain server: nothing of it is preloaded, so the client never gets SDP
    spawn "$TMP/http.out" env -u LD_PRELOAD python3 -m http.server "$CPORT" --bind 127.0.0.1 --directory "$TMP/www"
    wait_listen "$CPORT"
    URL=http://127.0.0.1:$CPORT/small.bin
    # once with the log, to see that the library was loaded and chose TCP
    PFX_FOR preloaded "$TMP/curl.plog"
    "${PFX[@]}" curl -fsS -o /dev/null "$URL" 2>>"$NOTES"
    grep -qE 'connect [^ ]*: tcp' "$TMP/curl.plog" 2>/dev/null ||
        echo "note: curl: the preloaded curl logged no TCP connect (was the library loaded?)" >>"$NOTES"
    # Timed runs at the default log level, each variant two exec()s (so
    # that only the library differs): plain `env -u LD_PRELOAD curl`,
    # preloaded `env LD_PRELOAD=LIB curl`, and as users run it, `uwarp-run
    # curl` (the launcher's own exec() included). The order rotates.
    declare -A VCMD=([plain]="env -u LD_PRELOAD curl" [preloaded]="env LD_PRELOAD=$LIB curl")
    VARIANTS=(plain preloaded)
    if [ -x "$URUN" ]; then
        VCMD[uwarp-run]="$URUN curl"
        VARIANTS+=(uwarp-run)
    fi
    RUNS=100
    for r in $(seq 1 "$REPEAT"); do
        log "curl $r/$REPEAT ($RUNS runs each)"
        k=$((r % ${#VARIANTS[@]}))
        names=("${VARIANTS[@]:k}" "${VARIANTS[@]:0:k}")
        if command -v hyperfine >/dev/null; then
            cmds=()
            for v in "${names[@]}"; do
                cmds+=("${VCMD[$v]} -fsS -o /dev/null $URL")
            done
            hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$TMP/hf.json" "${cmds[@]}" >/dev/null 2>"$TMP/hf.err" ||
                echo "note: hyperfine: $(tail -n2 "$TMP/hf.err")" >>"$NOTES"
            python3 - "$TMP/hf.json" "${names[@]}" >"$TMP/curl.r" <<'PY'
import json, sys
try:
    res = json.load(open(sys.argv[1]))["results"]
except Exception:
    sys.exit(0)
for name, r in zip(sys.argv[2:], res):
    print(name, r["median"] * 1000)
PY
        else
            for v in "${names[@]}"; do : >"$TMP/curl.$v"; done
            for i in $(seq 1 "$RUNS"); do
                for v in "${names[@]}"; do
                    read -r -a c <<<"${VCMD[$v]}"
                    t0=$EPOCHREALTIME
                    "${c[@]}" -fsS -o /dev/null "$URL"
                    t1=$EPOCHREALTIME
                    echo "$((${t1/./} - ${t0/./}))" >>"$TMP/curl.$v"
                done
            done
            for v in "${names[@]}"; do
                echo "$v $(sort -n "$TMP/curl.$v" | awk '{ v[NR] = $1 } END { printf "%.3f", v[int((NR + 1) / 2)] / 1000 }')"
            done >"$TMP/curl.r"
        fi
        # curl_ms compares the library, curl_run_ms the launcher with it
        while read -r v t; do
            case $v in
            plain) echo "curl_ms plain $t"; echo "curl_run_ms plain $t" ;;
            preloaded) echo "curl_ms preloaded $t" ;;
            uwarp-run) echo "curl_run_ms preloaded $t" ;;
            esac
        done <"$TMP/curl.r" >>"$SAMPLES"
    done
    command -v hyperfine >/dev/null || echo "note: curl: hyperfine not installed; an interleaved loop of $RUNS runs each" >>"$NOTES"
fi

read -r TICKS1 STEAL1 < <(cpu_ticks)
STEAL=$(awk -v a="$((TICKS1 - TICKS0))" -v s="$((STEAL1 - STEAL0))" 'BEGIN { printf "%.1f", a ? 100 * s / a : 0 }')
# the 1-minute load average before and after: other work on the machine
# (beside this run's own two to three busy processes) moves the figures too
LOAD="$LOAD0 $(cut -d' ' -f1 /proc/loadavg)"

# ---------------------------------------------------------------- report
python3 - "$SAMPLES" "$NOTES" "$TMP/fell_back" "$JSON" "$REPEAT" "$CPU_MODEL" "$NCPU" "$KERNEL" "$STEAL" "$SECS" "$LOAD" "$REV" "$PIN" <<'PY'
import json, statistics, sys
samples, notes_f, fell_f, as_json, repeat, cpu, ncpu, kernel, steal, secs, load, rev, pin = sys.argv[1:14]
vals = {}
for line in open(samples):
    parts = line.split()
    if len(parts) == 3:
        vals.setdefault(parts[0], {}).setdefault(parts[1], []).append(float(parts[2]))
try:
    fell = set(open(fell_f).read().split())
except OSError:
    fell = set()
notes = [l.rstrip("\n") for l in open(notes_f) if l.strip()]
# metric, label, unit, better, target ratio (preloaded / plain), bench name
ROWS = [
    ("iperf3_gbps", f"iperf3 1 stream {secs} s", "Gbit/s", "higher", (">=", 0.90), "iperf3"),
    ("iperf3_sender_cpu_ms_per_gib", "iperf3 sender CPU", "ms/GiB", "lower", None, "iperf3"),
    ("iperf3_receiver_cpu_ms_per_gib", "iperf3 receiver CPU", "ms/GiB", "lower", None, "iperf3"),
    ("redis_set_rps", "redis-benchmark SET -c 50", "req/s", "higher", (">=", 0.80), "redis"),
    ("redis_get_rps", "redis-benchmark GET -c 50", "req/s", "higher", (">=", 0.80), "redis"),
    ("sockperf_p50_us", "sockperf ping-pong 64 B p50", "usec", "lower", ("<=", 1.30), "sockperf"),
    ("curl_ms", "curl, TCP-only server, LD_PRELOAD", "ms", "lower", ("<=", 1.05), "curl"),
    ("curl_run_ms", "curl, TCP-only server, uwarp-run", "ms", "lower", ("<=", 1.05), "curl"),
]
out = {"source": rev, "pinned": bool(pin), "cpu_model": cpu, "cpus": int(ncpu), "kernel": kernel, "steal_percent": float(steal),
       "loadavg_before_after": [float(x) for x in load.split()],
       "repeat": int(repeat), "results": [], "notes": notes}
for key, label, unit, better, target, bench in ROWS:
    v = vals.get(key)
    if not v:
        continue
    plain = statistics.median(v["plain"]) if v.get("plain") else None
    pre = statistics.median(v["preloaded"]) if v.get("preloaded") else None
    ratio = pre / plain if plain and pre is not None else None
    met = None
    if ratio is not None and target:
        met = ratio >= target[1] if target[0] == ">=" else ratio <= target[1]
    out["results"].append({
        "metric": key, "label": label, "unit": unit, "better": better,
        "plain": plain, "preloaded": pre, "ratio": ratio,
        "target": f"{target[0]} {target[1]:.2f}" if target else None, "met": met,
        "samples": v, "preloaded_used_sdp": bench not in fell if bench != "curl" else None,
    })
if as_json:
    json.dump(out, sys.stdout, indent=1)
    print()
    sys.exit(0)
fmt = lambda x: "-" if x is None else (f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}")
print(f"steal during the run: {steal}% (above 5% the figures move with the host); "
      f"load average before/after: {'/'.join(load.split())}")
print()
print(f"{'benchmark':36} {'unit':7} {'plain TCP':>11} {'preloaded':>11} {'ratio':>6}  target")
for r in out["results"]:
    tgt = r["target"] or ""
    if r["met"] is not None:
        tgt += "  ok" if r["met"] else "  MISSED"
    if r["preloaded_used_sdp"] is False:
        tgt += "  (preloaded run fell back to TCP)"
    ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
    print(f"{r['label']:36} {r['unit']:7} {fmt(r['plain']):>11} {fmt(r['preloaded']):>11} {ratio:>6}  {tgt}")
if notes:
    print()
    for n in notes:
        print(n)
PY
