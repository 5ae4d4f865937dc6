"""[escalation] (and ``[[rooms]] escalation = {...}``): a prompt unanswered for ``after`` is escalated once:
``mention`` are paged (one ``m.text`` per room per window naming the prompts due) and may answer it from then
on (bot.service.escalation)."""

from __future__ import annotations

from pydantic import Field, field_validator

from bot.config.base import Seconds, Section


class EscalationConfig(Section):
    after: Seconds
    mention: list[str] = Field(min_length=1)

    @field_validator("after")
    @classmethod
    def _after(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be more than 0 seconds")
        return v

    @field_validator("mention")
    @classmethod
    def _mention(cls, v: list[str]) -> list[str]:
        for i, u in enumerate(v):
            if not (u.startswith("@") and ":" in u and len(u) <= 255 and u.isprintable()):
                raise ValueError(f"{i}: must be a Matrix user id (@name:server)")
        return v
