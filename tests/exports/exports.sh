#!/usr/bin/env bash
# exports.sh LIBUWARP.SO CC INCLUDE-DIR RUN(0|1)
# Fails on any defined dynamic symbol that is not part of the public uw_*
# API (an internal uw__* function included), or when the API is missing.
set -euo pipefail
lib=$1 cc=$2 inc=$3 run=$4
command -v nm >/dev/null || { echo "nm not found (binutils)"; exit 1; }
syms=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u)
bad=$(grep -v '^uw_[a-z0-9]' <<<"$syms" || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib exports symbols outside the uw_* API:"
  sed 's/^/  /' <<<"$bad"
  exit 1
fi
for want in uw_ctx_create uw_qp_destroy uw_strerror uw_crc32c uw_mpa_fpdu_encode uw_sdp_socket; do
  grep -qx "$want" <<<"$syms" || { echo "FAIL: $lib does not export $want"; exit 1; }
done
echo "exports: $(wc -l <<<"$syms") symbols, all uw_*"
[ "$run" = 1 ] || exit 0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/consumer.c" <<'C'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <uwarp/crc32c.h>
#include <uwarp/verbs.h>
int main(void)
{
    uw_ctx *c;
    if (uw_ctx_create(&c, NULL) != 0 || uw_ctx_destroy(c) != 0)
        return 1;
    if (uw_crc32c("123456789", 9) != 0xE3069283u || !strcmp(uw_strerror(-EMFILE), "unknown error"))
        return 1;
    puts("consumer ok");
    return 0;
}
C
"$cc" -std=c17 -D_POSIX_C_SOURCE=200809L -I"$inc" "$tmp/consumer.c" -o "$tmp/consumer" \
  -L"$(dirname "$lib")" -l:"$(basename "$lib")" -Wl,-rpath,"$(dirname "$lib")"
"$tmp/consumer"
