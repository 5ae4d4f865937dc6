"""`permissions ls` (every pending request, page by page), `permissions approve|deny ID` and
`permissions answer ID ANSWER` (a question)."""

from __future__ import annotations

import argparse
import getpass
import shutil
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from bot.cli.http import Client, DaemonUnreachable
from bot.cli.permissions.render import clean, dumps, matches_session, outcome_text, summary, table
from bot.cli.permissions.report import Fail, http_message, out, reason
from bot.util.ids import url_segment as quote_id
from bot.util.words import clip

EMPTY = "no pending permission requests"
LS_PAGE = "1000"  # records per GET /permissions page (a daemon without pages answers all at once)


def ls(args: argparse.Namespace, client: Client) -> int:
    """Print every pending request (optionally of one session), oldest first: a table, or JSON. Streamed a
    page at a time (GET /permissions pages): its time grows with what it prints, its memory with one page."""
    query: dict[str, str] | None = {"limit": LS_PAGE, **({"session": args.session} if args.session else {}),
                                    **({"room": args.room} if args.room else {}),
                                    **({} if args.json else {"view": "brief"})}  # the table's fields only
    path = "/permissions"
    printer = _JsonOut() if args.json else _TableOut()
    while True:
        status, body = client.call("GET", path, query=query)
        if status != 200:
            raise Fail(http_message(status, body, client))
        if not isinstance(body, list):
            raise Fail(f"unexpected answer from {client.url}/permissions (not a JSON list): {clip(str(body), 80)}")
        records = [r for r in body if isinstance(r, dict)]
        if args.session:
            records = [r for r in records if matches_session(r, args.session)]
        if args.room:  # a daemon that knows no rooms answers them all
            records = [r for r in records if (r.get("room") or "default") == args.room]
        printer.page(records)
        nxt = client.next_page
        if not nxt or not nxt.startswith("/permissions?"):
            break
        path, query = nxt, None
    printer.end(EMPTY + (f" in session {clean(args.session)}" if args.session else ""))
    return 0


class _JsonOut:
    """The records as one JSON array, written a page at a time (indented on a terminal)."""

    def __init__(self) -> None:
        self.indent = 2 if sys.stdout.isatty() else None
        self.count = 0

    def page(self, records: list[dict[str, Any]]) -> None:
        for rec in records:
            text = dumps(rec, indent=self.indent)  # the C encoder has no indent
            if self.indent:
                text = "\n".join("  " + line for line in text.split("\n"))
            sep = ("[" if not self.count else ",") + ("\n" if self.indent else "")
            sys.stdout.write(sep + text)
            self.count += 1
        sys.stdout.flush()

    def end(self, _empty: str) -> None:
        out("[]" if not self.count else ("\n]" if self.indent else "]"))


class _TableOut:
    """The table, a page at a time: its columns sized by the first page (ids are never cut)."""

    def __init__(self) -> None:
        self.width = shutil.get_terminal_size((160, 24)).columns
        self.now = datetime.now(UTC)
        self.widths: list[int] | None = None

    def page(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        lines, self.widths = table(records, self.width, self.now, self.widths)
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()

    def end(self, empty: str) -> None:
        if self.widths is None:
            out(empty)


def _who() -> str:
    try:
        return "cli:" + getpass.getuser()
    except (OSError, KeyError, ImportError):
        return "cli:unknown"


def _fetch(client: Client, rid: str) -> tuple[int, dict[str, Any] | None]:
    """``(status, record)`` for ``rid`` in any state; status 0 when unreachable (explains a 404/409)."""
    try:
        status, rec = client.call("GET", f"/permissions/{quote_id(rid)}")
    except DaemonUnreachable:
        return 0, None
    return status, (rec if status == 200 and isinstance(rec, dict) else None)


def _unique_prefix(client: Client, prefix: str) -> str | None:
    """The one pending request whose id starts with ``prefix`` (None: none, several, or not a prefix)."""
    if len(prefix) < 4:
        return None
    status, body = client.call("GET", "/permissions", query={"limit": LS_PAGE})
    if status != 200 or not isinstance(body, list):
        return None
    found = {str(r.get("id")) for r in body if isinstance(r, dict) and str(r.get("id", "")).startswith(prefix)}
    return found.pop() if len(found) == 1 else None


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
        done = f": {outcome_text(outcome)}" if isinstance(outcome, Mapping) else ""
        why = f"already {clean(str(rec.get('state')))}{done}"
    return f"HTTP 404: no pending request {clean(rid)} ({why})"


def _explain_409(client: Client, verb: str, option_id: str | None, rid: str, body: object) -> str:
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
    return f"HTTP 409: {clean(rid)}: {reason(body) or 'no fitting option'}{offered}"


def _settle(
    client: Client, rid: str, body: dict[str, Any], on_409: Callable[[str, object], str]
) -> tuple[str, dict[str, Any]]:
    """POST ``body`` to ``rid``, or to the one pending id ``rid`` is a prefix of: (the id, the settled record).
    A refusal raises :class:`Fail`: a 404 explained from the record as it now is, a 409 in ``on_409``'s words."""
    status, rec = client.call("POST", f"/permissions/{quote_id(rid)}", body)
    if status == 404 and (whole := _unique_prefix(client, rid)) is not None:  # a prefix of one pending id
        rid = whole
        status, rec = client.call("POST", f"/permissions/{quote_id(rid)}", body)
    if status == 404:
        raise Fail(_explain_404(client, rid))
    if status == 409:
        raise Fail(on_409(rid, rec))
    if status != 200:
        raise Fail(http_message(status, rec, client))
    if not isinstance(rec, dict):
        raise Fail(f"unexpected answer from {client.url} (not a JSON record): {clip(str(rec), 80)}")
    return rid, rec


def decide(args: argparse.Namespace, client: Client) -> int:
    """``approve`` or ``deny`` one request; a 404/409 is explained from the record as it now is."""
    verb: str = args.perm_verb
    body: dict[str, Any] = {"decision": verb, "by": _who()}
    if getattr(args, "always", False):
        body["scope"] = "always"
    if args.option_id is not None:
        body["option_id"] = args.option_id
    if args.feedback is not None:
        body["feedback"] = args.feedback
    rid, rec = _settle(client, args.id, body, partial(_explain_409, client, verb, args.option_id))
    out(dumps(rec, indent=2) if args.json else clean(summary(verb, rid, rec)))
    return 0


def _not_an_answer(rid: str, body: object) -> str:
    return f"HTTP 409: {clean(rid)}: {reason(body) or 'not an answer to this question'}"


def answer(args: argparse.Namespace, client: Client) -> int:
    """Answer one question (``{"decision": "answer", "answer": ...}``); a 404/409 is explained."""
    rid, rec = _settle(client, args.id, {"decision": "answer", "answer": args.answer}, _not_an_answer)
    outcome = rec.get("outcome")
    outcome = outcome if isinstance(outcome, Mapping) else {}
    given = outcome.get("answers")
    shown = next(iter(given.values())) if isinstance(given, Mapping) and given else outcome.get("option_id")
    out(dumps(rec, indent=2) if args.json else clean(f"answered {rid}: {shown}"))
    return 0
