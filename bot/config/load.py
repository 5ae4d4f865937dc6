"""The whole config: its tables, the checks across them, and reading it from a TOML file."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from bot.config.api import ApiConfig
from bot.config.base import ConfigError, Section
from bot.config.env import ENV_ACCESS_TOKEN, ENV_PASSWORD, with_env
from bot.config.escalation import EscalationConfig
from bot.config.harnesses import HarnessConfig
from bot.config.matrix import AnswerersConfig, MatrixConfig
from bot.config.messages import one_line
from bot.config.rooms import DEFAULT_ROOM, RoomConfig, check_rooms
from bot.config.service import LogConfig, PromptsConfig, StateConfig, WebhookConfig


class Config(Section):
    """The whole validated config."""

    matrix: MatrixConfig
    answerers: AnswerersConfig = AnswerersConfig()
    api: ApiConfig = ApiConfig()
    state: StateConfig = StateConfig()
    prompts: PromptsConfig = PromptsConfig()
    log: LogConfig = LogConfig()
    rules: list[dict[str, Any]] = Field(default_factory=list)
    webhooks: list[WebhookConfig] = Field(default_factory=list)
    harnesses: list[HarnessConfig] = Field(default_factory=list)
    rooms: list[RoomConfig] = Field(default_factory=list)
    escalation: EscalationConfig | None = None

    @model_validator(mode="after")
    def _across_tables(self) -> Config:
        """The checks that read more than one table: credentials, harness names, rooms and decider tokens."""
        if not self.matrix.password and not self.matrix.access_token:
            raise ValueError(
                f"matrix.password: required (or matrix.access_token, or env {ENV_PASSWORD} / {ENV_ACCESS_TOKEN})"
            )
        harnesses = [h.name for h in self.harnesses]
        for i, n in enumerate(harnesses):
            if n in harnesses[:i]:
                raise ValueError(f"harnesses.{i}.name: {n!r} is used twice")
        roles = {t.name: t.role for t in self.api.tokens}
        check_rooms(self.rooms, self.matrix.room, roles, set(harnesses))
        names = {DEFAULT_ROOM, *(r.name for r in self.rooms)}
        for i, t in enumerate(self.api.tokens):
            if t.rooms is not None and t.role != "decider":
                raise ValueError(f"api.tokens.{i}.rooms: only a decider token has rooms (an agent token's room: "
                                 "the [[rooms]] entry that lists it in tokens)")
            for n in t.rooms or []:
                if n not in names:
                    raise ValueError(f'api.tokens.{i}.rooms: "{n}" is not a room (names: {", ".join(sorted(names))})')
        return self

    @property
    def room_names(self) -> list[str]:
        """Every station room's name, the default room first."""
        return [DEFAULT_ROOM, *(r.name for r in self.rooms)]

    def room_of_token(self, token_name: str | None) -> str:
        """The room an agent token's requests go to (the default room unless a [[rooms]] lists it)."""
        return next((r.name for r in self.rooms if token_name in r.tokens), DEFAULT_ROOM)

    def room_of_harness(self, harness: str) -> str:
        """The room a watched harness's requests go to."""
        return next((r.name for r in self.rooms if harness in r.harnesses), DEFAULT_ROOM)

    def answerers_of(self, room: str) -> AnswerersConfig:
        """A room's answerers (``default``: [answerers])."""
        return next((r.answerers for r in self.rooms if r.name == room), self.answerers)

    def escalation_of(self, room: str) -> EscalationConfig | None:
        """A room's escalation (its own, else ``[escalation]``), or None."""
        return next((r.escalation for r in self.rooms if r.name == room), None) or self.escalation

    @property
    def state_dir(self) -> Path:
        return Path(self.state.path)


def parse_config(data: dict[str, Any], env: dict[str, str] | None = None) -> Config:
    """Validate parsed TOML ``data``; environment secrets win over the file."""
    env = dict(os.environ) if env is None else env
    try:
        cfg = Config.model_validate(with_env(data, env))
    except ValidationError as e:
        raise ConfigError(one_line(e)) from None
    for i, h in enumerate(cfg.harnesses):
        if h.url is None and h.workspace is None and not env.get("AGENTPROTO_DAEMON_URL"):
            raise ConfigError(f"harnesses.{i}.url: required (or workspace, or env AGENTPROTO_DAEMON_URL)")
    if cfg.rules:  # [[rules]]: the one rules engine's own check (bot.inbox.rules)
        from bot.inbox.rules import RuleError, parse_rules

        try:
            parse_rules(list(cfg.rules))
        except RuleError as e:
            raise ConfigError(f"rules: {e}") from None
    return cfg


def load_config(path: str | Path, env: dict[str, str] | None = None) -> Config:
    """Read and validate the TOML file at ``path``."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such config file (copy config.example.toml)") from None
    except OSError as e:
        raise ConfigError(f"{p}: cannot read: {e.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    return parse_config(data, env)
