#!/usr/bin/env bash
# Dynamic registration on uwarp-pmd's control socket and the library's
# resolver, on loopback (docs/portmapper.md, "Dynamic registration" and
# "Resolver"):
#  - a registration is answered by PMAccept while its connection lives, and
#    by PMDeny once the descriptor is closed or the process is killed -9;
#  - several mappings on one connection, UNMAP, conflicts with live and
#    static mappings, no daemon, a stopped daemon (timeout);
#  - as root, the ownership rule with user nobody: granted when nobody owns
#    both listeners, refused when root owns either, suspended when the
#    listeners go and stays refused when another uid takes the port; the
#    same through /proc (--owner-check proc);
#  - the resolver: accept, PmTime cache, deny, negative caches for deny,
#    timeout and ICMP unreachable, no negative cache, the environment's
#    server, the destination host's port mapper, CpPort from a bound socket,
#    a PMAccept naming port 0, threads, IPv6 and IPv4-mapped destinations;
#  - limits (connections, mappings, per uid) and random input.
#   dynamic.sh path/to/uwarp-pmd path/to/uwarp-pm path/to/pm_dyn
PMD=$1
PM=$2
DYN=$3
. "$(dirname "$0")/lib.sh"

declare -A REG_PID REG_FD

q() { timeout 30 "$PM" query --server "$S" "$@"; }

# query_until WANT ARGS...: queries until the answer is WANT (at most 10 s:
# the daemon sees a closed connection asynchronously); prints the last one.
query_until() {
    local want=$1 out i
    shift
    for i in $(seq 1 100); do
        out=$(q "$@")
        [ "$out" = "$want" ] && break
        sleep 0.1
    done
    echo "$out"
}

# wait_for FILE REGEX: up to 20 s (sanitizer builds on a busy machine).
wait_for() {
    local i
    for i in $(seq 1 400); do
        grep -q -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    fail "timed out waiting for '$2' in $1: $(cat "$1" 2>/dev/null)"
    return 1
}

# reg_start NAME CMD...: runs CMD with its stdin on a FIFO this script holds
# open (closing it is the client's "close the descriptor" signal) and its
# output in $TMP/NAME.out.
reg_start() {
    local name=$1 fd
    shift
    mkfifo "$TMP/$name.in"
    "$@" <"$TMP/$name.in" >"$TMP/$name.out" 2>&1 &
    REG_PID[$name]=$!
    PMD_PIDS+=("$!") # killed on exit
    disown "$!"      # no "Killed" notice from bash for the kill -9 case
    exec {fd}>"$TMP/$name.in"
    REG_FD[$name]=$fd
}
reg_say() { echo "$2" >&"${REG_FD[$1]}"; }
reg_close() {
    local fd=${REG_FD[$1]}
    exec {fd}>&-
}
# mapping NAME N: "SVC SDP RESULT" of the Nth MAP line of NAME's output.
mapping() { grep '^MAP' "$TMP/$1.out" | sed -n "$2p" | cut -d' ' -f2-; }

# first5 TEXT: the comparable part of pm_dyn resolve lines (no timings).
first5() { grep -E '^(sdp|tcp) ' | cut -d' ' -f1-5; }
ms_of() { sed -n "${2}p" <<<"$1" | sed -n 's/.* ms=\([0-9]*\).*/\1/p'; }

# The daemon creates the socket's directory; user nobody must reach it.
chmod 711 "$TMP"
CTL=$TMP/ctl/pmd.sock
LOG=$TMP/pmd.log
start_pmd "$LOG" --control "$CTL" --map 7001=17001 --listen '[::1]' --verbose
S=127.0.0.1:$PMD_PORT
P6=$(sed -n 's/.*listening on \[::1\]:\([0-9][0-9]*\).*/\1/p' "$LOG" | head -1)
expect_contains "control socket announced" "control: listening on $CTL" "$(cat "$LOG")"
expect_eq "control socket mode 0666" "srw-rw-rw-" "$(stat -c %A "$CTL")"
expect_eq "control directory created" "drwxr-xr-x" "$(stat -c %A "$TMP/ctl")"

# --- Registration as the current user ------------------------------------
reg_start a "$DYN" register "$CTL" L0:L0
wait_for "$TMP/a.out" '^held'
read -r SVC SDP RES <<<"$(mapping a 1)"
expect_eq "register: reply" "OK" "$RES"
out=$(q 127.0.0.1 "$SVC")
expect_eq "registered: accept" "sdp 127.0.0.1 $SDP accept pmtime=20 sent=1" "$out"
out=$("$DYN" resolve --server "$S" 127.0.0.1 "$SVC" | first5)
expect_eq "registered: resolver" "sdp 127.0.0.1 $SDP accept sent=1" "$out"
# Same service asked by another live registration, and a static one.
out=$("$DYN" register --once "$CTL" "$SVC:12345")
expect_eq "conflict with a live registration" "MAP $SVC 12345 ERR EADDRINUSE" "$out"
out=$("$DYN" register --once "$CTL" 7001:12345)
expect_eq "conflict with a static map" "MAP 7001 12345 ERR EADDRINUSE" "$out"
# Closing the descriptor (the process lives on) ends the mapping.
reg_close a
wait_for "$TMP/a.out" '^closed'
out=$(query_until "conventional 127.0.0.1 $SVC deny sent=1" 127.0.0.1 "$SVC")
expect_eq "descriptor closed: deny" "conventional 127.0.0.1 $SVC deny sent=1" "$out"
kill "${REG_PID[a]}" 2>/dev/null

# Two mappings on one connection, UNMAP of one, then kill -9.
reg_start b "$DYN" register "$CTL" L0:L0 L0:L0 L0:L0
wait_for "$TMP/b.out" '^held'
read -r SVC1 SDP1 RES1 <<<"$(mapping b 1)"
read -r SVC2 SDP2 RES2 <<<"$(mapping b 2)"
read -r SVC3 SDP3 RES3 <<<"$(mapping b 3)"
expect_eq "three mappings on one connection" "OK OK OK" "$RES1 $RES2 $RES3"
expect_eq "first: accept" "sdp 127.0.0.1 $SDP1 accept pmtime=20 sent=1" "$(q 127.0.0.1 "$SVC1")"
expect_eq "second: accept" "sdp 127.0.0.1 $SDP2 accept pmtime=20 sent=1" "$(q 127.0.0.1 "$SVC2")"
reg_say b "unmap $SVC3"
wait_for "$TMP/b.out" "^UNMAP $SVC3"
expect_eq "unmap" "UNMAP $SVC3 OK" "$(grep '^UNMAP' "$TMP/b.out")"
expect_eq "unmapped: deny" "conventional 127.0.0.1 $SVC3 deny sent=1" "$(q 127.0.0.1 "$SVC3")"
reg_say b "unmap $SVC3"
wait_for "$TMP/b.out" "^UNMAP $SVC3 ERR"
expect_eq "unmap twice" "UNMAP $SVC3 ERR ENOENT" "$(grep '^UNMAP' "$TMP/b.out" | tail -1)"
kill -KILL "${REG_PID[b]}"
out=$(query_until "conventional 127.0.0.1 $SVC1 deny sent=1" 127.0.0.1 "$SVC1")
expect_eq "process killed: first denied" "conventional 127.0.0.1 $SVC1 deny sent=1" "$out"
out=$(query_until "conventional 127.0.0.1 $SVC2 deny sent=1" 127.0.0.1 "$SVC2")
expect_eq "process killed: second denied" "conventional 127.0.0.1 $SVC2 deny sent=1" "$out"
wait_for "$LOG" "2 mappings dropped"
reg_close b

# Nobody there, registration disabled, a daemon that does not answer.
out=$("$DYN" register --once "$TMP/nothing.sock" 5000:5001)
expect_eq "no daemon" "MAP 5000 5001 ERR ENOENT" "$out"
out=$(UWARP_PMD_CONTROL=none "$DYN" register --once - 5000:5001)
expect_eq "registration disabled" "MAP 5000 5001 ERR ENOENT" "$out"
out=$(UWARP_PMD_CONTROL=$CTL "$DYN" register --once - 7001:1)
expect_eq "path from the environment" "MAP 7001 1 ERR EADDRINUSE" "$out"
kill -STOP "$PMD_PID"
t0=$(date +%s%N)
out=$("$DYN" register --once --timeout 300 "$CTL" 5000:5001)
t1=$(date +%s%N)
kill -CONT "$PMD_PID"
expect_eq "stopped daemon: timeout" "MAP 5000 5001 ERR ETIMEDOUT" "$out"
expect_le "stopped daemon: waited about the timeout (ms)" $(((t1 - t0) / 1000000)) 3000

# --- The ownership rule (another uid) -------------------------------------
# other_uid DAEMON_CTL LABEL: the cases that need a second user.
other_uid() {
    local ctl=$1 label=$2 out rp1 rp2 svc sdp res
    # nobody owns both listeners: granted.
    reg_start "n$label" "${AS_NOBODY[@]}" "$DYN" register "$ctl" L0:L0
    wait_for "$TMP/n$label.out" '^held'
    read -r svc sdp res <<<"$(mapping "n$label" 1)"
    expect_eq "$label: nobody owns both: granted" "OK" "$res"
    expect_eq "$label: nobody's mapping: accept" "sdp 127.0.0.1 $sdp accept pmtime=20 sent=1" \
        "$(q 127.0.0.1 "$svc")"
    # Root's listeners: nobody may not map them, nor point at them.
    reg_start "r$label" "$DYN" listen 0 0
    wait_for "$TMP/r$label.out" '^ready'
    rp1=$(sed -n 1p "$TMP/r$label.out" | cut -d' ' -f2)
    rp2=$(sed -n 2p "$TMP/r$label.out" | cut -d' ' -f2)
    out=$("${AS_NOBODY[@]}" "$DYN" register --once "$ctl" "$rp1:$rp2")
    expect_eq "$label: root's ports: refused" "MAP $rp1 $rp2 ERR EPERM" "$out"
    out=$("${AS_NOBODY[@]}" "$DYN" register --once "$ctl" "L0:$rp2")
    expect_contains "$label: root's SDP port: refused" "ERR EPERM" "$out"
    out=$("${AS_NOBODY[@]}" "$DYN" register --once "$ctl" "$rp1:L0")
    expect_contains "$label: root's service port: refused" "ERR EPERM" "$out"
    out=$("${AS_NOBODY[@]}" "$DYN" register --once "$ctl" 7998:7999)
    expect_eq "$label: no listener: refused" "MAP 7998 7999 ERR EPERM" "$out"
    expect_eq "$label: refused service: deny" "conventional 127.0.0.1 $rp1 deny sent=1" \
        "$(q 127.0.0.1 "$rp1")"
    # The listeners go while the connection stays: suspended at the next
    # check (at most 1 s old); root takes the port: still refused.
    reg_say "n$label" unlisten
    wait_for "$TMP/n$label.out" '^unlistened'
    out=$(query_until "conventional 127.0.0.1 $svc deny sent=1" 127.0.0.1 "$svc")
    expect_eq "$label: listeners gone: deny" "conventional 127.0.0.1 $svc deny sent=1" "$out"
    reg_start "t$label" "$DYN" listen "$svc" "$sdp"
    wait_for "$TMP/t$label.out" '^ready'
    sleep 1.2
    expect_eq "$label: port taken by root: deny" "conventional 127.0.0.1 $svc deny sent=1" \
        "$(q 127.0.0.1 "$svc")"
    wait_for "$LOG" "of uid 65534 suspended"
    reg_close "t$label"
    reg_close "r$label"
    reg_close "n$label"
    kill "${REG_PID[n$label]}" 2>/dev/null
}

if [ "$(id -u)" = 0 ]; then
    AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    if ! "${AS_NOBODY[@]}" true 2>/dev/null; then
        AS_NOBODY=(runuser -u nobody --)
    fi
    other_uid "$CTL" netlink
    # The same through /proc/net/tcp{,6} (the fallback when netlink fails).
    LOG1=$LOG S1=$S PID1=$PMD_PID PORT1=$PMD_PORT
    LOG=$TMP/pmd-proc.log
    start_pmd "$LOG" --control "$TMP/ctl2/pmd.sock" --owner-check proc --verbose
    S=127.0.0.1:$PMD_PORT
    other_uid "$TMP/ctl2/pmd.sock" proc
    kill -TERM "$PMD_PID"
    wait_for "$LOG" "exiting"
    CHECKS=$((CHECKS + 1))
    [ ! -e "$TMP/ctl2/pmd.sock" ] || fail "the socket file outlived the daemon"
    LOG=$LOG1 S=$S1 PMD_PID=$PID1 PMD_PORT=$PORT1
else
    echo "SKIP: not root: the other-uid ownership cases need to run a client as user nobody"
    # As a plain user the check applies to us: our own listeners are granted.
    out=$("$DYN" register --once "$CTL" L0:L0)
    expect_contains "non-root, own listeners: granted" " OK" "$out"
    out=$("$DYN" register --once "$CTL" 7998:7999)
    expect_eq "non-root, no listener: refused" "MAP 7998 7999 ERR EPERM" "$out"
fi

# --- Limits and garbage -------------------------------------------------------
LOG1=$LOG S1=$S PID1=$PMD_PID PORT1=$PMD_PORT
LOG=$TMP/pmd-limits.log
CTL3=$TMP/ctl3/pmd.sock
start_pmd "$LOG" --control "$CTL3" --control-max-conns 2 --control-max-maps 3 \
    --control-max-per-uid 1
S=127.0.0.1:$PMD_PORT
reg_start h1 "$DYN" register "$CTL3" L0:L0 L0:L0
wait_for "$TMP/h1.out" '^held'
out=$("$DYN" register --once "$CTL3" L0:L0 L0:L0 | cut -d' ' -f4-)
expect_eq "mapping table full" "OK
ERR ENOBUFS" "$out"
reg_start h2 "$DYN" register "$CTL3" L0:L0
wait_for "$TMP/h2.out" '^held'
out=$("$DYN" register --once "$CTL3" L0:L0 | cut -d' ' -f4-)
expect_eq "too many connections" "ERR ENOBUFS" "$out"
reg_close h2
reg_close h1
if [ "$(id -u)" = 0 ]; then
    # One connection and one mapping per non-root uid.
    reg_start h3 "${AS_NOBODY[@]}" "$DYN" register "$CTL3" L0:L0 L0:L0
    wait_for "$TMP/h3.out" '^held'
    expect_eq "per-uid mapping limit" "OK ERR ENOBUFS" \
        "$(grep '^MAP' "$TMP/h3.out" | cut -d' ' -f4- | tr '\n' ' ' | sed 's/ $//')"
    out=$("${AS_NOBODY[@]}" "$DYN" register --once "$CTL3" L0:L0 | cut -d' ' -f4-)
    expect_eq "per-uid connection limit" "ERR ENOBUFS" "$out"
    reg_close h3
fi
# Random octets, far too long lines, abrupt closes: the daemon carries on.
for seed in 1 2 3; do
    out=$(timeout 60 "$DYN" garbage "$CTL3" 2 300 "$seed")
    CHECKS=$((CHECKS + 1))
    [ $? = 0 ] && [[ "$out" == sent* ]] || fail "garbage run $seed: $out"
done
# The garbage clients' connections count against the connection limit
# until the daemon has seen them close, which under load can trail the
# clients' exit: ENOBUFS is retried for up to 5 s.
for _ in $(seq 50); do
    out=$("$DYN" register --once "$CTL3" L0:L0 | cut -d' ' -f4-)
    [ "$out" = "ERR ENOBUFS" ] || break
    sleep 0.1
done
expect_eq "after garbage: still registering" "OK" "$out"
CHECKS=$((CHECKS + 1))
kill -0 "$PMD_PID" 2>/dev/null || fail "the daemon died of garbage"
usr1_stats "$LOG"
kill -TERM "$PMD_PID"
wait_for "$LOG" "exiting"
LOG=$LOG1 S=$S1 PMD_PID=$PID1 PMD_PORT=$PORT1

# --- Resolver ---------------------------------------------------------------
out=$("$DYN" resolve --server "$S" --count 2 127.0.0.1 7001 | first5)
expect_eq "resolve: accept, then PmTime cache" "sdp 127.0.0.1 17001 accept sent=1
sdp 127.0.0.1 17001 cached/accept sent=0" "$out"
out=$("$DYN" resolve --server "$S" --count 2 127.0.0.1 7009 | first5)
expect_eq "resolve: deny, then negative cache" "tcp 127.0.0.1 7009 deny sent=1
tcp 127.0.0.1 7009 cached/deny sent=0" "$out"
full=$("$DYN" resolve --server silent --timeout 300 --count 2 127.0.0.1 7001)
expect_eq "resolve: timeout, then negative cache" "tcp 127.0.0.1 7001 timeout sent=3
tcp 127.0.0.1 7001 cached/timeout sent=0" "$(first5 <<<"$full")"
CHECKS=$((CHECKS + 1))
ms=$(ms_of "$full" 1)
[ "$ms" -ge 280 ] && [ "$ms" -le 2000 ] || fail "resolve: timeout took $ms ms, not about 300"
expect_le "resolve: cached timeout is fast (ms)" "$(ms_of "$full" 2)" 50
full=$("$DYN" resolve --server silent --timeout 200 --neg -1 --count 2 127.0.0.1 7001)
expect_eq "resolve: no negative cache" "tcp 127.0.0.1 7001 timeout sent=3
tcp 127.0.0.1 7001 timeout sent=3" "$(first5 <<<"$full")"
full=$("$DYN" resolve --server closed --timeout 5000 --count 2 127.0.0.1 7001)
expect_eq "resolve: ICMP unreachable, then negative cache" "tcp 127.0.0.1 7001 unreachable sent=1
tcp 127.0.0.1 7001 cached/unreachable sent=0" "$(first5 <<<"$full")"
expect_le "resolve: unreachable ends the wait at once (ms)" "$(ms_of "$full" 1)" 1000
out=$(UWARP_PM_SERVER=$S "$DYN" resolve 127.0.0.1 7001 | first5)
expect_eq "resolve: UWARP_PM_SERVER" "sdp 127.0.0.1 17001 accept sent=1" "$out"
out=$("$DYN" resolve --server-port "$PMD_PORT" 127.0.0.1 7001 | first5)
expect_eq "resolve: the destination host's port mapper" "sdp 127.0.0.1 17001 accept sent=1" "$out"
out=$("$DYN" resolve --server fake --bind 127.0.0.1 127.0.0.1 5555)
bound=$(sed -n 's/^bound //p' <<<"$out")
expect_eq "resolve: CpPort is the bound TCP port" "cp 127.0.0.1 $bound" "$(grep '^cp' <<<"$out")"
expect_eq "resolve: fake accept" "sdp 127.0.0.1 15555 accept sent=1" "$(first5 <<<"$out")"
out=$("$DYN" resolve --server fake 127.0.0.1 5555 | grep '^cp')
expect_eq "resolve: no source given: CpPort 0, routed CpIPAddr" "cp 127.0.0.1 0" "$out"
out=$("$DYN" resolve --server fake 127.0.0.1 55536 | first5) # the fake answers port 0
expect_eq "resolve: PMAccept of port 0 is not used" "tcp 127.0.0.1 55536 error sent=1" "$out"
out=$("$DYN" resolve --server "$S" --threads 8 127.0.0.1 7001 | first5 | cut -d' ' -f1-3 | sort -u)
expect_eq "resolve: 8 threads at once" "sdp 127.0.0.1 17001" "$out"
out=$("$DYN" resolve --server "$S" ::ffff:127.0.0.1 7001 | first5)
expect_eq "resolve: IPv4-mapped destination" "sdp ::ffff:127.0.0.1 17001 accept sent=1" "$out"
if [ -n "$P6" ]; then
    out=$("$DYN" resolve --server "[::1]:$P6" --count 2 ::1 7001 | first5)
    expect_eq "resolve: IPv6 accept, then cache" "sdp ::1 17001 accept sent=1
sdp ::1 17001 cached/accept sent=0" "$out"
    out=$("$DYN" resolve --server "[::1]:$P6" ::1 7009 | first5)
    expect_eq "resolve: IPv6 deny" "tcp ::1 7009 deny sent=1" "$out"
    full=$("$DYN" resolve --server closed --timeout 5000 ::1 7001)
    expect_eq "resolve: IPv6 unreachable" "tcp ::1 7001 unreachable sent=1" "$(first5 <<<"$full")"
    expect_le "resolve: IPv6 unreachable is fast (ms)" "$(ms_of "$full" 1)" 1000
    out=$("$DYN" resolve --server fake --bind ::1 ::1 5555)
    bound=$(sed -n 's/^bound //p' <<<"$out")
    expect_eq "resolve: IPv6 CpPort" "cp ::1 $bound" "$(grep '^cp' <<<"$out")"
else
    echo "SKIP: no IPv6 loopback: IPv6 resolver cases"
fi

# The daemon removes its socket file on exit and logs the registry.
usr1_stats "$LOG"
expect_eq "no registrations left" 0 "$(stats_of "$LOG" registrations)"
kill -TERM "$PMD_PID"
wait_for "$LOG" "exiting"
CHECKS=$((CHECKS + 1))
[ ! -e "$CTL" ] || fail "the socket file outlived the daemon"
finish
