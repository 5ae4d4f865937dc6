"""The escalation page: one ``m.text`` naming the prompts of a room that waited too long (pure).

An ``m.text``, never an ``m.notice``: the homeserver's default push rules silence every notice before the
mention rule, while an ``m.text`` whose ``m.mentions`` lists a user is a highlight for that user
(``.m.rule.is_user_mention``). The mention is in the body and as a pill too, for clients that read those.
One page names every prompt in it (up to ``LISTED``, then a count), each by a link to the prompt, its
request id and its title as agent prose: every line starts with the bot's own words, and nothing the
agent wrote can be a mention, a pill or a line of its own. A page of one prompt replies to it.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any
from urllib.parse import quote

from bot.inbox.record import Record
from bot.prompts.text import prose
from bot.util.durations import format_age

LISTED = 20  # prompts named one per line; the rest are counted
TITLE = 80  # characters of a title shown

_NOUN = {"question": ("question", "questions"), "plan": ("plan", "plans")}


def noun(kind: str, n: int = 1) -> str:
    """What a prompt of ``kind`` is called: "permission request", "question", "plan" (plural when n > 1)."""
    one, many = _NOUN.get(kind, ("permission request", "permission requests"))
    return one if n == 1 else many


def link(room_id: str, event_id: str) -> str:
    """A matrix.to link to an event (what clients open as the event in its room)."""
    return f"https://matrix.to/#/{quote(room_id, safe='!:')}/{quote(event_id, safe='$:')}"


def page(recs: list[Record], mention: list[str], after: float, room_id: str) -> dict[str, Any]:
    """The page for ``recs`` (posted prompts of ``room_id``, oldest first) mentioning ``mention``."""
    who, waited = ", ".join(mention), format_age(after)
    pills = ", ".join(f'<a href="https://matrix.to/#/{html.escape(quote(u, safe="@:"))}">{html.escape(u)}</a>'
                      for u in mention)
    if len(recs) == 1:
        what = f"this {noun(recs[0].kind)} has waited {waited} without an answer. You may answer it now: " \
               "reply to the prompt."
    else:
        counted = ", ".join(f"{n} {noun(k, n)}" for k, n in Counter(r.kind for r in recs).items())
        what = f"{len(recs)} prompts ({counted}) have waited {waited} without an answer. You may answer them " \
               "now: reply to each prompt."
    lines, items = [], []
    for r in recs[:LISTED]:
        assert r.prompt_event_id
        url, title, rid = link(room_id, r.prompt_event_id), prose(r.title, TITLE), prose(r.id, TITLE)
        lines.append(f"- {noun(r.kind).capitalize()} {rid}: {title} ({url})")
        items.append(f'<li><a href="{html.escape(url)}">{noun(r.kind).capitalize()} {html.escape(rid)}</a>: '
                     f"{html.escape(title)}</li>")
    more = len(recs) - LISTED
    if more > 0:
        lines.append(f"- and {more} more")
        items.append(f"<li>and {more} more</li>")
    content: dict[str, Any] = {
        "msgtype": "m.text",
        "body": "\n".join([f"{who}: {what}", *lines]),
        "format": "org.matrix.custom.html",
        "formatted_body": f"<p>{pills}: {html.escape(what)}</p><ul>{''.join(items)}</ul>",
        "m.mentions": {"user_ids": list(mention)},
    }
    if len(recs) == 1:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": recs[0].prompt_event_id}}
    return content
