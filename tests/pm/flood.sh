#!/usr/bin/env bash
# Flood test (draft-pinkerton-iwarp-sdp-01 15.2.1): 100,000 datagrams (three
# in four valid PMReqs with random handles and ports, from 64 source ports)
# sent to uwarp-pmd on loopback as fast as possible.
#  Phase 1, default settings: the flood comes from 127.0.0.2 and is rate
#   limited per source; legitimate queries from 127.0.0.1 issued while the
#   flood runs must all succeed.
#  Phase 2, rate limiting off: the flood fills the state table to its cap;
#   the daemon must stay within it.
# Both phases: resident memory stays under LIMIT_KB (peak, VmHWM) and grows
# by less than 8 MiB. Prints the figures.
#   flood.sh uwarp-pmd uwarp-pm pm_flood LIMIT_KB
PMD=$1
PM=$2
FLOOD=$3
LIMIT_KB=$4
COUNT=${UW_PM_FLOOD_COUNT:-100000}
. "$(dirname "$0")/lib.sh"

rss() { sed -n "s/^$2:[[:space:]]*\([0-9]*\).*/\1/p" "/proc/$1/status"; }

phase() {
    local name=$1 legit=$2
    shift 2
    local log=$TMP/pmd-$name.log
    start_pmd "$log" --map 7001=17001 "$@"
    local rss0 t0 t1 fpid ok=0 bad=0 during=0
    rss0=$(rss "$PMD_PID" VmRSS)
    t0=$(date +%s%N)
    timeout 60 "$FLOOD" 127.0.0.1 "$PMD_PORT" 127.0.0.2 "$COUNT" 64 "$RANDOM" 7001 \
        >"$TMP/flood-$name.out" &
    fpid=$!
    if [ "$legit" = 1 ]; then
        # Queries while the flood process runs; at least one must overlap it.
        while kill -0 "$fpid" 2>/dev/null; do
            during=$((during + 1))
            if timeout 20 "$PM" query --server "127.0.0.1:$PMD_PORT" --local 127.0.0.1 \
                127.0.0.1 7001 >"$TMP/q" 2>&1 && grep -q '^sdp 127.0.0.1 17001 accept' "$TMP/q"; then
                ok=$((ok + 1))
            else
                bad=$((bad + 1))
                echo "legitimate query failed: $(cat "$TMP/q")" >&2
            fi
        done
    fi
    wait "$fpid"
    expect_eq "$name: flood program" 0 $?
    t1=$(date +%s%N)
    sleep 0.3 # let the daemon drain its socket
    usr1_stats "$log"
    local rss1 hwm received pending peak limited full
    rss1=$(rss "$PMD_PID" VmRSS)
    hwm=$(rss "$PMD_PID" VmHWM)
    received=$(stats_of "$log" received)
    pending=$(stats_of "$log" pending)
    peak=$(stats_of "$log" pending_peak)
    limited=$(stats_of "$log" rate_limited)
    full=$(stats_of "$log" full)
    echo "$name: $(cat "$TMP/flood-$name.out"); daemon received $received," \
        "rate_limited $limited, full $full, pending $pending (peak $peak);" \
        "RSS before ${rss0} KiB, after ${rss1} KiB, peak ${hwm} KiB (limit ${LIMIT_KB} KiB);" \
        "flood+queries $(((t1 - t0) / 1000000)) ms; legitimate queries during flood: $ok ok, $bad failed"
    expect_le "$name: peak RSS" "$hwm" "$LIMIT_KB"
    expect_le "$name: RSS growth" $((hwm - rss0)) 8192
    expect_le "$name: pending within cap" "$peak" "${CAP:-4096}"
    CHECKS=$((CHECKS + 1))
    [ "${received:-0}" -gt 0 ] || fail "$name: daemon received nothing"
    if [ "$legit" = 1 ]; then
        CHECKS=$((CHECKS + 1))
        [ "$during" -ge 1 ] && [ "$ok" -ge 1 ] || fail "$name: no legitimate query ran during the flood"
        expect_eq "$name: legitimate queries failed" 0 "$bad"
        CHECKS=$((CHECKS + 1))
        [ "${limited:-0}" -gt 0 ] || fail "$name: nothing was rate limited"
    fi
    kill -TERM "$PMD_PID"
}

phase limited 1
CAP=2048 phase unlimited 0 --rate off --max-pending 2048
CHECKS=$((CHECKS + 1))
[ "$(stats_of "$TMP/pmd-unlimited.log" pending_peak)" = 2048 ] ||
    fail "unlimited: the state table did not fill up to its cap"
finish
