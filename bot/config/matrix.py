"""[matrix] (the bot's account, its station room, encryption and trust) and [answerers]."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator

from bot.config.base import HttpUrl, Seconds, Section


def check_room_ref(v: str) -> str:
    """A room id (``!abc:example.org``) or an alias (``#room:example.org``)."""
    if not (v.startswith("!") and len(v) > 1) and not (v.startswith("#") and ":" in v):
        raise ValueError("must be a room id (!abc:example.org) or an alias (#room:example.org)")
    return v


RoomRef = Annotated[str, AfterValidator(check_room_ref)]


class VerifiedDevice(Section):
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


class MatrixConfig(Section):
    """[matrix]: the bot's account and its station room."""

    homeserver: HttpUrl
    user_id: str
    password: str | None = Field(default=None, repr=False)
    access_token: str | None = Field(default=None, repr=False)
    device_name: str = "permission-bot"
    room: RoomRef
    sync_timeout: float = 30.0
    encryption: bool = True
    trust: Literal["cross-signed", "tofu", "verified-only"] = "cross-signed"
    recovery_key: str | None = Field(default=None, repr=False)
    verified_devices: list[VerifiedDevice] = Field(default=[], validate_default=True)
    undecryptable_wait: Seconds = 60.0

    @field_validator("verified_devices")
    @classmethod
    def _pins(cls, v: list[VerifiedDevice], info: ValidationInfo) -> list[VerifiedDevice]:
        if info.data.get("trust") == "verified-only" and not v:
            raise ValueError('required with trust = "verified-only" (else no device could read the prompts)')
        return v

    @field_validator("homeserver")
    @classmethod
    def _base(cls, v: str) -> str:
        return v.rstrip("/")

    @field_validator("user_id")
    @classmethod
    def _mxid(cls, v: str) -> str:
        if not (v.startswith("@") and ":" in v):
            raise ValueError("must be a full Matrix id like @permbot:example.org")
        return v

class AnswerersConfig(Section):
    """[answerers]: who may answer prompts. Empty means nobody."""

    users: list[str] = Field(default_factory=list)
    min_power_level: int | None = None
