"""A permission request -> Matrix content: the prompt and the settled edit. Pure: no I/O, no clock.

Parts: ``shown`` (what of ``rawInput`` is shown: the command line with its args, cwd, settings; the one
place, read by the session rules and the config rules too), ``text`` (agent text made fit to show:
visible invisibles and long blank runs, collapsed blank lines, defanged mentions, title inline code),
``preview`` (``subject.preview`` from the facts, what the agent would do), ``message`` (the body and
its HTML), ``build`` (the prompt, options by meaning), ``options`` (the order options are shown and
numbered in: by meaning, whatever order the agent sent; answers read numbers in it), ``meanings`` (what an
agent's option really does where its words say less: the note on its line), ``settled`` (the
edit that shows the outcome), ``attachment`` (the full text of a shortened prompt, posted in its thread).

Also: ``asks`` (A question or a plan -> the prompt's prose, HTML and preview (bot.events.kinds)), ``markdown``
(agent Markdown (a plan) -> HTML a Matrix client shows).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.prompts.build import build_prompt
    from bot.prompts.settled import build_settled, edit_content

__all__ = ["build_prompt", "build_settled", "edit_content"]
_HOME = {"build_settled": "settled", "edit_content": "settled"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'bot.prompts' has no attribute {name!r}")
    return getattr(importlib.import_module(f"bot.prompts.{_HOME.get(name, 'build')}"), name)
