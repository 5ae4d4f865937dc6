"""The order options are shown and numbered in: by meaning, whatever order the agent sent.

Allow once, allow always, reject once, reject always, then every other option in the
agent's order. Prompts number options in this order and answers read numbers in it,
so ``1`` means "allow once" on every agent that offers it.

A question (bot.events.kinds) is the exception: its choices keep the agent's order, numbered from 1, and its
decline option comes last (:func:`shown_order`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

MEANING_ORDER = ("allow_once", "allow_always", "reject_once", "reject_always")

T = TypeVar("T", bound=Mapping[str, Any])


def _rank(option: Mapping[str, Any]) -> int:
    kind = option.get("kind")
    return MEANING_ORDER.index(kind) if kind in MEANING_ORDER else len(MEANING_ORDER)


def by_meaning(options: Sequence[T]) -> list[T]:
    """ACP options (``optionId``, ``name``, ``kind``) in the shown order; a stable sort."""
    return sorted(options, key=_rank)


def shown_order(options: Sequence[T], kind: str | None = None) -> list[T]:
    """The order a prompt of ``kind`` shows (and answers number) ``options``: a question's choices in the
    agent's order, then its reject option; every other request's :func:`by_meaning`."""
    if kind != "question":
        return by_meaning(options)
    rejects = [o for o in options if str(o.get("kind", "")).startswith("reject")]
    return [o for o in options if o not in rejects] + rejects
