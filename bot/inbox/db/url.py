"""Where the state lives: ``state.database`` (env ``PERMISSION_BOT_DATABASE_URL`` wins) read into a target.

Accepted: ``sqlite:PATH``, ``sqlite:///ABS/PATH``, a plain path, or ``postgresql://`` / ``postgres://``
URLs as libpq takes them. A bad value is one line naming ``state.database`` and never the password:
every URL shown in a message or a log goes through :func:`mask` first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

ENV = "PERMISSION_BOT_DATABASE_URL"
KEY = "state.database"
_PASSWORD_IN_NETLOC = re.compile(r"(//[^/@:]*:)[^@/]*@")
_PASSWORD_IN_QUERY = re.compile(r"(?i)((?:^|[?&\s])password=)[^&\s]*")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


class DatabaseUrlError(ValueError):
    """A ``state.database`` value that names no usable database (the message names the key, no secret)."""


@dataclass(frozen=True)
class Target:
    """One database: ``engine`` is ``sqlite`` (``path`` set) or ``postgresql`` (``dsn`` set)."""

    engine: str
    path: Path | None = None
    dsn: str | None = None
    password: str | None = None  # to scrub from driver errors

    @property
    def shown(self) -> str:
        """The target as it may be shown or logged."""
        return str(self.path) if self.path is not None else mask(self.dsn or "")


def mask(url: str) -> str:
    """``url`` with any password (``user:PASSWORD@``, ``?password=``) replaced by ``***``."""
    return _PASSWORD_IN_QUERY.sub(r"\1***", _PASSWORD_IN_NETLOC.sub(r"\1***@", url))


def scrub(message: str, target: Target) -> str:
    """A driver's error message with the target's password (if any) cut out."""
    if target.password:
        message = message.replace(target.password, "***")
    return mask(message)


def parse(value: str, key: str = KEY) -> Target:
    """Read a ``state.database`` value; raise DatabaseUrlError (one line, no password) when it is unusable."""
    value = value.strip()
    if not value:
        raise DatabaseUrlError(f"{key}: empty; give a postgresql:// URL or a SQLite path")
    m = _SCHEME.match(value)
    scheme = m.group(1).lower() if m and len(m.group(1)) > 1 else ""  # "C:\\..." is a path, not a scheme
    if scheme in ("sqlite", "sqlite3"):
        rest = value[m.end():] if m else value
        path = rest[2:] if rest.startswith("//") else rest  # sqlite:///abs -> /abs; sqlite:rel -> rel
        if not path or path == ":memory:":
            raise DatabaseUrlError(f"{key}: a SQLite database needs a file path (sqlite:PATH)")
        return Target("sqlite", path=Path(unquote(path)))
    if scheme in ("postgres", "postgresql"):
        return _postgres(value, key)
    if scheme:
        raise DatabaseUrlError(f"{key}: unknown kind {scheme!r} in {mask(value)} (use postgresql:// or sqlite:)")
    return Target("sqlite", path=Path(value))


def _postgres(value: str, key: str) -> Target:
    try:
        parts = urlsplit(value)
        check_hosts(parts.netloc)
    except ValueError as e:
        raise DatabaseUrlError(f"{key}: not a valid PostgreSQL URL ({mask(str(e))}): {mask(value)}") from None
    if parts.fragment:
        raise DatabaseUrlError(f"{key}: a PostgreSQL URL has no #fragment: {mask(value)}")
    password = unquote(parts.password) if parts.password else None
    for pair in parts.query.split("&"):
        name, _, v = pair.partition("=")
        if name.lower() == "password" and v:
            password = unquote(v)
    return Target("postgresql", dsn=value, password=password)


def resolve(configured: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The database URL in force: the environment's ``PERMISSION_BOT_DATABASE_URL`` wins over the config."""
    env = os.environ if env is None else env
    return env.get(ENV) or configured or None


# -- several hosts (issue 36): libpq's multi-host form, kept apart from the masking above ------------------


def hosts(netloc: str) -> list[str]:
    """The ``host[:port]`` entries of a URL's netloc (``user:pw@db1:5432,db2``: two), as libpq reads them."""
    return netloc.rpartition("@")[2].split(",")


def check_hosts(netloc: str) -> None:
    """ValueError when a host entry's port is not a number from 1 to 65535 (``[::1]:5432`` allowed)."""
    for entry in hosts(netloc):
        port = entry.rpartition("]")[2].rpartition(":")[2] if ":" in entry.rpartition("]")[2] else ""
        if port and (not port.isdigit() or not 0 < int(port) < 65536):
            raise ValueError(f"port {port!r} is not a number from 1 to 65535")


def session_attrs(dsn: str) -> str | None:
    """The ``target_session_attrs`` to connect with: the URL's own, else ``read-write`` when it names
    several hosts (after a fail-over only the promoted primary takes writes), else None (the driver's)."""
    parts = urlsplit(dsn)
    for name, v in parse_qsl(parts.query):
        if name == "target_session_attrs":
            return v
    return "read-write" if len(hosts(parts.netloc)) > 1 else None
