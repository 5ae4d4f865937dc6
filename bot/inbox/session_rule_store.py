"""The inbox's part for session rules (table ``session_rules``): add, match, list, revoke, end, expire.

A rule is kept until it is revoked, its session ends (the proxy says so) or the session has sent no
request for longer than ``prompts.session_rule_ttl``. Matching is one exact lookup of the request's scope.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from bot.events.timestamps import iso_ms
from bot.inbox.db import Connection, Database, Row, placeholders
from bot.inbox.session_rules import Scope, origin_of, subject_facts
from bot.inbox.store import Inbox


@dataclass(frozen=True)
class SessionRule:
    """One stored rule."""

    id: int
    scope: Scope
    set_by: str
    request_id: str
    created_at: float
    used_at: float

    def to_api(self) -> dict[str, Any]:
        """The JSON form of ``GET /rules`` (never the ``origin``: the proxy run's secret)."""
        facts = subject_facts(self.scope.subject)
        return {
            "id": str(self.id),
            "session_id": self.scope.session_id,
            "tool": self.scope.tool,
            "command": facts.get("command"),
            "settings": facts.get("settings"),
            "paths": facts.get("paths"),
            "set_by": self.set_by,
            "request_id": self.request_id,
            "created_at": iso_ms(self.created_at),
            "used_at": iso_ms(self.used_at),
        }


def _rule(r: Row) -> SessionRule:
    scope = Scope(r["origin"], r["session_id"], r["tool"], r["subject"])
    return SessionRule(int(r["id"]), scope, r["set_by"], r["request_id"], float(r["created_at"]), float(r["used_at"]))


async def _of_scope(db: Connection, scope: Scope) -> SessionRule | None:
    row = await db.fetchrow(
        "SELECT * FROM session_rules WHERE origin=$1 AND session_id=$2 AND tool=$3 AND subject=$4",
        scope.origin, scope.session_id, scope.tool, scope.subject,
    )
    return _rule(row) if row is not None else None


def in_rooms(rooms: Collection[str] | None, first: int) -> tuple[str, tuple[str, ...]]:
    """SQL (`` AND ...``, placeholders from ``$first``) keeping the rules whose request is in ``rooms``
    (a rule belongs to the room of the request it was set on; None: every room), and its arguments."""
    if rooms is None:
        return "", ()
    names = tuple(sorted(rooms))
    if not names:
        return " AND 1=0", ()
    marks = placeholders(first, len(names))
    # by the request's primary key, one lookup per rule (never a scan of every request of those rooms)
    return (f" AND EXISTS (SELECT 1 FROM requests q WHERE q.id = session_rules.request_id AND q.room IN ({marks}))",
            names)


async def _delete(db: Connection | Database, origin: str, session_id: str | None) -> int:
    if session_id is None:
        return await db.execute("DELETE FROM session_rules WHERE origin=$1", origin)
    return await db.execute("DELETE FROM session_rules WHERE origin=$1 AND session_id=$2", origin, session_id)


class SessionRules:
    """Session rules over one open ``Inbox``."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def add(self, scope: Scope, *, set_by: str, request_id: str, now: float) -> SessionRule:
        """Store a rule (the same scope again keeps the first rule, marked used now)."""
        async with self.inbox.database.transaction() as db:
            await db.execute(
                "INSERT INTO session_rules (origin, session_id, tool, subject, set_by, request_id, created_at,"
                " used_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT (origin, session_id, tool, subject)"
                " DO UPDATE SET used_at=excluded.used_at",
                scope.origin, scope.session_id, scope.tool, scope.subject, set_by, request_id, float(now),
            )
            rule = await _of_scope(db, scope)
        assert rule is not None
        return rule

    async def match(self, scope: Scope, now: float) -> SessionRule | None:
        """The rule for exactly ``scope``, or None. The session is active: its rules are marked used now
        (a session's rules expire together, once it has been idle for the ttl)."""
        args = (scope.origin, scope.session_id)
        if await self.inbox.database.fetchrow(
            "SELECT 1 FROM session_rules WHERE origin=$1 AND session_id=$2 LIMIT 1", *args
        ) is None:
            return None  # the common case: no write
        async with self.inbox.database.transaction() as db:
            await db.execute("UPDATE session_rules SET used_at=$1 WHERE origin=$2 AND session_id=$3", float(now), *args)
            return await _of_scope(db, scope)

    async def list(self, session_id: str | None = None, rooms: Collection[str] | None = None) -> list[SessionRule]:
        """Every rule (of one session id; of ``rooms`` only, when given), oldest first."""
        sql, args = "SELECT * FROM session_rules WHERE 1=1", tuple[str, ...]()
        if session_id is not None:
            sql, args = sql + " AND session_id=$1", (session_id,)
        where, names = in_rooms(rooms, len(args) + 1)
        return [_rule(r) for r in await self.inbox.database.fetch(sql + where + " ORDER BY id", *args, *names)]

    async def revoke(self, rule_id: int, rooms: Collection[str] | None = None) -> SessionRule | None:
        """Remove one rule (of ``rooms`` only, when given); the rule removed, or None when there was none."""
        where, names = in_rooms(rooms, 2)
        async with self.inbox.database.transaction() as db:
            row = await db.fetchrow(f"DELETE FROM session_rules WHERE id=$1{where} RETURNING *", rule_id, *names)
        return _rule(row) if row is not None else None

    async def end(self, origin: str, session_id: str | None = None) -> int:
        """The session (or, without one, every session of the proxy run ``origin``) ended: drop its rules."""
        return await _delete(self.inbox.database, origin, session_id)

    async def end_by_key(
        self, key: str, submitted_by: str, session_id: str | None = None, rooms: Collection[str] | None = None
    ) -> int | None:
        """:meth:`end` for the run behind ``key``, proven by a stored request (of ``session_id``, when
        given; in ``rooms``, when given) that ``submitted_by`` sent with that very key; None (nothing
        dropped) without that proof."""
        origin = origin_of(key)
        if origin is None:
            return None
        sql, args = "SELECT submitted_by, room FROM requests WHERE key=$1", [key]
        if session_id is not None:
            sql, args = sql + " AND session_id=$2", [key, session_id]
        async with self.inbox.database.transaction() as db:
            rows = await db.fetch(sql, *args)
            if not any(r[0] == submitted_by and (rooms is None or r[1] in rooms) for r in rows):
                return None
            return await _delete(db, origin, session_id)

    async def expire(self, idle_before: float) -> int:
        """Drop rules not used since ``idle_before``; how many."""
        return await self.inbox.database.execute("DELETE FROM session_rules WHERE used_at < $1", float(idle_before))
