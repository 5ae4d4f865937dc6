"""The one charset for names the outside world chooses: session ids, keys, labels, token names.

Letters, digits and ``._:@-``, 1 to 128 characters: nothing that walks a path, splits a URL
or a log line, or hides in a prompt.
"""

from __future__ import annotations

import re
import urllib.parse

SAFE_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
SAFE_ID_RULE = "1 to 128 letters, digits and ._:@-"


def is_safe_id(v: str) -> bool:
    """True when ``v`` is a short string of the safe charset."""
    return SAFE_ID.fullmatch(v) is not None


def url_segment(request_id: str) -> str:
    """An id as one percent-encoded URL path segment (``sess_1:3`` stays readable; ``/``, ``%``,
    ``?``, ``#`` are encoded, and so are ``.``/``..``): no id walks a path, e.g. ``x/../victim``."""
    q = urllib.parse.quote(request_id, safe=":@")
    return q.replace(".", "%2E") if q in (".", "..") else q
