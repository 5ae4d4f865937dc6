"""TCP keepalives on every PostgreSQL connection: a primary that vanished without closing the connection
(a host lost, packets dropped) is noticed by the kernel within :data:`NOTICED_WITHIN` seconds even on an
idle connection (the leadership lock's, the LISTEN one), which then ends with a "not now" error its owner
retries. A statement waiting on such a server ends at asyncpg's ``command_timeout`` (bot.inbox.db.postgres).
"""

from __future__ import annotations

import socket
from typing import Any

IDLE, INTERVAL, COUNT = 10, 5, 3  # seconds idle before the first probe, between probes, probes unanswered
NOTICED_WITHIN = IDLE + INTERVAL * COUNT  # also the most that sent data may wait unacknowledged (TCP_USER_TIMEOUT)


def options() -> list[tuple[int, int, int]]:
    """The socket options set (those this platform has)."""
    out = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", IDLE), ("TCP_KEEPINTVL", INTERVAL), ("TCP_KEEPCNT", COUNT),
                        ("TCP_USER_TIMEOUT", NOTICED_WITHIN * 1000)):
        if hasattr(socket, name):
            out.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return out


async def keep_alive(conn: Any) -> None:
    """Set the keepalives on an asyncpg connection's socket (a Unix socket has none: left alone)."""
    transport = getattr(conn, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    for level, opt, value in options():
        try:
            sock.setsockopt(level, opt, value)
        except OSError:  # not allowed here: the statement timeout still bounds every call
            pass
