#!/usr/bin/env bash
# 256 MiB each way at the same time between two uwarp-sdpcat processes,
# byte-identical at the far ends (SHA-256), both exiting 0.
. "$(dirname "$0")/lib.sh"

SIZE=$((256 << 20))
head -c "$SIZE" /dev/urandom >"$TMP/a.bin"
head -c "$SIZE" /dev/urandom >"$TMP/b.bin"
t0=$EPOCHREALTIME
pair bulk "$TMP/b.bin" "$TMP/a.bin" "-v --timeout 30" "-v --timeout 30" 400
ms=$(ms_since "$t0")
expect_eq "bulk: connector rc ($(errs bulk))" 0 "$CRC"
expect_eq "bulk: listener rc ($(errs bulk))" 0 "$LRC"
sa=$(sha256sum <"$TMP/a.bin" | cut -d' ' -f1)
sb=$(sha256sum <"$TMP/b.bin" | cut -d' ' -f1)
expect_eq "bulk: connector -> listener SHA-256" "$sa" "$(sha256sum <"$(f bulk.l).out" | cut -d' ' -f1)"
expect_eq "bulk: listener -> connector SHA-256" "$sb" "$(sha256sum <"$(f bulk.c).out" | cut -d' ' -f1)"
cx=$(json_line "$(f bulk.c).err" sent)
expect_eq "bulk: connector sent" "$SIZE" "$(json_get "$cx" sent)"
expect_eq "bulk: connector received" "$SIZE" "$(json_get "$cx" received)"
echo "bulk: 2 x 256 MiB in $ms ms; connector: $cx"
finish
