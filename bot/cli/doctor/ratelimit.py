"""doctor's view of the homeserver's message limit on the bot's account.

Nothing is measured by sending (a burst would cost the room events and the account its budget). What can be
known is said: Synapse's admin API answers the account's own ``override_ratelimit`` when the bot is an admin
(exempt, or a limit of its own, or the homeserver's ``rc_message``); else what the running daemon saw (its
``/healthz`` ``rate_limit``: refusals for rate, the figures of the last limit); else that it cannot be told
from here, with what to look for and the remedy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.cli.doctor.config import daemon_health
from bot.cli.doctor.homeserver import Login, call
from bot.cli.doctor.report import Report
from bot.config import Config
from bot.matrix.rate import REMEDY
from bot.util.jsonhttp import quote

ADMIN = "/_synapse/admin/v1/users/{}/override_ratelimit"


def check_rate_limit(
    cfg: Config, login: Login | None, rep: Report, health: Callable[[], tuple[int, object]] | None = None
) -> None:
    """One line: the account is exempt, rate-limited (with the remedy), or it cannot be told from here.
    ``health``: the running daemon's ``/healthz`` (:func:`daemon_health`, asked once per doctor run)."""
    user = cfg.matrix.user_id
    if login is not None and _admin_answer(cfg, login, user, rep):
        return
    status, body = health() if health else daemon_health(cfg)
    seen = body.get("rate_limit") if status in (200, 503) and isinstance(body, dict) else None
    if isinstance(seen, dict):
        _daemon_answer(seen, user, rep)
        return
    rep.ok(
        f"rate limit: not measured (no admin rights for {user}, no running daemon to ask); most homeservers limit "
        "a normal account to 0.2 messages a second after a burst of 10: if prompts come late and the log says "
        f"matrix_rate_limited_started, {REMEDY}"
    )


def _admin_answer(cfg: Config, login: Login, user: str, rep: Report) -> bool:
    """What Synapse's admin API says of the account (True), or False when it does not answer the bot."""
    status, body = call(cfg, "GET", ADMIN.format(quote(user)), token=login.token)
    if status != 200 or not isinstance(body, dict):
        return False  # not an admin (403), or not Synapse (404): nothing to read here
    per_second, burst = body.get("messages_per_second"), body.get("burst_count")
    if not body:
        rep.warn(
            f"rate limit: {user} has no override_ratelimit: the homeserver's rc_message applies to it "
            "(Synapse's default: 0.2 messages a second after a burst of 10)",
            REMEDY,
        )
    elif not per_second and not burst:
        rep.ok(f"rate limit: {user} is exempt (override_ratelimit 0/0)")
    else:
        rep.warn(f"rate limit: {user} has its own limit ({per_second} messages a second, burst {burst})", REMEDY)
    return True


def _daemon_answer(seen: dict[str, Any], user: str, rep: Report) -> None:
    if seen.get("limited"):
        now = seen.get("now") or {}
        rep.warn(
            f"rate limit: the running daemon is rate-limited by the homeserver now ({now.get('refusals', 0)} "
            f"refusals, {now.get('sends_delayed', 0)} sends delayed up to {now.get('delay_max_s', 0)} s)",
            REMEDY,
        )
    elif seen.get("refusals"):
        last = seen.get("last") or {}
        rep.warn(
            f"rate limit: the running daemon was rate-limited {seen.get('limits', 0)} time(s) "
            f"({seen.get('refusals')} refusals; the last limit delayed {last.get('sends_delayed', 0)} sends "
            f"up to {last.get('delay_max_s', 0)} s)",
            REMEDY,
        )
    else:
        rep.ok(f"rate limit: the running daemon has not been refused for rate (not a proof {user} is exempt)")
