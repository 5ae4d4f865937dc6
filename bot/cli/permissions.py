"""`permission-bot permissions ls|approve|deny|watch|rules`: the human side of the inbox (agentproto seed 002).

A thin client over the daemon's HTTP API (docs/design.md), stdlib only so it starts fast;
``bot.inbox.rules`` (pydantic) is imported by ``watch`` alone. Exit codes: 0 done; 1 the daemon said no
(HTTP 404/409/401/...) or cannot be reached; 2 bad command line (argparse, --url, rules).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

from bot.cli import rules_cmd
from bot.cli.discovery import TOKEN_ENV, warn_argv_token
from bot.cli.http import Client, DaemonUnreachable, UsageError, discover
from bot.durations import DurationError, format_age, parse_duration
from bot.hide import hide_secrets
from bot.ids import url_segment as quote_id
from bot.words import clip

if TYPE_CHECKING:
    from bot.inbox.rules import Rule

PROG = "permission-bot"
EMPTY = "no pending permission requests"
_ALLOW = ("allow_once", "allow_always")


# ---------------------------------------------------------------- arguments


class _ToolRule(argparse.Action):
    """``--allow-tool``/``--deny-tool``: append ``(decision, pattern)`` to one list, keeping their order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        items = list(getattr(namespace, self.dest, None) or [])
        items.append((self.const, values))
        setattr(namespace, self.dest, items)


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _interval(text: str) -> float:
    v = _duration(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be more than zero (got {text!r})")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the subcommands ls/approve/deny/watch (each with --url/--token) to ``p``."""
    conn = argparse.ArgumentParser(add_help=False)
    g = conn.add_argument_group("daemon")
    g.add_argument("--url", metavar="URL", help="the daemon's API (env PERMISSION_BOT_URL; http://127.0.0.1:8750)")
    g.add_argument("--token-file", metavar="PATH", help="a file holding the API token (else env PERMISSION_BOT_TOKEN)")
    g.add_argument("--token", metavar="TOKEN", help="deprecated: the token in argv, readable by any local process")
    sub = p.add_subparsers(dest="perm_verb", metavar="{ls,approve,deny,watch,rules}", required=True)

    ls = sub.add_parser(
        "ls",
        parents=[conn],
        help="list pending requests, oldest first",
        description="List every pending permission request across sessions, oldest first.",
    )
    ls.add_argument("--json", action="store_true", help="print the full records as a JSON array")
    ls.add_argument("--session", metavar="ID", help="only this session (its id or label)")

    for verb in ("approve", "deny"):
        what = (
            "Approve: allow-once, or allow-always with --always"
            if verb == "approve"
            else "Deny: a reject option, or cancel the request when none is offered"
        )
        v = sub.add_parser(verb, parents=[conn], help=f"{verb} one request", description=f"{what}.")
        v.add_argument("id", metavar="ID", help="the request id (see ls)")
        if verb == "approve":
            v.add_argument("--always", action="store_true", help="pick allow-always when it is offered")
        v.add_argument("--option-id", metavar="ID", help="pick exactly this offered option (see ls --json)")
        v.add_argument("--feedback", metavar="TEXT", help="free text attached to the resolution")
        v.add_argument("--json", action="store_true", help="print the resolved record as JSON")

    w = sub.add_parser(
        "watch",
        parents=[conn],
        help="auto-resolve requests that match rules",
        description="Poll the inbox and resolve requests that match explicit rules; deny rules win. "
        "Anything unmatched stays pending. Needs at least one rule.",
    )
    w.add_argument(
        "--allow-tool",
        dest="tool_rules",
        action=_ToolRule,
        const="approve",
        metavar="PAT",
        help="approve tools whose harness tool name matches this glob (case-sensitive; never the title); repeatable",
    )
    w.add_argument(
        "--deny-tool",
        dest="tool_rules",
        action=_ToolRule,
        const="deny",
        metavar="PAT",
        help="deny tools matching this glob; repeatable; wins over any allow rule",
    )
    w.add_argument("--session", metavar="ID", help="restrict every rule to this session id (chosen by the agent)")
    w.add_argument("--label", metavar="NAME", help="restrict every rule to requests with this label (set by the proxy)")
    w.add_argument("--rules-json", metavar="JSON|@FILE", help="a JSON list of rules, or @FILE holding one")
    w.add_argument("--always", action="store_true", help="approve rules pick allow-always (if offered)")
    w.add_argument("--interval", type=_interval, default=2.0, metavar="DUR", help="poll period (default 2s)")
    w.add_argument("--timeout", type=_duration, metavar="DUR", help="stop after this long (exit 0)")
    w.add_argument("--once", action="store_true", help="one pass, then exit")
    w.add_argument("--dry-run", action="store_true", help="print what would be done; resolve nothing")
    w.add_argument("--json", action="store_true", help="one JSON object per line")
    rules_cmd.add_arguments(sub, conn)


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry (``python -m bot.cli.permissions``); the real CLI wires :func:`add_arguments`."""
    p = argparse.ArgumentParser(prog=f"{PROG} permissions")
    add_arguments(p)
    return run(p.parse_args(argv))


# ---------------------------------------------------------------- running


class _Fail(Exception):
    """A one-line error and its exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def run(args: argparse.Namespace) -> int:
    """Run the verb in ``args.perm_verb``; returns the exit code."""
    verb = args.perm_verb
    try:
        if args.token is not None:
            warn_argv_token("permission-bot permissions")
        url, token = discover(args.url, args.token, args.token_file)
        hide_secrets()  # a decider token: not in this process's /proc environ or cmdline for an agent to read
        client = Client(url, token)
        if verb == "ls":
            return _ls(args, client)
        if verb in ("approve", "deny"):
            return _decide(args, client, verb)
        if verb == "watch":
            return _watch(args, client)
        if verb == "rules":
            try:
                return rules_cmd.run(args, client, lambda status, body: _http_message(status, body, client))
            except rules_cmd.RulesError as err:
                raise _Fail(str(err)) from None
        raise _Fail(f"unknown permissions verb {verb!r}", 2)
    except UsageError as err:
        return _error(str(err), 2)
    except DaemonUnreachable as err:
        return _error(str(err), 1)
    except _Fail as err:
        return _error(str(err), err.code)
    except KeyboardInterrupt:
        return 0 if verb == "watch" else 130
    except BrokenPipeError:
        _quiet_stdout()
        return 0


def _warn(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _error(message: str, code: int) -> int:
    _warn(message)
    return code


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _out(line: str) -> None:
    print(line, flush=True)


# ---------------------------------------------------------------- output helpers

_SPACE = re.compile(r"\s+")  # str \s covers \n \t \r, \x1c-\x1f, \x85, \u2028/\u2029
_CTRL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """One terminal-safe line: whitespace runs become one space, control and bidi characters become '?'."""
    return _CTRL.sub("?", _SPACE.sub(" ", text)).strip()


def dumps(obj: object, indent: int | None = None) -> str:
    """JSON with readable non-ASCII, but C1 controls, bidi marks and line separators escaped."""
    seps = (",", ": ") if indent else (",", ":")
    text = json.dumps(obj, ensure_ascii=False, indent=indent, separators=seps)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _str(rec: Mapping[str, Any], *keys: str) -> str:
    for k in keys:
        v = rec.get(k)
        if isinstance(v, str) and v:
            return v
    return ""


def tool_of(rec: Mapping[str, Any]) -> str:
    """The record's tool name, falling back to its title and kind."""
    return _str(rec, "tool_name", "toolName", "title", "tool_kind") or "?"


def session_of(rec: Mapping[str, Any]) -> str:
    """The session's label when it has one, else its id."""
    return _str(rec, "label", "session_id", "sessionId") or "?"


def preview(raw: object) -> str:
    """What the tool would do, in brief: the command, else the path/url/pattern, else compact JSON."""
    if raw is None or raw == {}:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, Mapping):
        for k in ("command", "cmd"):
            v = raw.get(k)
            if isinstance(v, str) and v:
                return v
            if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                return shlex.join(v)
        for k in ("file_path", "path", "abs_path", "notebook_path", "url", "pattern", "query"):
            v = raw.get(k)
            if isinstance(v, str) and v:
                return v
    try:
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(raw)


def question(rec: Mapping[str, Any]) -> str:
    """``Allow "TOOL"?`` and a preview of the raw input."""
    q = _str(rec, "text") or f'Allow "{tool_of(rec)}"?'
    p = preview(rec.get("raw_input", rec.get("rawInput")))
    return f"{q} {p}" if p else q


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def age_of(rec: Mapping[str, Any], now: datetime) -> str:
    """How long the request has waited (``12s``, ``3m``), ``?`` when unknown."""
    t = _parse_time(rec.get("requested_at", rec.get("requestedAt")))
    return format_age((now - t).total_seconds()) if t else "?"


_HEAD = ("ID", "SESSION", "TOOL", "AGE", "QUESTION")
_CAPS = (32, 24, 24, 6)


def table(records: Sequence[Mapping[str, Any]], width: int, now: datetime) -> list[str]:
    """The ``ls`` table: one line per record, cells cut with … to fit ``width`` columns."""
    rows = [
        (
            clean(str(r.get("id", "?"))),
            clean(session_of(r)),
            clean(tool_of(r)),
            age_of(r, now),
            clean(question(r)),
        )
        for r in records
    ]
    widths = [min(cap, max(len(_HEAD[i]), *(len(row[i]) for row in rows))) for i, cap in enumerate(_CAPS)]
    last = max(len(_HEAD[4]), width - sum(widths) - 2 * len(widths))
    lines = []
    for row in [_HEAD, *rows]:
        cells = [clip(row[i], w).ljust(w) for i, w in enumerate(widths)]
        lines.append("  ".join([*cells, clip(row[4], last)]).rstrip())
    return lines


# ---------------------------------------------------------------- ls


def _matches_session(rec: Mapping[str, Any], session: str) -> bool:
    return session in (rec.get("session_id"), rec.get("sessionId"), rec.get("label"))


LS_PAGE = "1000"  # records per GET /permissions page (a daemon without pages answers all at once)


def _ls(args: argparse.Namespace, client: Client) -> int:
    query: dict[str, str] | None = {"limit": LS_PAGE, **({"session": args.session} if args.session else {})}
    records: list[dict[str, Any]] = []
    path = "/permissions"
    while True:
        status, body = client.call("GET", path, query=query)
        if status != 200:
            raise _Fail(_http_message(status, body, client))
        if not isinstance(body, list):
            raise _Fail(f"unexpected answer from {client.url}/permissions (not a JSON list): {clip(str(body), 80)}")
        records += [r for r in body if isinstance(r, dict)]
        nxt = client.next_page
        if not nxt or not nxt.startswith("/permissions?"):
            break
        path, query = nxt, None
    if args.session:
        records = [r for r in records if _matches_session(r, args.session)]
    if args.json:
        _out(dumps(records, indent=2 if sys.stdout.isatty() else None))  # the C encoder has no indent
        return 0
    if not records:
        _out(EMPTY + (f" in session {clean(args.session)}" if args.session else ""))
        return 0
    width = shutil.get_terminal_size((160, 24)).columns
    sys.stdout.write("\n".join(table(records, width, datetime.now(UTC))) + "\n")
    sys.stdout.flush()
    return 0


# ---------------------------------------------------------------- approve / deny


def _who() -> str:
    try:
        return "cli:" + getpass.getuser()
    except (OSError, KeyError, ImportError):
        return "cli:unknown"


def _reason(body: object) -> str:
    if isinstance(body, Mapping):
        r = body.get("reason") or body.get("error")
        if isinstance(r, str) and r:
            return clean(r)
    if isinstance(body, str) and body.strip():
        return clip(clean(body), 200)
    return ""


def _http_message(status: int, body: object, client: Client) -> str:
    if status == 401:
        if client.token:
            return (
                f"HTTP 401: the daemon refused the API token (from --token-file or {TOKEN_ENV}); "
                "it must be one of the daemon's [[api.tokens]] (or its api.token)"
            )
        return f"HTTP 401: no API token; pass --token-file PATH or set {TOKEN_ENV}"
    reason = _reason(body)
    return f"HTTP {status}: {reason}" if reason else f"HTTP {status}"


def _fetch(client: Client, rid: str) -> tuple[int, dict[str, Any] | None]:
    """``(status, record)`` for ``rid`` in any state; status 0 when unreachable (explains a 404/409)."""
    try:
        status, rec = client.call("GET", f"/permissions/{quote_id(rid)}")
    except DaemonUnreachable:
        return 0, None
    return status, (rec if status == 200 and isinstance(rec, dict) else None)


def _outcome_text(outcome: Mapping[str, Any]) -> str:
    bits = [str(outcome.get("option_id") or "cancelled")]
    for k, fmt in (("answered_by", "by {}"), ("via", "via {}")):
        v = outcome.get(k)
        if isinstance(v, str) and v:
            bits.append(fmt.format(v))
    return clean(" ".join(bits))


def _explain_404(client: Client, rid: str) -> str:
    status, rec = _fetch(client, rid)
    if status == 404:
        why = "unknown id; see permissions ls"
    elif rec is None:
        why = "unknown or already resolved"
    elif rec.get("state") == "pending":
        why = "it was pending a moment ago; try again"
    else:
        outcome = rec.get("outcome")
        done = f": {_outcome_text(outcome)}" if isinstance(outcome, Mapping) else ""
        why = f"already {clean(str(rec.get('state')))}{done}"
    return f"HTTP 404: no pending request {clean(rid)} ({why})"


def _explain_409(client: Client, rid: str, verb: str, option_id: str | None, body: object) -> str:
    _, rec = _fetch(client, rid)
    offered = ""
    if rec is not None and isinstance(rec.get("options"), list):
        ids = [str(o.get("optionId")) for o in rec["options"] if isinstance(o, Mapping)]
        offered = f"; offered: {clean(', '.join(ids))}" if ids else ""
    if option_id is not None:
        return f"HTTP 409: {clean(rid)} does not offer option {clean(option_id)}{offered}"
    if verb == "approve":
        hint = "pass --option-id (see ls --json)"
        return f"HTTP 409: {clean(rid)} offers no allow-flavoured option; {hint}{offered}"
    return f"HTTP 409: {clean(rid)}: {_reason(body) or 'no fitting option'}{offered}"


def _summary(verb: str, rid: str, rec: Mapping[str, Any]) -> str:
    done = "approved" if verb == "approve" else "denied"
    outcome = rec.get("outcome")
    oid = outcome.get("option_id") if isinstance(outcome, Mapping) else None
    if not oid:
        if rec.get("state") == "cancelled":
            return f"{done} {rid}: cancelled (no reject-flavoured option offered)"
        return f"{done} {rid}"
    name = outcome.get("option_name") if isinstance(outcome, Mapping) else None
    if not name:
        for o in rec.get("options") or []:
            if isinstance(o, Mapping) and o.get("optionId") == oid:
                name = o.get("name")
    return f"{done} {rid} with {oid}" + (f" ({name})" if isinstance(name, str) and name else "")


def _decide(args: argparse.Namespace, client: Client, verb: str) -> int:
    rid: str = args.id
    body: dict[str, Any] = {"decision": verb, "by": _who()}
    if getattr(args, "always", False):
        body["scope"] = "always"
    if args.option_id is not None:
        body["option_id"] = args.option_id
    if args.feedback is not None:
        body["feedback"] = args.feedback
    status, rec = client.call("POST", f"/permissions/{quote_id(rid)}", body)
    if status == 404:
        raise _Fail(_explain_404(client, rid))
    if status == 409:
        raise _Fail(_explain_409(client, rid, verb, args.option_id, rec))
    if status != 200:
        raise _Fail(_http_message(status, rec, client))
    if not isinstance(rec, dict):
        raise _Fail(f"unexpected answer from {client.url} (not a JSON record): {clip(str(rec), 80)}")
    _out(dumps(rec, indent=2) if args.json else clean(_summary(verb, rid, rec)))
    return 0


# ---------------------------------------------------------------- watch


class _Watch:
    """One watch process: its rules, the ids it has seen, and how it reports."""

    def __init__(self, args: argparse.Namespace, client: Client, rules: list[Rule]) -> None:
        self.args = args
        self.client = client
        self.rules = rules
        self.seen: set[str] = set()

    def emit(self, result: str, rec: Mapping[str, Any], rule: Rule, n: int, **extra: Any) -> None:
        rid, tool = str(rec.get("id")), tool_of(rec)
        if self.args.json:
            line = {
                "result": result,
                "id": rid,
                "session_id": rec.get("session_id", rec.get("sessionId")),
                "tool": tool,
                "decision": rule.decision,
                "rule": n,
                "rule_spec": rule.wire(),
                "dry_run": bool(self.args.dry_run),
                **extra,
            }
            _out(dumps(line))
            return
        head = f"{rid} ({tool})"
        if result in ("approved", "denied"):
            text = f"{result} {head} by rule {n}"
        elif result.startswith("would_"):
            text = f"would {rule.decision} {head} by rule {n}"
        elif result == "skipped":
            text = f"skipped {head}: HTTP 404, already answered elsewhere"
        else:
            text = f"failed to {rule.decision} {head} by rule {n}: {extra.get('error', '?')}"
        _out(clean(text))

    def handle(self, rec: Mapping[str, Any]) -> None:
        """Act on one listed record, at most once per process."""
        from bot.inbox.rules import decide

        rid = rec.get("id")
        if not isinstance(rid, str) or rid in self.seen:
            return
        self.seen.add(rid)
        if rec.get("state", "pending") != "pending":
            return
        rule = decide(self.rules, rec)
        if rule is None:
            return  # stays pending for ls / approve / deny
        n = next(i for i, r in enumerate(self.rules, 1) if r is rule)
        if self.args.dry_run:
            self.emit(f"would_{rule.decision}", rec, rule, n)
            return
        body: dict[str, Any] = {"decision": rule.decision, "by": "watch", "via": "rule"}
        if rule.scope is not None:
            body["scope"] = rule.scope
        if rule.option_id is not None:
            body["option_id"] = rule.option_id
        try:
            status, res = self.client.call("POST", f"/permissions/{quote_id(rid)}", body)
        except DaemonUnreachable as err:
            self.seen.discard(rid)  # nothing was decided; try again on a later pass
            self.emit("failed", rec, rule, n, error=err.reason)
            return
        if status == 200 and isinstance(res, dict):
            got = res.get("outcome")
            outcome: dict[str, Any] = got if isinstance(got, dict) else {}
            self.emit(
                "approved" if rule.decision == "approve" else "denied",
                rec,
                rule,
                n,
                option_id=outcome.get("option_id"),
                state=res.get("state"),
            )
        elif status == 404:
            self.emit("skipped", rec, rule, n, error="HTTP 404: already answered elsewhere")
        elif status == 401:
            raise _Fail(_http_message(status, res, self.client))
        else:
            self.emit("failed", rec, rule, n, error=_http_message(status, res, self.client))


def _usage(message: str) -> NoReturn:
    raise _Fail(message, 2)


def _watch(args: argparse.Namespace, client: Client) -> int:
    from bot.inbox.rules import RuleError, build_rules

    try:
        rules = build_rules(
            args.tool_rules or [], args.rules_json, session=args.session, label=args.label, always=args.always
        )
    except RuleError as err:
        _usage(str(err))
    if not rules:
        _usage("watch needs at least one rule: --allow-tool PAT, --deny-tool PAT or --rules-json (none given)")
    w = _Watch(args, client, rules)
    interval: float = args.interval
    start = time.monotonic()
    deadline = None if args.timeout is None else start + args.timeout
    listed = args.session or args.label
    query = {"session": listed} if listed else None
    answered_once = False
    lost = False
    if sys.stderr.isatty():
        print(f"watching {client.url} with {len(rules)} rule(s); Ctrl-C to stop", file=sys.stderr)
    while True:
        try:
            status, body = client.call("GET", "/permissions", query=query)
        except DaemonUnreachable as err:
            if not answered_once or args.once:
                raise
            if not lost:
                _warn(f"{err} (retrying every {interval:g}s)")
                lost = True
        else:
            answered_once = True
            if lost:
                _warn(f"the daemon at {client.url} answers again")
                lost = False
            if status == 200 and isinstance(body, list):
                for rec in body:
                    if isinstance(rec, dict):
                        w.handle(rec)
            elif status == 401:
                raise _Fail(_http_message(status, body, client))
            else:
                _warn(f"listing requests: {_http_message(status, body, client)}")
                if args.once:
                    return 1
        if args.once:
            return 0
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return 0
        time.sleep(interval if deadline is None else min(interval, deadline - now))


if __name__ == "__main__":
    raise SystemExit(main())
