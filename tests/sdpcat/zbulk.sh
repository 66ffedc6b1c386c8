#!/usr/bin/env bash
# Zero copy in bulk between two uwarp-sdpcat processes: 1 GiB one way by
# each mechanism (Read Zcopy in Combined Mode; Write Zcopy into the
# receiver's SinkAvails in Pipelined Mode; a mix of odd send and receive
# sizes under the library's mode policy), byte-identical at the far end,
# with the counters showing the mechanism really carried it; then zero copy
# through the re-segmenting proxy (intact) and the corrupting one (an error
# on both sides, no damaged octet written). UW_ZBULK_MIB sets the size (the
# sanitizer build uses less).
. "$(dirname "$0")/lib.sh"

MIB=${UW_ZBULK_MIB:-1024}
SIZE=$((MIB << 20))
head -c "$SIZE" /dev/urandom >"$TMP/z.bin"
SUM=$(sha256sum <"$TMP/z.bin" | cut -d' ' -f1)
Z="-v --timeout 30 --zcopy-min 65536"

# zrun NAME "LISTENER OPTS" "CONNECTOR OPTS": the connector sends z.bin.
zrun() {
    local t0=$EPOCHREALTIME
    pair "$1" /dev/null "$TMP/z.bin" "$2" "$3" 600
    expect_eq "$1: connector rc ($(errs "$1"))" 0 "$CRC"
    expect_eq "$1: listener rc ($(errs "$1"))" 0 "$LRC"
    expect_eq "$1: SHA-256 of what arrived" "$SUM" "$(sha256sum <"$(f "$1.l").out" | cut -d' ' -f1)"
    ZC=$(json_line "$(f "$1.c").err" sent)
    ZL=$(json_line "$(f "$1.l").err" sent)
    expect_eq "$1: the sender's octets, copied or taken" "$SIZE" \
        "$(($(json_get "$ZC" bcopy_bytes) + $(json_get "$ZC" zcopy_bytes)))"
    echo "$1: $MIB MiB in $(ms_since "$t0") ms; sender $ZC"
}

# gt NAME WHAT VALUE MIN: VALUE > MIN.
gt() {
    CHECKS=$((CHECKS + 1))
    [ "$3" -gt "$4" ] 2>/dev/null || fail "$1: $2 > $4 (is $3)"
}

zrun read "$Z --recv-size 1048576" "$Z --chunk 1048576 --mode combined"
gt read "receiver's rdma_read_bytes" "$(json_get "$ZL" rdma_read_bytes)" $((SIZE / 2))
expect_eq "read: sender's rdma_write_bytes" 0 "$(json_get "$ZC" rdma_write_bytes)"

zrun write "$Z --recv-size 1048576 --sink-avail" "$Z --chunk 1048576 --mode pipelined"
gt write "receiver's sinkavail_sent" "$(json_get "$ZL" sinkavail_sent)" 0
gt write "sender's rdma_write_bytes" "$(json_get "$ZC" rdma_write_bytes)" 0

# Sizes that fit nothing: sends of 777,777 octets into receives of 300,000,
# the modes left to the policy (REQ_PIPE takes the sender to Pipelined).
zrun mix "$Z --recv-size 300000 --sink-avail" "$Z --chunk 777777"
gt mix "sender's zcopy_bytes" "$(json_get "$ZC" zcopy_bytes)" 0

# Through the proxy: re-segmented, then one flipped bit.
head -c $((64 << 20)) /dev/urandom >"$TMP/p.bin"
pv() { # NAME "PROXY OPTS"
    proxied "$1" "$2" /dev/null "$TMP/p.bin" "$Z --recv-size 1048576" "$Z --chunk 1048576"
}
pv zsplit "--split --seed 11"
expect_eq "zsplit: connector rc ($(errs zsplit))" 0 "$CRC"
expect_eq "zsplit: listener rc ($(errs zsplit))" 0 "$LRC"
expect_true "zsplit: intact" same "$TMP/p.bin" "$(f zsplit.l).out"
gt zsplit "receiver's rdma_read_bytes" "$(json_get "$(json_line "$(f zsplit.l).err" sent)" rdma_read_bytes)" 0
pv zcorrupt "--dir c2s --corrupt 1 --corrupt-after $((1 << 20)) --corrupt-span $((32 << 20)) --seed 12"
expect_eq "zcorrupt: the proxy corrupted one octet" 1 "$(grep -c 'offset=' "$(f zcorrupt).plog" 2>/dev/null)"
expect_in "zcorrupt: connector rc ($(errs zcorrupt))" "2 5" "$CRC"
expect_in "zcorrupt: listener rc ($(errs zcorrupt))" "2 5" "$LRC"
expect_true "zcorrupt: what the listener wrote is a prefix of what was sent" \
    is_prefix "$(f zcorrupt.l).out" "$TMP/p.bin"
finish
