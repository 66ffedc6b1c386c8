#!/usr/bin/env python3
"""Checks the byte counts an iperf3 client and server reported (--json).

usage: iperf3_json.py CLIENT.json SERVER.json [--reverse] [--index N]

SERVER.json may hold several documents, one per test a persistent
`iperf3 -s --json` ran; --index N (default 1) picks the Nth.

Data flows client to server (server to client with --reverse). The client's
output holds both sides' totals (the server sends its results over the
control connection at the end); the server's holds its own. Checked:
 - the server's own total (received, or sent with --reverse) is the one the
   client reports for it, in total and per stream, exactly;
 - 0 < received <= sent, and sent - received <= 64 MiB: the receiver stops
   counting at the end of the test with data still in flight (socket and
   SDP buffers), as iperf3 does over plain TCP.
Prints "SENT RECEIVED" and exits 0 when all hold, 1 otherwise (the reasons on
stderr), 2 when a file is not iperf3 JSON output."""
import json
import sys

IN_FLIGHT = 64 << 20


def documents(text):
    """The JSON documents of text, one after the other."""
    dec, i, out = json.JSONDecoder(), 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        doc, i = dec.raw_decode(text, i)
        out.append(doc)


def load(path, index=1):
    try:
        with open(path) as f:
            docs = documents(f.read())
        d = docs[index - 1]
    except (OSError, ValueError, IndexError) as e:
        print(f"{path}: no document {index}: {e!r}", file=sys.stderr)
        sys.exit(2)
    if "error" in d:
        print(f"{path}: iperf3 error: {d['error']}", file=sys.stderr)
    return d


def total(d, key):
    try:
        return int(d["end"][key]["bytes"])
    except (KeyError, TypeError, ValueError):
        return None


def streams(d, key):
    try:
        return sorted(int(s[key]["bytes"]) for s in d["end"]["streams"])
    except (KeyError, TypeError, ValueError):
        return None


def main():
    argv, args, index, reverse = sys.argv[1:], [], 1, False
    while argv:
        a = argv.pop(0)
        if a == "--reverse":
            reverse = True
        elif a == "--index" and argv:
            index = int(argv.pop(0))
        else:
            args.append(a)
    if len(args) != 2 or index < 1:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    client, server = load(args[0]), load(args[1], index)
    key, side = ("sum_sent", "sender") if reverse else ("sum_received", "receiver")
    sent, received = total(client, "sum_sent"), total(client, "sum_received")
    print(sent, received)
    bad = []
    if total(server, key) != total(client, key):
        bad.append(f"{key}: the server reports {total(server, key)} octets, the client "
                   f"{total(client, key)} for it")
    if streams(server, side) != streams(client, side):
        bad.append(f"per stream {side} octets: the server reports {streams(server, side)}, "
                   f"the client {streams(client, side)}")
    if not sent or not received or received > sent or sent - received > IN_FLIGHT:
        bad.append(f"sent {sent} octets, received {received}")
    for b in bad:
        print(b, file=sys.stderr)
    sys.exit(1 if bad else 0)


main()
