"""Does a ``https://`` URL's port speak plain HTTP? (A TLS handshake to such a port hangs or fails; this
asks the port the plain way, so that `run` and `doctor` can say "use http://" at once.)"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit


def speaks_plain_http(url: str, timeout: float = 5.0) -> bool:
    """True when ``url`` is ``https://`` and its host and port answer a plain ``HTTP/1.0`` request."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        return False
    try:
        with socket.create_connection((parts.hostname, parts.port or 443), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(f"HEAD / HTTP/1.0\r\nHost: {parts.hostname}\r\n\r\n".encode())
            return s.recv(5) == b"HTTP/"
    except OSError:
        return False
