"""The hook input as Claude Code and Codex send it (see tests/fixtures/hooks/), validated with pydantic."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.hooks.clis import CLIS as CLIS
from bot.hooks.clis import Cli as Cli

EVENTS: dict[Cli, tuple[str, ...]] = {
    "claude-code": ("PermissionRequest", "PreToolUse"),
    "codex": ("PermissionRequest",),
}
_ID = re.compile(r"^[A-Za-z0-9._:@-]{1,200}$")
MAX_INPUT = 1_000_000  # bytes of hook input read at most


class HookInputError(ValueError):
    """A hook input we will not act on: the message names the field."""


class Extras(BaseModel):
    """What the command hook adds beside the CLI's input: the file a Write replaces, as read on disk.

    The daemon never reads files named by a hook input. A caller that forges these fields only
    shapes its own prompt, whose answer goes back to that same caller, not to any CLI.
    """

    model_config = ConfigDict(extra="ignore")
    write_before: str | None = None
    write_before_known: bool = False
    write_withheld: str | None = Field(default=None, max_length=5000)  # why it is not shown: path, size, SHA-256


class HookInput(BaseModel):
    """One hook invocation: the fields we use; the rest is ignored."""

    model_config = ConfigDict(extra="ignore", str_max_length=100_000)
    hook_event_name: str = Field(max_length=64)
    session_id: str
    cwd: str = Field(default="", max_length=4096)
    tool_name: str = Field(min_length=1, max_length=200)
    tool_input: dict[str, Any]
    tool_use_id: str | None = None
    permission_suggestions: list[dict[str, Any]] = Field(default_factory=list, max_length=50)
    permission_mode: str | None = Field(default=None, max_length=64)
    turn_id: str | None = Field(default=None, max_length=200)
    extras: Extras = Field(default_factory=Extras, alias="_permission_bot")

    @field_validator("session_id", "tool_use_id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        if v is not None and not _ID.match(v):
            raise ValueError("expected 1-200 letters, digits or ._:@-")
        return v


def parse_hook_input(cli: Cli, data: Any) -> HookInput:
    """Validate one hook input for ``cli``; HookInputError names what is wrong."""
    if not isinstance(data, dict):
        raise HookInputError("hook input: expected a JSON object")
    event = data.get("hook_event_name")
    if event not in EVENTS[cli]:
        handled = ", ".join(EVENTS[cli])
        if event is None:
            raise HookInputError(f"hook_event_name: missing; not a {cli} hook input (expected one of: {handled})")
        if not isinstance(event, str):
            raise HookInputError(f"hook_event_name: expected a string, got a {type(event).__name__} ({handled})")
        raise HookInputError(f"hook_event_name: {event[:40]!r} is not handled for {cli} (expected one of: {handled})")
    try:
        return HookInput.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "hook input"
        raise HookInputError(f"{where}: {err['msg']}") from None


def event_of(data: Any) -> str | None:
    """The ``hook_event_name`` of a (maybe invalid) input, when it names one we answer."""
    ev = data.get("hook_event_name") if isinstance(data, dict) else None
    return ev if ev in ("PermissionRequest", "PreToolUse") else None
