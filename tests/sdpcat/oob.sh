#!/usr/bin/env bash
# Urgent data: --oob-at N sends stdin octet N alone with MSG_OOB. With
# --oob-out FILE the receiver writes it to FILE and the stream lacks it;
# without, it stays in the stream (SO_OOBINLINE).
. "$(dirname "$0")/lib.sh"

head -c 5000 /dev/urandom >"$TMP/a.bin"
head -c 200000 /dev/urandom >"$TMP/big.bin"

# oob NAME FILE OFFSET: out-of-line, then inline, urgent octet at OFFSET.
oob() {
    local name=$1 in=$2 at=$3
    # Out of line: the listener receives.
    pair "$name" /dev/null "$in" "-v --timeout 10 --oob-out $TMP/$name.urg" \
        "-v --timeout 10 --oob-at $at"
    expect_eq "$name: connector rc ($(errs "$name"))" 0 "$CRC"
    expect_eq "$name: listener rc ($(errs "$name"))" 0 "$LRC"
    head -c "$at" "$in" >"$TMP/want"
    tail -c +"$((at + 2))" "$in" >>"$TMP/want"
    expect_true "$name: the stream lacks the urgent octet" same "$TMP/want" "$(f "$name.l").out"
    expect_eq "$name: the urgent octet is in the file" \
        "$(tail -c +"$((at + 1))" "$in" | head -c 1 | od -An -tx1 | tr -d ' ')" \
        "$(od -An -tx1 "$TMP/$name.urg" | tr -d ' \n')"
    expect_eq "$name: oob_sent" 1 "$(json_get "$(json_line "$(f "$name.c").err" sent)" oob_sent)"
    expect_eq "$name: oob_received" 1 \
        "$(json_get "$(json_line "$(f "$name.l").err" sent)" oob_received)"
    # Inline: the connector receives, the stream is unchanged.
    pair "$name-inline" "$in" /dev/null "-v --timeout 10 --oob-at $at" "-v --timeout 10"
    expect_eq "$name inline: connector rc ($(errs "$name-inline"))" 0 "$CRC"
    expect_eq "$name inline: listener rc ($(errs "$name-inline"))" 0 "$LRC"
    expect_true "$name inline: the stream is whole" same "$in" "$(f "$name-inline.c").out"
}
oob small "$TMP/a.bin" 1000
oob first "$TMP/a.bin" 0
oob big "$TMP/big.bin" 150000

finish
