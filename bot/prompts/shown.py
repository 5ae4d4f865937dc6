"""What of a request's raw input is shown: the one place that decides it (INVARIANT 2). Pure.

Every field of ``rawInput`` is either shown or is the model's prose about it (``description``,
``reason``...): the command line is ``command`` with ``args`` appended (a list shell-joined, a string as
is), ``cwd`` is the directory it runs in, and every other field (``env``, sandbox and permission flags,
fields nobody knows) is a setting shown as JSON. A raw input without a command is shown as JSON, less
what a diff of the request already shows. The prompt (:mod:`bot.prompts.preview`), session rules
(:mod:`bot.inbox.session_rules`) and rule globs (:mod:`bot.inbox.rules`) all read this, so a rule matches
exactly what a person read.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.prompts.text import unquote_code

PROSE = frozenset({"description", "title", "reason", "explanation", "justification"})
"""The model's words about the call: they change nothing that runs, so they need not be shown."""
ESCALATION = frozenset({
    "dangerouslyDisableSandbox",
    "dangerously_disable_sandbox",
    "sandbox_permissions",
    "with_escalated_permissions",
    "bypassPermissions",
    "bypass_sandbox",
})
"""Settings that ask to run with more than the sandbox allows (Claude Code's, Codex's)."""
_COMMAND_KEYS = frozenset({"command", "args", "cwd"})
_BARE_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)


def as_json(value: object) -> str:
    """Compact JSON of any value (what cannot be JSON said by its ``repr``)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):  # circular or too deep: say what it is
        return repr(value)


def _shell_join(parts: Sequence[Any]) -> str:
    return shlex.join(p if isinstance(p, str) else as_json(p) for p in parts)


@dataclass(frozen=True)
class Shown:
    """What a person reads of the raw input: ``label`` ``Command`` (the command line) or ``Input`` (JSON), or
    None when there is nothing to read; ``cwd`` where it runs; ``settings`` every other field that changes
    what runs, as ``key: JSON`` lines; ``escalates`` the settings that ask for more than the sandbox."""

    label: str | None = None
    text: str = ""
    cwd: str | None = None
    settings: tuple[str, ...] = ()
    escalates: tuple[str, ...] = ()
    env: bool = False  # the input sets environment variables

    @property
    def command(self) -> str | None:
        """The full command line shown (``command`` and ``args``), or None."""
        return self.text if self.label == "Command" and self.text.strip() else None


def _args(args: object) -> str:
    """``args`` as appended to the command line: a list shell-joined, a string as is, else its JSON (one word)."""
    if args is None or args == "" or args == []:
        return ""
    if isinstance(args, str):
        return args
    return _shell_join(args if isinstance(args, list) else [args])


def _command_line(command: object, args: object) -> str | None:
    if isinstance(command, str) and command:
        head = command
    elif isinstance(command, list) and command:
        head = _shell_join(command)
    else:
        return None
    tail = _args(args)
    return f"{head} {tail}" if tail else head


def _truthy(value: object) -> bool:
    return value not in (None, False, 0, "", [], {}, "false", "0", "no", "off", "use_default")


def _command_input(raw: Mapping[Any, Any], line: str) -> Shown:
    cwd = raw.get("cwd")
    settings: list[str] = []
    if "cwd" in raw and not isinstance(cwd, str):
        settings.append(f"cwd: {as_json(cwd)}")
    for k, v in raw.items():
        key = str(k)
        if key in _COMMAND_KEYS or key in PROSE:
            continue
        settings.append(f"{key if _BARE_KEY.fullmatch(key) else as_json(key)}: {as_json(v)}")
    escalates = tuple(str(k) for k, v in raw.items() if str(k) in ESCALATION and _truthy(v))
    return Shown(label="Command", text=line, cwd=cwd if isinstance(cwd, str) and cwd else None,
                 settings=tuple(settings), escalates=escalates, env=_truthy(raw.get("env")))


def _unshown(value: object, by_diff: frozenset[str]) -> object:
    """``value`` less the strings a diff already shows (containers left empty by that go too)."""
    if isinstance(value, str):
        return None if value in by_diff else value
    if isinstance(value, Mapping):
        kept = {k: _unshown(v, by_diff) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None} or None
    if isinstance(value, list):
        items = [_unshown(v, by_diff) for v in value]
        return [v for v in items if v is not None] or None
    return value


def shown_input(
    raw_input: object, *, kind: str | None = None, title: str = "", by_diff: frozenset[str] = frozenset()
) -> Shown:
    """What of ``raw_input`` is shown. ``by_diff``: the paths and texts the request's diffs show (a field
    holding one of them is read in the diff). For an ``execute`` request without raw input the title is
    the command (one Markdown code span unwrapped); without ``kind`` the title never counts."""
    if raw_input is None or raw_input == {} or raw_input == [] or raw_input == "":
        if kind == "execute" and title.strip():
            return Shown(label="Command", text=unquote_code(title))
        return Shown()
    if isinstance(raw_input, Mapping):
        line = _command_line(raw_input.get("command"), raw_input.get("args"))
        if line is not None:
            return _command_input(raw_input, line)
    if isinstance(raw_input, str):
        return Shown(label="Input", text=raw_input)
    rest = _unshown(raw_input, by_diff) if by_diff else raw_input
    if rest is None or (isinstance(rest, Mapping) and not set(map(str, rest)) - PROSE):
        return Shown()  # the diffs show all of it (but the model's prose)
    return Shown(label="Input", text=as_json(rest))


def command_line(raw_input: object) -> str | None:
    """``shown_input(raw_input).command`` without the rest of :class:`Shown` (`permissions ls` asks this of
    every pending request): the command line shown (``command`` and ``args``), or None."""
    if isinstance(raw_input, Mapping):
        line = _command_line(raw_input.get("command"), raw_input.get("args"))
        if line is not None and line.strip():
            return line
    return None


def settings_of(raw_input: object) -> dict[str, Any] | None:
    """The raw input's fields but the command line and the prose (``cwd``, ``env``, flags...), as a session
    rule compares them: ``ls`` in ``/tmp`` is not ``ls`` in ``~``. None when there are none."""
    if not isinstance(raw_input, Mapping):
        return None
    return {str(k): v for k, v in raw_input.items() if str(k) not in PROSE and k not in ("command", "args")} or None
