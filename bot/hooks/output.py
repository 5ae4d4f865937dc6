"""A settled record -> the JSON each CLI reads from its hook (FACTS.md). Pure: no I/O.

Claude Code ``PermissionRequest``: ``decision.behavior`` allow|deny, ``updatedPermissions`` only
for "Allow for this session", ``message`` with a deny (the model reads exactly it).
Claude Code ``PreToolUse``: ``permissionDecision`` allow|deny + ``permissionDecisionReason``.
Codex ``PermissionRequest``: like Claude Code's, never with ``updatedPermissions``.
None means "no decision": the CLI asks whoever it would ask without the hook. When the hook cannot
ask at all, Claude Code still gets a ``systemMessage`` (:func:`failure_notice`): a warning it shows
the user, carrying no decision (its stderr is dropped for a PermissionRequest; FACTS.md). An
``AskUserQuestion`` form and an ``ExitPlanMode`` plan get their own (:mod:`bot.hooks.translate` asks them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.events.kinds import DECLINE
from bot.hooks.models import Cli, HookInput
from bot.hooks.translate import (
    ALLOW_ONCE,
    ALLOW_SESSION,
    APPROVE,
    APPROVE_EDITS,
    KEEP_PLANNING,
    PLAN_TOOL,
    session_rule,
)

ACCEPT_EDITS = [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
DECLINED = "The user declined to answer the questions in the permission room."
KEEP_PLANNING_MESSAGE = "The user wants you to keep planning: the plan was not approved."
NO_ANSWER = "No answer in time in the permission room."


def _allowed(option_id: str, options: list[dict[str, Any]]) -> bool | None:
    kind = next((o.get("kind") for o in options if o.get("optionId") == option_id), None)
    if option_id in (ALLOW_ONCE, ALLOW_SESSION) or kind in ("allow_once", "allow_always"):
        return True
    if kind in ("reject_once", "reject_always"):
        return False
    return None


def _said(feedback: Any, expired: bool, otherwise: str, expired_text: str = NO_ANSWER) -> str:
    """The person's feedback (trimmed) when given, else why it was denied."""
    if isinstance(feedback, str) and feedback.strip():
        return feedback.strip()
    return expired_text if expired else otherwise


def decision(cli: Cli, inp: HookInput, rec: dict[str, Any]) -> dict[str, Any] | None:
    """The hook output for a settled record, or None (cancelled, or an option that is neither)."""
    out = rec.get("outcome") or {}
    option_id = out.get("option_id")
    if rec.get("state") not in ("resolved", "expired") or not isinstance(option_id, str):
        return None
    if cli == "claude-code" and inp.tool_name == PLAN_TOOL:
        return plan_decision(inp, rec)  # a plain allow is no decision for ExitPlanMode: echo its input
    allowed = _allowed(option_id, rec.get("options") or [])
    by = out.get("answered_by") or "a person"
    if allowed is None:
        return None
    if not allowed:
        expired = rec.get("state") == "expired"
        why = _said(out.get("feedback"), expired, f"Denied by {by} in the permission room.",
                    "Denied: no answer in time in the permission room.")
        return reply(inp.hook_event_name, "deny", why)
    rule = session_rule(cli, inp) if option_id == ALLOW_SESSION else None
    return reply(inp.hook_event_name, "allow", f"Allowed by {by} in the permission room.",
                 permissions=rule[0] if rule is not None else None)


def reply(event: str | None, behavior: str, message: str, updated_input: dict[str, Any] | None = None,
          permissions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An explicit allow or deny for ``event``'s hook: PreToolUse's ``permissionDecision``, else a
    PermissionRequest ``decision`` (``message`` only with a deny; ``updatedPermissions`` only there)."""
    if event == "PreToolUse":
        spec: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": behavior,
                                "permissionDecisionReason": message}
        if updated_input is not None:
            spec["updatedInput"] = updated_input
        return {"hookSpecificOutput": spec}
    d: dict[str, Any] = {"behavior": behavior}
    if behavior == "deny":
        d["message"] = message
    if updated_input is not None:
        d["updatedInput"] = updated_input
    if permissions:
        d["updatedPermissions"] = permissions
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": d}}


def _declined(rec: Mapping[str, Any]) -> bool:
    out = rec.get("outcome") or {}
    return rec.get("state") in ("resolved", "expired") and out.get("option_id") == DECLINE


def form_decision(inp: HookInput, recs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The hook output for an AskUserQuestion form whose question records are ``recs`` (API form, in order):
    ``allow`` with the answers once all are answered, ``deny`` when one was declined, else None."""
    declined = [r.get("outcome") or {} for r in recs if _declined(r)]
    if declined:
        expired = any(r.get("state") == "expired" for r in recs)
        why = _said(declined[0].get("feedback"), expired, f"{DECLINED} ({declined[0].get('answered_by')})")
        return reply(inp.hook_event_name, "deny", why)
    answers: dict[str, str] = {}
    notes: dict[str, dict[str, str]] = {}
    for r in recs:
        out = r.get("outcome") or {}
        given = out.get("answers")
        if r.get("state") != "resolved" or not isinstance(given, dict) or len(given) != 1:
            return None
        (question, answer), = given.items()
        answers[question] = answer
        if isinstance(out.get("feedback"), str) and out["feedback"].strip():
            notes[question] = {"notes": out["feedback"].strip()}
    updated: dict[str, Any] = {"questions": inp.tool_input["questions"], "answers": answers}
    if notes:
        updated["annotations"] = notes
    return reply(inp.hook_event_name, "allow", "Answered in the permission room.", updated)


def plan_decision(inp: HookInput, rec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hook output for an ExitPlanMode request's settled record (:func:`decision` checks it is): approval
    echoes ``tool_input``; option 2 also accepts edits for the session (a PermissionRequest only)."""
    out = rec.get("outcome") or {}
    option_id = out.get("option_id")
    if option_id in (APPROVE, APPROVE_EDITS):
        by = out.get("answered_by") or "a person"
        return reply(inp.hook_event_name, "allow", f"Plan approved by {by} in the permission room.",
                     dict(inp.tool_input), ACCEPT_EDITS if option_id == APPROVE_EDITS else None)
    if option_id == KEEP_PLANNING:
        why = _said(out.get("feedback"), rec.get("state") == "expired", KEEP_PLANNING_MESSAGE)
        return reply(inp.hook_event_name, "deny", why)
    return None


def failure_notice(cli: Cli, why: str) -> dict[str, Any] | None:
    """What the hook prints when it could not ask (no decision): a ``systemMessage`` Claude Code shows
    its user, so a missing token or an unreachable daemon is not silent; None for Codex."""
    if cli != "claude-code":
        return None
    return {"systemMessage": f"permission-bot hook: {why}; no decision, so Claude Code asks as usual"}
