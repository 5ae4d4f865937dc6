"""Quorum: a request an ``ask`` rule gave ``approvals = N`` settles once N distinct people approved it (pure).

Approvals count people. A room answer (message, reaction, structured reply) is its sender's; a decider
token's is the person the token belongs to (``[[api.tokens]] user``, bot.config.tokens), so one person
counts once whichever way they answer; a token that belongs to nobody is no person: its approval is refused
(:class:`NotCounted`, the API answers 403) and never counted, while its reject still rejects (refusing is
the safe side). A token's person who is not one of the request's answerers is refused either way, as in
the room. Each answer is tallied in the settlement's own transaction (``Inbox.settle``): an approval by
someone who has not approved yet is added (``{"by": USER, "at", "option_id", "token"?}``); the same person
again changes nothing; one reject by an answerer settles it rejected at once; the N-th approval settles it
approved, naming every approver. A rule, a timeout or a cancel is no approval: they settle it as they
would any request. The option it settles with is the
narrowest the approvers chose (a "once" if any of them chose one), so one approver's "always" never
widens what the others approved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.events.ledger import meaning_of
from bot.events.states import Via

APPROVED = "approved"
"""The kind of a NOTIFY that a quorum request's approvals changed: only ``on_approved`` callbacks hear it
(its prompt is to be edited; nothing is settled)."""
PERSON_VIAS = frozenset({Via.MATRIX, Via.REACTION, Via.STRUCTURED, Via.API})
"""The paths a person answers by (a decider token counts as the person it belongs to, if any)."""


class NotCounted(Exception):
    """A decider token's answer a quorum request refuses (answered 403): the message says why."""


@dataclass(frozen=True)
class Tally:
    """What one answer does to a quorum request: ``counted`` (added, not yet enough), ``again`` (this person
    approved already), ``refused`` (not one of its answerers), ``settle`` (approved by enough, or rejected)."""

    kind: Literal["counted", "again", "refused", "settle"]
    given: list[dict[str, Any]] = field(default_factory=list)
    option_id: str | None = None
    by: list[str] = field(default_factory=list)
    reason: str = ""  # why it was refused


def tally(
    needed: int, approvers: Sequence[str] | None, given: Sequence[Mapping[str, Any]],
    options: Sequence[Mapping[str, Any]], option_id: str, by: str, via: str, at: float, person: str | None = None,
) -> Tally:
    """One answer (``option_id`` by ``by`` through ``via`` at ``at``; through the API ``by`` is ``api:NAME``
    and ``person`` whom that token belongs to, or None) to a request needing ``needed`` approvals from
    ``approvers`` (None: anyone who may answer in its room)."""
    who = person if via == Via.API else by
    meaning, _ = meaning_of(options, option_id)
    kept = [dict(g) for g in given]
    if who is None:  # a token that belongs to nobody: never an approver; a reject still rejects
        if meaning == "reject":
            return Tally("settle", kept, option_id, [by])
        return Tally("refused", kept, reason=(
            f"it needs {needed} approvals by distinct people, and {by} belongs to no person "
            "([[api.tokens]] user): its approval counts for nobody"))
    if approvers is not None and who not in approvers:
        return Tally("refused", kept, reason=f"{who} is not one of the people who may answer it")
    if meaning == "reject":
        return Tally("settle", kept, option_id, [who])
    if any(g.get("by") == who for g in given):
        return Tally("again", kept)
    entry = {"by": who, "at": at, "option_id": option_id, **({"token": by} if via == Via.API else {})}
    now_given = [*kept, entry]
    if len(now_given) < needed:
        return Tally("counted", now_given)
    once = [str(g["option_id"]) for g in now_given if meaning_of(options, g.get("option_id"))[1] == "once"]
    return Tally("settle", now_given, once[0] if once else option_id, [str(g["by"]) for g in now_given])


def progress(needed: int, given: Sequence[Mapping[str, Any]]) -> str:
    """The line a quorum prompt shows: ``Needs 2 approvals: 1 of 2: @alice``."""
    names = ", ".join(str(g.get("by")) for g in given)
    return f"Needs {needed} approvals: {len(given)} of {needed}" + (f": {names}" if names else "")
