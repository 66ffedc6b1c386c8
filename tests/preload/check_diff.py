#!/usr/bin/env python3
"""Compares a pl_calls run under the preload library with the plain TCP run.

usage: check_diff.py MODE REFERENCE GOT ALLOWLIST

Lines are "SEQUENCE SIDE NN DESCRIPTION = RESULT". Every line of REFERENCE
(plain TCP) must appear in GOT with the same RESULT, unless ALLOWLIST has an
entry for it:

    MODES | SEQUENCE SIDE DESCRIPTION | TCP RESULT | ALLOWED RESULT

(fields separated by " | ", a bar with a space on each side).

MODES is a comma-separated list of run modes (both, server, client) or '*';
ALLOWED RESULT is an fnmatch pattern. Lines only in GOT (an aborted sequence,
a timeout) are failures too. Prints one line per difference, classified
"allowed" or "BUG", and exits 1 if any is a BUG.
"""
import fnmatch
import re
import sys

LINE = re.compile(r"^(\S+) ([SC]) (\d\d) (.*?) = (.*)$")


def parse(path):
    steps, other = {}, []
    order = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            raw = raw.rstrip("\n")
            m = LINE.match(raw)
            if not m:
                if raw.strip():
                    other.append(raw)
                continue
            seq, side, num, desc, val = m.groups()
            key = (seq, side, num, desc)
            steps[key] = val
            order.append(key)
    return steps, order, other


def load_allow(path):
    entries = []
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(" | ")]
            if len(parts) != 4:
                sys.exit(f"{path}:{n}: expected 'MODES | SEQ SIDE DESC | TCP | ALLOWED'")
            modes = {m.strip() for m in parts[0].split(",")}
            entries.append({"line": n, "modes": modes, "key": parts[1], "tcp": parts[2],
                            "allowed": parts[3], "used": 0})
    return entries


def allowed(entries, mode, seq, side, desc, tcp, got):
    k = f"{seq} {side} {desc}"
    for e in entries:
        if ("*" in e["modes"] or mode in e["modes"]) and e["key"] == k and e["tcp"] == tcp \
                and fnmatch.fnmatchcase(got, e["allowed"]):
            e["used"] += 1
            return e
    return None


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    mode, ref_path, got_path, allow_path = sys.argv[1:]
    ref, ref_order, _ = parse(ref_path)
    got, got_order, got_other = parse(got_path)
    entries = load_allow(allow_path)
    bugs = allowed_n = 0
    if not got_order:
        print(f"BUG     [{mode}] no output at all: the program did not run")
        return 1
    # Sequences after the last one with output: the program ended early (a
    # timeout, a crash); named once instead of step by step.
    ref_seqs = list(dict.fromkeys(k[0] for k in ref_order))
    got_seqs = {k[0] for k in got_order}
    last = max(i for i, q in enumerate(ref_seqs) if q in got_seqs) if got_seqs & set(ref_seqs) \
        else -1
    after = set(ref_seqs[last + 1:])
    not_run = []
    for key in ref_order:
        seq, side, num, desc = key
        tcp = ref[key]
        if seq in after:
            if seq not in not_run:
                not_run.append(seq)
            continue
        if key not in got:
            print(f"BUG     [{mode}] {seq} {side} {num} {desc}: tcp '{tcp}', missing")
            bugs += 1
            continue
        val = got[key]
        if val == tcp:
            continue
        e = allowed(entries, mode, seq, side, desc, tcp, val)
        if e:
            allowed_n += 1
            print(f"allowed [{mode}] {seq} {side} {num} {desc}: tcp '{tcp}', got '{val}'"
                  f" (expected_diffs.txt:{e['line']})")
        else:
            bugs += 1
            print(f"BUG     [{mode}] {seq} {side} {num} {desc}: tcp '{tcp}', got '{val}'")
    for key in got_order:
        if key not in ref:
            seq, side, num, desc = key
            print(f"BUG     [{mode}] {seq} {side} {num} {desc}: not in the tcp run, got "
                  f"'{got[key]}'")
            bugs += 1
    for o in got_other:
        print(f"BUG     [{mode}] {o}")
        bugs += 1
    if not_run:
        print(f"BUG     [{mode}] the program ended early; sequences without output: "
              f"{' '.join(not_run)}")
        bugs += 1
    print(f"[{mode}] {len(ref_order)} steps: {bugs} unexpected differences, "
          f"{allowed_n} allowed")
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
