# Assertions shared by the shell tests (sourced by tests/*/lib.sh). Each
# check counts in CHECKS; a failed one prints why and counts in FAILS, and
# the test's summary decides the exit status.

fail() {
    echo "FAIL: $*" >&2
    FAILS=$((FAILS + 1))
}

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
    CHECKS=$((CHECKS + 1))
    if [ "$2" != "$3" ]; then
        fail "$1"
        printf '  expected: %s\n  actual:   %s\n' "$2" "$3" >&2
    fi
}

# expect_contains NAME NEEDLE HAYSTACK
expect_contains() {
    CHECKS=$((CHECKS + 1))
    case "$3" in
    *"$2"*) ;;
    *)
        fail "$1"
        printf '  expected to contain: %s\n  actual: %s\n' "$2" "$3" >&2
        ;;
    esac
}

# expect_true NAME COMMAND...: the command succeeds.
expect_true() {
    local name=$1
    shift
    CHECKS=$((CHECKS + 1))
    if ! "$@"; then
        fail "$name"
        printf '  command failed: %s\n' "$*" >&2
    fi
}
