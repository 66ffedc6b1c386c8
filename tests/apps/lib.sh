# Helpers for the real-program tests (label apps, issue 17 "Real programs").
# Each script is called as
#   SCRIPT PORT-BASE PRELOAD-LIB UWARP-RUN UWARP-PMD UWARP-PM
# (PRELOAD-LIB empty when the build has no uwarp-preload target; UWARP-RUN a
# path that may not exist yet) and sources this file. It runs its program in
# several modes, one phase each:
#   plain            no preload at all (the harness's own check; always run
#                    when there is no library, else only if asked for)
#   sdp              both ends preloaded: the program's result, the log says
#                    sdp for every connection, the service port saw no SYN and
#                    the SDP port the port mapper gave saw MPA Requests
#   fallback-client  only the client preloaded (the server never registered,
#                    PMDeny): TCP on the service port, no MPA
#   fallback-server  only the server preloaded: a plain client reaches it on
#                    the service port, the log says tcp, no MPA
#   tcp-only         both ends under `uwarp-run --tcp-only`: TCP, no MPA
# UW_APPS_MODES="plain sdp ..." chooses the modes (default: plain without the
# library; sdp fallback-client fallback-server, and tcp-only when uwarp-run
# exists, with it). UW_APPS_KEEP=1 keeps the logs (the path is printed).
# Without the library the script runs the plain phase and exits 77 (CTest
# SKIP) when that passed. Checks count in CHECKS, failures in FAILS (each
# prints what it expected and got); `finish` sets the exit status.
#
# Ports: every listener takes a free port from this test's own range of 100
# starting at PORT-BASE (tests/apps/CMakeLists.txt gives each test its own),
# below the ephemeral range, so the tests run in parallel. Every program is
# started in its own process group under timeout(1) and the whole group is
# killed on exit; every wait is bounded.

set -u
export LC_ALL=C
PORT_BASE=${1:?usage: $0 PORT-BASE PRELOAD-LIB UWARP-RUN UWARP-PMD UWARP-PM}
PRELOAD_LIB=${2-}
URUN=${3-}
PMD=${4:?}
PMQ=${5:?}
APPS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
APP=$(basename "$0" .sh)
FAILS=0
CHECKS=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-apps-$APP.XXXXXX")
LIFE=280 # no program outlives this many seconds, whatever happens to us
GROUPS_STARTED=()
T0=$EPOCHREALTIME

source "$APPS_DIR/../lib/expect.sh"

# The watchdog: a process of its own session that kills every group this
# script started once the script is gone, even when it was killed too hard
# for its EXIT trap to run (SIGKILL from a timeout above it).
GROUPS_FILE=$TMP/groups
: >"$GROUPS_FILE"
setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
    while read -r g; do kill -KILL -- "-$g"; done <"$2"' _ $$ "$GROUPS_FILE" </dev/null >/dev/null 2>&1 &
WATCHDOG=$!

# started GROUP: remembers a process group for cleanup and the watchdog.
started() {
    GROUPS_STARTED+=("$1")
    echo "$1" >>"$GROUPS_FILE"
}

cleanup() {
    local g
    kill -KILL "$WATCHDOG" 2>/dev/null
    wait "$WATCHDOG" 2>/dev/null
    for g in "${GROUPS_STARTED[@]}"; do
        kill -KILL -- "-$g" 2>/dev/null
        wait "$g" 2>/dev/null
    done
    if [ -n "${UW_APPS_KEEP:-}" ] || [ "$FAILS" -ne 0 ]; then
        echo "logs kept in $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

note() { echo "[$APP $(secs_since "$T0")s] $*"; }

# secs_since START: seconds (one decimal) since START (an $EPOCHREALTIME).
secs_since() {
    local now=$EPOCHREALTIME d
    d=$(((${now/./} - ${1/./}) / 100000))
    echo "$((d / 10)).$((d % 10))"
}

# expect_ge NAME VALUE MIN
expect_ge() {
    CHECKS=$((CHECKS + 1))
    if ! [ "${2:-x}" -ge "$3" ] 2>/dev/null; then
        fail "$1"
        printf '  expected at least: %s\n  actual: %s\n' "$3" "${2:-(none)}" >&2
    fi
}

# sha FILE: its sha256.
sha() { sha256sum "$1" | cut -d' ' -f1; }

# tail_of FILE...: the last lines of each, for failure messages.
tail_of() {
    local f
    for f in "$@"; do
        [ -s "$f" ] && { echo "--- $f"; tail -n 8 "$f"; }
    done
}

# ---------------------------------------------------------------- modes

HAVE_LIB=
[ -n "$PRELOAD_LIB" ] && [ -f "$PRELOAD_LIB" ] && HAVE_LIB=1
HAVE_RUN=
[ -n "$URUN" ] && [ -x "$URUN" ] && HAVE_RUN=1
if [ -n "${UW_APPS_MODES:-}" ]; then
    read -r -a MODES <<<"$UW_APPS_MODES"
elif [ -n "$HAVE_LIB" ]; then
    MODES=(sdp fallback-client fallback-server)
    [ -n "$HAVE_RUN" ] && MODES+=(tcp-only)
else
    MODES=(plain)
fi
SKIPPED=()
# mode_ok MODE: whether MODE can run here (else it is noted and skipped).
mode_ok() {
    case $1 in
    plain) return 0 ;;
    tcp-only) [ -n "$HAVE_LIB" ] && [ -n "$HAVE_RUN" ] && return 0 ;;
    sdp | fallback-client | fallback-server) [ -n "$HAVE_LIB" ] && return 0 ;;
    *)
        fail "unknown mode $1"
        return 1
        ;;
    esac
    SKIPPED+=("$1")
    return 1
}

# preloaded MODE ROLE: whether ROLE (server|client) runs with the library.
preloaded() {
    case "$1:$2" in
    sdp:* | tcp-only:* | fallback-client:client | fallback-server:server) return 0 ;;
    esac
    return 1
}

# expected MODE: the transport every connection of MODE must use.
expected() {
    [ "$1" = sdp ] && echo sdp || echo tcp
}

# prefix MODE ROLE LOGSTEM: sets PFX, the command prefix for ROLE in MODE.
# A preloaded side logs at info level to LOGSTEM.plog. uwarp-run is used
# when it exists (the way users run programs), else LD_PRELOAD directly.
prefix() {
    local mode=$1 role=$2 log=$3.plog
    PFX=(env -u LD_PRELOAD)
    preloaded "$mode" "$role" || return 0
    PFX=(env UWARP_PRELOAD_LOG=info UWARP_PRELOAD_LOG_FILE="$log" UWARP_PRELOAD_LIB="$PRELOAD_LIB")
    if [ -n "$HAVE_RUN" ]; then
        PFX+=("$URUN" --log info)
        [ "$mode" = tcp-only ] && PFX+=(--tcp-only)
    else
        PFX+=(LD_PRELOAD="$PRELOAD_LIB")
    fi
}

# ---------------------------------------------------------------- ports

# port: sets PORT to a free TCP port of this test's range, none handed out
# twice (a function run in this shell, never in $(...), for that reason).
PORTS_USED=" "
PORT=
port() {
    local p i
    for ((i = 0; i < 400; i++)); do
        p=$((PORT_BASE + RANDOM % 100))
        case $PORTS_USED in *" $p "*) continue ;; esac
        [ -z "$(ss -Htan "( sport = :$p or dport = :$p )" 2>/dev/null)" ] || continue
        PORTS_USED+="$p "
        PORT=$p
        return 0
    done
    fail "no free port in $PORT_BASE..$((PORT_BASE + 99))"
    PORT=1
}

# wait_listen PORT PGID [SECS]: until something listens on 127.0.0.1:PORT
# (watched with ss, never by connecting: a probe would be a connection the
# wire checks count); fails if the group PGID died first or after SECS.
wait_listen() {
    local p=$1 g=$2 secs=${3:-20} i
    for ((i = 0; i < secs * 20; i++)); do
        [ -n "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && return 0
        kill -0 -- "-$g" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 -- "-$g" 2>/dev/null; then
        fail "nothing listens on port $p after $secs s"
    else
        wait_group "$g" 1
        fail "nothing listens on port $p: the server exited with status $SRC$( ((SRC > 128 && SRC < 160)) && echo " (signal $((SRC - 128)))")"
    fi
    return 1
}

# ---------------------------------------------------------------- processes

# spawn NAME MODE ROLE CMD...: CMD in the background in its own process group
# (setsid), under timeout(1), prefixed for ROLE in MODE; output in
# $TMP/NAME.out/.err, the library's log in $TMP/NAME.plog. Sets SPGID.
spawn() {
    local name=$1 mode=$2 role=$3
    shift 3
    prefix "$mode" "$role" "$TMP/$name"
    setsid timeout -s KILL "$LIFE" "${PFX[@]}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null &
    SPGID=$!
    started "$SPGID"
    group_made "$SPGID"
}

# group_made PID: waits (5 s at most) until the background child PID has
# called setsid(), so that its process group exists: on a loaded machine a
# check of the group right after the fork found none and took the server
# for dead.
group_made() {
    local i st
    for ((i = 0; i < 500; i++)); do
        st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
        st=${st##*) }
        read -r _ _ pg _ <<<"$st"
        [ "$pg" = "$1" ] && return 0
        sleep 0.01
    done
}

# stop PGID [SIGNAL] [SECS]: SIGNAL (default TERM) to the group, then waits
# (default 10 s) and kills what is left. SRC is the exit status (124: killed).
stop() {
    local g=$1 sig=${2:-TERM} secs=${3:-10} i
    kill "-$sig" -- "-$g" 2>/dev/null
    wait_group "$g" "$secs"
}

# wait_group PGID SECS: waits for the group's leader (a job of this shell);
# after SECS kills the group. SRC is its exit status, or 124.
wait_group() {
    local g=$1 secs=$2 i
    for ((i = 0; i < secs * 20; i++)); do
        if ! kill -0 "$g" 2>/dev/null; then
            wait "$g" 2>/dev/null
            SRC=$?
            kill -KILL -- "-$g" 2>/dev/null
            return
        fi
        sleep 0.05
    done
    kill -KILL -- "-$g" 2>/dev/null
    wait "$g" 2>/dev/null
    SRC=124
}

# run NAME MODE ROLE SECS CMD...: CMD in the foreground, prefixed for ROLE in
# MODE and bounded by SECS; stdin from /dev/null unless RUN_IN names a file.
# Output in $TMP/NAME.out/.err; RC is its exit status (124: timed out).
run() {
    local name=$1 mode=$2 role=$3 secs=$4
    shift 4
    prefix "$mode" "$role" "$TMP/$name"
    timeout -k 5 "$secs" "${PFX[@]}" "$@" <"${RUN_IN:-/dev/null}" >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
}

# ---------------------------------------------------------------- port mapper

# start_pmd: a private uwarp-pmd on 127.0.0.1 (a UDP port the kernel picks)
# with its control socket under $TMP, and the environment that points the
# library (and every child) at it.
PMD_PID=
PMD_PORT=
start_pmd() {
    local log=$TMP/pmd.log ctl=$TMP/pmd.sock i
    setsid timeout -s KILL "$LIFE" "$PMD" --port 0 --listen 127.0.0.1 --control "$ctl" 2>"$log" </dev/null &
    PMD_PID=$!
    started "$PMD_PID"
    group_made "$PMD_PID"
    for ((i = 0; i < 400; i++)); do
        PMD_PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log" | head -1)
        [ -n "$PMD_PORT" ] && [ -S "$ctl" ] && break
        sleep 0.05
    done
    if [ -z "$PMD_PORT" ] || [ ! -S "$ctl" ]; then
        fail "uwarp-pmd did not start: $(cat "$log")"
        finish
    fi
    # The names of the preload library's contract, and those of uwarp/sdp.h
    # and the port mapper tools (the same daemon either way).
    export UWARP_PM_PORT=$PMD_PORT UWARP_PM_SOCKET=$ctl
    export UWARP_PMD_CONTROL=$ctl UWARP_PM_SERVER=127.0.0.1:$PMD_PORT
}

# mapped SVC: the SDP port the port mapper gives for 127.0.0.1:SVC, or
# nothing (PMDeny, no answer).
mapped() {
    timeout 10 "$PMQ" query --server "127.0.0.1:$PMD_PORT" --timeout 100 --retries 2 127.0.0.1 "$1" \
        2>/dev/null | sed -n 's/^sdp [^ ]* \([0-9]*\) .*/\1/p' | head -1
}

# wait_mapped SVC PGID: in the modes where the server runs the library and
# may use SDP (sdp, fallback-server), waits until its listener registered
# SVC (a client that asked earlier would get PMDeny and TCP) and sets
# SDPPORT; fails after 10 s.
SDPPORT=
wait_mapped() {
    local svc=$1 g=$2 i
    SDPPORT=
    for ((i = 0; i < 100; i++)); do
        SDPPORT=$(mapped "$svc")
        [ -n "$SDPPORT" ] && return 0
        kill -0 -- "-$g" 2>/dev/null || break
        sleep 0.1
    done
    fail "the preloaded listener on port $svc never registered with the port mapper"
    return 1
}

# ---------------------------------------------------------------- logs

# transports FILE...: one line "EVENT TRANSPORT" per connection or listener
# the library logged (EVENT connect, accept or listen; TRANSPORT sdp, tcp,
# sdp+tcp, or failed for "sdp failed: ..."), parsed from its lines
#   uwarp-preload[PID] fd N: connect ADDR:PORT: sdp (why)
#   uwarp-preload[PID] fd N: accept from ADDR:PORT on fd L: tcp (why)
#   uwarp-preload[PID] fd N: listen ADDR:PORT: sdp+tcp (why)
transports() {
    python3 - "$@" <<'PY'
import re, sys
pat = re.compile(r'uwarp-preload\[\d+\]\s+fd\s+-?\d+:\s+(connect|accept4?|listen)\b.*?:\s+(sdp\+tcp|sdp|tcp)\b(\s+failed)?')
for name in sys.argv[1:]:
    try:
        text = open(name, errors="replace").read()
    except OSError:
        continue
    for line in text.splitlines():
        m = pat.search(line)
        if m:
            print(m.group(1).rstrip("4"), "failed" if m.group(3) else m.group(2))
PY
}

# count_tr FILE... -- EVENT TRANSPORT: how many connections logged so.
count_tr() {
    local files=() ev tr
    while [ "$1" != -- ]; do
        files+=("$1")
        shift
    done
    ev=$2 tr=$3
    transports "${files[@]}" | grep -c "^$ev $tr\$"
}

# log_check NAME MODE SERVER-STEM CLIENT-STEM MIN: the transport the library
# logged for each connection of a phase. In sdp mode the server accepted at
# least MIN connections over SDP and the client made at least MIN, none over
# TCP; in the fallback modes the preloaded side logged at least MIN over TCP
# and none over SDP; under --tcp-only nothing is SDP.
log_check() {
    local name=$1 mode=$2 s=$TMP/$3.plog c=$TMP/$4.plog min=$5 want other
    want=$(expected "$mode")
    [ "$want" = sdp ] && other=tcp || other=sdp
    if preloaded "$mode" server && [ "$mode" != tcp-only ]; then
        expect_ge "$name: server log: listeners over sdp+tcp" "$(count_tr "$s" -- listen sdp+tcp)" 1
        expect_ge "$name: server log: accepts over $want" "$(count_tr "$s" -- accept "$want")" "$min"
    fi
    if preloaded "$mode" client && [ "$mode" != tcp-only ]; then
        expect_ge "$name: client log: connects over $want" "$(count_tr "$c" -- connect "$want")" "$min"
    fi
    expect_eq "$name: connections logged over $other or failed" 0 \
        "$(transports "$s" "$c" | grep -cE "^(connect|accept) ($other|failed)\$")"
    if [ "$mode" = tcp-only ]; then
        expect_eq "$name: listeners logged over sdp" 0 "$(count_tr "$s" -- listen sdp+tcp)"
    fi
    case_failed && tail_of "$s" "$c" >&2
}

# ---------------------------------------------------------------- wire

# The wire: one capture per script on lo, of TCP SYNs (no ACK), segments
# whose payload starts with "MPA " (MPA Request and Reply frames, RFC 5044
# 7.1) and this script's UDP sentinels; small whatever else runs. At the end
# each phase's ports are checked (wire_expect).
TSPID=
CAPTURE=
SENTINEL_PORT=9 # discard
start_capture() {
    local i
    command -v tshark >/dev/null 2>&1 || {
        note "tshark missing: no wire checks (scripts/deps.sh installs it)"
        return
    }
    # bounded like every other process here: a script killed hard (a CTest
    # timeout) leaves nothing running for long
    setsid timeout -s KILL $((LIFE + 20)) tshark -a "duration:$LIFE" -i lo -B 16 -f "(tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn) or \
(tcp[((tcp[12] & 0xf0) >> 2):4] = 0x4d504120) or (udp dst port $SENTINEL_PORT)" \
        -w "$TMP/wire.pcapng" 2>"$TMP/tshark.err" </dev/null &
    TSPID=$!
    started "$TSPID"
    group_made "$TSPID"
    for ((i = 0; i < 400; i++)); do
        if grep -q "Capturing on" "$TMP/tshark.err" 2>/dev/null; then
            if sentinel "start"; then
                CAPTURE=1
                return
            fi
            break
        fi
        kill -0 "$TSPID" 2>/dev/null || break
        sleep 0.05
    done
    note "cannot capture on lo, no wire checks: $(tail -n2 "$TMP/tshark.err")"
    kill -KILL -- "-$TSPID" 2>/dev/null
    TSPID=
}

# sentinel WORD: sends a datagram and waits (30 s at most) until the capture
# file holds it, so everything sent before it is in the file too.
sentinel() {
    local word="uwarp-apps-$$-$1" i
    for ((i = 0; i < 60; i++)); do
        echo "$word" >"/dev/udp/127.0.0.1/$SENTINEL_PORT" 2>/dev/null || true
        sleep 0.5
        tshark -r "$TMP/wire.pcapng" -Y "udp.dstport == $SENTINEL_PORT" -T fields -e data.data \
            2>/dev/null | tr -d ':\n' | grep -q "$(printf %s "$word" | od -An -tx1 | tr -d ' \n')" &&
            return 0
    done
    return 1
}

# wire_expect NAME MODE SVC SDP MIN: remembers a phase for wire_checks.
WIRE=()
wire_expect() {
    WIRE+=("$*")
}

# wire_checks: stops the capture and checks each phase. sdp: no SYN to the
# service port (unless the SDP port is the same), at least MIN MPA Requests
# to the SDP port and MIN Replies from it. Other modes: at least MIN SYNs to
# the service port and no MPA frame on either port.
wire_checks() {
    [ -n "$CAPTURE" ] || return 0
    sentinel "end" || fail "the capture did not catch up in 30 s"
    kill -INT "$TSPID" 2>/dev/null
    local i
    for ((i = 0; i < 200; i++)); do
        kill -0 "$TSPID" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL -- "-$TSPID" 2>/dev/null
    wait "$TSPID" 2>/dev/null
    TSPID=
    # dst port, src port, SYN flag, ACK flag, the payload's first 10 octets
    tshark -r "$TMP/wire.pcapng" -Y tcp -T fields -e tcp.dstport -e tcp.srcport \
        -e tcp.flags.syn -e tcp.flags.ack -e tcp.payload 2>/dev/null |
        awk -F'\t' '{ p = $5; gsub(":", "", p); p = substr(p, 1, 20)
            if (($3 == "1" || $3 == "True") && !($4 == "1" || $4 == "True")) print "syn", $1
            if (p == "4d504120494420526571") print "req", $1
            if (p == "4d504120494420526570") print "rep", $2 }' >"$TMP/wire.txt"
    local w name mode svc sdp min syn req rep
    for w in "${WIRE[@]}"; do
        read -r name mode svc sdp min <<<"$w"
        syn=$(grep -c "^syn $svc\$" "$TMP/wire.txt")
        if [ "$mode" = sdp ]; then
            if [ "$sdp" = - ]; then
                fail "$name: wire: no SDP port known (the listener never registered)"
                continue
            fi
            req=$(grep -c "^req $sdp\$" "$TMP/wire.txt")
            rep=$(grep -c "^rep $sdp\$" "$TMP/wire.txt")
            note "$name: wire: $syn SYNs to the service port $svc; SDP port $sdp: $req MPA Requests, $rep Replies"
            [ "$sdp" != "$svc" ] && expect_eq "$name: wire: SYNs to the service port $svc" 0 "$syn"
            expect_ge "$name: wire: MPA Requests to the SDP port $sdp" "$req" "$min"
            expect_ge "$name: wire: MPA Replies from the SDP port $sdp" "$rep" "$min"
        else
            req=$(grep -c "^req $svc\$" "$TMP/wire.txt")
            [ "$sdp" != - ] && req=$((req + $(grep -c "^req $sdp\$" "$TMP/wire.txt")))
            note "$name: wire: $syn SYNs to the service port $svc, $req MPA Requests"
            expect_ge "$name: wire: SYNs to the service port $svc" "$syn" "$min"
            expect_eq "$name: wire: MPA Requests (ports $svc, $sdp)" 0 "$req"
        fi
    done
}

# ---------------------------------------------------------------- the phases

# begin_phase MODE: prints the phase; returns 1 when MODE cannot run here.
begin_phase() {
    mode_ok "$1" || return 1
    note "phase $1"
    return 0
}

# case_failed: whether a check failed since the case began (server_ready).
CASE_FAILS0=0
case_failed() {
    [ "$FAILS" -gt "$CASE_FAILS0" ]
}

# server_ready NAME MODE SVC PGID: begins a case (see case_failed); waits
# for the listener and, where the server is preloaded (not --tcp-only), for
# its registration; sets SDPPORT ("-" when none). In the fallback-client mode the server is plain, so the
# port mapper must deny (checked: otherwise the phase proves nothing).
server_ready() {
    local name=$1 mode=$2 svc=$3 g=$4
    CASE_FAILS0=$FAILS
    SDPPORT=-
    wait_listen "$svc" "$g" || return 1
    case $mode in
    sdp | fallback-server)
        if ! wait_mapped "$svc" "$g"; then
            SDPPORT=-
            # without the mapping an SDP phase proves nothing; the fallback
            # to TCP can still be tried
            [ "$mode" = sdp ] && return 1
            return 0
        fi
        CHECKS=$((CHECKS + 1))
        [ "$SDPPORT" != "$svc" ] || note "$name: the SDP port is the service port $svc"
        ;;
    fallback-client)
        expect_eq "$name: port mapper denies the plain server's port" "" "$(mapped "$svc")"
        ;;
    esac
    return 0
}

finish() {
    wire_checks
    note "done: $CHECKS checks, $FAILS failed"
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS of $CHECKS checks failed" >&2
        exit 1
    fi
    if [ -z "$HAVE_LIB" ]; then
        echo "SKIP: libuwarp-preload.so is not built (no uwarp-preload target);" \
            "only the plain run of $APP was checked ($CHECKS checks passed)"
        exit 77
    fi
    if [ ${#SKIPPED[@]} -ne 0 ]; then
        echo "note: modes not run here: ${SKIPPED[*]}"
    fi
    echo "all $CHECKS checks passed"
    exit 0
}

# Set up what the preloaded modes need.
if [ -n "$HAVE_LIB" ]; then
    start_pmd
    start_capture
fi
note "modes: ${MODES[*]}; library: ${PRELOAD_LIB:-none}; uwarp-run: $([ -n "$HAVE_RUN" ] && echo "$URUN" || echo none)"
