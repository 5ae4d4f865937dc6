"""Sessions (table ``seq``): which room a session belongs to, which ACP proxy run claimed it, and the caps
on pending requests per agent token (one budget for what the token submits alone, one for its claiming proxy
run's requests, one for its held hooks: :func:`check_caps`) and per session.

A session id is one namespace across rooms, and a request id is ``{session_id}:{request_seq}`` (the
contract), so a session belongs to exactly one room: the room of its first request (or of the proxy
that claimed it first). A submission of another room under that id is refused
(:class:`SessionInOtherRoom`, answered 409): joined to the session, it would take the session's next
seq, could be settled by the session's rules or ended with them. Refusing is the safe choice: giving it
its own numbering would make two requests with one id; moving it to the other room would let a
request pick its room, which only its credential may.

An ACP proxy claims the sessions it relays (``POST /sessions/claim``, when the agent answers
``session/new`` or the client loads one), with its run's secret (the origin of its keys) and its API
token. Only a request of the claiming run, by the claiming token, may stand in for a request a hook
holds in that session (:mod:`bot.api.hook_hold`); a plain API submission never can. A claim is refused
when the session is claimed by another token's proxy, is another room's, or already has a hook's requests
(a claim that comes only after the hook asked proves nothing). A later run of the same token's proxy (a
session loaded again after a restart) takes the claim over on the same terms.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.inbox.db import Connection, Database
from bot.inbox.session_rules import origin_of
from bot.inbox.submission import KeyConflict

HOOK_KEY_PREFIX = "hook-"  # the key of every request a hook submits (bot.api.hook_hold)


class SessionInOtherRoom(KeyConflict):
    """A submission or claim whose session id belongs to another room (409 ``session_in_other_room``)."""


class SessionClaimed(Exception):
    """A claim the session refuses (409 ``session_claimed``): the message says why."""


class TooManyPending(Exception):
    """A submission over a cap (429 ``too_many_pending``); ``token`` names the capped agent token, if that cap."""

    def __init__(self, reason: str, token: str | None = None) -> None:
        super().__init__(reason)
        self.token = token


@dataclass(frozen=True)
class PendingCaps:
    """How many pending requests one agent token, and one session, may hold at once."""

    per_token: int
    per_session: int


@dataclass(frozen=True)
class ProxyClaim:
    """The ACP proxy run that claimed a session: its secret origin and its API token's name."""

    origin: str
    token: str


OTHER_ROOM = "sessionId: this session id is in use in another station room; pick another session id"


async def check_room(db: Connection, session_id: str, room: str) -> None:
    """:class:`SessionInOtherRoom` when ``session_id`` belongs to a room other than ``room``."""
    got = await db.fetchval("SELECT room FROM seq WHERE session_id=$1", session_id)
    if got is not None and got != room:
        raise SessionInOtherRoom(OTHER_ROOM)


_ALONE = (  # a token's pending requests that came with no front door's proof: the token alone
    "SELECT COUNT(*) FROM requests r LEFT JOIN seq s ON s.session_id=r.session_id"
    " WHERE r.submitted_by=$1 AND r.state='pending' AND r.held_by IS NULL"
    " AND NOT COALESCE(s.proxy_token=r.submitted_by AND r.key LIKE s.proxy_origin || ':%', FALSE)"
)
_OF_RUN = "SELECT COUNT(*) FROM requests WHERE submitted_by=$1 AND state='pending' AND key LIKE $2"
_HELD = "SELECT COUNT(*) FROM requests WHERE submitted_by=$1 AND state='pending' AND held_by IS NOT NULL"


async def check_caps(
    db: Connection, caps: PendingCaps, session_id: str, token: str | None, *, key: str | None = None,
    held: bool = False,
) -> None:
    """:class:`TooManyPending` when the session, or the budget of the agent token ``token`` this request
    counts against, holds its cap of pending requests already.

    A token has one budget for what it submits alone (a plain ``POST /permissions``) and one apiece for
    what comes with a front door's own proof: the requests of the ACP proxy run that claimed the session
    (a key of that run's secret, by the claiming token) and the hooks the daemon holds (a request lives
    only while its hook's connection does). Each is capped at ``per_token``, and every session at
    ``per_session``; so a flood the token submits alone never blocks its proxy or its hooks."""
    if token is not None:
        run = origin_of(key)
        claim = await proxy_of(db, session_id) if run is not None else None
        if held:
            n, what = int(await db.fetchval(_HELD, token) or 0), "held hooks"
        elif claim is not None and claim == ProxyClaim(str(run), token):
            n, what = int(await db.fetchval(_OF_RUN, token, f"{run}:%") or 0), "requests of its ACP proxy run"
        else:
            n, what = int(await db.fetchval(_ALONE, token) or 0), ""
        if n >= caps.per_token:
            if what:
                raise TooManyPending(
                    f"token {token!r} has {n} pending {what}, the most one may have "
                    f"(api.max_pending_per_token = {caps.per_token}); retry once some are answered")
            raise TooManyPending(
                f"token {token!r} has {n} pending requests, the most one agent token may have "
                f"(api.max_pending_per_token = {caps.per_token}); retry once some are answered", token)
    n = int(await db.fetchval(
        "SELECT COUNT(*) FROM requests WHERE session_id=$1 AND state='pending'", session_id) or 0)
    if n >= caps.per_session:
        raise TooManyPending(
            f"session {session_id!r} has {n} pending requests, the most one session may have "
            f"(api.max_pending_per_session = {caps.per_session}); retry once some are answered")


async def next_seq(db: Connection, session_id: str, room: str) -> int:
    """The session's next ``request_seq`` (the session is ``room``'s from its first request on)."""
    return int(await db.fetchval(
        "INSERT INTO seq (session_id, last, room) VALUES ($1, 1, $2) "
        "ON CONFLICT(session_id) DO UPDATE SET last = seq.last + 1 RETURNING last",
        session_id, room,
    ))


async def claim(db: Connection, session_id: str, room: str, origin: str, token: str) -> None:
    """Record that the proxy run ``origin`` (with the API token ``token``) relays ``session_id`` of ``room``;
    the same claim again is a no-op. :class:`SessionInOtherRoom` or :class:`SessionClaimed` otherwise."""
    if db.dialect.is_postgres:  # the same lock as a submission of that session takes
        await db.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", session_id)
    row = await db.fetchrow("SELECT room, proxy_origin, proxy_token FROM seq WHERE session_id=$1", session_id)
    if row is not None:
        if row["room"] != room:
            raise SessionInOtherRoom(OTHER_ROOM)
        if (row["proxy_origin"], row["proxy_token"]) == (origin, token):
            return
        if row["proxy_origin"] is not None and row["proxy_token"] != token:
            raise SessionClaimed("sessionId: another token's proxy claimed this session")
        hooked = await db.fetchrow(
            "SELECT 1 FROM requests WHERE session_id=$1 AND key LIKE $2 LIMIT 1", session_id, HOOK_KEY_PREFIX + "%")
        if hooked is not None:  # a later run of the same token's proxy (a session loaded again) only before
            raise SessionClaimed("sessionId: a hook asked in this session before the proxy claimed it")
    await db.execute(
        "INSERT INTO seq (session_id, last, room, proxy_origin, proxy_token) VALUES ($1, 0, $2, $3, $4) "
        "ON CONFLICT(session_id) DO UPDATE SET proxy_origin=excluded.proxy_origin, proxy_token=excluded.proxy_token",
        session_id, room, origin, token,
    )


async def proxy_of(db: Connection | Database, session_id: str) -> ProxyClaim | None:
    """The proxy run that claimed ``session_id``, or None."""
    row = await db.fetchrow("SELECT proxy_origin, proxy_token FROM seq WHERE session_id=$1", session_id)
    if row is None or row["proxy_origin"] is None or row["proxy_token"] is None:
        return None
    return ProxyClaim(str(row["proxy_origin"]), str(row["proxy_token"]))
