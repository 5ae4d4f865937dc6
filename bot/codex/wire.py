"""Codex's app-server requests as the daemon's records, and the person's answer in Codex's words. Pure.

Approvals (``item/commandExecution/requestApproval``, ``item/fileChange/requestApproval``) become one permission
request each: ``sessionId`` the thread, ``toolCall`` the item (``kind`` ``execute`` or ``edit``; a file change's
files come from the item the server announced before, ``item/started``), and one option per decision Codex
offers, named by what it does:

- ``accept``: allow once;
- ``acceptForSession``: allow always, for this thread (Codex remembers it until the thread ends);
- ``acceptWithExecpolicyAmendment``: allow always, and Codex keeps a rule for every later session (said so);
- ``applyNetworkPolicyAmendment``: a host rule Codex keeps for every later session (allow or deny);
- ``decline``: no, the turn goes on and the model is told "rejected by user" (always offered: Codex takes it
  whether or not it lists it);
- ``cancel``: no, and the turn is interrupted.

The reply is ``{"decision": <the decision as Codex offered it>}``; a record with no option (cancelled, expired)
is ``cancel`` when offered, else ``decline``.

Questions (``item/tool/requestUserInput``): each question is one question prompt (:mod:`bot.door.forms`), its
options the choices, free text taken when ``isOther``; the reply is ``{"answers": {<question id>: {"answers":
[<label or the person's words>, <a choice's note>?]}}}``, handed to the model as it is. A secret question
(``isSecret``) is never posted: such a request goes to the client unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.door import forms
from bot.events import kinds

COMMAND = "item/commandExecution/requestApproval"
FILE_CHANGE = "item/fileChange/requestApproval"
USER_INPUT = "item/tool/requestUserInput"
APPROVALS = (COMMAND, FILE_CHANGE)
MAX_TITLE = 300


class NotAskable(ValueError):
    """A request the room cannot ask (the message says why): it goes to the client unchanged."""


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _ids(params: Mapping[str, Any]) -> tuple[str, str]:
    thread, item = params.get("threadId"), params.get("itemId")
    if not isinstance(thread, str) or not thread or not isinstance(item, str) or not item:
        raise NotAskable("threadId and itemId must be non-empty strings")
    return thread, item


def decision_name(decision: Any) -> str | None:
    """A decision's name: the string, or the one key of an object decision (None when neither)."""
    if isinstance(decision, str):
        return decision
    if isinstance(decision, Mapping) and len(decision) == 1:
        key = next(iter(decision))
        return key if isinstance(key, str) else None
    return None


def _option(decision: Any, i: int, what: str) -> dict[str, Any] | None:
    """The daemon option for one of Codex's decisions (None: one the proxy does not know, left out)."""
    name = decision_name(decision)
    if name == "accept":
        return {"optionId": "accept", "name": "Yes, allow once", "kind": "allow_once"}
    if name == "acceptForSession":
        return {"optionId": "acceptForSession", "name": f"Yes, and allow {what} for the rest of this Codex thread",
                "kind": "allow_always"}
    if name == "acceptWithExecpolicyAmendment":
        rule = (decision.get(name) or {}).get("execpolicy_amendment") if isinstance(decision, Mapping) else None
        prefix = " ".join(str(w) for w in rule) if isinstance(rule, list) else "this command"
        return {"optionId": name, "kind": "allow_always",
                "name": f"Yes, and always allow commands that start with `{prefix[:200]}`: "
                        "a rule Codex keeps for every later session, not this one only"}
    if name == "applyNetworkPolicyAmendment":
        amend = (decision.get(name) or {}).get("network_policy_amendment") if isinstance(decision, Mapping) else None
        amend = amend if isinstance(amend, Mapping) else {}
        act, host = _s(amend.get("action")), _s(amend.get("host"))[:200]
        if act not in ("allow", "deny") or not host:
            return None
        return {"optionId": f"{name}:{i}", "kind": "allow_always" if act == "allow" else "reject_always",
                "name": f"{act.capitalize()} the host {host} from now on: a rule Codex keeps for every later session"}
    if name == "decline":
        return {"optionId": "decline", "name": "No (Codex carries on with the turn)", "kind": "reject_once"}
    if name == "cancel":
        return {"optionId": "cancel", "name": "No, and stop the turn", "kind": "reject_once"}
    return None


def decisions_of(method: str, params: Mapping[str, Any]) -> list[Any]:
    """The decisions Codex offers (``availableDecisions``, else the ones its schema always takes), decline in."""
    offered = params.get("availableDecisions")
    out = list(offered) if isinstance(offered, list) and offered else ["accept", "acceptForSession", "cancel"]
    names = [decision_name(d) for d in out]
    if "decline" not in names:  # Codex takes decline whatever it lists: a plain no that lets the turn go on
        at = names.index("cancel") if "cancel" in names else len(out)
        out.insert(at, "decline")
    return out


def approval_body(method: str, params: Mapping[str, Any], item: Mapping[str, Any] | None) -> dict[str, Any]:
    """The daemon submission (ACP ``session/request_permission`` params) for one approval; ``NotAskable``."""
    thread, item_id = _ids(params)
    reason = _s(params.get("reason"))
    raw: dict[str, Any] = {"reason": reason} if reason else {}
    content: list[dict[str, Any]] = []
    if method == COMMAND:
        command = _s(params.get("command")) or _s((item or {}).get("command"))
        if not command:
            raise NotAskable("a command approval without its command")
        raw.update(command=command, cwd=_s(params.get("cwd")) or None)
        kind, title, what = "execute", command, "this command"
    else:
        changes = (item or {}).get("changes")
        changes = [c for c in changes if isinstance(c, Mapping)] if isinstance(changes, list) else []
        paths = [_s(c.get("path")) for c in changes if _s(c.get("path"))]
        raw.update(changes=changes)
        if params.get("grantRoot"):
            raw["grantRoot"] = _s(params.get("grantRoot"))
        for c in changes:
            if _s(c.get("path")):
                content.append({"type": "diff", "path": c["path"], "oldText": None, "newText": _s(c.get("diff"))})
        kind, what = "edit", "changes to these files"
        title = ("Edit " + ", ".join(paths)) if paths else (reason or "Edit files")
    if reason:
        content.insert(0, {"type": "content", "content": {"type": "text", "text": reason}})
    options = [o for i, d in enumerate(decisions_of(method, params)) if (o := _option(d, i, what)) is not None]
    if not any(o["kind"] == "allow_once" for o in options) or not any(o["kind"] == "reject_once" for o in options):
        raise NotAskable("no allow-once or no reject option among the decisions offered")
    tool_call: dict[str, Any] = {"toolCallId": item_id, "title": title[:MAX_TITLE], "kind": kind,
                                 "status": "pending", "rawInput": {k: v for k, v in raw.items() if v is not None}}
    if content:
        tool_call["content"] = content
    return {"sessionId": thread, "toolCall": tool_call, "options": options}


def decision_reply(method: str, params: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """Codex's reply for a daemon result (``{"outcome": {"outcome": "selected", "optionId"}}`` or cancelled)."""
    out = result.get("outcome")
    chosen = out.get("optionId") if isinstance(out, Mapping) and out.get("outcome") == "selected" else None
    offered = decisions_of(method, params)
    for i, d in enumerate(offered):
        opt = _option(d, i, "")
        if opt is not None and opt["optionId"] == chosen:
            return {"decision": d}
    names = [decision_name(d) for d in offered]
    return {"decision": "cancel" if "cancel" in names else "decline"}


def choice_value(i: int) -> str:
    """The option id of a question's ``i``-th choice (0-based)."""
    return f"choice-{i + 1}"


def asks_of(params: Mapping[str, Any]) -> list[forms.Ask]:
    """A ``requestUserInput``'s questions as the room asks them; ``NotAskable`` for a secret or bad one."""
    _ids(params)
    questions = params.get("questions")
    if not isinstance(questions, list) or not questions or len(questions) > forms.MAX_QUESTIONS:
        raise NotAskable(f"questions must be a list of 1 to {forms.MAX_QUESTIONS}")
    asks: list[forms.Ask] = []
    seen: set[str] = set()
    for q in questions:
        if not isinstance(q, Mapping) or not isinstance(q.get("id"), str) or not q["id"] or q["id"] in seen:
            raise NotAskable("every question needs an id of its own")
        if q.get("isSecret"):
            raise NotAskable("a secret question is never posted in the room")
        text = _s(q.get("question")).strip() or _s(q.get("header")).strip()
        if not text:
            raise NotAskable("a question without its text")
        opts = q.get("options")
        opts = opts if isinstance(opts, list) else []
        choices = tuple(
            forms.Choice(choice_value(i), _s(o.get("label"))[:200], _s(o.get("description"))[:500])
            for i, o in enumerate(opts) if isinstance(o, Mapping) and _s(o.get("label"))
        )
        free = bool(q.get("isOther")) or not choices
        seen.add(q["id"])
        asks.append(forms.Ask(q["id"], "single" if choices else "text", text, _s(q.get("header")),
                              choices, custom=q["id"] if free and choices else None))
    return asks


def answer_of(ask: forms.Ask, got: forms.Answered) -> list[str] | None:
    """One question's answers as Codex takes them (labels, the person's words, a choice's note); None: no usable
    answer (declined, cancelled, or own words where only the choices are taken)."""
    if got.option_id is None or got.option_id == kinds.DECLINE:
        return None
    labels = {c.value: c.label for c in ask.choices}
    picked = [labels[c] for c in (list(got.chosen) or [got.option_id]) if c in labels]
    if picked:
        return picked + ([got.feedback] if got.feedback else [])
    if got.text and ask.free_text:
        return [got.text]
    return None


def answers_reply(answers: Mapping[str, list[str]]) -> dict[str, Any]:
    """``{"answers": {<question id>: {"answers": [...]}}}``."""
    return {"answers": {k: {"answers": list(v)} for k, v in answers.items()}}
