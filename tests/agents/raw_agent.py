"""A byte-level ACP agent for attack tests: it writes what it is told, exactly, and logs what it gets.

Usage: raw_agent.py LOG. Every line it reads is appended to LOG as it came (bytes). A
``_test/emit`` notification's ``params.line`` is written to stdout as it is, plus a newline,
so a test can make the agent send any bytes at all (escaped method names, ACP 1.x messages).
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    log_path = sys.argv[1]
    out = sys.stdout.buffer
    with open(log_path, "ab", buffering=0) as log:
        for line in sys.stdin.buffer:
            log.write(line)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("method") == "_test/emit":
                out.write(msg["params"]["line"].encode() + b"\n")
                out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
