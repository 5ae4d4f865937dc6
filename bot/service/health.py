"""What ``/healthz`` says: ``ok``, or ``degraded`` with the reasons (a pure core, ``now`` passed in)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

UNHEALTHY_HARNESS = ("unreachable", "token_refused", "misconfigured")


@dataclass(frozen=True)
class Facts:
    """What the daemon knows about its Matrix side at one moment."""

    ready: bool  # logged in and joined at start
    joined: bool  # still in the station room (not left, kicked or banned since)
    last_sync_ok: float  # wall time of the last sync batch handled and saved (0: none yet)
    ready_at: float  # wall time the daemon became ready (0: not yet)
    sync_timeout: float
    send_failing: str | None  # why the last send failed, until one succeeds
    rate_limit: Mapping[str, Any] = field(default_factory=dict)  # bot.matrix.gate.RateGate.status()


def reasons(f: Facts, now: float) -> list[str]:
    """Why the daemon is not fully working; empty when it is."""
    if not f.ready:
        return ["not joined to the station room yet (logging in, or the homeserver is unreachable)"]
    out: list[str] = []
    if not f.joined:
        out.append("not in the station room (left, kicked or banned): invite the bot back")
    since = max(f.last_sync_ok, f.ready_at)
    if now - since > 2 * f.sync_timeout:
        out.append(f"not synced for {now - since:.0f} s (more than 2 x the sync timeout)")
    if f.send_failing:
        out.append(f"sends failing: {f.send_failing[:200]}")
    if f.rate_limit.get("limited"):  # what the homeserver's rate limit costs so far and what fixes it
        cost = f.rate_limit.get("now") or {}
        out.append(
            f"the homeserver rate-limits the bot's account ({cost.get('refusals', 0)} refusals, "
            f"{cost.get('sends_delayed', 0)} sends delayed up to {cost.get('delay_max_s', 0)} s, for "
            f"{cost.get('seconds', 0)} s): prompts and answered edits go first, keycaps wait or are left out; "
            f"{f.rate_limit.get('remedy', '')}"
        )
    return out


def database_reasons(unreachable: tuple[float, str] | None, now: float) -> list[str]:
    """One reason while the state's database is lost (``(since, why)``): every role says it."""
    if unreachable is None:
        return []
    since, why = unreachable
    return [f"database unreachable for {max(0.0, now - since):.0f} s, retrying: {why[:200]}"]


def body(
    f: Facts, now: float, connected: bool, harnesses: Sequence[Mapping[str, Any]] = (), role: str = "leader",
    database: tuple[float, str] | None = None,
) -> dict[str, object]:
    """The ``/healthz`` JSON: ``ok`` is ``status == "ok"`` (false while degraded, so a check that reads ``ok``
    is not misled); ``live`` stays true while the process serves (liveness).
    ``harnesses`` (each watcher's health, listed when there are any) adds a reason per unhealthy one.
    ``role``: ``leader`` runs the Matrix side; a ``standby`` serves the API only, so it has no Matrix reasons.
    ``database``: (since, why) while the state's database is unreachable (any role). ``rate_limit`` (the
    leader's): the homeserver's refusals for rate seen, the figures of the limit now or the last one, the remedy."""
    why = database_reasons(database, now)
    if role == "leader":
        why += reasons(f, now)
        for h in harnesses:  # one reason per watched harness unreachable, refusing the token or not found
            if h.get("state") in UNHEALTHY_HARNESS:
                error = f": {str(h['error'])[:200]}" if h.get("error") else ""
                why.append(f"harness {h.get('name')}: {h.get('state')}{error}")
    out: dict[str, object] = {
        "ok": not why,
        "live": True,
        "status": "degraded" if why else "ok",
        "role": role,
        "reasons": why,
        "matrix_ready": f.ready,
        "matrix_connected": connected,
    }
    if role == "leader" and f.rate_limit:
        out["rate_limit"] = dict(f.rate_limit)
    if harnesses:
        out["harnesses"] = list(harnesses)
    return out
