# Shared by the netmtu tests: scratch directory, assertions, the namespaces
# (tests/lib/netns.sh) and the uwarp-cat runs inside them.
set -u
CHECKS=0 FAILS=0
TMP=$(mktemp -d /tmp/uwarp-netmtu.XXXXXX)
BG_PIDS=()
source "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/proc.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/netns.sh"

cleanup() {
    local p
    for p in "${BG_PIDS[@]}"; do
        kill -9 "$p" 2>/dev/null
    done
    netns_down
    if [ "$FAILS" -gt 0 ]; then
        echo "logs kept in $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT

# up MTU: fresh namespaces at MTU (the previous ones removed); exits 77
# when namespaces cannot be made here.
up() {
    netns_down
    if ! netns_up "$1"; then
        echo "SKIP: $(netns_why)"
        exit 77
    fi
}

# serve NAME OPTS...: uwarp-cat -l in namespace A on 127.0.0.1 (for the
# proxy) or ADDR_A (LADDR), stdin empty, stdout hashed into $TMP/NAME.sha.
# Sets SPID and SPORT.
serve() {
    local name=$1
    shift
    in_a bash -c '"$@" </dev/null 2>"$0.err" | sha256sum | cut -d" " -f1 >"$0.sha"' \
        "$TMP/$name" "$CAT" -l "${LADDR:-$ADDR_A}:0" --timeout 60 "$@" &
    SPID=$!
    BG_PIDS+=("$SPID")
    SPORT=$(wait_port "$TMP/$name.err")
    [ -n "$SPORT" ] || fail "$name: the responder never listened ($(cat "$TMP/$name.err"))"
}

# send NAME FILE HOST PORT OPTS...: uwarp-cat from namespace B; CRC is the
# initiator's exit status.
send() {
    local name=$1 file=$2 host=$3 port=$4
    shift 4
    in_b "$CAT" --timeout 60 "$@" "$host" "$port" <"$file" >/dev/null 2>"$TMP/$name.i.err" &
    local pid=$!
    BG_PIDS+=("$pid")
    wait_rc "$pid" 300
    CRC=$WRC
}

summary() {
    echo "$CHECKS checks, $FAILS failed"
    [ "$FAILS" -eq 0 ]
}
