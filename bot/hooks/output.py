"""A settled record -> the JSON each CLI reads from its hook (FACTS.md). Pure: no I/O.

Claude Code ``PermissionRequest``: ``decision.behavior`` allow|deny, ``updatedPermissions`` only
for "Allow for this session", ``message`` with a deny (the model reads exactly it).
Claude Code ``PreToolUse``: ``permissionDecision`` allow|deny + ``permissionDecisionReason``.
Codex ``PermissionRequest``: like Claude Code's, never with ``updatedPermissions``.
None means "no decision": the CLI asks whoever it would ask without the hook. When the hook cannot
ask at all, Claude Code still gets a ``systemMessage`` (:func:`failure_notice`): a warning it shows
the user, carrying no decision (its stderr is dropped for a PermissionRequest; FACTS.md).
"""

from __future__ import annotations

from typing import Any

from bot.hooks.asks import PLAN_TOOL, plan_decision
from bot.hooks.models import Cli, HookInput
from bot.hooks.translate import ALLOW_ONCE, ALLOW_SESSION, session_rule


def _allowed(option_id: str, options: list[dict[str, Any]]) -> bool | None:
    kind = next((o.get("kind") for o in options if o.get("optionId") == option_id), None)
    if option_id in (ALLOW_ONCE, ALLOW_SESSION) or kind in ("allow_once", "allow_always"):
        return True
    if kind in ("reject_once", "reject_always"):
        return False
    return None


def _deny_message(rec: dict[str, Any]) -> str:
    out = rec.get("outcome") or {}
    feedback = out.get("feedback")
    if isinstance(feedback, str) and feedback.strip():
        return feedback.strip()
    if rec.get("state") == "expired":
        return "Denied: no answer in time in the permission room."
    return f"Denied by {out.get('answered_by') or 'a person'} in the permission room."


def decision(cli: Cli, inp: HookInput, rec: dict[str, Any]) -> dict[str, Any] | None:
    """The hook output for a settled record, or None (cancelled, or an option that is neither)."""
    if cli == "claude-code" and inp.tool_name == PLAN_TOOL:
        return plan_decision(inp, rec)  # a plain allow is no decision for ExitPlanMode: echo its input
    out = rec.get("outcome") or {}
    option_id = out.get("option_id")
    if rec.get("state") not in ("resolved", "expired") or not isinstance(option_id, str):
        return None
    allowed = _allowed(option_id, rec.get("options") or [])
    if allowed is None:
        return None
    if allowed:
        updated = None
        if option_id == ALLOW_SESSION and (rule := session_rule(cli, inp)) is not None:
            updated = rule[0]
        by = out.get("answered_by") or "a person"
        return allow(inp, f"Allowed by {by} in the permission room.", updated)
    return deny(inp, _deny_message(rec))


def allow(inp: HookInput, reason: str, updated: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An explicit allow for ``inp``'s event."""
    if inp.hook_event_name == "PreToolUse":
        return _pre_tool_use("allow", reason)
    d: dict[str, Any] = {"behavior": "allow"}
    if updated:
        d["updatedPermissions"] = updated
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": d}}


def deny(inp: HookInput | None, message: str, event: str | None = None) -> dict[str, Any]:
    """An explicit deny for ``inp``'s event (or ``event`` when the input did not validate)."""
    ev = inp.hook_event_name if inp is not None else event
    if ev == "PreToolUse":
        return _pre_tool_use("deny", message)
    d = {"behavior": "deny", "message": message}
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": d}}


def _pre_tool_use(verdict: str, reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": verdict,
            "permissionDecisionReason": reason,
        }
    }


def failure_notice(cli: Cli, why: str) -> dict[str, Any] | None:
    """What the hook prints when it could not ask (no decision): a ``systemMessage`` Claude Code shows
    its user, so a missing token or an unreachable daemon is not silent; None for Codex."""
    if cli != "claude-code":
        return None
    return {"systemMessage": f"permission-bot hook: {why}; no decision, so Claude Code asks as usual"}
