"""A permission request -> Matrix content: the prompt and the settled edit. Pure: no I/O, no clock.

``shown`` decides what of the raw input is shown (rules read it too), ``text`` makes agent text fit to
show, ``preview`` says what the agent would do, ``message`` writes the body and its HTML, ``build`` the
prompt, ``settled`` the edit that shows the outcome. The names below load on first use, so that
``bot.prompts.shown`` stays light for the command line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.prompts.build import CONTENT_BUDGET, HTML_FORMAT, build_prompt, option_meaning, shown_options
    from bot.prompts.message import ANSWER_HINT
    from bot.prompts.settled import build_settled, edit_content

__all__ = [
    "ANSWER_HINT",
    "CONTENT_BUDGET",
    "HTML_FORMAT",
    "build_prompt",
    "build_settled",
    "edit_content",
    "option_meaning",
    "shown_options",
]
_HOME = {"ANSWER_HINT": "message", "build_settled": "settled", "edit_content": "settled"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'bot.prompts' has no attribute {name!r}")
    return getattr(importlib.import_module(f"bot.prompts.{_HOME.get(name, 'build')}"), name)
