"""A URL's own credentials kept out of logs: ``user:PASSWORD@`` and query values (``?token=...``). Pure.

:func:`shown_url` is the URL as a log line may carry it (the password and every query value ``***``);
:func:`url_secrets` the strings the log masker should hide wherever they turn up (a library's error).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

# The one rule for every URL the bot reads (a webhook's, the database's): a query key whose value is a secret.
# ``sslkey`` and ``target_session_attrs`` name no secret (a file, a mode); ``key``, ``api_key``, ``session`` do.
_SECRET_KEY = re.compile(
    r"(?i)pass|pwd|token|secret|auth|sig|cred|(?:^|[_-])(?:api)?key$|^(?:code|session(?:[_-]?id)?)$"
)


def secret_key(key: str) -> bool:
    """Whether a (decoded) query key's value is a secret: ``password``, ``sslpassword``, ``token``, ``sig``..."""
    return _SECRET_KEY.search(key) is not None


def shown_url(url: str) -> str:
    """``url`` without its secrets: ``https://user:***@host/path?token=***`` (no fragment)."""
    try:
        p = urlsplit(url)
        host = p.hostname or ""
        port = p.port
    except ValueError:
        return "(an unreadable URL)"
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port is not None else "")
    if p.username is not None:
        netloc = quote(unquote(p.username), safe="") + (":***" if p.password is not None else "") + "@" + netloc
    query = "&".join(f"{quote(k, safe='')}=***" for k, _ in parse_qsl(p.query, keep_blank_values=True))
    return urlunsplit((p.scheme, netloc, p.path, query, ""))


def url_secrets(url: str) -> list[str]:
    """The password and the values of secret-looking query keys (``token``, ``key``, ``sig``...), raw and
    decoded: what the log masker hides."""
    try:
        p = urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    if p.password:
        found += [p.password, unquote(p.password)]
    for raw in p.query.split("&"):
        k, _, v = raw.partition("=")
        if v and secret_key(unquote(k)):
            found += [v, unquote(v.replace("+", " "))]
    if p.fragment:
        found.append(p.fragment)
    return [s for s in dict.fromkeys(found) if s]
