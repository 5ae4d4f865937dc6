"""What a decision makes: the answer, or the refusal notice (with the prompt's numbered choices)."""

from __future__ import annotations

from bot.answers.model import Answer, Candidate, Refusal, Target
from bot.answers.text import NoSuchNumber, Pick, norm, parse
from bot.inbox.session_rules import ALIASES as SESSION_ALIASES
from bot.prompts.text import prose


def show(text: str, limit: int = 40) -> str:
    """A name fit for a one-line notice: shown as agent prose (one line, visible, no mention), shortened."""
    return prose(text, limit)


def offered(ids: list[str]) -> str:
    """The option ids a structured answer may name, for a notice."""
    return ", ".join(show(i) for i in ids) or "none"


def unknown_option(option_id: str, rid: str, ids: list[str]) -> Refusal:
    """A structured answer naming an option the prompt does not offer."""
    return Refusal("unparsable", f"Option {show(option_id, 60)} is not offered for {show(rid, 80)}. "
                   f"Offered: {offered(ids)}.", rid)


def shown(target: Target) -> list[tuple[str, str]]:
    """The numbered lines of the prompt: the options, then "Allow for this session" when offered."""
    return [*target.options, ("session", target.session)] if target.session else list(target.options)


SESSION_OPTION = norm("Allow for this session")
"""The agent's own option of that name (the Claude Code hook offers one) is what the shortcuts pick
when the bot offers no session line of its own."""


def session_index(target: Target) -> int | None:
    """The line ``s`` / ``session`` / 🔁 pick (0-based): the bot's own session line, else the one
    allow-always option named "Allow for this session"; None when the prompt offers neither."""
    if target.session:
        return len(target.options)
    kinds = list(target.kinds) + [""] * (len(target.options) - len(target.kinds))
    hits = [i for i, (_, label) in enumerate(target.options)
            if kinds[i] == "allow_always" and isinstance(label, str) and norm(label) == SESSION_OPTION]
    return hits[0] if len(hits) == 1 else None


def parse_for(text: str, target: Target) -> Pick | NoSuchNumber | None:
    """:func:`bot.answers.text.parse` over the prompt's numbered lines (``s`` / ``session`` name the
    session line, :func:`session_index`)."""
    index = session_index(target)
    aliases = dict.fromkeys(SESSION_ALIASES, index) if index is not None else None
    return parse(text, shown(target), aliases)


def _choices(target: Target) -> str:
    n = len(shown(target))
    if n == 0:
        return "This prompt offers no options."
    listed = ", ".join(f"{i}. {show(label or oid)}" for i, (oid, label) in enumerate(shown(target), 1))
    if n == 1:
        return f"Answer with 1 or the option's name: {listed}."
    return f"Answer with a number 1–{n} or an option's name: {listed}."


def unparsable(target: Target, lead: str = "") -> Refusal:
    return Refusal("unparsable", f"{lead}{_choices(target)}", target.request_id)


def not_offered(target: Target, number: int, what: str = "option") -> Refusal:
    """A number the prompt does not offer ("7" under four options): said so, with the answers."""
    return Refusal("not_offered", f"There is no {what} {number}. {_choices(target)}", target.request_id)


def not_pending(target: Target) -> Refusal:
    return Refusal(
        "not_pending", f"Request {show(target.request_id, 80)} is already settled.", target.request_id
    )


def answer(c: Candidate, target: Target, index: int, feedback: str | None) -> Answer:
    if target.session and index == len(target.options):  # allow once, and a session rule
        once = target.options[list(target.kinds).index("allow_once")][0]
        return Answer(target.request_id, once, c.via, feedback, c.sender, c.event_id, session_rule=True)
    oid, label = target.options[index]
    if target.question is not None and index < len(target.options) - 1:  # a choice (the last one declines)
        return Answer(target.request_id, oid, c.via, feedback, c.sender, c.event_id, answer=label, chosen=(oid,))
    return Answer(target.request_id, oid, c.via, feedback, c.sender, c.event_id)


def incomplete(target: Target) -> Refusal:
    return Refusal(
        "incomplete",
        f"The prompt for {show(target.request_id, 80)} was shortened, so a plain answer cannot settle it. "
        "Read the full text in its thread, then reply to the prompt (or answer in its thread).",
        target.request_id,
    )
