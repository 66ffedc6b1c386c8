#!/usr/bin/env bash
# Installs the build tree into a scratch prefix and builds a consumer program
# through pkg-config, the way a downstream project would.
set -euo pipefail
build=$1
cc=${2:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$(find "$tmp/prefix" -name uwarp.pc)")
cat > "$tmp/consumer.c" <<'C'
#include <stdio.h>
#include <uwarp/crc32c.h>
#include <uwarp/mpa.h>
int main(void)
{
    uint8_t out[64], u[4] = {1, 2, 3, 4};
    ssize_t n = uw_mpa_fpdu_encode(out, sizeof(out), u, sizeof(u), 0, UW_MPA_CRC | UW_MPA_MARKERS);
    if (uw_crc32c("123456789", 9) != 0xE3069283u || n != 16)
        return 1;
    puts("consumer ok");
    return 0;
}
C
# shellcheck disable=SC2046
"$cc" -std=c17 -D_POSIX_C_SOURCE=200809L "$tmp/consumer.c" -o "$tmp/consumer" \
    $(pkg-config --cflags --libs --static uwarp)
"$tmp/consumer"
test -x "$tmp/prefix/bin/uwarp-mpa"
"$tmp/prefix/bin/uwarp-mpa" --help >/dev/null
echo "install ok: $(pkg-config --modversion uwarp)"
