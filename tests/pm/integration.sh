#!/usr/bin/env bash
# uwarp-pmd and uwarp-pm on loopback: accept, deny (unmapped service and
# client network rule), a configuration file and its reload on SIGHUP, cache
# hits and expiry (7.3.1.4), retransmission while the daemon is stopped
# (7.5.1) with the duplicates that follow (7.5.2), the timeout fallback,
# statistics on SIGUSR1 and on exit, usage errors.
#   integration.sh path/to/uwarp-pmd path/to/uwarp-pm
PMD=$1
PM=$2
. "$(dirname "$0")/lib.sh"

q() { timeout 30 "$PM" query "$@"; }

# --help and usage errors.
timeout 10 "$PMD" --help >"$TMP/h" 2>&1
expect_eq "pmd --help exit" 0 $?
expect_contains "pmd --help text" "--map SVC=SDP" "$(cat "$TMP/h")"
timeout 10 "$PM" --help >"$TMP/h" 2>&1
expect_eq "pm --help exit" 0 $?
expect_contains "pm --help text" "Exit codes" "$(cat "$TMP/h")"
timeout 10 "$PMD" --bogus 2>/dev/null
expect_eq "pmd unknown option" 1 $?
timeout 10 "$PMD" --map 80=x 2>/dev/null
expect_eq "pmd bad map" 1 $?
timeout 10 "$PM" query 127.0.0.1 2>/dev/null
expect_eq "pm missing port" 1 $?
timeout 10 "$PM" query 127.0.0.1 70000 2>/dev/null
expect_eq "pm bad port" 1 $?

cat >"$TMP/pmd.conf" <<CONF
# services from the file
map 7003=17003
deny 127.0.0.3
pmtime 4
CONF
LOG=$TMP/pmd.log
start_pmd "$LOG" --config "$TMP/pmd.conf" --map 7001=17001 --map 7002=same --verbose
S=127.0.0.1:$PMD_PORT

# Accept: the mapped port, 'same', and a map from the file.
out=$(q --server "$S" 127.0.0.1 7001); rc=$?
expect_eq "accept exit" 0 $rc
expect_eq "accept 7001" "sdp 127.0.0.1 17001 accept pmtime=4 sent=1" "$out"
out=$(q --server "$S" 127.0.0.1 7002)
expect_eq "accept same" "sdp 127.0.0.1 7002 accept pmtime=4 sent=1" "$out"
out=$(q --server "$S" 127.0.0.1 7003)
expect_eq "accept from config file" "sdp 127.0.0.1 17003 accept pmtime=4 sent=1" "$out"

# Deny: an unmapped service, and a client in a denied network.
out=$(q --server "$S" 127.0.0.1 7009); rc=$?
expect_eq "deny exit" 2 $rc
expect_eq "deny unmapped" "conventional 127.0.0.1 7009 deny sent=1" "$out"
out=$(q --server "$S" --local 127.0.0.3 127.0.0.1 7001); rc=$?
expect_eq "deny rule exit" 2 $rc
expect_eq "deny by rule" "conventional 127.0.0.1 7001 deny sent=1" "$out"

# Cache (7.3.1.4): PmTime 4 is 1 s. Three queries in a row: one PMReq.
usr1_stats "$LOG"
req0=$(stats_of "$LOG" requests)
out=$(q --server "$S" --json --count 3 127.0.0.1 7001)
expect_eq "cache: reasons" "accept cached cached" \
    "$(echo "$out" | sed -n 's/.*"reason":"\([a-z]*\)".*/\1/p' | tr '\n' ' ' | sed 's/ $//')"
expect_contains "cache: sdp port" '"port":17001' "$out"
usr1_stats "$LOG"
expect_eq "cache: one PMReq for three queries" $((req0 + 1)) "$(stats_of "$LOG" requests)"
# After PmTime the answer is flushed and a new PMReq goes out.
out=$(q --server "$S" --count 2 --interval 1300 127.0.0.1 7001)
expect_eq "cache expiry" "sdp 127.0.0.1 17001 accept pmtime=4 sent=1
sdp 127.0.0.1 17001 accept pmtime=4 sent=1" "$out"

# Reload on SIGHUP: a new map, a new PmTime, the rule gone.
cat >"$TMP/pmd.conf" <<CONF
map 7004=17004
pmtime 0
CONF
kill -HUP "$PMD_PID"
for i in $(seq 1 400); do grep -q "configuration reloaded" "$LOG" && break; sleep 0.05; done
out=$(q --server "$S" 127.0.0.1 7004)
expect_eq "reload: new map" "sdp 127.0.0.1 17004 accept pmtime=0 sent=1" "$out"
out=$(q --server "$S" 127.0.0.1 7003)
expect_eq "reload: old file map gone" "conventional 127.0.0.1 7003 deny sent=1" "$out"
out=$(q --server "$S" 127.0.0.1 7001)
expect_eq "reload: command line kept" "sdp 127.0.0.1 17001 accept pmtime=0 sent=1" "$out"
out=$(q --server "$S" --local 127.0.0.3 127.0.0.1 7001)
expect_eq "reload: rule gone" "sdp 127.0.0.1 17001 accept pmtime=0 sent=1" "$out"
# PmTime 0: never cached (7.3.1.4), so every query asks.
out=$(q --server "$S" --json --count 2 127.0.0.1 7001)
expect_eq "pmtime 0: no cache" "accept accept" \
    "$(echo "$out" | sed -n 's/.*"reason":"\([a-z]*\)".*/\1/p' | tr '\n' ' ' | sed 's/ $//')"
# A broken file keeps the running configuration.
echo "map nonsense" >"$TMP/pmd.conf"
kill -HUP "$PMD_PID"
for i in $(seq 1 400); do grep -q "reload failed" "$LOG" && break; sleep 0.05; done
expect_contains "reload: bad file reported" "reload failed" "$(cat "$LOG")"
out=$(q --server "$S" 127.0.0.1 7004)
expect_eq "reload: bad file kept old config" "sdp 127.0.0.1 17004 accept pmtime=0 sent=1" "$out"

# Retransmission (7.5.1) while the daemon is stopped: the query keeps
# resending and succeeds once the daemon runs again; the PMReqs queued
# meanwhile are duplicates to the daemon (7.5.2).
usr1_stats "$LOG"
dup0=$(stats_of "$LOG" duplicates)
kill -STOP "$PMD_PID"
q --server "$S" --json --timeout 100 --retries 8 127.0.0.1 7001 >"$TMP/stopped" &
QPID=$!
sleep 1
kill -CONT "$PMD_PID"
wait $QPID
expect_eq "stopped daemon: query exit" 0 $?
out=$(cat "$TMP/stopped")
expect_contains "stopped daemon: accepted" '"outcome":"sdp","reason":"accept"' "$out"
sent=$(echo "$out" | sed -n 's/.*"sent":\([0-9]*\).*/\1/p')
CHECKS=$((CHECKS + 1))
[ "${sent:-0}" -ge 3 ] || fail "stopped daemon: expected retransmissions, sent=$sent"
usr1_stats "$LOG"
CHECKS=$((CHECKS + 1))
[ "$(stats_of "$LOG" duplicates)" -gt "$dup0" ] || fail "stopped daemon: no duplicates counted"

# Statistics on exit, exit status 0.
kill -TERM "$PMD_PID"
for i in $(seq 1 400); do grep -q "exiting" "$LOG" && break; sleep 0.05; done
expect_contains "stats on exit" "stats: received=" "$(tail -3 "$LOG")"
expect_contains "exit logged" "exiting" "$(tail -1 "$LOG")"
for k in requests accepts denies duplicates acks timeouts rate_limited; do
    CHECKS=$((CHECKS + 1))
    [ -n "$(stats_of "$LOG" $k)" ] || fail "stats: no $k"
done
expect_eq "accepts counted" 1 "$([ "$(stats_of "$LOG" accepts)" -ge 10 ] && echo 1)"

# The sample configuration in contrib/ is valid.
start_pmd "$TMP/example.log" --config "$(dirname "$0")/../../contrib/pmd.conf.example"
expect_contains "contrib example config" "ready: 2 maps, 3 rules, pmtime 20" "$(cat "$TMP/example.log")"
kill -TERM "$PMD_PID"

# Nobody there: timeout, fall back to the Conventional Address (7.5.1).
out=$(q --server "$S" --timeout 50 --retries 2 127.0.0.1 7001); rc=$?
expect_eq "timeout exit" 4 $rc
expect_eq "timeout fallback" "conventional 127.0.0.1 7001 timeout sent=3" "$out"
finish
