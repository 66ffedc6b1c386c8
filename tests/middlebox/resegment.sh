#!/usr/bin/env bash
# 256 MiB of Sends (plus interleaved RDMA Writes) through a proxy that splits
# and coalesces at random in both directions: no error, every octet checked.
source "$(dirname "$0")/lib.sh"
run_case split-crc $((256 << 20)) "" "" "--split --max-seg 4096 --seed 11"
run_case split-markers $((32 << 20)) "--markers" "--markers" "--split --max-seg 1500 --seed 12"
run_case split-nocrc-tiny $((4 << 20)) "--no-crc" "--no-crc" "--split --max-seg 7 --seed 13"
echo "resegment: all cases passed"
