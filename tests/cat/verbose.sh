#!/usr/bin/env bash
# uwarp-cat -v: the negotiated parameters as one JSON line on each side, for
# the MPA options (RFC 5044 7.1 CRC and markers, RFC 6581 IRD/ORD and
# peer-to-peer RTR), private data in both directions, and the failures of
# negotiation: reject (exit 3 with the peer's private data), no common RTR
# type, unsupported revision.
# usage: verbose.sh UWARP-CAT UWARP-RPING SILENT-PEER
CAT=${1:-} RPING=${2:-} PEER=${3:-}
. "$(dirname "$0")/lib.sh"

# pair NAME "RESPONDER OPTS" "INITIATOR OPTS" [IN_I [IN_R]]: one connection;
# sets IRC, RRC, IJ, RJ (the JSON lines), IERR, RERR.
pair() {
    local name=$1 ropts=$2 iopts=$3 in_i=${4:-/dev/null} in_r=${5:-/dev/null}
    # shellcheck disable=SC2086
    responder "$name.r" "$in_r" -v --timeout 10 $ropts
    # shellcheck disable=SC2086
    initiator "$name.i" "$in_i" "$RPORT" -v --timeout 10 $iopts
    wait_rc "$RPID" 20
    RRC=$WRC
    IJ=$(json_of "$name.i")
    RJ=$(json_of "$name.r")
    IERR=$(cat "$(f "$name.i").err")
    RERR=$(cat "$(f "$name.r").err")
}

# ok NAME "RESPONDER OPTS" "INITIATOR OPTS" WANT_I_JSON WANT_R_JSON
ok() {
    pair "$1" "$2" "$3"
    expect_eq "$1: initiator rc ($IERR)" 0 "$IRC"
    expect_eq "$1: responder rc ($RERR)" 0 "$RRC"
    expect_eq "$1: initiator JSON" "$4" "$IJ"
    expect_eq "$1: responder JSON" "$5" "$RJ"
}

j() { # j REV CRC MRX MTX IRD ORD P2P RTR PD
    printf '{"rev":%s,"crc":%s,"markers_rx":%s,"markers_tx":%s,"ird":%s,"ord":%s,"p2p":%s,"rtr":"%s","peer_pd":"%s"}' "$@"
}

D=$(j 2 true false false 16 16 false none "")
ok default "" "" "$D" "$D"
ok rev1 "--rev 1" "--rev 1" "$(j 1 true false false 16 16 false none "")" \
    "$(j 1 true false false 16 16 false none "")"
# The responder answers with the initiator's lower revision (RFC 6581 10).
ok "rev1 initiator, rev2 responder" "" "--rev 1" "$(j 1 true false false 16 16 false none "")" \
    "$(j 1 true false false 16 16 false none "")"
ok "no crc both" "--no-crc" "--no-crc" "$(j 2 false false false 16 16 false none "")" \
    "$(j 2 false false false 16 16 false none "")"
# RFC 5044 7.1.1: C from either side turns CRCs on.
ok "no crc one side" "--no-crc" "" "$D" "$D"
ok "no crc other side" "" "--no-crc" "$D" "$D"
# M asks the other side to mark what we receive.
ok "markers responder" "--markers" "" "$(j 2 true false true 16 16 false none "")" \
    "$(j 2 true true false 16 16 false none "")"
ok "markers initiator" "" "--markers" "$(j 2 true true false 16 16 false none "")" \
    "$(j 2 true false true 16 16 false none "")"
# RFC 6581 9.1: the responder's IRD covers the initiator's ORD when it can,
# its ORD stays within the initiator's IRD; the initiator lowers its ORD to
# the responder's IRD.
ok "ird/ord initiator" "" "--ird 4 --ord 8" "$(j 2 true false false 4 8 false none "")" \
    "$(j 2 true false false 8 4 false none "")"
ok "ird/ord both" "--ird 2 --ord 3" "--ird 4 --ord 8" "$(j 2 true false false 4 2 false none "")" \
    "$(j 2 true false false 2 3 false none "")"
# Peer-to-peer with each RTR type (RFC 6581 7.1).
for t in send write read; do
    ok "p2p $t" "--p2p $t" "--p2p $t" "$(j 2 true false false 16 16 true $t "")" \
        "$(j 2 true false false 16 16 true $t "")"
done
ok "p2p offer all, accept read" "--p2p read" "--p2p send,write,read" \
    "$(j 2 true false false 16 16 true read "")" "$(j 2 true false false 16 16 true read "")"

# Data still flows after each RTR type, both ways.
head -c 300000 /dev/urandom >"$TMP/x.bin"
head -c 200000 /dev/urandom >"$TMP/y.bin"
for t in send write read; do
    pair "p2p data $t" "--p2p $t" "--p2p $t" "$TMP/x.bin" "$TMP/y.bin"
    expect_eq "p2p data $t: rcs ($IERR / $RERR)" "0 0" "$IRC $RRC"
    expect_true "p2p data $t: to responder" cmp -s "$TMP/x.bin" "$(f "p2p data $t.r").out"
    expect_true "p2p data $t: to initiator" cmp -s "$TMP/y.bin" "$(f "p2p data $t.i").out"
done

# Private data both ways (the RFC 6581 word is not part of it), up to the
# Rev 2 limit of 512 - 4 octets and the Rev 1 limit of 512.
ok "private data" "--pd aabb" "--pd 0102030405" "$(j 2 true false false 16 16 false none aabb)" \
    "$(j 2 true false false 16 16 false none 0102030405)"
BIG=$(head -c 508 /dev/urandom | od -An -tx1 -v | tr -d ' \n')
ok "private data 508" "" "--pd $BIG" "$D" "$(j 2 true false false 16 16 false none "$BIG")"
BIG1=$(head -c 512 /dev/urandom | od -An -tx1 -v | tr -d ' \n')
ok "private data 512 rev 1" "--rev 1 --pd $BIG1" "--rev 1" \
    "$(j 1 true false false 16 16 false none "$BIG1")" "$(j 1 true false false 16 16 false none "")"

# Reject: the initiator exits 3 and shows the responder's private data.
pair reject "--reject --pd deadbeef" "--pd 01"
expect_eq "reject: initiator rc ($IERR)" 3 "$IRC"
expect_contains "reject: peer private data shown" "deadbeef" "$IERR"
expect_eq "reject: responder rc ($RERR)" 0 "$RRC"
expect_eq "reject: no JSON" "" "$IJ"
pair "reject no pd" "--reject" ""
expect_eq "reject without pd: initiator rc ($IERR)" 3 "$IRC"

# No RTR type in common: the initiator sends a Terminate with LLP/MPA error
# code 7 (RFC 6581 9.2) and both sides name it.
pair "p2p mismatch" "--p2p send" "--p2p write"
expect_eq "p2p mismatch: initiator rc" 2 "$IRC"
expect_eq "p2p mismatch: responder rc" 2 "$RRC"
expect_contains "p2p mismatch: initiator names code 7" "code 0x07" "$IERR"
expect_contains "p2p mismatch: initiator names the RFC error" "no matching RTR" "$IERR"
expect_contains "p2p mismatch: responder names code 7" "code 0x07" "$RERR"

# A Rev 1 responder cannot speak Rev 2 and closes (RFC 6581 10).
pair "rev mismatch" "--rev 1" ""
expect_eq "rev mismatch: initiator rc ($IERR)" 2 "$IRC"
expect_eq "rev mismatch: responder rc" 2 "$RRC"
expect_contains "rev mismatch: responder names the error" "EMPA_REV" "$RERR"

finish
