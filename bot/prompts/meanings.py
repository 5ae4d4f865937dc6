"""What an agent's option really does, where its words say less or other: a note on the option's line. Pure.

Decided once, from facts the harness sets (the option ids an agent's harness uses, the tool name its ``_meta``
carries), never from the option's words (agent-given text) or anything the model writes:

- Codex (options ``approved`` and ``abort``): ``approved-execpolicy-amendment`` writes a rule Codex keeps for
  every later session, not this one only; ``abort`` ends the turn and Codex gets no feedback (its words ask
  for some).
- Qwen Code (``proceed_once`` and ``cancel``, with a ``_meta`` tool name): ``proceed_always_project`` and
  ``proceed_always_user`` are both "always", kept in the project's or in the user's settings; ``cancel``
  ends the turn with no feedback; in a plan, which mode each approval switches to.
- OpenCode (``once``, ``always``, ``reject``): ``reject`` ends the turn with a fixed message, no feedback.

The bot's own "Allow for this session (this command)" line is not offered beside an agent's own allow-always
option that names the session (Gemini CLI's "Allow for this session"): one name, one meaning
(:func:`own_session_option`); ``s`` / 🔁 then pick the agent's own.

Every note is the bot's: it follows the agent's label after :data:`MARK`, on the option's line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MARK = " ⚠ "
NO_FEEDBACK = "ends {agent}'s turn: words after the number never reach {agent}"
CODEX_RULE = "Codex keeps this rule for every later session too (its rules file), not for this session only"
QWEN_PROJECT = "scope: this project (kept in the project's settings, for later sessions too)"
QWEN_USER = "scope: every project of yours (kept in your user settings, for later sessions too)"
QWEN_PLAN = {
    "restore_previous": "leaves plan mode for the mode before planning",
    "proceed_always": "leaves plan mode; edits then run without asking",
    "proceed_once": "leaves plan mode; edits are still asked",
}
QWEN_AUTO = " (auto: Qwen's model approves actions itself, nothing is asked)"


_REJECT = {"Codex": "abort", "Qwen": "cancel", "OpenCode": "reject"}
"""Each agent's reject option that ends its turn and drops the person's feedback (FACTS of the agents spec)."""


def _agent(ids: set[str], tool_name: str) -> str | None:
    """Which agent's harness these option ids are (None: one whose options say what they do)."""
    if {"approved", "abort"} <= ids:
        return "Codex"
    if {"proceed_once", "cancel"} <= ids and tool_name:  # Gemini CLI's ids too, but it names no tool in _meta
        return "Qwen"
    if {"once", "always", "reject"} <= ids:
        return "OpenCode"
    return None


def notes(options: Sequence[tuple[str, str, str]], *, tool_name: str, plan: bool) -> dict[str, str]:
    """option id -> the note on its line, for the options whose meaning differs from their words.
    ``options``: (optionId, name, kind); ``tool_name``: the harness's ``_meta`` tool name, or ""."""
    ids = {oid for oid, _, _ in options}
    agent = _agent(ids, tool_name)
    if agent is None:
        return {}
    out = {_REJECT[agent]: NO_FEEDBACK.format(agent=agent)}
    if agent == "Codex" and "approved-execpolicy-amendment" in ids:
        out["approved-execpolicy-amendment"] = CODEX_RULE
    if agent == "Qwen":
        out |= {k: v for k, v in (("proceed_always_project", QWEN_PROJECT), ("proceed_always_user", QWEN_USER))
                if k in ids}
        if plan:
            for oid, name, _ in options:
                if oid in QWEN_PLAN:
                    out[oid] = QWEN_PLAN[oid] + (QWEN_AUTO if oid == "restore_previous" and "(auto)" in name else "")
    return out


def feedback_dropped(options: Sequence[Mapping[str, Any]], option_id: str, *, tool_name: str) -> str | None:
    """The agent's name when its option ``option_id`` drops the person's feedback, else None."""
    ids = {str(o.get("optionId")) for o in options if isinstance(o, Mapping)}
    agent = _agent(ids, tool_name)
    return agent if agent is not None and _REJECT[agent] == option_id else None


def noted(label: str, note: str | None) -> str:
    """An option's shown line text: its label, and the bot's note after it."""
    return f"{label}{MARK}{note}" if note else label


def own_session_option(options: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the agent offers an allow-always option of its own whose name speaks of the session."""
    return any(o.get("kind") == "allow_always" and isinstance(o.get("name"), str) and "session" in o["name"].lower()
               for o in options if isinstance(o, Mapping))
