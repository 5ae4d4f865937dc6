"""The one logging set-up of every command that logs (`run`, `acp`, `hook`, `doctor`, `e2ee`, `state`, `audit`).

One style everywhere: structlog events (snake_case names) on stderr, one line each, rendered as
``key=value`` (``console``, the default) or as one JSON object (``json``), always with ``timestamp``,
``level`` and ``event`` first; library records (stdlib ``logging``) routed through the same chain
(bot.util.liblogs); every known secret masked (:class:`Masker`); a flood of one warning thinned
(:class:`Repeats`). ``[log] level`` / ``format`` choose; the environment's ``PERMISSION_BOT_LOG_LEVEL`` /
``PERMISSION_BOT_LOG_FORMAT`` win (the commands without a config file read only these).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, TextIO

import structlog

from bot.util import liblogs

LEVEL_ENV = "PERMISSION_BOT_LOG_LEVEL"
FORMAT_ENV = "PERMISSION_BOT_LOG_FORMAT"
LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("console", "json")

_SECRET_KEYS = {"password", "access_token", "token", "api_token", "authorization"}


class Masker:
    """Replace every known secret, wherever it appears in an event, with ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        self.secrets = sorted({*self.secrets, *(s for s in secrets if s and len(s) >= 4)}, key=len, reverse=True)

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            for s in self.secrets:
                if s in value:
                    value = value.replace(s, "***")
            return value
        if isinstance(value, dict):
            return {k: ("***" if str(k).lower() in _SECRET_KEYS else self._clean(v)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(v) for v in value]
        if value is None or isinstance(value, int | float | bool):
            return value
        return self._clean(str(value))

    def __call__(self, _logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for k in list(event):
            event[k] = "***" if k.lower() in _SECRET_KEYS else self._clean(event[k])
        return event


_LOUD = {"warning", "warn", "error", "exception", "critical"}


class Repeats:
    """At most ``burst`` warnings or errors of one event per ``window`` seconds; the first line of
    the next window carries ``suppressed=N`` (a flood of one line cannot drown the log)."""

    def __init__(self, burst: int = 20, window: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.window = window
        self.clock = clock
        self._seen: dict[str, list[float]] = {}  # event -> [window start, lines, dropped]

    def allow(self, key: str) -> int | None:
        """None: drop this line; else how many lines of it were dropped before (0 usually)."""
        now = self.clock()
        seen = self._seen.get(key)
        if seen is None:
            if len(self._seen) > 10_000:
                self._seen.clear()
            seen = self._seen[key] = [now, 0, 0]
        report = 0
        if now - seen[0] >= self.window:
            report = int(seen[2])
            seen[:] = [now, 0, 0]
        seen[1] += 1
        if seen[1] > self.burst:
            seen[2] += 1
            return None
        return report

    def __call__(self, _logger: Any, name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        key = event.pop("_repeat_key", None) or event.get("event")  # a library record: its logger and template
        if name not in _LOUD:  # the audit trail (info: submitted, answered, posted) is never thinned
            return event
        report = self.allow(str(key))
        if report is None:
            raise structlog.DropEvent
        if report:
            event["suppressed"] = report
        return event


_MASKER = Masker(())
_REPEATS = Repeats()


def add_secret(*secrets: str) -> None:
    """Mask these too from now on (e.g. an access token obtained at login)."""
    _MASKER.add(secrets)


def settings(level: str | None, fmt: str | None, env: Mapping[str, str]) -> tuple[str, str, list[str]]:
    """The level and format to use (the environment's, else the given, else info and console) and the
    environment variables that were set to something else than a level or a format (ignored)."""
    ignored: list[str] = []
    chosen: list[str] = []
    for var, given, allowed, default in ((LEVEL_ENV, level, LEVELS, "info"), (FORMAT_ENV, fmt, FORMATS, "console")):
        value = env.get(var, "").strip().lower()
        if value and value not in allowed:
            ignored.append(var)
        chosen.append(value if value in allowed else given if given and given in allowed else default)
    return chosen[0], chosen[1], ignored


_warned: set[str] = set()
Renderer = Callable[[Any, str, MutableMapping[str, Any]], "str | bytes"]
_renderer: Renderer = structlog.processors.KeyValueRenderer()
_to_json = structlog.processors.JSONRenderer()


def _first_keys_first(logger: Any, name: str, event: MutableMapping[str, Any]) -> str | bytes:
    head = {k: event.pop(k) for k in ("timestamp", "level", "event") if k in event}
    return _to_json(logger, name, {**head, **event})


def configure(
    level: str | None = None, fmt: str | None = None, secrets: Iterable[str] = (), sink: TextIO | None = None
) -> None:
    """Route structlog and stdlib logging (every library's records) to ``sink`` (default: stderr) in the one
    style, secrets masked. Called again (a command's config loaded), it replaces the set-up; the secrets
    already given stay masked."""
    global _renderer
    lvl_name, fmt, ignored = settings(level, fmt, os.environ)
    lvl = getattr(logging, lvl_name.upper())
    _MASKER.add(secrets)
    _renderer = _first_keys_first if fmt == "json" else structlog.processors.KeyValueRenderer(
        key_order=["timestamp", "level", "event"], drop_missing=True)
    chain: list[structlog.typing.Processor] = [
        _REPEATS,
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        _MASKER,
        _renderer,
    ]
    structlog.configure(
        processors=chain,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.WriteLoggerFactory(file=sink) if sink is not None
        else structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # libraries: their warnings and errors (not chatter)
    liblogs.route(max(lvl, logging.WARNING), chain, sink, debug=lvl <= logging.DEBUG)
    for var in set(ignored) - _warned:  # once, though a command configures twice (before and after its config)
        _warned.add(var)
        structlog.get_logger("log").warning("log_setting_ignored", variable=var, value=os.environ.get(var, "")[:40],
                                            hint=f"{LEVEL_ENV}: {'|'.join(LEVELS)}; {FORMAT_ENV}: {'|'.join(FORMATS)}")


def line(level: str, event: str, **fields: Any) -> str:
    """One line in the current style, for a writer that cannot log through structlog (it is the sink)."""
    now = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
    out = _renderer(None, level, _MASKER(None, level, {"timestamp": now, "level": level, "event": event, **fields}))
    return (out.decode() if isinstance(out, bytes) else out) + "\n"
