"""A byte-level stand-in agent for relay tests (no ACP at all).

echo_agent.py [--record PATH] [--emit PATH] [--echo] [--exit-code N] [--seed N]
  --record: write every byte read from stdin to PATH (until stdin's EOF)
  --emit:   write PATH's bytes to stdout in random-sized pieces, then close stdout
  --echo:   copy stdin to stdout as it comes
Exits with --exit-code once stdin is at EOF and the emitting is done.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--record")
    ap.add_argument("--emit")
    ap.add_argument("--echo", action="store_true")
    ap.add_argument("--exit-code", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)

    def emit() -> None:
        with open(a.emit, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            n = rnd.choice([1, 7, 100, 4096, 65536, 1 << 20])
            _write_all(data[pos : pos + n])
            pos += n
            if rnd.random() < 0.05:
                time.sleep(0.001)
        os.close(1)

    t = threading.Thread(target=emit) if a.emit else None
    if t:
        t.start()
    out = open(a.record, "wb") if a.record else None
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        if out:
            out.write(chunk)
        if a.echo:
            _write_all(chunk)
    if out:
        out.close()
    if t:
        t.join()
    return a.exit_code


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


if __name__ == "__main__":
    sys.exit(main())
