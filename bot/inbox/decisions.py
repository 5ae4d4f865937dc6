"""Which offered option a decision means (agentproto's semantics, seed 002). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CANCEL = None


class NoFittingOption(Exception):
    """The request offers no option that fits the decision."""


def _first(options: Sequence[dict[str, Any]], *kinds: str) -> str | None:
    return next((str(o["optionId"]) for kind in kinds for o in options if o.get("kind") == kind), None)


def choose(
    options: Sequence[dict[str, Any]],
    decision: str,
    *,
    scope: str | None = None,
    option_id: str | None = None,
) -> str | None:
    """The optionId for ``decision`` ("approve", "deny", "cancel"); None means cancel.

    ``option_id`` picks exactly. approve: allow_always when scope is "always" and
    offered, else allow_once, else allow_always. deny: reject_always when scope is
    "always", else reject_once, else reject_always, else cancel.
    """
    if decision == "cancel":
        return CANCEL
    if option_id is not None:
        if any(o.get("optionId") == option_id for o in options):
            return option_id
        raise NoFittingOption(f"option {option_id!r} is not offered")
    if decision not in ("approve", "deny"):
        raise ValueError(f"unknown decision {decision!r}")
    verb = "allow" if decision == "approve" else "reject"
    order = (f"{verb}_always", f"{verb}_once") if scope == "always" else (f"{verb}_once", f"{verb}_always")
    chosen = _first(options, *order)
    if chosen is None and decision == "approve":
        raise NoFittingOption("no allow-flavoured option is offered; pass option_id")
    return chosen


def timeout_choice(options: Sequence[dict[str, Any]], on_timeout: str) -> str | None:
    """``reject``: a reject_once option, else cancel; ``cancel``: cancel."""
    if on_timeout == "reject":
        return _first(options, "reject_once")
    return CANCEL
