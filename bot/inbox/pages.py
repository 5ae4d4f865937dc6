"""Keyset pages of the pending list: the cursor is where the last page stopped.

Pending records are listed oldest first, by ``(requested_at, rowid)``, which the
``requests_state`` index (state, requested_at; rowid implied) serves in order: a
page costs what it returns, however many requests the inbox holds. The cursor is
that key of a page's last record, opaque to clients (URL-safe base64).
"""

from __future__ import annotations

import base64
import binascii
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

MAX_KEPT = 20_000  # records whose JSON is kept (about 2 KB each)
MAX_LIMIT = 1000  # records a page holds at most
DEFAULT_LIMIT = 100  # a page's size when a cursor comes without a limit


class BadCursor(ValueError):
    """A cursor this daemon did not hand out."""


Key = tuple[float, int]  # (requested_at, rowid)


def encode(key: Key) -> str:
    return base64.urlsafe_b64encode(f"{key[0]!r}/{key[1]}".encode()).decode().rstrip("=")


def decode(cursor: str) -> Key:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, rowid = raw.split("/")
        key = (float(at), int(rowid))
        if key[0] != key[0] or key[1] < 0:  # NaN, negative
            raise ValueError(raw)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor("cursor: not one this daemon handed out") from None
    return key


def parse_limit(text: str) -> int:
    """A ``limit`` query value: 1..MAX_LIMIT (ValueError with the reason otherwise)."""
    try:
        n = int(text)
        if not 1 <= n <= MAX_LIMIT:
            raise ValueError(text)
    except ValueError:
        raise ValueError(f"limit: expected a whole number from 1 to {MAX_LIMIT}") from None
    return n


class JsonKept:
    """Each record's API JSON, kept while its row is unchanged (the whole row is hashed with Python's
    per-process keyed hash): listing 10,000 pending requests again encodes only those that changed."""

    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self._kept: OrderedDict[str, tuple[int, bytes]] = OrderedDict()
        self._max = max_kept

    def array(self, rows: Sequence[Any], encode: Callable[[Any], str]) -> bytes:
        """The JSON array of ``rows`` (sqlite3 rows with an ``id``), each encoded by ``encode`` unless kept."""
        parts = []
        for row in rows:
            rid, h = row["id"], hash(tuple(row))
            got = self._kept.get(rid)
            if got is None or got[0] != h:
                got = self._kept[rid] = (h, encode(row).encode())
                if len(self._kept) > self._max:
                    self._kept.popitem(last=False)
            parts.append(got[1])
        return b"[" + b",".join(parts) + b"]"
