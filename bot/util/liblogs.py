"""Library records (stdlib ``logging``: matrix-nio, aiohttp, asyncio, asyncpg, ``warnings``) into the structured log.

Every record becomes one structlog event, so it is rendered, masked and thinned like the bot's own lines:
matrix-nio's 429 waits as one ``matrix_rate_limited`` line, its ``Timed out, sleeping for 0s`` dropped
(bot.matrix.retry says ``matrix_unreachable``), its ``Error validating response`` (before an error answer)
a debug line, any other nio line as ``matrix_library``, every other
library's as ``library_log``; both keep the library's logger name and its message (masked, at most 500
characters) and a traceback as ``exception``.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

_LEVELS = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning", logging.ERROR: "error"}
MAX_MESSAGE = 500


def _level(record: logging.LogRecord) -> str:
    if record.levelno >= logging.CRITICAL:
        return "critical"
    return next((name for no, name in sorted(_LEVELS.items(), reverse=True) if record.levelno >= no), "debug")


class LibraryHandler(logging.Handler):
    """The root handler: each stdlib record as one structlog event (see the module's docstring)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._emit(record)
        except Exception:  # a log line must never take its caller down
            self.handleError(record)

    def _emit(self, record: logging.LogRecord) -> None:
        log = structlog.get_logger(record.name)
        msg = str(record.msg)
        nio = record.name == "nio" or record.name.startswith("nio.")
        if nio and msg.startswith("Timed out, sleeping"):
            return
        if nio and msg.startswith("Got 429 response"):
            arg = record.args[0] if isinstance(record.args, tuple) and record.args else 0
            secs = round(float(arg) / 1000, 1) if isinstance(arg, int | float) else 0.0
            hint = f"rate-limited by the homeserver, retrying in {secs:g} s"
            log.warning("matrix_rate_limited", retry_in=secs, hint=hint)
            return
        try:
            message = record.getMessage()
        except Exception:  # a library's bad format string: its template and arguments, as they are
            message = f"{msg} {record.args!r}"
        kw: dict[str, Any] = {
            "logger": record.name,
            "message": message[:MAX_MESSAGE],
            "_repeat_key": f"{record.name}:{msg}",
        }
        if record.exc_info and record.exc_info[0] is not None:
            kw["exc_info"] = record.exc_info
        # nio's "Error validating response" precedes every error answer it then reads as one (a refused login):
        # the bot's own line says what went wrong, so this one is debug
        quiet = nio and msg.startswith("Error validating response")
        getattr(log, "debug" if quiet else _level(record))("matrix_library" if nio else "library_log", **kw)


def route(level: int) -> None:
    """Send every stdlib record (and ``warnings``) at ``level`` or above through :class:`LibraryHandler`."""
    root = logging.getLogger()
    root.handlers[:] = [LibraryHandler()]
    root.setLevel(level)
    logging.captureWarnings(True)
