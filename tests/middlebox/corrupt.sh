#!/usr/bin/env bash
# One flipped bit somewhere in the data stream (after the MPA exchange):
# the receiver must report MPA error 2 (CRC) and send a Terminate, the sender
# must receive it, and no damaged octet may reach a completion or the Write
# target (mb_peer checks every octet). Several seeds, with and without
# markers, and with re-segmentation on top.
source "$(dirname "$0")/lib.sh"
for seed in 1 2 3 4 5 6; do
  run_case corrupt-$seed $((8 << 20)) "--expect-crc-error" "--expect-term" \
    "--dir c2s --corrupt 1 --corrupt-after 4096 --corrupt-span $((4 << 20)) --seed $seed"
done
for seed in 7 8; do
  run_case corrupt-mk-$seed $((8 << 20)) "--markers --expect-crc-error" "--markers --expect-term" \
    "--dir c2s --corrupt 1 --corrupt-after 4096 --corrupt-span $((4 << 20)) --seed $seed"
done
run_case corrupt-split $((8 << 20)) "--expect-crc-error" "--expect-term" \
  "--dir c2s --split --corrupt 1 --corrupt-after 4096 --corrupt-span $((4 << 20)) --seed 9"
echo "corrupt: every corruption was caught as an MPA CRC error"
