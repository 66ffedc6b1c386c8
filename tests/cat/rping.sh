#!/usr/bin/env bash
# uwarp-rping client against uwarp-rping server over loopback: rping's
# ping-pong (Send, RDMA Read, Send, Send, RDMA Write, Send per ping) with
# validation, rping's exact ping data and -v output, its size limits, the
# server's -C check, persistent mode, and MPA variants.
# usage: rping.sh UWARP-CAT UWARP-RPING SILENT-PEER
CAT=${1:-} RPING=${2:-} PEER=${3:-}
. "$(dirname "$0")/lib.sh"

# server NAME OPTS...: starts "uwarp-rping -s -a 127.0.0.1 -p 0 OPTS"; sets
# SPID and SPORT.
server() {
    local name=$1
    shift
    "$RPING" -s -a 127.0.0.1 -p 0 "$@" >"$(f "$name.s").out" 2>"$(f "$name.s").err" &
    SPID=$!
    BG_PIDS+=("$SPID")
    SPORT=$(wait_port "$(f "$name.s").err")
    [ -n "$SPORT" ] || fail "$name: server did not listen: $(cat "$(f "$name.s").err")"
}

# client NAME OPTS...: runs "uwarp-rping -c -a 127.0.0.1 -p SPORT OPTS"; sets
# CRC_ (its exit status).
client() {
    local name=$1
    shift
    "$RPING" -c -a 127.0.0.1 -p "$SPORT" "$@" >"$(f "$name.c").out" 2>"$(f "$name.c").err" &
    local pid=$!
    BG_PIDS+=("$pid")
    wait_rc "$pid" 40
    CRC_=$WRC
}

# pingpong NAME "SERVER OPTS" "CLIENT OPTS": both must exit 0.
pingpong() {
    local name=$1
    # shellcheck disable=SC2086
    server "$name" -t 10 $2
    [ -n "$SPORT" ] || return
    # shellcheck disable=SC2086
    client "$name" -t 10 $3
    wait_rc "$SPID" 20
    expect_eq "$name: client rc ($(cat "$(f "$name.c").err"))" 0 "$CRC_"
    expect_eq "$name: server rc ($(cat "$(f "$name.s").err"))" 0 "$WRC"
}

pingpong "50 validated pings of 4 KiB" "-C 50 -S 4096" "-C 50 -V -S 4096"
pingpong "default size" "" "-C 20 -V"
pingpong "largest size" "-S 65535" "-C 3 -V -S 65535"
pingpong "smallest size" "-S 26" "-C 3 -V -S 26"
pingpong "rev 1 without CRC" "--rev 1 --no-crc -S 512" "--rev 1 --no-crc -C 10 -V -S 512"
pingpong "markers" "--markers -S 3000" "--markers -C 10 -V -S 3000"
for t in send write read; do
    pingpong "p2p $t" "--p2p $t" "--p2p $t -C 5 -V"
done

# rping's ping data: "rdma-ping-<n>: " then characters from 'A' to 'z'
# cycling, starting one later on each ping, NUL at the end (size - 1 shown).
want_pings() { # want_pings PREFIX COUNT SIZE
    awk -v pre="$1" -v count="$2" -v size="$3" 'BEGIN {
        start = 65
        for (p = 0; p < count; p++) {
            s = sprintf("rdma-ping-%d: ", p)
            c = start
            while (length(s) < size - 1) {
                s = s sprintf("%c", c)
                if (++c > 122) c = 65
            }
            if (++start > 122) start = 65
            print pre s
        }
    }'
}
pingpong "verbose" "-v -S 100" "-v -V -C 70 -S 100"
expect_eq "verbose: client lines" "$(want_pings "ping data: " 70 100)" "$(cat "$(f verbose.c).out")"
expect_eq "verbose: server lines" "$(want_pings "server ping data: " 70 100)" \
    "$(cat "$(f verbose.s).out")"

# Size limits as rping's: 26..65535.
run_usage() { # run_usage NAME ARGS...
    local name=$1
    shift
    "$RPING" "$@" >"$TMP/u.out" 2>"$TMP/u.err"
    local rc=$?
    expect_eq "$name: rc ($(cat "$TMP/u.err"))" 1 "$rc"
}
run_usage "size 25" -c -a 127.0.0.1 -S 25
run_usage "size 65536" -s -S 65536
run_usage "neither -s nor -c" -a 127.0.0.1
run_usage "both -s and -c" -s -c -a 127.0.0.1
run_usage "client without -a" -c
run_usage "unknown option" -s -x
"$RPING" --help >"$TMP/help.out" 2>&1
expect_eq "--help rc" 0 "$?"
expect_contains "--help names the pause" "pitfall 13" "$(cat "$TMP/help.out")"

# The server's -C: the client stopped early, so the server fails.
server "short" -t 10 -C 10
client "short" -t 10 -C 5
wait_rc "$SPID" 20
expect_eq "server -C: client rc" 0 "$CRC_"
expect_eq "server -C: server rc" 2 "$WRC"
expect_contains "server -C: says why" "5 of 10" "$(cat "$(f short.s).err")"

# Different sizes: the server cannot read a larger buffer than its own.
server "sizes" -t 10 -S 64
client "sizes" -t 10 -C 1 -S 100
wait_rc "$SPID" 20
expect_eq "size mismatch: client fails" 2 "$CRC_"
expect_eq "size mismatch: server fails" 2 "$WRC"

# Persistent server: clients one after another.
server "persist" -t 10 -P -V
for k in 1 2 3; do
    client "persist$k" -t 10 -C 5 -V
    expect_eq "persistent: client $k rc ($(cat "$(f "persist$k.c").err"))" 0 "$CRC_"
done
kill "$SPID" 2>/dev/null
wait "$SPID" 2>/dev/null

# Nothing listens: a clear failure, fast.
"$PEER" listen silent >"$TMP/p.out" 2>/dev/null &
PP=$!
for ((i = 0; i < 100; i++)); do
    SPORT=$(head -n1 "$TMP/p.out" 2>/dev/null)
    [ -n "$SPORT" ] && break
    sleep 0.05
done
kill "$PP" 2>/dev/null
wait "$PP" 2>/dev/null
client "refused" -t 5 -C 1
expect_eq "refused: rc" 2 "$CRC_"

finish
