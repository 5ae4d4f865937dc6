"""Reactions: a keycap (the option's number), ✅ / ❌ (by the option's ACP kind) or 🔁 (allow for this
session) on a prompt: read from the event, then decided against the prompt it reacts to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.answers.model import Answer, Candidate, Refusal, Target
from bot.answers.outcomes import answer, not_offered, not_pending, session_index, shown, unparsable
from bot.answers.text import keycap_index
from bot.events.states import Via
from bot.inbox.session_rules import REACTION as SESSION_REACTION

SHORTCUTS = {"\u2705": "allow_once", "\u274c": "reject_once"}
"""Reactions that pick an option by its ACP kind: ✅ allow once, ❌ reject once."""


def classify_reaction(content: Mapping[Any, Any], sender: str, event_id: str) -> Candidate | None:
    rel = content.get("m.relates_to")
    if not isinstance(rel, Mapping) or rel.get("rel_type") != "m.annotation":
        return None
    target, key = rel.get("event_id"), rel.get("key")
    if not (isinstance(target, str) and target and isinstance(key, str) and key):
        return None
    return Candidate(event_id, sender, Via.REACTION, target, reaction_key=key, explicit=True)


def resolve_reaction(c: Candidate, target: Target | None) -> Answer | Refusal | None:
    key = c.reaction_key if isinstance(c.reaction_key, str) else ""
    bare = key.replace("\ufe0f", "").replace("\ufe0e", "")
    kind = SHORTCUTS.get(bare)
    number = keycap_index(key)
    if bare == SESSION_REACTION:
        index = session_index(target) if target is not None else None
        number = index + 1 if index is not None else 0
    if (number is None and kind is None) or target is None:
        return None
    if not target.pending:
        return not_pending(target)
    if number == 0:
        return unparsable(target, "This prompt offers no allow-for-this-session option. ")
    if kind is not None:
        if kind not in target.kinds:
            return unparsable(target, f"This prompt offers no {kind.replace('_', ' ')} option. ")
        return answer(c, target, list(target.kinds).index(kind), None)
    if number is None:
        return unparsable(target)
    if number > len(shown(target)):
        return not_offered(target, number)
    return answer(c, target, number - 1, None)
