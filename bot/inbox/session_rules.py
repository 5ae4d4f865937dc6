"""Session rules ("Allow for this session"): which requests one covers. Pure.

An answerer's ``s`` / ``session`` / 🔁 on a prompt answers allow once and adds a rule that settles
later requests of the same session at once, but only requests that are the same in every fact the
rule was made from (:class:`Scope`), compared exactly: never a prefix or a glob of the command
(a rule for ``rm -rf build`` does not allow ``rm -rf build ~``).

The scope's ``origin`` is the proxy run that submitted the request (the first part of the ``key``
the proxy sets, ``PROXYID:N``, where ``PROXYID`` is a per-run secret of 128 random bits that no API
route shows; an agent's own ``key`` never reaches the daemon), so a session id the agent picks
cannot inherit another agent's rules, nor can a squatter guess the next key. Requests without such a
key are never offered a session rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.inbox.record import Record
from bot.inbox.submission import canon
from bot.prompts.meanings import own_session_option
from bot.prompts.shown import settings_of, shown_input

LABEL = "Allow for this session (this command)"
"""The bot's own numbered line after the agent's options (for a command)."""
FILES_LABEL = "Allow for this session (these files)"
"""The same line for an edit, a read or a move."""
ALIASES = ("s", "session")
"""Words that pick it (case-insensitive, whole text as for other answers)."""
REACTION = "\U0001f501"
"""🔁 picks it as a reaction."""

_PROXY_KEY = re.compile(r"([0-9a-f]{32}):[0-9]+", re.ASCII)


@dataclass(frozen=True)
class Scope:
    """What a session rule covers; equal scopes, and only those, match."""

    origin: str
    session_id: str
    tool: str  # the harness's tool name, or the ACP kind when there is none
    subject: str  # canonical JSON: {"command", "settings"?} or {"paths": sorted}


def origin_of(key: object) -> str | None:
    """The proxy run behind a request's ``key`` (``PROXYID:N``), or None when the proxy did not set it."""
    if not isinstance(key, str):
        return None
    m = _PROXY_KEY.fullmatch(key)
    return m.group(1) if m else None


_FILE_KINDS = frozenset({"edit", "delete", "move", "read"})


def _subject(**what: Any) -> str:
    """The facts a rule holds the same, as canonical JSON (compared as a string, exactly)."""
    return canon({k: v for k, v in what.items() if v is not None})


def subject_facts(subject: str) -> dict[str, Any]:
    """``command`` (with ``settings``) or ``paths``, read back from a stored subject."""
    try:
        out = json.loads(subject)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _paths(locations: object, content: object) -> list[str]:
    found: set[str] = set()
    for items, field in ((locations, "path"), (content, "path")):
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, Mapping) and isinstance(item.get(field), str) and item[field]:
                if items is content and item.get("type") != "diff":
                    continue
                found.add(item[field])
    return sorted(found)


def scope_of(rec: Mapping[str, Any]) -> Scope | None:
    """The scope a request falls in (its API form: ``key``, ``session_id``, ``tool_name``, ``tool_kind``,
    ``raw_input``, ``locations``, ``content``, ``title``, ``kind``), or None when no session rule can cover it
    (never a question or a plan)."""
    if rec.get("kind", "permission") != "permission":
        return None  # a question or a plan: a session rule never answers one (bot.events.kinds)
    origin = origin_of(rec.get("key"))
    session_id = rec.get("session_id")
    tool = rec.get("tool_name") or rec.get("tool_kind")
    if origin is None or not isinstance(session_id, str) or not session_id or not isinstance(tool, str):
        return None
    title = rec.get("title")
    kind = rec.get("tool_kind")
    shown = shown_input(rec.get("raw_input"), kind=kind if isinstance(kind, str) else None,
                        title=title if isinstance(title, str) else "")
    if shown.command is not None:
        # exactly the command line the prompt showed (args too), and every other input that changes what
        # runs (cwd, env, flags...)
        subject = _subject(command=shown.command, settings=settings_of(rec.get("raw_input")))
        return Scope(origin, session_id, tool, subject)
    paths = _paths(rec.get("locations"), rec.get("content"))
    if paths and kind in _FILE_KINDS:  # an edit, a read, a move: the same files (never for other kinds)
        return Scope(origin, session_id, tool, _subject(paths=paths))
    return None


def offered(rec: Mapping[str, Any], kinds: Sequence[str]) -> str | None:
    """The "Allow for this session" line the prompt shows, or None when not offered (it needs an
    allow-once option and a scope, and no option of the agent's own that names the session)."""
    options = rec.get("options")
    if isinstance(options, list) and own_session_option(options):
        return None  # the agent's own "Allow for this session" is the only line of that name
    scope = scope_of(rec) if "allow_once" in kinds else None
    if scope is None:
        return None
    return LABEL if "command" in subject_facts(scope.subject) else FILES_LABEL


FACTS = ("key", "session_id", "tool_name", "tool_kind", "raw_input", "locations", "content", "title", "kind", "options")


def facts(rec: Record) -> dict[str, Any]:
    """What :func:`scope_of` reads, from an inbox record."""
    return {k: getattr(rec, k) for k in FACTS}
