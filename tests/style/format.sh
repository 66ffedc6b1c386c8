#!/usr/bin/env bash
# Every C source and header is as clang-format (.clang-format) leaves it, so
# a change carries no reformatting noise. `cmake --build B --target format`
# fixes what this reports.
# usage: format.sh SOURCE-DIR
set -u
SRC=${1:?usage: $0 SOURCE-DIR}
if ! command -v clang-format >/dev/null 2>&1; then
    echo "SKIP: clang-format is not installed (scripts/deps.sh installs it)"
    exit 77
fi
cd "$SRC" || exit 1
bad=0
total=0
while IFS= read -r f; do
    total=$((total + 1))
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f"
        bad=$((bad + 1))
    fi
done < <(find include src tools bench tests -name '*.[ch]' | sort)
echo "$((total - bad)) of $total files formatted"
[ "$bad" -eq 0 ] || { echo "FAIL: run: cmake --build BUILD --target format"; exit 1; }
