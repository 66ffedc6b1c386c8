#!/usr/bin/env bash
# uwarp-sdpcat's command line: --help, and every usage error exits 1 with a
# message that points at --help, before any network activity.
. "$(dirname "$0")/lib.sh"

out=$(timeout 10 "$SDPCAT" --help)
expect_eq "--help exits 0" 0 "$?"
for word in "-l [ADDR:]PORT" --pm --pm-server --chunk --rcvbuf-size --bufs --nodelay \
    --oob-at --oob-out --chrcvbuf --linger --timeout "Exit status"; do
    expect_contains "--help mentions $word" "$word" "$out"
done

# usage_case NAME ARGS...: exit 1 and a pointer to --help on stderr.
usage_case() {
    local name=$1 err rc
    shift
    err=$(timeout 10 "$SDPCAT" "$@" </dev/null 2>&1 >/dev/null)
    rc=$?
    expect_eq "$name: exit status ($err)" 1 "$rc"
    expect_contains "$name: points at --help" "--help" "$err"
}
usage_case "no arguments"
usage_case "only a host" 127.0.0.1
usage_case "too many arguments" 127.0.0.1 1 2
usage_case "unknown option" --frobnicate 127.0.0.1 7000
usage_case "-l without a port" -l
usage_case "-l with HOST PORT" -l 7000 127.0.0.1 7000
usage_case "--chunk 0" --chunk 0 127.0.0.1 7000
usage_case "--chunk too big" --chunk 16777217 127.0.0.1 7000
usage_case "--chunk not a number" --chunk lots 127.0.0.1 7000
usage_case "--bufs not a number" --bufs x 127.0.0.1 7000
usage_case "--rcvbuf-size missing" 127.0.0.1 7000 --rcvbuf-size
usage_case "--timeout 0" --timeout 0 127.0.0.1 7000
usage_case "--timeout negative" --timeout -1 127.0.0.1 7000
usage_case "--linger not a number" --linger soon 127.0.0.1 7000
usage_case "--oob-at not a number" --oob-at x 127.0.0.1 7000
usage_case "--pm-server without --pm" --pm-server 127.0.0.1:3935 127.0.0.1 7000
usage_case "--pm-server with -l" --pm --pm-server 127.0.0.1:3935 -l 7000
# Bad addresses and ports: exit 1, and the message quotes what was wrong.
addr_case() {
    local name=$1 needle=$2 err rc
    shift 2
    err=$(timeout 10 "$SDPCAT" "$@" </dev/null 2>&1 >/dev/null)
    rc=$?
    expect_eq "$name: exit status ($err)" 1 "$rc"
    expect_contains "$name: names the culprit" "$needle" "$err"
}
addr_case "port out of range" 70000 127.0.0.1 70000
addr_case "port 0" "port 0" 127.0.0.1 0
addr_case "bad listen address" "1.2.3.4:5:6" -l 1.2.3.4:5:6
addr_case "bad IPv6 listen address" "[::1:7000" -l '[::1:7000'
addr_case "bad --pm-server" "nowhere" --pm --pm-server nowhere 127.0.0.1 7000

finish
