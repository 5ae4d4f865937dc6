"""Claude Code's ``AskUserQuestion`` and ``ExitPlanMode`` through the hook (docs/questions.md). Pure: no I/O.

Claude Code 2.1.332 takes no plain ``allow`` for either tool (it is "no decision"):

- **AskUserQuestion**: one question request per question of ``tool_input.questions`` (bot.events.kinds), in the
  agent's order. Once every one is answered: ``allow`` with ``updatedInput`` = the questions unchanged plus
  ``answers`` (``{"<question>": "<label>"}``; several labels joined by ``", "``; free text as given), and
  ``annotations`` (``{"<question>": {"notes": ...}}``) for feedback given with a choice. One declined (or
  expired): ``deny``, the whole form. PreToolUse takes the same ``updatedInput`` (``permissionDecision``).
- **ExitPlanMode**: a plan request; ``allow`` echoes ``tool_input`` as ``updatedInput``; option 2 adds
  ``updatedPermissions`` ``setMode acceptEdits`` for the session (PermissionRequest only); option 3, keep
  planning, is a ``deny`` whose ``message`` is exactly the person's feedback (the model reads it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from bot.events.kinds import DECLINE, question_params
from bot.hooks.models import Cli, HookInput, HookInputError

QUESTION_TOOL = "AskUserQuestion"
PLAN_TOOL = "ExitPlanMode"
APPROVE = "approve"
APPROVE_EDITS = "approve_accept_edits"
KEEP_PLANNING = "keep_planning"
ACCEPT_EDITS = [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
DECLINED = "The user declined to answer the questions in the permission room."
KEEP_PLANNING_MESSAGE = "The user wants you to keep planning: the plan was not approved."


def plan_options(inp: HookInput) -> list[dict[str, str]]:
    """1 approve (edits still asked), 2 approve and accept edits (a PermissionRequest only), 3 keep planning."""
    opts = [{"optionId": APPROVE, "name": "Approve (edits still asked)", "kind": "allow_once"}]
    if inp.hook_event_name == "PermissionRequest":
        opts.append({"optionId": APPROVE_EDITS, "name": "Approve, and accept edits for this session",
                     "kind": "allow_always"})
    opts.append({"optionId": KEEP_PLANNING, "name": "Keep planning", "kind": "reject_once"})
    return opts


def questions_of(inp: HookInput) -> list[Mapping[str, Any]]:
    """The questions of an AskUserQuestion input; HookInputError when they cannot be asked."""
    qs = inp.tool_input.get("questions")
    if not isinstance(qs, list) or not 1 <= len(qs) <= 10:
        raise HookInputError("tool_input.questions: expected 1 to 10 questions")
    texts: set[str] = set()
    for i, q in enumerate(qs):
        if not isinstance(q, dict) or not isinstance(q.get("question"), str) or not q["question"].strip():
            raise HookInputError(f"tool_input.questions[{i}].question: expected a non-empty string")
        if q["question"] in texts:
            raise HookInputError(f"tool_input.questions[{i}].question: repeats an earlier question")
        texts.add(q["question"])
        opts = q.get("options")
        if not isinstance(opts, list) or len(opts) > 19 or not all(
            isinstance(o, dict) and isinstance(o.get("label"), str) and o["label"].strip() for o in opts
        ):
            raise HookInputError(f"tool_input.questions[{i}].options: expected up to 19 options with labels")
        if len({o["label"] for o in opts}) != len(opts) or DECLINE in {o["label"] for o in opts}:
            raise HookInputError(f"tool_input.questions[{i}].options: labels must differ (and not be {DECLINE!r})")
    return qs


def question_submissions(cli: Cli, inp: HookInput, key: str, tool_call_id: str) -> list[dict[str, Any]]:
    """One question request per question (keys ``KEY.1``, ``KEY.2`` ...)."""
    qs = questions_of(inp)
    out = []
    for i, q in enumerate(qs, 1):
        raw = {
            "question": q["question"],
            "header": q.get("header") if isinstance(q.get("header"), str) else "",
            "multiSelect": q.get("multiSelect") is True,
            "options": [{"label": o["label"], "description": o.get("description", "")} for o in q["options"]],
            "form": {"index": i, "count": len(qs)},
        }
        meta: dict[str, Any] = {cli: {"toolName": QUESTION_TOOL, "hookEventName": inp.hook_event_name, "cwd": inp.cwd}}
        choices = [(o["label"], o["label"]) for o in q["options"]]
        out.append({
            **question_params(inp.session_id, f"{tool_call_id}:q{i}", raw, choices, meta),
            "key": f"{key}.{i}",
            "label": cli,
            **({"cwd": inp.cwd} if inp.cwd.strip() else {}),
        })
    return out


def form_digest(digests: Sequence[str | None]) -> str | None:
    """The digest a decision for several requests (a question form) is bound to: one digest, or the SHA-256
    of the digests in order (None when one cannot have any)."""
    if any(d is None for d in digests):
        return None
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("\n".join(str(d) for d in digests).encode()).hexdigest()


def _declined(rec: Mapping[str, Any]) -> bool:
    out = rec.get("outcome") or {}
    return rec.get("state") in ("resolved", "expired") and out.get("option_id") == DECLINE


def form_decision(inp: HookInput, recs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The hook output for an AskUserQuestion form whose question records are ``recs`` (API form, in order):
    ``allow`` with the answers once all are answered, ``deny`` when one was declined, else None."""
    if any(_declined(r) for r in recs):
        fb = next(((r.get("outcome") or {}).get("feedback") for r in recs if _declined(r)), None)
        by = next(((r.get("outcome") or {}).get("answered_by") for r in recs if _declined(r)), None)
        expired = any(r.get("state") == "expired" for r in recs)
        message = fb.strip() if isinstance(fb, str) and fb.strip() else (
            "No answer in time in the permission room." if expired else f"{DECLINED} ({by})"
        )
        return _out(inp, "deny", message, None)
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
    return _out(inp, "allow", "Answered in the permission room.", updated)


def plan_decision(inp: HookInput, rec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hook output for an ExitPlanMode request's record: approval echoes ``tool_input``."""
    out = rec.get("outcome") or {}
    option_id = out.get("option_id")
    if rec.get("state") not in ("resolved", "expired") or not isinstance(option_id, str):
        return None
    if option_id in (APPROVE, APPROVE_EDITS):
        d = _out(inp, "allow", f"Plan approved by {out.get('answered_by') or 'a person'} in the permission room.",
                 dict(inp.tool_input))
        if option_id == APPROVE_EDITS and inp.hook_event_name == "PermissionRequest":
            d["hookSpecificOutput"]["decision"]["updatedPermissions"] = ACCEPT_EDITS
        return d
    if option_id == KEEP_PLANNING:
        fb = out.get("feedback")
        if isinstance(fb, str) and fb.strip():
            return _out(inp, "deny", fb.strip(), None)
        why = "No answer in time in the permission room." if rec.get("state") == "expired" else KEEP_PLANNING_MESSAGE
        return _out(inp, "deny", why, None)
    return None


def _out(inp: HookInput, behavior: str, message: str, updated: dict[str, Any] | None) -> dict[str, Any]:
    if inp.hook_event_name == "PreToolUse":
        spec: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": behavior,
                                "permissionDecisionReason": message}
        if updated is not None:
            spec["updatedInput"] = updated
        return {"hookSpecificOutput": spec}
    d: dict[str, Any] = {"behavior": behavior}
    if behavior == "deny":
        d["message"] = message
    if updated is not None:
        d["updatedInput"] = updated
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": d}}
