#!/usr/bin/env python3
"""A memcached text-protocol client on raw sockets (issue 17: memcached with a
client storing and reading back 1,000 keys).

usage: memcache_client.py PORT [--keys N] [--conns C]

C threads (default 4), each with its own connection, store N/C keys each
(set, one at a time, values of 1 to 20,000 octets that depend on the key) and
read them back with multi-key gets of 50 keys; then one more connection asks
for `stats`. Prints "stored N keys, read back N, threads T, total_connections
K" and exits 0 when every value came back intact, 1 otherwise."""
import argparse
import hashlib
import socket
import sys
import threading


def value_of(key):
    n = 1 + int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 20000
    seed = hashlib.sha256(b"v" + key.encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            data = self.s.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n:
            data = self.s.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def set(self, key, value):
        self.s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key.encode(), len(value), value))
        reply = self.line()
        if reply != b"STORED":
            raise RuntimeError(f"set {key}: {reply!r}")

    def get_many(self, keys):
        self.s.sendall(b"get " + b" ".join(k.encode() for k in keys) + b"\r\n")
        got = {}
        while True:
            line = self.line()
            if line == b"END":
                return got
            parts = line.split()
            if len(parts) != 4 or parts[0] != b"VALUE":
                raise RuntimeError(f"get: unexpected {line!r}")
            got[parts[1].decode()] = self.exactly(int(parts[3]))
            if self.exactly(2) != b"\r\n":
                raise RuntimeError("get: a value not followed by CRLF")

    def stats(self):
        self.s.sendall(b"stats\r\n")
        out = {}
        while True:
            line = self.line()
            if line == b"END":
                return out
            _, k, v = line.decode().split(" ", 2)
            out[k] = v


def worker(port, keys, results, i):
    try:
        c = Conn(port)
        for k in keys:
            c.set(k, value_of(k))
        bad = 0
        read = 0
        for j in range(0, len(keys), 50):
            batch = keys[j:j + 50]
            got = c.get_many(batch)
            for k in batch:
                if got.get(k) != value_of(k):
                    bad += 1
                else:
                    read += 1
        c.s.close()
        results[i] = (len(keys), read, bad, None)
    except Exception as e:  # reported by the main thread
        results[i] = (0, 0, 0, repr(e))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--conns", type=int, default=4)
    a = ap.parse_args()
    keys = [f"uwarp:{i:05d}" for i in range(a.keys)]
    results = [None] * a.conns
    threads = [threading.Thread(target=worker, args=(a.port, keys[i::a.conns], results, i))
               for i in range(a.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = sum(r[0] for r in results)
    read = sum(r[1] for r in results)
    bad = sum(r[2] for r in results)
    errors = [r[3] for r in results if r[3]]
    st = Conn(a.port).stats()
    print(f"stored {stored} keys, read back {read}, threads {st.get('threads')}, "
          f"total_connections {st.get('total_connections')}")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    if bad:
        print(f"{bad} values came back wrong or missing", file=sys.stderr)
    return 0 if not errors and not bad and read == a.keys else 1


sys.exit(main())
