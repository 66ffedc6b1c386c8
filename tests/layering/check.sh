#!/usr/bin/env bash
# The protocol cores are sans-I/O (docs/design.md): no sockets, epoll,
# eventfds or timers, and no include of a layer above them (<poll.h> is
# fine: the SDP core speaks readiness in its bits). Usage:
#   check.sh SRC_DIR          check src/{mpa,pm,sdp,rdmap}
#   check.sh --self-test      prove the check catches each kind of include
set -euo pipefail

# check_core DIR CORE: prints each forbidden include; returns 1 if any.
check_core() {
    local dir=$1 core=$2 bad=0 f line
    # Layers: a core may include its own and, for rdmap, mpa (util and
    # include/uwarp are open to all).
    local up='"(io|verbs|preload|sdp|rdmap|pm|mpa)/'
    for f in "$dir"/*.[ch]; do
        [ -e "$f" ] || continue
        while IFS= read -r line; do
            case "$line" in
            *'<sys/socket.h>'* | *'<sys/epoll.h>'* | *'<sys/eventfd.h>'* | *'<sys/timerfd.h>'*)
                echo "$f: $line (a core does no I/O)"
                bad=1
                ;;
            esac
            if [[ $line =~ ^#include\ \"\.\. ]]; then
                echo "$f: $line (a path out of the core's directory)"
                bad=1
            fi
            if [[ $line =~ ^#include\ $up ]]; then
                local target=${line#*\"}
                target=${target%%/*}
                case "$core:$target" in
                "$core:$core" | "rdmap:mpa") ;;
                *)
                    echo "$f: $line (not a layer below $core)"
                    bad=1
                    ;;
                esac
            fi
        done < <(grep -E '^#include' "$f")
    done
    return $bad
}

# io_free DIR: no I/O header and no clock read in DIR (src/verbs: its
# objects are plain data; io/ owns the descriptors and the clock).
io_free() {
    local bad=0
    if grep -nE '^#include <sys/(socket|epoll|eventfd|timerfd)\.h>|clock_gettime\(' "$1"/*.[ch]; then
        bad=1
    fi
    return $bad
}

if [ "${1:-}" = --self-test ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/sdp"
    fails=0
    for inc in '<sys/socket.h>' '<sys/epoll.h>' '"io/engine.h"' '"verbs/internal.h"' '"rdmap/wire.h"' \
        '"../io/engine.h"'; do
        printf '#include %s\n' "$inc" >"$tmp/sdp/x.c"
        if check_core "$tmp/sdp" sdp >/dev/null; then
            echo "FAIL: self-test: #include $inc in an SDP core file was not caught"
            fails=1
        fi
    done
    # The RDMAP core sees its protocol object, never the engine's QP.
    mkdir -p "$tmp/rdmap"
    for inc in '"verbs/internal.h"' '"io/engine.h"' '<sys/socket.h>'; do
        printf '#include %s\n' "$inc" >"$tmp/rdmap/x.c"
        if check_core "$tmp/rdmap" rdmap >/dev/null; then
            echo "FAIL: self-test: #include $inc in an RDMAP core file was not caught"
            fails=1
        fi
    done
    printf '#include "rdmap/rdmap.h"\n#include "mpa/fpdu_walk.h"\n#include "util/cq_ring.h"\n' >"$tmp/rdmap/x.c"
    check_core "$tmp/rdmap" rdmap || { echo "FAIL: self-test: a clean RDMAP file was refused"; fails=1; }
    printf '#include "sdp/conn.h"\n#include "util/alloc.h"\n#include <string.h>\n' >"$tmp/sdp/x.c"
    check_core "$tmp/sdp" sdp || { echo "FAIL: self-test: a clean file was refused"; fails=1; }
    mkdir -p "$tmp/verbs"
    printf 'static long t(void) { struct timespec ts; clock_gettime(0, &ts); return 0; }\n' >"$tmp/verbs/x.c"
    if io_free "$tmp/verbs" >/dev/null; then
        echo "FAIL: self-test: a clock read in verbs was not caught"
        fails=1
    fi
    [ $fails = 0 ] && echo "layering self-test: every kind of forbidden include is caught"
    exit $fails
fi

SRC=${1:?usage: check.sh SRC_DIR | --self-test}
rc=0
for core in mpa pm sdp rdmap; do
    if check_core "$SRC/$core" "$core"; then
        echo "ok: src/$core includes no I/O header and no layer above it"
    else
        rc=1
    fi
done
if io_free "$SRC/verbs"; then
    echo "ok: src/verbs includes no I/O header and reads no clock"
else
    echo "src/verbs: I/O belongs in src/io"
    rc=1
fi
exit $rc
