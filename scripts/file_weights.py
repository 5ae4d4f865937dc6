#!/usr/bin/env python3
"""Write tests/file_weights.json from a run's ``pytest --durations=0`` output (read on stdin): each test
file's seconds (setup, call and teardown summed), which tests/conftest.py uses to hand the longest files
to the pytest-xdist workers first. Usage:

    scripts/test --durations=0 | python3 scripts/file_weights.py
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "file_weights.json"


def main() -> int:
    seconds: collections.Counter[str] = collections.Counter()
    for line in sys.stdin:
        m = re.match(r"([\d.]+)s (?:call|setup|teardown)\s+(tests/\S+?\.py)::", line)
        if m:
            seconds[m.group(2)] += float(m.group(1))
    if not seconds:
        sys.stderr.write("no durations read: run pytest with --durations=0\n")
        return 1
    for f in OUT.parent.glob("test_*.py"):  # a file whose every step took under 5 ms is not in the output
        seconds.setdefault(f"tests/{f.name}", 0.0)
    OUT.write_text(json.dumps({f: round(s, 1) for f, s in sorted(seconds.items())}, indent=0) + "\n")
    sys.stderr.write(f"{len(seconds)} files, {sum(seconds.values()):.0f} s, written to {OUT}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
