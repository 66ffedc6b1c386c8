# Background processes and scratch files for the shell tests (sourced by
# tests/*/lib.sh, which set TMP).

# f NAME: the file-name stem for a case name (spaces and slashes allowed in
# names).
f() {
    echo "$TMP/${1//[^A-Za-z0-9._-]/_}"
}

# wait_port FILE: prints the port of the first "listening on ADDR:PORT" line
# of FILE (a stderr log); fails, printing nothing, after 10 s.
wait_port() {
    local i
    for ((i = 0; i < 200; i++)); do
        if grep -q 'listening on' "$1" 2>/dev/null; then
            sed -n 's/.*listening on .*:\([0-9][0-9]*\)$/\1/p' "$1" | head -n1
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# wait_rc PID SECS: waits for a background job of this shell (not in a
# subshell: only the parent can reap it); sets WRC to its exit status, or to
# 124 after killing it when it outlives SECS.
wait_rc() {
    local pid=$1 secs=$2 i
    for ((i = 0; i < secs * 20; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            WRC=$?
            return
        fi
        sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    WRC=124
}
