"""The ledger's chain (docs/audit.md): pure, no I/O, no clock.

One entry per settlement, each carrying ``prev`` (the previous entry's ``hash``; 64 zeros for the first)
and ``hash``: lowercase hex SHA-256 of the RFC 8785 (JCS) canonical JSON of the entry without ``hash``.
:func:`seal` makes an entry, :class:`Checker` walks a chain in order and names the first bad or missing
``seq``; :func:`against_checkpoints` compares a chain's hashes with the heads the bot posted in the rooms.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import rfc8785

ZERO = "0" * 64
"""``prev`` of the first entry."""
CHECKPOINT_KEY = "dev.permission-bot.ledger.checkpoint"
"""The content key of a checkpoint notice: ``{"seq": N, "hash": H}``."""
FIELDS = (
    "seq", "at", "request_id", "room", "kind", "digest", "revision", "option_id", "meaning", "scope",
    "answered_by", "via", "feedback", "prev", "hash",
)
"""An entry's keys (also the CSV columns, in this order)."""
_MEANINGS: dict[str, tuple[str, str | None]] = {
    "allow_once": ("approve", "once"),
    "allow_always": ("approve", "always"),
    "reject_once": ("reject", "once"),
    "reject_always": ("reject", "always"),
}


def canonical(value: Any) -> str:
    """RFC 8785 (JCS) canonical JSON of ``value`` (the ``rfc8785`` package)."""
    return str(rfc8785.dumps(value).decode("utf-8"))


_ORDER = tuple(sorted(k for k in FIELDS if k != "hash"))  # ASCII keys: code-point order is RFC 8785's
_KEYS = frozenset(FIELDS)
_BODY = _KEYS - {"hash"}
_SCALARS = frozenset({str, int, bool, type(None)})
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _plain(v: Any) -> bool:
    """Whether ``json.dumps`` writes ``v`` as RFC 8785 does: null, a boolean, an integer, a string, or a
    list of strings (an entry's field values; no float, no object with keys to sort by UTF-16)."""
    t = type(v)
    return t in _SCALARS or (t is list and all(type(x) is str for x in v))


def entry_hash(entry: Mapping[str, Any]) -> str:
    """The ``hash`` of ``entry``: SHA-256 of its canonical JSON without ``hash`` (an entry's keys and plain
    values in key order through the C encoder, which writes them exactly as RFC 8785 does: the fast path
    ``verify`` takes; anything else by :func:`canonical`)."""
    keys = entry.keys()
    if keys == _KEYS or keys == _BODY:
        ordered = {k: entry[k] for k in _ORDER}
        types = set(map(type, ordered.values()))
        if types <= _SCALARS or (types <= _SCALARS | {list} and all(map(_plain, ordered.values()))):
            return hashlib.sha256(_encode(ordered).encode("utf-8")).hexdigest()
    return hashlib.sha256(line({k: v for k, v in entry.items() if k != "hash"}).encode("utf-8")).hexdigest()


def line(body: Mapping[str, Any]) -> str:
    """Canonical JSON of ``body`` on one line (ASCII keys and plain values through the C encoder; else
    :func:`canonical`): an entry as the ledger stores and exports it (``hash`` included)."""
    if all(k.isascii() for k in body) and all(map(_plain, body.values())):
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return canonical(body)


def option_meaning(kind: object) -> tuple[str, str | None]:
    """ACP option kind -> (meaning, scope): ``allow_once`` -> ("approve", "once"), else ("choose", None)."""
    return _MEANINGS.get(kind, ("choose", None)) if isinstance(kind, str) else ("choose", None)


def meaning_of(options: Sequence[Mapping[str, Any]], option_id: str | None) -> tuple[str | None, str | None]:
    """(meaning, scope) of the chosen option: ``allow_once`` -> ("approve", "once"); another kind ->
    ("choose", None); no option (a cancel, a timeout without one) -> (None, None)."""
    if option_id is None:
        return None, None
    return option_meaning(next((o.get("kind") for o in options if o.get("optionId") == option_id), None))


def seal(fields: Mapping[str, Any], seq: int, prev: str) -> dict[str, Any]:
    """The entry ``fields`` as entry ``seq`` after ``prev``, with its ``hash``."""
    entry = {k: fields.get(k) for k in FIELDS if k not in ("seq", "prev", "hash")}
    entry["seq"], entry["prev"] = seq, prev
    entry["hash"] = entry_hash(entry)
    return entry


@dataclass
class Checker:
    """Walks entries in order. ``problem`` is set at the first bad one: ``seq N: why``. ``from_start``:
    the chain must begin at seq 1 with ``prev`` 64 zeros (else, for an export ``--since``, the first
    entry's ``prev`` is taken as given). ``partial`` (an export filtered by ``--since`` or ``--room``; implies
    not ``from_start``): a gap in seq is not checkable from the entries given, so it is counted in ``gaps``
    (the seq before the first one in ``first_gap``) and the entry after it is checked by its own hash only;
    every entry's hash, and ``prev`` between consecutive seqs, are still checked."""

    from_start: bool = True
    partial: bool = False
    first_seq: int = 0
    gaps: int = 0
    first_gap: int | None = None
    count: int = 0
    last_seq: int = 0
    last_hash: str = ZERO
    problem: str | None = None
    bad_seq: int | None = None
    hashes: dict[int, str] = field(default_factory=dict)  # seq -> hash, only those asked for (checkpoints)
    wanted: set[int] = field(default_factory=set)

    def _fail(self, seq: int, why: str) -> bool:
        self.problem, self.bad_seq = f"seq {seq}: {why}", seq
        return False

    def feed_line(self, text: str) -> bool:
        """:meth:`feed` of one exported line. A line as the bot writes it (canonical JSON) is hashed as it
        is, ``hash`` member cut out (what :func:`entry_hash` would write, without writing it again); any
        other line is parsed and hashed by :func:`entry_hash`."""
        try:
            entry = json.loads(text)
        except ValueError:
            return self._fail(self.last_seq + 1, "not JSON")
        h = entry.get("hash") if isinstance(entry, dict) else None
        known = None
        if isinstance(h, str):
            member = f',"hash":"{h}"'
            i = text.find(member)
            if i > 0:
                body = text[:i] + text[i + len(member):].rstrip("\r\n")
                known = hashlib.sha256(body.encode("utf-8")).hexdigest()
        return self.feed(entry, known if known == h else None)

    def feed(self, entry: Any, known_hash: str | None = None) -> bool:
        """Check the next entry; False once a problem is found (stop there). ``known_hash``: its hash,
        already computed from its exact text (:meth:`feed_line`)."""
        if self.problem is not None:
            return False
        expected = self.last_seq + 1
        if not isinstance(entry, dict) or not isinstance(entry.get("seq"), int) or isinstance(entry["seq"], bool):
            return self._fail(expected, "not a ledger entry (no integer seq)")
        seq = entry["seq"]
        if entry.keys() != _KEYS:
            return self._fail(seq, "fields differ from a ledger entry's")
        if self.partial and not self.count and seq == 1 and entry["prev"] != ZERO:
            return self._fail(seq, "prev of the first entry is not 64 zeros")
        if self.count or (self.from_start and not self.partial):
            if seq > expected and self.partial:
                self.gaps += 1  # not checkable from these entries: its prev is taken as given
                self.first_gap = self.last_seq if self.first_gap is None else self.first_gap
            elif seq > expected:
                return self._fail(expected, f"missing (the next entry is seq {seq})")
            elif seq != expected:
                return self._fail(seq, f"out of order (expected seq {expected})")
            elif entry["prev"] != self.last_hash:
                return self._fail(seq, "prev is not the previous entry's hash (an entry before it was changed)")
        try:
            h = known_hash or entry_hash(entry)
        except (TypeError, ValueError) as e:  # a value RFC 8785 cannot write (NaN, an integer past 2**53)
            return self._fail(seq, f"not canonical JSON ({e})")
        if entry["hash"] != h:
            return self._fail(seq, "hash does not match the entry (the entry was changed)")
        self.first_seq = self.first_seq or seq
        self.count, self.last_seq, self.last_hash = self.count + 1, seq, h
        if seq in self.wanted:
            self.hashes[seq] = h
        return True


def against_checkpoints(checker: Checker, checkpoints: Iterable[tuple[str, int, str]]) -> str | None:
    """The first checkpoint ``(room, seq, hash)`` the checked chain contradicts, as ``seq N: why``, else
    None. Feed ``checker`` (its ``wanted`` set to the checkpoints' seqs) before calling. A ``partial``
    checker is compared only at the checkpoints whose entries it was given."""
    for room, seq, h in sorted(checkpoints, key=lambda c: c[1]):
        if checker.partial and seq not in checker.hashes:
            continue
        if seq > checker.last_seq:
            return f"seq {seq}: missing (room {room} holds a checkpoint of it; the ledger ends at {checker.last_seq})"
        got = checker.hashes.get(seq)
        if got is not None and got != h:
            return f"seq {seq}: differs from the checkpoint in room {room} (the chain was rewritten from there on)"
    return None


def checkpoint_of(content: Any) -> tuple[int, str] | None:
    """(seq, hash) of a checkpoint notice's content, or None when it is not one."""
    if not isinstance(content, Mapping):
        return None
    cp = content.get(CHECKPOINT_KEY)
    if not isinstance(cp, Mapping):
        return None
    seq, h = cp.get("seq"), cp.get("hash")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1 or not isinstance(h, str) or len(h) != 64:
        return None
    return seq, h
