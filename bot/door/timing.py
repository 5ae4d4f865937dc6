"""Where one ACP request's time went, for its ``request_timing`` log event (pure; bot/room/timing.py logs the
room's side): asked -> submitted (the daemon's clock), settled -> proxy told (the long-poll's answer) ->
agent told, in ms."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def request_timing(rec: dict[str, Any], asked_at: float, told_at: float, agent_told: float) -> dict[str, Any] | None:
    """The event's fields for the settled record ``rec`` (None when its times cannot be read); the floats are
    epoch seconds: the agent's request read, the proxy told, the agent told."""
    try:
        settled, submitted = (
            datetime.fromisoformat(str(at).replace("Z", "+00:00")).timestamp()
            for at in ((rec.get("outcome") or {}).get("decided_at"), rec.get("requested_at"))
        )
    except ValueError:
        return None
    return {
        "request_id": rec.get("id"),
        "asked_to_submit_ms": round((submitted - asked_at) * 1000, 1),
        "settled_to_proxy_ms": round((told_at - settled) * 1000, 1),
        "proxy_to_agent_ms": round((agent_told - told_at) * 1000, 1),
    }
