#!/usr/bin/env bash
# The committed pm_* fuzz seeds are exactly what tests/pm/pm_seeds.c writes,
# so the generator cannot drift from the corpus (or the corpus from the
# fuzzers' input formats it documents).
set -u
GEN=$1
CORPUS=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uwarp-pmseeds.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
timeout 30 "$GEN" "$TMP" || { echo "FAIL: pm_seeds failed" >&2; exit 1; }
rc=0
for f in "$TMP"/*/*; do
    rel=${f#"$TMP"/}
    if ! cmp -s "$f" "$CORPUS/$rel"; then
        echo "FAIL: $rel differs from the committed seed (run: pm_seeds tests/fuzz/corpus)" >&2
        rc=1
    fi
done
[ $rc = 0 ] && echo "all $(ls "$TMP"/*/* | wc -l) seeds match"
exit $rc
