"""A permission request -> Matrix content: the prompt and the settled edit. Pure: no I/O, no clock.

``text`` makes agent text fit to show, ``preview`` says what the agent would do, ``message`` writes the
body and its HTML, ``build`` the prompt, ``settled`` the edit that shows the outcome.
"""

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
