"""structlog set-up for the daemon: key-value events on stderr, secrets masked."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any, TextIO

import structlog

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
        if name not in _LOUD:  # the audit trail (info: submitted, answered, posted) is never thinned
            return event
        report = self.allow(str(event.get("event")))
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


def configure(
    level: str = "info",
    fmt: str = "console",
    secrets: Iterable[str] = (),
    sink: TextIO | None = None,
    formatter: logging.Formatter | None = None,
) -> None:
    """Route structlog (and stdlib logging, e.g. nio's) to ``sink`` (stderr) with secrets masked; the one
    structlog set-up (the daemon's, and the ACP proxy's with its non-blocking sink and line formatter)."""
    out: TextIO = sink if sink is not None else sys.stderr
    lvl = getattr(logging, level.upper(), logging.INFO)
    masker = _MASKER
    masker.add(secrets)
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"], drop_missing=True)
    )
    structlog.configure(
        processors=[
            _REPEATS,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            masker,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.WriteLoggerFactory(file=out) if sink is not None
        else structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # Libraries log through stdlib logging; keep them quiet and masked too.
    handler = logging.StreamHandler(out)
    handler.addFilter(_NioLines())
    handler.addFilter(_StdlibMask(masker, _REPEATS))
    if formatter is not None:
        handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(lvl, logging.WARNING))


class _NioLines(logging.Filter):
    """matrix-nio's retry chatter into the structured log: its 429 waits as one ``matrix_rate_limited``
    line, its ``Timed out, sleeping for 0s`` dropped (bot.matrix.retry says ``matrix_unreachable``), any
    other nio line as ``matrix_library`` (level and message kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("nio"):
            return True
        msg = str(record.msg)
        if msg.startswith("Timed out, sleeping"):
            return False
        log = structlog.get_logger("matrix")
        if msg.startswith("Got 429 response"):
            arg = record.args[0] if isinstance(record.args, tuple) and record.args else 0
            secs = round(float(arg) / 1000, 1) if isinstance(arg, int | float) else 0.0
            hint = f"rate-limited by the homeserver, retrying in {secs:g} s"
            log.warning("matrix_rate_limited", retry_in=secs, hint=hint)
            return False
        level = record.levelname.lower()
        getattr(log, level if level in ("warning", "error", "critical") else "info")(
            "matrix_library", logger=record.name, message=record.getMessage()[:500])
        return False


class _StdlibMask(logging.Filter):
    def __init__(self, masker: Masker, repeats: Repeats) -> None:
        super().__init__()
        self.masker = masker
        self.repeats = repeats

    def filter(self, record: logging.LogRecord) -> bool:
        report = self.repeats.allow(f"{record.name}:{record.msg}")
        if report is None:
            return False
        suffix = f" ({report} like it suppressed)" if report else ""
        record.msg = self.masker._clean(record.getMessage() + suffix)
        record.args = ()
        return True
