#!/usr/bin/env bash
# Wireshark's iWARP dissectors (tshark 4.0) decode captured uwarp-cat traffic
# in both directions: MPA Rev 1 and Rev 2, CRC on, markers off and on. For
# every case: the Request and Reply are decoded, every FPDU has a good CRC,
# no frame is malformed and no expert info of severity Error appears, and per
# direction the Send messages (DDP segments with L=1) have MSNs 1..N and
# carry exactly the bytes sent. The initiator's first message is uwarp-cat's
# opening empty Send (RFC 5044 7.1.2; see uwarp-cat --help), so it sends one
# message more than its data needs.
# Skips (exit 77) when tshark is missing or may not capture on lo.
# usage: tshark.sh UWARP-CAT UWARP-RPING SILENT-PEER
CAT=${1:-} RPING=${2:-} PEER=${3:-}
. "$(dirname "$0")/lib.sh"

if ! command -v tshark >/dev/null 2>&1; then
    echo "SKIP: tshark is not installed (scripts/deps.sh installs it)"
    exit 77
fi

# Wireshark's TLS heuristic claims MPA streams, and the RPC-over-RDMA and
# SMB Direct heuristics claim random Send payloads: only iWARP may decode.
DECODE=(--disable-protocol tls --disable-protocol rpcordma --disable-protocol smb_direct)

# The capture is bracketed by UDP datagrams to a port nobody listens on.
# dumpcap says "Capturing on" before it reads anything, and stops reading at
# SIGINT with packets still queued for it; under load (ASan, ctest -j2) it
# lags the traffic by seconds, and fixed pauses lost the first packets or a
# 32 KiB segment in the middle of a case. A datagram sent before the
# connection and one sent after it are in the file only once dumpcap has
# read everything before them.
SENTINEL_PORT=9 # discard

# sentinel NAME WORD: sends WORD and waits (up to 30 s) until the capture file
# holds it. Returns 1 if it never shows up.
sentinel() {
    local name=$1 word=$2 i
    for ((i = 0; i < 60; i++)); do
        echo "$word" >/dev/udp/127.0.0.1/$SENTINEL_PORT 2>/dev/null || true
        sleep 0.5
        if tshark -r "$TMP/$name.pcapng" -Y "udp.dstport == $SENTINEL_PORT" -T fields -e data.text \
            -o data.show_as_text:TRUE 2>/dev/null | grep -q "$word"; then
            return 0
        fi
    done
    return 1
}

# capture NAME PORT: starts tshark on lo for PORT; sets TSPID once it
# captures. Exits 77 when capturing is not permitted.
capture() {
    local name=$1 port=$2 i
    tshark -i lo -B 64 -f "tcp port $port or (udp dst port $SENTINEL_PORT)" \
        -w "$TMP/$name.pcapng" 2>"$TMP/$name.tshark.err" &
    TSPID=$!
    BG_PIDS+=("$TSPID")
    for ((i = 0; i < 200; i++)); do
        if grep -q "Capturing on" "$TMP/$name.tshark.err" 2>/dev/null; then
            sentinel "$name" "start-$name" && return
            echo "SKIP: tshark captured nothing on lo in 30 s"
            exit 77
        fi
        if ! kill -0 "$TSPID" 2>/dev/null; then
            echo "SKIP: cannot capture on lo: $(cat "$TMP/$name.tshark.err")"
            exit 77
        fi
        sleep 0.05
    done
    echo "SKIP: tshark did not start capturing: $(cat "$TMP/$name.tshark.err")"
    exit 77
}

stop_capture() {
    local name=$1
    sentinel "$name" "end-$name" || fail "$name: the capture did not catch up in 30 s"
    kill -INT "$TSPID" 2>/dev/null
    wait_rc "$TSPID" 10
}

# check_capture NAME REV IN_I IN_R MSGS_I MSGS_R: decodes $TMP/NAME.pcapng
# and checks it against the files each side sent and their message counts.
# Returns 2, counting nothing, when the only fault is a direction whose
# decoded FPDUs fall short of what was sent while every decoded one is
# good: on a loaded machine (the sanitizer build running beside other
# tests) tshark once left one 32 KiB FPDU of a correct stream undecoded,
# and the receiver had checked that FPDU's CRC and data. A fault of ours
# would repeat; run_case runs the case once more and fails it then.
check_capture() {
    local name=$1 rev=$2 in_i=$3 in_r=$4 msgs_i=$5 msgs_r=$6
    local pcap=$TMP/$name.pcapng txt=$TMP/$name.txt
    # The initiator is the side that sent the MPA Request.
    IPORT=$(tshark -r "$pcap" "${DECODE[@]}" -Y iwarp_mpa.req -T fields -e tcp.srcport 2>/dev/null |
        head -n1)
    tshark -r "$pcap" "${DECODE[@]}" -V >"$txt" 2>&1
    local fpdus good bad nocrc lost
    # Segments the capture itself missed (dumpcap drops under load, e.g.
    # beside iperf3 on the same loopback) make tshark reassemble garbage:
    # bad CRCs on FPDUs the receiver checked good. That is the capture's
    # fault: run the case again (once) rather than blame the stream.
    lost=$(tshark -r "$pcap" -Y "tcp.analysis.lost_segment || tcp.analysis.ack_lost_segment" \
        2>/dev/null | wc -l)
    if [ "$lost" -gt 0 ] && [ -z "${RETRIED:-}" ]; then
        echo "note: $name: the capture missed $lost segment(s)" >&2
        return 2
    fi
    fpdus=$(grep -c '^ *ULPDU length:' "$txt")
    good=$(grep -c '^ *CRC check: 0x[0-9a-f]* (Good CRC32)' "$txt")
    bad=$(grep -c 'Bad CRC32' "$txt")
    nocrc=$(grep -c '^ *CRC: 0x' "$txt")
    expect_eq "$name: Request and Reply decoded" "1 1" \
        "$(grep -c 'Request frame header' "$txt") $(grep -c 'Reply frame header' "$txt")"
    expect_eq "$name: revision in both frames" 2 "$(grep -c "^ *Revision: $rev\$" "$txt")"
    CHECKS=$((CHECKS + 1))
    [ "$fpdus" -ge $((msgs_i + msgs_r)) ] || fail "$name: only $fpdus FPDUs decoded"
    expect_eq "$name: every FPDU has a good CRC" "$fpdus $fpdus 0 0" "$fpdus $good $bad $nocrc"
    expect_eq "$name: no malformed frame" 0 "$(grep -ci 'malformed' "$txt")"
    expect_eq "$name: no expert errors" 0 "$(grep -c 'Expert Info (Error' "$txt")"
    # Per direction: source port, then per FPDU the ULPDU length, L flag,
    # opcode and MSN (one TCP segment may carry several FPDUs).
    tshark -r "$pcap" "${DECODE[@]}" -T fields -E occurrence=a -E aggregator=' ' \
        -e tcp.srcport -e iwarp_mpa.ulpdulength -e iwarp_ddp.last_flag -e iwarp_rdma.opcode \
        -e iwarp_ddp.msn >"$TMP/$name.fields" 2>/dev/null
    local dir port in msgs summary short=
    for dir in i r; do
        if [ "$dir" = i ]; then
            port=$IPORT in=$in_i msgs=$msgs_i
        else
            port=$RPORT in=$in_r msgs=$msgs_r
        fi
        # Untagged Send header: DDP (2 + 4 + 12) octets including RDMAP's
        # control octet, so payload = ULPDU_Length - 18.
        summary=$(awk -F'\t' -v port="$port" '
            $1 == port && NF >= 5 {
                n = split($2, len, " "); split($3, last, " "); split($4, op, " "); split($5, msn, " ")
                for (k = 1; k <= n; k++) {
                    if (op[k] != "0x03") { other++; continue }
                    segs++; bytes += len[k] - 18
                    if (last[k] == "1" || last[k] == "True") {
                        msgs++
                        if (msn[k] != msgs) badmsn++
                    }
                }
            }
            END { printf "%d %d %d %d", msgs, bytes, badmsn, other }' "$TMP/$name.fields")
        local want="$msgs $(wc -c <"$in") 0 0"
        if [ "$summary" != "$want" ] && [ -z "${RETRIED:-}" ] && [ "$bad" = 0 ] &&
            [ "$good" = "$fpdus" ] && [ "${summary%% *}" = "$msgs" ]; then
            echo "note: $name: $dir->: tshark decoded less than was sent" \
                "(expected $want, got $summary); per segment:" >&2
            awk -F'\t' -v port="$port" '$1 == port && $2 != "" { print "  " $2 }' \
                "$TMP/$name.fields" >&2
            short=1
            continue
        fi
        expect_eq "$name: $dir->: messages, payload octets, MSN faults, other opcodes" \
            "$want" "$summary"
    done
    [ -z "$short" ] || return 2
}

# run_case NAME REV OPTS_STRING IN_I IN_R MSGS_I MSGS_R [PACED_MSG_SIZE]
# With PACED_MSG_SIZE, stdin is fed one message every 10 ms so that each
# FPDU travels in its own TCP segment (see the markers case below).
run_case() {
    local name=$1 rev=$2 opts=$3 in_i=$4 in_r=$5 msgs_i=$6 msgs_r=$7 paced=${8:-}
    local src_i=$in_i src_r=$in_r
    if [ -n "$paced" ]; then
        src_i=$TMP/$name.fifo_i src_r=$TMP/$name.fifo_r
        mkfifo "$src_i" "$src_r"
        pace "$in_i" "$paced" "$(f "$name.i").err" >"$src_i" &
        BG_PIDS+=("$!")
        pace "$in_r" "$paced" "$(f "$name.r").err" >"$src_r" &
        BG_PIDS+=("$!")
    fi
    # shellcheck disable=SC2086
    responder "$name.r" "$src_r" -v --timeout 20 --rev "$rev" $opts
    [ -n "$RPORT" ] || return
    capture "$name" "$RPORT"
    # shellcheck disable=SC2086
    "$CAT" -v --timeout 20 --rev "$rev" $opts 127.0.0.1 "$RPORT" <"$src_i" \
        >"$(f "$name.i").out" 2>"$(f "$name.i").err" &
    local ipid=$!
    BG_PIDS+=("$ipid")
    wait_rc "$ipid" 40
    local irc=$WRC
    wait_rc "$RPID" 20
    expect_eq "$name: rcs" "0 0" "$irc $WRC"
    stop_capture "$name"
    expect_true "$name: data to responder" cmp -s "$in_i" "$(f "$name.r").out"
    expect_true "$name: data to initiator" cmp -s "$in_r" "$(f "$name.i").out"
    check_capture "$name" "$rev" "$in_i" "$in_r" "$msgs_i" "$msgs_r" && CASE_DONE=$name && return
    echo "note: $name: running the case again" >&2
    RETRIED=1 run_case "$name-again" "${@:2}"
}

# pace FILE SIZE LOG: once LOG (the reader's stderr) shows the -v line of an
# established connection, writes FILE in SIZE-octet pieces 10 ms apart (each
# piece is one write() below PIPE_BUF, hence one read() and one Send).
pace() {
    local file=$1 size=$2 log=$3 n i
    for ((i = 0; i < 400; i++)); do
        grep -q '^{"rev"' "$log" 2>/dev/null && break
        sleep 0.05
    done
    n=$(($(wc -c <"$file") / size))
    for ((i = 0; i < n; i++)); do
        dd if="$file" bs="$size" skip="$i" count=1 status=none
        sleep 0.01
    done
}

# Markers off: bulk transfer, 64 KiB messages (several FPDUs each, many
# FPDUs per TCP segment).
head -c $((512 * 1024)) /dev/urandom >"$TMP/bulk_i.bin"
head -c $((256 * 1024)) /dev/urandom >"$TMP/bulk_r.bin"
for rev in 1 2; do
    run_case "rev$rev" "$rev" "" "$TMP/bulk_i.bin" "$TMP/bulk_r.bin" 9 4
done

# Markers on. Two limits of Wireshark 4.0's marker handling shape this case:
#  * it finds markers only in a TCP segment that holds exactly one FPDU, so
#    stdin is paced (one message every 10 ms; TCP_NODELAY sends each alone)
#    and a message fits one FPDU;
#  * it miscounts the markers of an FPDU that ends exactly on a 512-octet
#    stream boundary (siw-vm README, pitfall 14), so the message size is
#    chosen below such that, with markers, no FPDU of either stream does:
#    the responder's N messages of S octets, and the initiator's opening
#    empty Send followed by N messages of S octets.
N=40
S=$(awk -v n="$N" '
    function wire(payload,    l) {       # FPDU octets without markers
        l = 2 + payload + 18             # length field, untagged DDP/RDMAP header
        l += (4 - l % 4) % 4             # pad
        return l + 4                     # CRC
    }
    function clean(s, opening,    p, i, w, d) {
        p = 0
        for (i = 0; i < n + opening; i++) {
            w = wire(opening && i == 0 ? 0 : s)
            d = (512 - p % 512) % 512    # RFC 5044 4.3: a marker every 512 octets
            while (d < w) { w += 4; d += 512 }
            p += w
            if (p % 512 == 0) return 0
        }
        return 1
    }
    BEGIN {
        for (s = 1000; s < 1400; s++)
            if (clean(s, 0) && clean(s, 1)) { print s; exit }
    }')
echo "markers case: $N messages of $S octets each way"
head -c $((N * S)) /dev/urandom >"$TMP/mk_i.bin"
head -c $((N * S)) /dev/urandom >"$TMP/mk_r.bin"
for rev in 1 2; do
    run_case "rev$rev-markers" "$rev" "--markers --msg-size $S" "$TMP/mk_i.bin" "$TMP/mk_r.bin" \
        $((N + 1)) "$N" "$S"
    expect_eq "rev$rev-markers: one FPDU per message" $((2 * N + 1)) \
        "$(grep -c '^ *ULPDU length:' "$TMP/$CASE_DONE.txt")"
done

finish
