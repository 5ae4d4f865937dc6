"""The daemon's own tables: [state], [prompts], [log] and [[webhooks]]."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from bot.config.base import HttpUrl, Seconds, Section


class StateConfig(Section):
    """[state]: where everything durable lives. ``database`` (env ``PERMISSION_BOT_DATABASE_URL`` wins): a
    ``postgresql://`` URL puts the inbox there (several daemons may share it); unset, SQLite under ``path``."""

    path: str = "./state"
    database: str | None = None


class PromptsConfig(Section):
    """[prompts]: how long a prompt stays answerable and what a timeout does."""

    timeout: Seconds = 900.0
    on_timeout: Literal["reject", "cancel"] = "reject"
    seed_reactions: bool = True
    clear_reactions: bool = False  # take the seeded keycaps back once settled (a redaction each; the edit shows it)
    post_rule_settled: bool = True
    session_rule_ttl: Seconds = 12 * 3600.0  # a session idle this long loses its session rules

    @field_validator("timeout", "session_rule_ttl")
    @classmethod
    def _positive(cls, seconds: float) -> float:
        if seconds <= 0:
            raise ValueError("must be longer than 0s")
        return seconds


class LogConfig(Section):
    """[log]: level and rendering of the daemon's structured log."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "console"] = "console"


EventName = Literal["permission-request", "permission-resolved", "permission-amended"]
EVENT_NAMES: tuple[EventName, ...] = ("permission-request", "permission-resolved", "permission-amended")


class WebhookConfig(Section):
    """[[webhooks]]: POST each event to ``url``, signed with HMAC-SHA256 of the body when ``secret`` is set."""

    url: HttpUrl
    secret: str | None = Field(default=None, repr=False)
    events: list[EventName] = Field(default_factory=lambda: list(EVENT_NAMES))
    timeout: float = 10.0
    max_attempts: int = Field(default=8, ge=1, le=100)
