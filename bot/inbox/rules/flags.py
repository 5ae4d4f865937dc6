"""``permissions watch``'s rules from its command line: ``--allow-tool``/``--deny-tool`` patterns,
``--rules-json``, ``--always``, and ``--session``/``--label`` restricting them all."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.inbox.rules.model import Decision, Rule
from bot.inbox.rules.parse import RuleError, parse_rules_json


def flag_rule(decision: Decision, pattern: str, *, always: bool = False) -> Rule:
    """The rule for ``--allow-tool PAT`` (approve) or ``--deny-tool PAT`` (deny)."""
    if not pattern:
        raise RuleError(f"{'--allow-tool' if decision == 'approve' else '--deny-tool'}: the pattern is empty")
    data: dict[str, Any] = {"match": {"toolName": pattern}, "decision": decision}
    if always and decision == "approve":
        data["scope"] = "always"
    return Rule.model_validate(data)  # always well-formed: a non-empty pattern, an approve rule's scope


def restrict_to_session(
    rules: Sequence[Rule], session: str | None = None, *, label: str | None = None, room: str | None = None
) -> list[Rule]:
    """``--session ID`` / ``--label NAME`` / ``--room NAME``: rules without their own get it; rules with
    their own keep it.

    A rule naming a different session (or label) then matches nothing the restriction lets through
    (the watch also asks the daemon for that session's requests only).
    """
    for flag, given, what in (
        ("--session", session, "the session id"), ("--label", label, "the label"), ("--room", room, "the room name")
    ):
        if given == "":
            raise RuleError(f"{flag}: {what} is empty")
    wanted = {"session_id": session, "label": label, "room": room}
    out: list[Rule] = []
    for r in rules:
        update = {k: v for k, v in wanted.items() if v is not None and getattr(r.match, k) is None}
        if update:
            r = r.model_copy(update={"match": r.match.model_copy(update=update)})
        out.append(r)
    return out


def build_rules(
    tool_flags: Sequence[tuple[Decision, str]] = (),
    rules_json: str | None = None,
    *,
    session: str | None = None,
    label: str | None = None,
    room: str | None = None,
    always: bool = False,
) -> list[Rule]:
    """All of ``watch``'s rules: the tool flags in command-line order, then the ``--rules-json`` ones.

    ``always`` (``--always``) gives scope ``always`` to approve rules that set no scope of their own;
    ``session`` (``--session``), ``label`` (``--label``) and ``room`` (``--room``) restrict every rule
    (see :func:`restrict_to_session`).
    """
    rules = [flag_rule(d, p, always=always) for d, p in tool_flags]
    if rules_json is not None:
        for r in parse_rules_json(rules_json):
            if always and r.decision == "approve" and r.scope is None:
                r = r.model_copy(update={"scope": "always"})
            rules.append(r)
    return restrict_to_session(rules, session, label=label, room=room)
