"""TOML config -> validated settings, with environment overrides for secrets.

Every problem becomes one ``ConfigError`` line naming the key, e.g.
``matrix.homeserver: required``.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.config_tokens import ApiTokenConfig, TokenSourceError, fill_secrets_from_env
from bot.durations import DurationError, parse_duration

ENV_PASSWORD = "PERMISSION_BOT_MATRIX_PASSWORD"
ENV_ACCESS_TOKEN = "PERMISSION_BOT_MATRIX_ACCESS_TOKEN"
ENV_API_TOKEN = "PERMISSION_BOT_API_TOKEN"
ENV_RECOVERY_KEY = "PERMISSION_BOT_MATRIX_RECOVERY_KEY"


class ConfigError(Exception):
    """A config problem, as one line that names the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class VerifiedDevice(_Section):
    """One entry of [matrix] verified_devices: a device the operator checked out of band."""

    user_id: str
    device_id: str
    ed25519: str

    @field_validator("ed25519")
    @classmethod
    def _key(cls, v: str) -> str:
        key = "".join(v.split())  # Element shows the session key in groups of four
        if len(key) != 43:
            raise ValueError("must be the device's ed25519 key (43 base64 characters, Element: 'Session key')")
        return key


class MatrixConfig(_Section):
    """[matrix]: the bot's account and its station room."""

    homeserver: str
    user_id: str
    password: str | None = Field(default=None, repr=False)
    access_token: str | None = Field(default=None, repr=False)
    device_name: str = "permission-bot"
    room: str
    sync_timeout: float = 30.0
    encryption: bool = True
    trust: Literal["cross-signed", "tofu", "verified-only"] = "cross-signed"
    recovery_key: str | None = Field(default=None, repr=False)
    verified_devices: list[VerifiedDevice] = Field(default=[], validate_default=True)
    undecryptable_wait: float = 60.0

    @field_validator("undecryptable_wait", mode="before")
    @classmethod
    def _wait(cls, v: Any) -> float:
        try:
            return parse_duration(v)
        except DurationError as e:
            raise ValueError(str(e)) from None

    @field_validator("verified_devices")
    @classmethod
    def _pins(cls, v: list[VerifiedDevice], info: ValidationInfo) -> list[VerifiedDevice]:
        if info.data.get("trust") == "verified-only" and not v:
            raise ValueError('required with trust = "verified-only" (else no device could read the prompts)')
        return v

    @field_validator("homeserver")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")

    @field_validator("user_id")
    @classmethod
    def _mxid(cls, v: str) -> str:
        if not (v.startswith("@") and ":" in v):
            raise ValueError("must be a full Matrix id like @permbot:example.org")
        return v

    @field_validator("room")
    @classmethod
    def _room(cls, v: str) -> str:
        if not (v.startswith("!") and len(v) > 1) and not (v.startswith("#") and ":" in v):
            raise ValueError("must be a room id (!abc:example.org) or an alias (#room:example.org)")
        return v


class AnswerersConfig(_Section):
    """[answerers]: who may answer prompts. Empty means nobody."""

    users: list[str] = []
    min_power_level: int | None = None


class ApiConfig(_Section):
    """[api]: the HTTP API."""

    listen: str = "127.0.0.1:8750"
    token: str | None = Field(default=None, repr=False)
    tokens: list[ApiTokenConfig] = []

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
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:8750")
        return v

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])


class StateConfig(_Section):
    """[state]: where everything durable lives."""

    path: str = "./state"


class PromptsConfig(_Section):
    """[prompts]: how long a prompt stays answerable and what a timeout does."""

    timeout: float = 900.0
    on_timeout: Literal["reject", "cancel"] = "reject"
    seed_reactions: bool = True
    post_rule_settled: bool = True
    session_rule_ttl: float = 12 * 3600.0  # a session idle this long loses its session rules

    @field_validator("timeout", "session_rule_ttl", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float:
        try:
            seconds = parse_duration(v)
        except DurationError as e:
            raise ValueError(str(e)) from None
        if seconds <= 0:
            raise ValueError("must be longer than 0s")
        return seconds


class LogConfig(_Section):
    """[log]: level and rendering of the daemon's structured log."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "console"] = "console"


class WebhookConfig(_Section):
    """[[webhooks]]: POST each event to ``url``, signed with HMAC-SHA256 of the body when ``secret`` is set."""

    url: str
    secret: str | None = Field(default=None, repr=False)
    events: list[Literal["permission-request", "permission-resolved", "permission-amended"]] = [
        "permission-request",
        "permission-resolved",
        "permission-amended",
    ]
    timeout: float = 10.0
    max_attempts: int = Field(default=8, ge=1, le=100)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v



class HarnessConfig(_Section):
    """[[harnesses]]: a harness that keeps its own permission inbox (seed 002), watched by the bot.

    Found by ``url`` + the token in env ``token_env``, or by ``workspace`` (its
    ``.agentproto/runtime.json`` names url and token), else by env ``AGENTPROTO_DAEMON_URL``.
    """

    name: str
    url: str | None = None
    workspace: str | None = None
    token_env: str = "AGENTPROTO_DAEMON_TOKEN"
    poll: float = 2.0

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v or len(v) > 64 or any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in v):
            raise ValueError("must be 1-64 letters, digits, '.', '_' or '-'")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v

    @field_validator("poll", mode="before")
    @classmethod
    def _poll(cls, v: Any) -> float:
        try:
            seconds = parse_duration(v)
        except DurationError as e:
            raise ValueError(str(e)) from None
        if not 0.05 <= seconds <= 3600:
            raise ValueError("must be between 50ms and 1h")
        return seconds

    @model_validator(mode="after")
    def _one_place(self) -> HarnessConfig:
        if self.url is not None and self.workspace is not None:
            raise ValueError("workspace: give url or workspace, not both")
        return self


class Config(_Section):
    """The whole validated config."""

    matrix: MatrixConfig
    answerers: AnswerersConfig = AnswerersConfig()
    api: ApiConfig = ApiConfig()
    state: StateConfig = StateConfig()
    prompts: PromptsConfig = PromptsConfig()
    log: LogConfig = LogConfig()
    rules: list[dict[str, Any]] = []
    webhooks: list[WebhookConfig] = []
    harnesses: list[HarnessConfig] = []

    @model_validator(mode="after")
    def _credentials(self) -> Config:
        if not self.matrix.password and not self.matrix.access_token:
            raise ValueError(
                f"matrix.password: required (or matrix.access_token, or env {ENV_PASSWORD} / {ENV_ACCESS_TOKEN})"
            )
        return self

    @model_validator(mode="after")
    def _harness_names(self) -> Config:
        names = [h.name for h in self.harnesses]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise ValueError(f"harnesses.{i}.name: {n!r} is used twice")
        return self

    @property
    def state_dir(self) -> Path:
        return Path(self.state.path)


_TYPE_WORDS = {
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
    "tuple_type": "expected a list",
    "list_type": "expected a list",
    "dict_type": "expected a table",
    "model_type": "expected a table",
}


_SUBKEY = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*")


def _type_name(v: Any) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list",
            dict: "a table"}.get(type(v), type(v).__name__)


def _one_line(err: ValidationError) -> str:
    """The first validation error as ``key.path: what is wrong``."""
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"])
    kind = e["type"]
    if kind == "missing":
        msg = "required"
    elif kind == "extra_forbidden":
        msg = "unknown key"
    elif kind in _TYPE_WORDS:
        msg = f"{_TYPE_WORDS[kind]} (got {_type_name(e['input'])})"  # never the value: it may be a secret
    else:
        msg = e["msg"].removeprefix("Value error, ")
        # a list validator names the entry: "3.name: ..." after "api.tokens"
        head, sep, rest = msg.partition(": ")
        if sep and head[:1].isdigit() and _SUBKEY.fullmatch(head):
            loc, msg = f"{loc}.{head}" if loc else head, rest
    return f"{loc}: {msg}" if loc else msg


def parse_config(data: dict[str, Any], env: dict[str, str] | None = None) -> Config:
    """Validate parsed TOML ``data``; environment secrets win over the file."""
    env = dict(os.environ) if env is None else env
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    matrix = data.get("matrix")
    if isinstance(matrix, dict):
        if env.get(ENV_PASSWORD):
            matrix["password"] = env[ENV_PASSWORD]
        if env.get(ENV_ACCESS_TOKEN):
            matrix["access_token"] = env[ENV_ACCESS_TOKEN]
        if env.get(ENV_RECOVERY_KEY):
            matrix["recovery_key"] = env[ENV_RECOVERY_KEY]
    if env.get(ENV_API_TOKEN):
        api = data.setdefault("api", {})
        if isinstance(api, dict):
            api["token"] = env[ENV_API_TOKEN]
    try:
        fill_secrets_from_env(data, env)
    except TokenSourceError as e:
        raise ConfigError(str(e)) from None
    try:
        cfg = Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_one_line(e)) from None
    for i, h in enumerate(cfg.harnesses):
        if h.url is None and h.workspace is None and not env.get("AGENTPROTO_DAEMON_URL"):
            raise ConfigError(f"harnesses.{i}.url: required (or workspace, or env AGENTPROTO_DAEMON_URL)")
    if cfg.rules:
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
