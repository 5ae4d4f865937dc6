"""[api]: where the HTTP API listens and its tokens (the old single ``token`` and [[api.tokens]])."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from bot.config.base import Section
from bot.config.tokens import ApiTokenConfig


class ApiConfig(Section):
    """[api]: the HTTP API."""

    listen: str = "127.0.0.1:8750"
    token: str | None = Field(default=None, repr=False)
    tokens: list[ApiTokenConfig] = Field(default_factory=list)
    max_pending_per_token: int = Field(default=50, ge=1, le=100_000)  # pending requests one agent token may hold
    max_pending_per_session: int = Field(default=20, ge=1, le=100_000)  # and one session (else 429)

    @field_validator("tokens")
    @classmethod
    def _distinct(cls, v: list[ApiTokenConfig], info: ValidationInfo) -> list[ApiTokenConfig]:
        names: set[str] = set()
        secrets: dict[str, int] = {}
        legacy = info.data.get("token")
        for i, t in enumerate(v):
            if t.name in names:
                raise ValueError(f"{i}.name: repeats another token's name")
            names.add(t.name)
            assert t.secret is not None
            if t.secret in secrets or t.secret == legacy:
                raise ValueError(f"{i}.secret: the same secret as another token (each needs its own)")
            secrets[t.secret] = i
        return v

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        ok = port.isascii() and port.isdigit() and len(port) <= 5  # isdigit alone takes "²", which int() refuses
        if not sep or not host or not ok or not 0 < int(port) < 65536:
            raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:8750")
        return v

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])
