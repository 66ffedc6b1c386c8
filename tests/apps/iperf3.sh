#!/usr/bin/env bash
# iperf3 (issue 17, "Real programs"): one `iperf3 -s` runs a series of
# `iperf3 -c` tests, as it is normally used (between tests it closes its
# listening socket and listens again on the same port): 5 s, then -R (the
# server sends) and -P 4 (four streams besides the control connection), with
# both ends preloaded. Each time both sides' --json results agree on the
# octets moved (iperf3_json.py) and every connection used SDP (log, wire).
# Then with one end preloaded (each way) and under --tcp-only: a 2 s test
# and a 1 s -R test, over TCP.
# Called as iperf3.sh PORT-BASE PRELOAD-LIB UWARP-RUN UWARP-PMD UWARP-PM.
source "$(dirname "$0")/lib.sh"

# docs FILE: how many JSON documents a persistent server wrote (one per test).
docs() {
    python3 -c '
import json, sys
t, d, i, n = open(sys.argv[1]).read(), json.JSONDecoder(), 0, 0
try:
    while True:
        while i < len(t) and t[i].isspace():
            i += 1
        if i >= len(t):
            break
        _, i = d.raw_decode(t, i)
        n += 1
except ValueError:
    pass
print(n)' "$1" 2>/dev/null || echo 0
}

# iperf_series NAME MODE "SECS OPTS" ...: one server, one client per test.
# MIN connections per test: the control connection and one per stream.
iperf_series() {
    local name=$1 mode=$2 p g k=0 t secs opts min rev out sname=$1.s
    shift 2
    port
    p=$PORT
    spawn "$sname" "$mode" server iperf3 -s -B 127.0.0.1 -p "$p" --json
    g=$SPGID
    for t in "$@"; do
        k=$((k + 1))
        read -r secs opts <<<"$t"
        local cname=$name.$k
        # the server listens anew after every test (and registers anew)
        if ! server_ready "$cname" "$mode" "$p" "$g"; then
            tail_of "$TMP/$sname.out" "$TMP/$sname.err" >&2
            break
        fi
        min=2 rev=
        case " $opts " in *" -P 4 "*) min=5 ;; esac
        case " $opts " in *" -R "*) rev=--reverse ;; esac
        # shellcheck disable=SC2086
        run "$cname.c" "$mode" client $((secs + 30)) iperf3 -c 127.0.0.1 -p "$p" -t "$secs" -i 0 --json $opts
        expect_eq "$cname ($opts): client exit" 0 "$RC"
        local i
        for ((i = 0; i < 200; i++)); do
            [ "$(docs "$TMP/$sname.out")" -ge "$k" ] && break
            sleep 0.05
        done
        CHECKS=$((CHECKS + 1))
        # shellcheck disable=SC2086
        if ! out=$(python3 "$APPS_DIR/iperf3_json.py" "$TMP/$cname.c.out" "$TMP/$sname.out" --index "$k" $rev 2>&1); then
            fail "$cname ($opts): the octets both sides report differ: $out"
            tail_of "$TMP/$cname.c.err" "$TMP/$sname.err" >&2
        else
            note "$cname ($opts): $(echo "$out" | awk -v s="$secs" '{ printf "%.0f octets sent, %.0f received, %.2f Gbit/s", $1, $2, $2 * 8 / s / 1e9 }')"
        fi
        case " $opts " in
        *" -C "*)
            # The algorithm asked for is the one the connection's TCP (the
            # SDP connection's LLP) really ran, as both ends read it back.
            local want=${opts#*-C } got
            want=${want%% *}
            got=$(python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["end"]
print(e.get("sender_tcp_congestion"), e.get("receiver_tcp_congestion"))' "$TMP/$cname.c.out" 2>&1)
            expect_eq "$cname ($opts): congestion control used (sender receiver)" "$want $want" "$got"
            ;;
        esac
        # The server's log holds every test so far: count this test's share.
        cp "$TMP/$sname.plog" "$TMP/$cname.s.plog" 2>/dev/null
        log_check "$cname" "$mode" "$cname.s" "$cname.c" "$min"
        wire_expect "$cname" "$mode" "$p" "$SDPPORT" "$min"
    done
    stop "$g" TERM 10
}

for mode in "${MODES[@]}"; do
    begin_phase "$mode" || continue
    case $mode in
    sdp | plain) iperf_series "$mode" "$mode" "5" "5 -R" "5 -P 4" "2 -C reno" ;;
    *) iperf_series "$mode" "$mode" "2" "1 -R" ;;
    esac
done
finish
