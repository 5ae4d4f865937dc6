"""[[api.tokens]]: named API tokens with a role (their ``secret_env`` is read by bot.config.env).

A decider token may belong to a person (``user = "@alice:example.org"``): the one mapping of a token to a
person. Its decisions are that person's where people are counted (a quorum's approvals, bot.inbox.quorum);
a token that belongs to nobody never counts as a person. Errors name the key and never a secret's value.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from bot.config.base import Section
from bot.util.ids import SAFE_ID_RULE, is_safe_id

MIN_SECRET = 16


class ApiTokenConfig(Section):
    """One [[api.tokens]] entry: a named secret with one role."""

    name: str
    role: Literal["agent", "decider"]
    secret: str | None = Field(default=None, repr=False)
    secret_env: str | None = None
    rooms: list[str] | None = None  # a decider's rooms ([[rooms]] names, "default"); None: every room
    user: str | None = None  # the person a decider token belongs to (a Matrix user id); None: nobody

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not is_safe_id(v):
            raise ValueError(f"{SAFE_ID_RULE} (records show it as api:NAME)")
        return v

    @field_validator("user")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        if v is not None and not is_user_id(v):
            raise ValueError("must be a Matrix user id (@name:server), the person the token belongs to")
        return v

    @field_validator("secret")
    @classmethod
    def _secret(cls, v: str | None) -> str | None:
        if v is not None and len(v.strip()) < MIN_SECRET:
            raise ValueError(f"at least {MIN_SECRET} characters (the value is not shown)")
        return v.strip() if v is not None else None

    @model_validator(mode="after")
    def _has_secret(self) -> ApiTokenConfig:
        if self.secret is None:
            raise ValueError("secret or secret_env = \"VAR\" is required")
        if self.user is not None and self.role != "decider":
            raise ValueError("user: only a decider token belongs to a person (an agent token decides nothing)")
        return self


def is_user_id(v: str) -> bool:
    """Whether ``v`` looks like a Matrix user id: ``@localpart:server``, printable, no blank, at most 255."""
    local, sep, server = v[1:].partition(":")
    return (v.startswith("@") and bool(sep) and bool(local) and bool(server) and len(v) <= 255
            and v.isprintable() and not any(c.isspace() for c in v))
