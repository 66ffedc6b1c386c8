#!/usr/bin/env bash
# uwarp-sdpcat through uwarp-testproxy: re-segmented streams arrive intact;
# a flipped bit anywhere after setup ends the connection with an error on
# both sides (exit 2 or 5), and no damaged octet reaches stdout: what each
# side wrote is a prefix of what the other sent.
. "$(dirname "$0")/lib.sh"

head -c $((16 << 20)) /dev/urandom >"$TMP/a.bin"
head -c $((8 << 20)) /dev/urandom >"$TMP/b.bin"

# via NAME "PROXY OPTS": listener <- proxy <- connector, 16 MiB from the
# connector and 8 MiB back at the same time (files $A and $B if set).
via() {
    proxied "$1" "$2" "${B:-$TMP/b.bin}" "${A:-$TMP/a.bin}" "--timeout 15" "--timeout 15"
}

for seed in 1 2 3; do
    via "split-$seed" "--split --seed $seed"
    expect_eq "split $seed: connector rc ($(errs "split-$seed"))" 0 "$CRC"
    expect_eq "split $seed: listener rc ($(errs "split-$seed"))" 0 "$LRC"
    expect_true "split $seed: connector -> listener intact" same "$TMP/a.bin" "$(f "split-$seed.l").out"
    expect_true "split $seed: listener -> connector intact" same "$TMP/b.bin" "$(f "split-$seed.c").out"
done
# Tiny segments (1..7 octets) cost a system call each: 1 MiB one way only.
head -c $((1 << 20)) /dev/urandom >"$TMP/small.bin"
A=$TMP/small.bin B=/dev/null via split-small "--split --max-seg 7 --seed 4"
expect_eq "split 1..7: connector rc ($(errs split-small))" 0 "$CRC"
expect_eq "split 1..7: listener rc ($(errs split-small))" 0 "$LRC"
expect_true "split 1..7: intact" same "$TMP/small.bin" "$(f split-small.l).out"

# corrupt NAME DIR SEED [more proxy options]
corrupt() {
    local name=$1 dir=$2 seed=$3
    shift 3
    via "$name" "--dir $dir --corrupt 1 --corrupt-after 4096 --corrupt-span $((4 << 20)) --seed $seed $*"
    local hits
    hits=$(grep -c 'offset=' "$(f "$name").plog" 2>/dev/null)
    expect_eq "$name: the proxy corrupted one octet" 1 "$hits"
    expect_in "$name: connector rc ($(errs "$name"))" "2 5" "$CRC"
    expect_in "$name: listener rc ($(errs "$name"))" "2 5" "$LRC"
    expect_true "$name: listener's output is a prefix of what was sent" \
        is_prefix "$(f "$name.l").out" "$TMP/a.bin"
    expect_true "$name: connector's output is a prefix of what was sent" \
        is_prefix "$(f "$name.c").out" "$TMP/b.bin"
}
for seed in 1 2 3 4; do
    corrupt "corrupt-c2s-$seed" c2s "$seed"
done
for seed in 5 6; do
    corrupt "corrupt-s2c-$seed" s2c "$seed"
done
corrupt corrupt-split c2s 7 --split

finish
