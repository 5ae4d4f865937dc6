"""A hook input -> an ACP ``session/request_permission`` params object for the daemon. Pure: no I/O.

The submission carries what the room should show (a ``toolCall`` with title, kind, rawInput,
content and locations, read by :mod:`bot.prompts`), the agent's name as ``label`` and the
options the hook can really honour: "Allow for this session" only where an ``updatedPermissions``
entry covers the repeat (FACTS.md: an ``addRules`` rule or ``setMode acceptEdits`` with
``destination: "session"``; ``addDirectories`` alone does not), and never for Codex or PreToolUse.


Claude Code's ``AskUserQuestion`` and ``ExitPlanMode`` (docs/questions.md; their outputs:
:mod:`bot.hooks.output`) take no plain ``allow`` (it is "no decision" to Claude Code 2.1.332):

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
import json
from collections.abc import Mapping, Sequence
from typing import Any

from bot.events.kinds import DECLINE, question_params
from bot.hooks.models import Cli, HookInput, HookInputError
from bot.util.linkhost import BadLink, link_host
from bot.util.words import clip

ALLOW_ONCE = "allow_once"
ALLOW_SESSION = "allow_session"
DENY = "deny"
TITLE_MAX = 300
SUSPICIOUS_URL = (
    "not a plain http(s) URL (a user name before @, a backslash, an escaped or unusual host): "
    "the fetcher may reach another host than it seems to name"
)
EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
KINDS = {
    **dict.fromkeys(EDIT_TOOLS, "edit"),
    **dict.fromkeys(("Glob", "Grep", "LS"), "search"),
    **dict.fromkeys(("NetworkAccess", "WebFetch", "WebSearch"), "fetch"),
    "Bash": "execute",
    "Read": "read",
    "Task": "think",
    "ExitPlanMode": "switch_mode",
}
PLAN_TITLE = "Ready to code? Approve the plan to leave plan mode"
QUESTION_TOOL = "AskUserQuestion"
PLAN_TOOL = "ExitPlanMode"
APPROVE = "approve"
APPROVE_EDITS = "approve_accept_edits"
KEEP_PLANNING = "keep_planning"


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _first_line(text: str, limit: int = 200) -> str:
    return clip(" ".join(text.split()), limit)


def _text(label: str, text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": f"{label}: {text}"}}


def tool_call_id(inp: HookInput) -> str:
    """The hook's ``tool_use_id``, else a stable hash of the tool and its input."""
    if inp.tool_use_id:
        return inp.tool_use_id
    blob = json.dumps([inp.tool_name, inp.tool_input], sort_keys=True, ensure_ascii=False, default=str)
    return "hook-" + hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def mcp_parts(tool_name: str) -> tuple[str, str] | None:
    """(server, tool) of an ``mcp__server__tool`` name, or None."""
    if not tool_name.startswith("mcp__"):
        return None
    server, sep, tool = tool_name[5:].partition("__")
    return (server, tool) if sep and server and tool else None


def url_host(url: str) -> str | None:
    """The host an http(s) URL fetches, or None when it cannot be told for sure.

    The fetcher parses URLs as WHATWG says (Node's ``URL``): the host is :func:`bot.util.linkhost.link_host`'s
    (the one reading every prompt's host comes from), and a link it refuses, one written with non-ASCII
    letters (a rule names the host as written) or an IPv6 address gets None.
    """
    try:
        found = link_host(url)
    except BadLink:
        return None
    return None if found.lookalike or found.host.startswith("[") else found.host


def describe(inp: HookInput) -> tuple[str, str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(title, kind, content, locations) of what the tool would do (the working directory is the
    submission's ``cwd``, shown with the asking agent)."""
    name, ti = inp.tool_name, inp.tool_input
    path = _s(ti.get("file_path")) or _s(ti.get("notebook_path"))
    content: list[dict[str, Any]] = []
    locations = [{"path": path}] if path else []
    mcp = mcp_parts(name)
    if name in ("Bash", "NetworkAccess"):
        verb = "Run" if name == "Bash" else "Network access for"
        title = f"{verb}: {_first_line(_s(ti.get('command')))}"
        if _s(ti.get("description")):
            content.append(_text("The agent says", _s(ti["description"])))
    elif name == "Edit":
        title = f"Edit {path}" + (" (every occurrence)" if ti.get("replace_all") is True else "")
        content.append(_diff(path, _s(ti.get("old_string")), _s(ti.get("new_string"))))
    elif name == "MultiEdit":
        edits = [e for e in ti.get("edits") or [] if isinstance(e, dict)] if isinstance(ti.get("edits"), list) else []
        title = f"Edit {path} ({len(edits)} changes)"
        content += [_diff(path, _s(e.get("old_string")), _s(e.get("new_string"))) for e in edits]
    elif name == "Write":
        title = f"Write {path}"
        new = _s(ti.get("content"))
        if inp.extras.write_before_known:
            content.append(_diff(path, inp.extras.write_before, new))
        else:
            told = inp.extras.write_withheld or "the file on disk was not read"
            content.append(_text("Note", f"{told}; the diff shows the whole new content"))
            content.append(_diff(path, None, new))
    elif name in ("WebFetch", "WebSearch"):
        target = _s(ti.get("url")) or _s(ti.get("query"))
        title = f"{'Fetch' if name == 'WebFetch' else 'Search the web for'} {_first_line(target)}"
        if _s(ti.get("url")):
            content.append(_text("URL", _s(ti["url"])))
            if url_host(_s(ti["url"])) is None:
                content.append(_text("⚠ Suspicious URL", SUSPICIOUS_URL))
        if _s(ti.get("prompt")):
            content.append(_text("The agent asks of it", _s(ti["prompt"])))
    elif name == PLAN_TOOL:
        title = PLAN_TITLE
    elif mcp is not None:
        title = f"MCP {mcp[0]}: {mcp[1]}"
        content.append(_text("MCP server", mcp[0]))
        content.append(_text("MCP tool", mcp[1]))
    else:
        subject = path or _s(ti.get("pattern")) or _s(ti.get("description"))
        title = f"{name}: {_first_line(subject)}" if subject else name
    return _first_line(title, TITLE_MAX), KINDS.get(name, "other"), content, locations


def _diff(path: str, old: str | None, new: str) -> dict[str, Any]:
    return {"type": "diff", "path": path or "(no path)", "oldText": old, "newText": new}


def session_rule(cli: Cli, inp: HookInput) -> tuple[list[dict[str, Any]], str] | None:
    """(updatedPermissions, what it allows) for "Allow for this session", or None when nothing covers it."""
    if cli != "claude-code" or inp.hook_event_name != "PermissionRequest":
        return None
    name, ti = inp.tool_name, inp.tool_input
    rule: dict[str, Any] | None = None
    if name == "Bash" and _s(ti.get("command")).strip() and "*" not in ti["command"]:
        # a "*" (or a trailing ":*") in a rule is a wildcard: the rule would allow more than was shown
        rule = {"toolName": "Bash", "ruleContent": ti["command"]}
    elif name == "WebFetch" and (host := url_host(_s(ti.get("url")))):
        rule = {"toolName": "WebFetch", "ruleContent": f"domain:{host}"}
    elif mcp_parts(name) is not None:
        rule = {"toolName": name}
    elif name in EDIT_TOOLS and any(
        s.get("type") == "setMode" and s.get("mode") == "acceptEdits" for s in inp.permission_suggestions
    ):
        mode = {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
        return [mode], "every file edit, for the rest of this session"
    if rule is None:
        return None
    entry = {"type": "addRules", "rules": [rule], "behavior": "allow", "destination": "session"}
    shown = f"{rule['toolName']}({rule['ruleContent']})" if "ruleContent" in rule else rule["toolName"]
    return [entry], f"{_first_line(shown)}, for the rest of this session"


def options(cli: Cli, inp: HookInput) -> list[dict[str, str]]:
    """Allow once, Allow for this session (when it can be honoured), Deny; a plan its own (:func:`plan_options`)."""
    if cli == "claude-code" and inp.tool_name == PLAN_TOOL:
        return plan_options(inp)
    opts = [{"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"}]
    if session_rule(cli, inp) is not None:
        opts.append({"optionId": ALLOW_SESSION, "name": "Allow for this session", "kind": "allow_always"})
    opts.append({"optionId": DENY, "name": "Deny", "kind": "reject_once"})
    return opts


def build_submission(cli: Cli, inp: HookInput, key: str) -> dict[str, Any]:
    """The daemon submission for one hook input (ACP params + ``key`` and ``label``)."""
    title, kind, content, locations = describe(inp)
    rule = session_rule(cli, inp)
    if rule is not None:
        content.append(_text("“Allow for this session” allows", rule[1]))
    tool_call = {
        "toolCallId": tool_call_id(inp),
        "title": title,
        "kind": kind,
        "rawInput": inp.tool_input,
        "content": content,
        "locations": locations,
        "_meta": {cli: {"toolName": inp.tool_name, "hookEventName": inp.hook_event_name, "cwd": inp.cwd}},
    }
    return {
        "sessionId": inp.session_id,
        "toolCall": tool_call,
        "options": options(cli, inp),
        "key": key,
        "label": cli,
        **({"cwd": inp.cwd} if inp.cwd.strip() else {}),
    }


def build_submissions(cli: Cli, inp: HookInput, key: str) -> list[dict[str, Any]]:
    """The daemon submissions for one hook input: one, or one per question of an AskUserQuestion
    (HookInputError when its questions cannot be asked)."""
    if cli == "claude-code" and inp.tool_name == QUESTION_TOOL:
        return question_submissions(cli, inp, key, tool_call_id(inp))
    return [build_submission(cli, inp, key)]


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
