"""A ``postgresql://`` URL read once, by the driver's own rules (asyncpg's ``_parse_connect_dsn_and_args``),
into parts that can be shown without their secrets. Pure.

- ``urlparse``; the netloc split at its first ``@`` into ``user:password`` and the hosts
  (``h1[:p1],h2[:p2],...``; ``[v6]``; a ``/socket/dir``), each part percent-decoded;
- the path is the database; the query ``key=value`` pairs (keys decoded too: ``pass%77ord`` is
  ``password``), the last of a key wins; ``password`` there counts only when the netloc has none.

A password that breaks that reading (an unencoded ``/``, ``?``, ``#`` or a second ``@``) is refused, with
a message that quotes nothing of the URL: the driver would have read pieces of it as the host, the port
or the database, and printed them. :meth:`PgUrl.shown` rebuilds the URL from the parsed parts without any
password; :attr:`PgUrl.secrets` is every secret the URL holds (raw and decoded), for the log masker.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlparse

from bot.util.urlsecrets import secret_key

ENCODE = "percent-encode / ? # @ in the user name and password (%2F %3F %23 %40)"
_IPV6 = re.compile(r"(?:\[([^\]]+)\])(?::([0-9]+))?")


class PgUrlError(ValueError):
    """Why a URL is refused: never a piece of it."""


@dataclass(frozen=True)
class PgUrl:
    """A parsed PostgreSQL URL: ``hosts`` as the driver reads them, (host, port or None) each, in order."""

    scheme: str
    user: str | None
    password: str | None  # the one the driver uses: the netloc's, else the query's
    hosts: tuple[tuple[str, int | None], ...]
    database: str | None
    query: tuple[tuple[str, str], ...]  # decoded, in order, without the secret keys
    secrets: tuple[str, ...]

    def shown(self) -> str:
        """The URL rebuilt from its parts, without any password: what a message or a log line may carry."""
        hosts = ",".join(_host(h) + (f":{p}" if p is not None else "") for h, p in self.hosts)
        user = f"{quote(self.user, safe='')}@" if self.user else ""
        db = f"/{quote(self.database, safe='')}" if self.database else ""
        query = f"?{urlencode(self.query)}" if self.query else ""
        return f"{self.scheme}://{user}{hosts}{db}{query}"


def _key(raw: str) -> str:
    """A query key as ``parse_qsl`` decodes it."""
    return unquote(raw.replace("+", " "))


def _host(h: str) -> str:
    return f"[{h}]" if ":" in h else quote(h, safe="")


def parse_pg(value: str) -> PgUrl:
    """Read ``value`` as asyncpg does; raise PgUrlError (no piece of the URL in it) when it cannot be
    read, or when a password would be read in pieces."""
    try:
        parts = urlparse(value)
    except ValueError:
        raise PgUrlError("not a valid URL") from None
    if parts.fragment or "#" in value:
        raise PgUrlError(f"a PostgreSQL URL has no #fragment ({ENCODE})")
    auth, at, hostspec = parts.netloc.partition("@")
    if not at:
        auth, hostspec = "", parts.netloc
    if "@" in hostspec:
        raise PgUrlError(f"more than one '@' before the host ({ENCODE})")
    raw_pairs = [raw.partition("=")[::2] for raw in parts.query.split("&")] if parts.query else []
    if "@" in parts.path + parts.params or any("@" in k or ("@" in v and _key(k) != "user") for k, v in raw_pairs):
        raise PgUrlError(f"an '@' after the host ({ENCODE})")  # a user name in the query may hold one
    try:
        pairs = parse_qsl(parts.query, strict_parsing=True) if parts.query else []
    except ValueError:
        raise PgUrlError(f"the query is not key=value pairs joined by '&' ({ENCODE})") from None
    user, _, raw_password = auth.partition(":")
    secrets = [raw_password, unquote(raw_password)] if raw_password else []
    query: list[tuple[str, str]] = []
    password = unquote(raw_password) if raw_password else None
    for k, v in pairs:
        if secret_key(k):
            secrets.append(v)
            if k == "password" and not raw_password:
                password = v  # the last one wins, as in asyncpg
        else:
            query.append((k, v))
    secrets += [v for k, v in raw_pairs if secret_key(_key(k)) and v]  # as written too (a driver may quote it)
    database = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path) or None
    return PgUrl(
        scheme=parts.scheme,
        user=unquote(user) or None,
        password=password,
        hosts=_hosts(hostspec) if hostspec else (),
        database=database,
        query=tuple(query),
        secrets=tuple(s for s in dict.fromkeys(secrets) if s),
    )


def _hosts(hostspec: str) -> tuple[tuple[str, int | None], ...]:
    """``h1[:p1],[v6][:p2],/socket`` as asyncpg's ``_parse_hostlist`` reads a netloc's hosts."""
    out: list[tuple[str, int | None]] = []
    for spec in hostspec.split(","):
        if not spec:
            raise PgUrlError("an empty host in the host list")
        if spec.startswith("/"):
            addr, port = spec, ""
        elif spec.startswith("["):
            m = _IPV6.match(spec)
            if m is None:
                raise PgUrlError("an invalid [IPv6] host")
            addr, port = m.group(1), m.group(2) or ""
        else:
            addr, _, port = spec.partition(":")
        port = unquote(port)
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise PgUrlError(f"a port is not a number from 1 to 65535 ({ENCODE})")
        out.append((unquote(addr), int(port) if port else None))
    return tuple(out)


def lenient_secrets(value: str) -> list[str]:
    """Every string of ``value`` that may be a password, read generously (never raises): the driver's
    reading's, and the text between the first ``:`` after ``//`` and the last ``@`` (a password with an
    unencoded ``/``, ``?``, ``#`` or ``@``), and any ``password=`` value: for the log masker only."""
    found: list[str] = []
    with contextlib.suppress(ValueError):
        found += parse_pg(value).secrets
    _, slashes, rest = value.partition("//")
    auth = rest.rpartition("@")[0] if slashes else ""
    if ":" in auth:
        pw = auth.split(":", 1)[1]
        found += [pw, unquote(pw)]
    for raw in re.split(r"[?&]", value):
        k, eq, v = raw.partition("=")
        if eq and v and secret_key(_key(k)):
            found += [v, unquote(v.replace("+", " "))]
    return [s for s in dict.fromkeys(found) if s]
