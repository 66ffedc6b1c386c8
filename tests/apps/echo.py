#!/usr/bin/env python3
"""An asyncio echo server and client (issue 17: a python3 program whose event
loop is epoll, with many concurrent connections).

  echo.py server PORT [--expect N]
      echoes every connection on 127.0.0.1:PORT; with --expect, exits 0 once
      N connections have come and gone, after printing
      "server: N connections, peak P concurrent, B octets echoed".
  echo.py client PORT [--conns C] [--msgs M]
      opens C connections (default 200), all of them before any data, then
      on every one at once writes M messages (default 10,000) of 8 to 71
      octets while reading the echo back; checks that each connection gets
      back exactly the octets it sent (length and SHA-256), prints
      "client: C connections x M messages, B octets each way, ok" and exits 0,
      or prints what went wrong and exits 1.
The messages of a connection depend on its number only, so a mix-up between
connections, a lost, repeated or reordered chunk all show."""
import argparse
import asyncio
import hashlib
import sys


def message_block(conn, first, count):
    """Messages first..first+count-1 of connection conn, concatenated."""
    out = bytearray()
    for seq in range(first, first + count):
        body = f"{conn}:{seq}:".encode()
        pad = 8 + (seq * 7 + conn) % 64 - len(body)
        out += body + b"x" * max(pad, 0) + b"\n"
    return bytes(out)


async def serve(port, expect):
    stats = {"done": 0, "open": 0, "peak": 0, "octets": 0}
    finished = asyncio.Event()

    async def handle(reader, writer):
        stats["open"] += 1
        stats["peak"] = max(stats["peak"], stats["open"])
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                stats["octets"] += len(data)
                writer.write(data)
                await writer.drain()
            writer.close()
            await writer.wait_closed()
        except (ConnectionError, OSError) as e:
            print(f"server: connection error: {e!r}", file=sys.stderr)
        finally:
            stats["open"] -= 1
            stats["done"] += 1
            if expect and stats["done"] >= expect:
                finished.set()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    print(f"server: listening on 127.0.0.1:{port}", flush=True)
    async with server:
        if expect:
            await finished.wait()
        else:
            await asyncio.Event().wait()
    print(f"server: {stats['done']} connections, peak {stats['peak']} concurrent, "
          f"{stats['octets']} octets echoed", flush=True)


async def one_client(conn, reader, writer, msgs, start, barrier):
    sent_hash, got_hash = hashlib.sha256(), hashlib.sha256()
    sent = got = 0
    eof_sent = False
    await start.wait()

    async def round_trip():
        # One message there and back, then wait for every connection's: the
        # server then holds all of them at once however slowly it accepts
        # (early connections could otherwise finish before late ones are
        # accepted, which says nothing about the server).
        nonlocal sent, got
        block = message_block(conn, 0, 1)
        sent_hash.update(block)
        sent += len(block)
        writer.write(block)
        await writer.drain()
        echo = await reader.readexactly(len(block))
        got_hash.update(echo)
        got += len(echo)
        arrive()
        await barrier["all"].wait()

    arrived = False

    def arrive():
        nonlocal arrived
        if not arrived:
            arrived = True
            barrier["n"] += 1
            if barrier["n"] == barrier["of"]:
                barrier["all"].set()

    async def write_all():
        nonlocal sent, eof_sent
        batch = 50
        for first in range(1, msgs, batch):
            block = message_block(conn, first, min(batch, msgs - first))
            sent_hash.update(block)
            sent += len(block)
            writer.write(block)
            await writer.drain()
        writer.write_eof()
        eof_sent = True

    async def read_all():
        nonlocal got
        while True:
            data = await reader.read(65536)
            if not data:
                break
            got_hash.update(data)
            got += len(data)

    try:
        await round_trip()
        await asyncio.gather(write_all(), read_all())
    except (ConnectionError, OSError, asyncio.IncompleteReadError) as e:
        arrive()  # the others must not wait for a connection that failed
        writer.close()
        return (f"connection {conn}: {e!r} after writing {sent} octets "
                f"({'all, and EOF' if eof_sent else 'not all yet'}) and reading {got} back")
    writer.close()
    if got != sent or got_hash.digest() != sent_hash.digest():
        return f"connection {conn}: sent {sent} octets, got {got} back" + \
            ("" if got != sent else " (different contents)")
    return sent


async def client(port, conns, msgs):
    opened = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in range(conns)),
                                  return_exceptions=True)
    errors = [o for o in opened if isinstance(o, BaseException)]
    if errors:
        print(f"client: {len(errors)} of {conns} connections failed: {errors[0]!r}", file=sys.stderr)
        return 1
    start = asyncio.Event()
    barrier = {"n": 0, "of": conns, "all": asyncio.Event()}
    tasks = [one_client(i, r, w, msgs, start, barrier) for i, (r, w) in enumerate(opened)]
    start.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    bad = [r for r in results if not isinstance(r, int)]
    for b in bad[:5]:
        print(f"client: {b!r}" if isinstance(b, BaseException) else f"client: {b}", file=sys.stderr)
    if bad:
        print(f"client: {len(bad)} of {conns} connections failed", file=sys.stderr)
        return 1
    print(f"client: {conns} connections x {msgs} messages, {sum(results)} octets each way, ok")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["server", "client"])
    ap.add_argument("port", type=int)
    ap.add_argument("--expect", type=int, default=0)
    ap.add_argument("--conns", type=int, default=200)
    ap.add_argument("--msgs", type=int, default=10000)
    a = ap.parse_args()
    if a.role == "server":
        asyncio.run(serve(a.port, a.expect))
        return 0
    return asyncio.run(client(a.port, a.conns, a.msgs))


sys.exit(main())
