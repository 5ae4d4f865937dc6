"""Library records (stdlib ``logging``: matrix-nio, aiohttp, asyncio, asyncpg, ``warnings``) into the structured log.

structlog's ``ProcessorFormatter`` renders every record through the bot's own chain (so it is masked and
thinned like the bot's lines); :func:`as_event`, its ``foreign_pre_chain``, names it: matrix-nio's 429 waits
as one ``matrix_rate_limited`` line, any other nio line as ``matrix_library``, every other library's as
``library_log``; both keep the library's logger name and its message (at most 500 characters) and a
traceback as ``exception``. nio's ``Timed out, sleeping for 0s`` is dropped (bot.matrix.retry says
``matrix_unreachable``), its ``Error validating response`` (before every error answer it then reads as one: the
bot's own line says what went wrong) is a debug line.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping, Sequence
from typing import Any, TextIO

import structlog

MAX_MESSAGE = 500
Processor = structlog.typing.Processor


def _nio(record: logging.LogRecord) -> bool:
    return record.name == "nio" or record.name.startswith("nio.")


class _Records(logging.Filter):
    """Drops nio's timed-out chatter, demotes its validation chatter to debug (shown only at ``debug``); a record
    whose format string does not fit its arguments keeps both as text."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def filter(self, record: logging.LogRecord) -> bool:
        if _nio(record) and str(record.msg).startswith("Timed out, sleeping"):
            return False
        if _nio(record) and str(record.msg).startswith("Error validating response"):
            if not self.debug:
                return False
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        try:
            record.getMessage()
        except Exception:  # a library's bad format string: its template and arguments, as they are
            record.msg, record.args = f"{record.msg} {record.args!r}", None
        return True


class _Handler(logging.StreamHandler[TextIO]):
    """Writes each formatted record; one the chain drops (a flood thinned) writes nothing."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(self.format(record) + self.terminator)
            self.flush()
        except structlog.DropEvent:
            return
        except Exception:  # a log line must never take its caller down
            self.handleError(record)


def as_event(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A library record's event (see the module's docstring)."""
    record: logging.LogRecord = event["_record"]
    template = str(record.msg)
    args = event.pop("positional_args", record.args)
    if _nio(record) and template.startswith("Got 429 response"):
        arg = args[0] if isinstance(args, tuple) and args else 0
        secs = round(float(arg) / 1000, 1) if isinstance(arg, int | float) else 0.0
        hint = f"rate-limited by the homeserver, retrying in {secs:g} s"
        event.update(event="matrix_rate_limited", retry_in=secs, hint=hint)
        return event
    message = str(event["event"])
    event.update(event="matrix_library" if _nio(record) else "library_log", logger=record.name,
                 message=message[:MAX_MESSAGE], _repeat_key=f"{record.name}:{template}")
    return event


def route(level: int, chain: Sequence[Processor], sink: TextIO | None = None, *, debug: bool = False) -> None:
    """Send every stdlib record (and ``warnings``) at ``level`` or above through ``chain`` (the bot's own
    processors, renderer last) to ``sink`` (default: stderr); ``debug``: the bot logs at debug."""
    handler = _Handler(sink if sink is not None else sys.stderr)
    handler.addFilter(_Records(debug))
    processors = [structlog.stdlib.ProcessorFormatter.remove_processors_meta, *chain]
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(foreign_pre_chain=[as_event], processors=processors, pass_foreign_args=True)
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.captureWarnings(True)
