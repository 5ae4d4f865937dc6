"""Who calls the HTTP API, and what that caller may do.

Two roles: an ``agent`` token submits, reads and cancels the requests it submitted itself
(the proxy and hooks hold it); a ``decider`` token decides (the CLI, people's tools). The
old single ``api.token`` holds both roles and is named ``api.token`` in records. Secrets
are compared in constant time, against every token, through their SHA-256 (so neither
the length nor the position of a match shows in the timing).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Literal

from bot.config import ApiConfig

AGENT, DECIDER = "agent", "decider"
LEGACY_NAME = "api.token"
Action = Literal["read", "submit", "decide", "cancel"]


@dataclass(frozen=True)
class Caller:
    """A caller that showed a valid token."""

    name: str
    roles: frozenset[str]
    rooms: frozenset[str] | None = None  # a decider's rooms ([[api.tokens]] rooms); None: every room
    user: str | None = None  # the person the token belongs to ([[api.tokens]] user); None: nobody

    @property
    def answered_by(self) -> str:
        """What a record shows for a decision made with this token."""
        return f"api:{self.name}"


@dataclass(frozen=True)
class Denied:
    """A refusal: 401 (no or bad token) or 403 (a valid token without the role)."""

    status: int
    code: str
    reason: str


def _digest(secret: str) -> bytes:
    # a header's non-UTF-8 bytes arrive surrogate-escaped: hash them as they came, never fail
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).digest()


class Tokens:
    """The configured tokens; :meth:`identify` finds the caller of one Authorization header."""

    def __init__(self, entries: list[tuple[Caller, str]]) -> None:
        self._entries = [(c, _digest(s)) for c, s in entries]

    @classmethod
    def from_config(cls, api: ApiConfig) -> Tokens:
        entries = [
            (Caller(t.name, frozenset({t.role}), None if t.rooms is None else frozenset(t.rooms), t.user), t.secret)
            for t in api.tokens if t.secret
        ]
        if api.token:
            entries.append((Caller(LEGACY_NAME, frozenset({AGENT, DECIDER})), api.token))
        return cls(entries)

    @property
    def configured(self) -> bool:
        return bool(self._entries)

    def identify(self, authorization: str | None) -> Caller | None:
        """The caller whose secret the ``Bearer`` header carries, or None."""
        scheme, _, secret = (authorization or "").partition(" ")
        got = _digest(secret.strip())
        found: Caller | None = None
        for caller, digest in self._entries:  # no early exit: every comparison runs
            if hmac.compare_digest(got, digest) and scheme.lower() == "bearer" and found is None:
                found = caller
        return found


def may(caller: Caller, action: Action, submitted_by: str | None = None) -> Denied | None:
    """None when ``caller`` may do ``action`` (on a request ``submitted_by`` a token), else why not."""
    roles = caller.roles
    if action == "read":
        return None
    if action == "submit":
        if AGENT in roles:
            return None
        return Denied(403, "forbidden", f"token {caller.name!r} has no agent role; submitting needs an agent token")
    if DECIDER in roles:
        return None
    if action == "cancel" and AGENT in roles:
        if submitted_by == caller.name:
            return None
        return Denied(403, "forbidden", f"token {caller.name!r} may cancel only the requests it submitted")
    return Denied(403, "forbidden", f"token {caller.name!r} has no decider role; deciding needs a decider token")


def authenticate(tokens: Tokens, authorization: str | None) -> Caller | Denied:
    """The caller, or a 401 saying what is missing."""
    if not tokens.configured:
        return Denied(401, "unauthorized", "the daemon has no API token configured ([[api.tokens]] or api.token)")
    caller = tokens.identify(authorization)
    if caller is None:
        return Denied(401, "unauthorized", "a valid 'Authorization: Bearer TOKEN' header is required")
    return caller
