# Sourced by the bench scripts. perf_server PERF LOG [ADDR [OPTION...]]:
# starts "PERF -l ADDR:0 OPTION..." in the background (ADDR defaults to
# 127.0.0.1; options such as --zcopy-min apply to what the server receives) and waits
# up to 30 s for its "listening on" line, which comes only once all three
# listeners are up. Sets SRV (its pid) and PORT (uwarp's; TCP is PORT+1 and
# SDP PORT+2); fails with the server's log when it does not come up.
perf_server() {
    local perf=$1 log=$2 addr=${3:-127.0.0.1} i
    shift $(($# < 3 ? $# : 3))
    # The log exists before the server does: a caller under set -e dies of
    # a sed that cannot read it yet (the sanitizer CI phase did).
    : >"$log"
    "$perf" -l "$addr:0" "$@" >"$log" 2>&1 &
    SRV=$!
    PORT=
    for ((i = 0; i < 300; i++)); do
        PORT=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\) (uwarp).*/\1/p' "$log" || true)
        [ -n "$PORT" ] && return 0
        kill -0 "$SRV" 2>/dev/null || break
        sleep 0.1
    done
    echo "uwarp-perf server did not come up:" >&2
    cat "$log" >&2
    return 1
}
