"""[[harnesses]]: harnesses that keep their own permission inbox (seed 002), watched by the bot."""

from __future__ import annotations

from pydantic import field_validator, model_validator

from bot.config.base import HttpUrl, Name, Seconds, Section


class HarnessConfig(Section):
    """[[harnesses]]: a harness that keeps its own permission inbox (seed 002), watched by the bot.

    Found by ``url`` + the token in env ``token_env``, or by ``workspace`` (its
    ``.agentproto/runtime.json`` names url and token), else by env ``AGENTPROTO_DAEMON_URL``.
    """

    name: Name
    url: HttpUrl | None = None
    workspace: str | None = None
    token_env: str = "AGENTPROTO_DAEMON_TOKEN"
    poll: Seconds = 2.0

    @field_validator("poll")
    @classmethod
    def _poll(cls, seconds: float) -> float:
        if not 0.05 <= seconds <= 3600:
            raise ValueError("must be between 50ms and 1h")
        return seconds

    @model_validator(mode="after")
    def _one_place(self) -> HarnessConfig:
        if self.url is not None and self.workspace is not None:
            raise ValueError("workspace: give url or workspace, not both")
        return self
