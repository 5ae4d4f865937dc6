"""`permission-bot hook trust codex`: mark permission-bot's hooks in ``CODEX_HOME/hooks.json`` trusted.

Codex runs a hook from ``hooks.json`` only when ``config.toml`` holds, under
``[hooks.state."<key>"]``, a ``trusted_hash`` equal to the hash it computes for that hook (what the
app-server's ``hooks/list`` reports as ``currentHash``). As Codex computes them
(codex-rs/hooks/src/engine/discovery.rs, config/src/fingerprint.rs):

- key: ``<absolute path of hooks.json>:<event, snake_case>:<group index>:<handler index>``;
- hash: ``sha256:`` + hex SHA-256 of the compact, key-sorted JSON of ``{"event_name", "matcher"
  (when set), "hooks": [{"type": "command", "command", "timeout" (default 600, at least 1),
  "async" (default false), "statusMessage" (when set)}]}``.

Only a handler whose command is exactly one that ``hook print-config codex`` writes for this install is
trusted (:func:`judge`): this install's resolved ``permission-bot`` (:func:`bot.hooks.snippet.own_program`), then
``hook codex`` and print-config's own flags, quoted as ``shlex.join`` quotes them. No other program named
``permission-bot``, no shell syntax (``&&``, ``$(...)``, ``;``), no flag print-config does not write, no
``--url`` but the daemon's this command is given (``--url``, else ``$PERMISSION_BOT_URL``, else the default).
``config.toml`` is edited as text (a table appended, or the one ``trusted_hash`` line replaced),
checked by parsing the result, and replaced atomically; nothing is written when the check fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.hooks.snippet import hook_command

EVENTS = {"PermissionRequest": "permission_request", "PreToolUse": "pre_tool_use"}
DEFAULT_TIMEOUT = 600
_HASH_LINE = r"^[ \t]*trusted_hash[ \t]*=.*"


class TrustError(Exception):
    """Why nothing was trusted (one line for stderr)."""


@dataclass(frozen=True)
class Trusted:
    key: str
    trusted_hash: str
    command: str
    changed: bool


def codex_home(flag: str | None, env: dict[str, str] | os._Environ[str]) -> Path:
    """``--codex-home``, else ``$CODEX_HOME``, else ``~/.codex``; absolute."""
    raw = flag or env.get("CODEX_HOME") or str(Path.home() / ".codex")
    return Path(os.path.abspath(os.path.expanduser(raw)))


def hook_hash(event_label: str, matcher: str | None, handler: dict[str, Any]) -> str:
    """The hash Codex computes for one command handler of one matcher group."""
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    normalized: dict[str, Any] = {
        "type": "command",
        "command": handler["command"],
        "timeout": max(1, int(timeout)) if isinstance(timeout, int) and not isinstance(timeout, bool)
        else DEFAULT_TIMEOUT,
        "async": handler.get("async") is True,
    }
    if isinstance(handler.get("statusMessage"), str):
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": event_label, "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Ours:
    """What print-config would write here: this install's program, the daemon's URL."""

    program: str
    url: str


def judge(command: str, ours: Ours) -> str | None:
    """None when ``command`` is exactly a command print-config writes for this install; else why not."""
    try:
        words = shlex.split(command)
    except ValueError:
        return "not one plain command (unbalanced quotes)"
    if not words or words[0] != ours.program:
        return f"it does not run this install's {ours.program}"
    if words[1:3] != ["hook", "codex"]:
        return "not `hook codex`"
    flags: dict[str, str] = {}
    rest = words[3:]
    for i in range(0, len(rest), 2):
        flag, value = rest[i], rest[i + 1] if i + 1 < len(rest) else None
        if flag not in ("--token-file", "--url", "--fallback") or value is None or flag in flags:
            return "more than print-config writes (a flag it does not write, or shell syntax)"
        flags[flag] = value
    token_file, url = flags.get("--token-file"), flags.get("--url")
    if token_file is None or not os.path.isabs(token_file):
        return "no absolute --token-file"
    if url is not None and url.rstrip("/") != ours.url.rstrip("/"):
        return f"its --url is not {ours.url} (give trust the --url print-config was given)"
    if flags.get("--fallback", "deny") != "deny":
        return "more than print-config writes (--fallback ask)"
    if command != hook_command("codex", ours.program, token_file, url, flags.get("--fallback", "ask")):
        return "not exactly as print-config writes it (quoting or shell syntax)"
    return None


def our_hooks(hooks_json: Path, ours: Ours) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """(key, hash, command) of each handler in ``hooks_json`` that print-config would write for this install,
    and (key, why) of each other handler that names ``permission-bot`` (never trusted)."""
    try:
        data = json.loads(hooks_json.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrustError(f"{hooks_json} does not exist: write `permission-bot hook print-config codex` there") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TrustError(f"{hooks_json}: cannot read it as JSON ({type(e).__name__})") from None
    events = data.get("hooks") if isinstance(data, dict) else None
    found: list[tuple[str, str, str]] = []
    refused: list[tuple[str, str]] = []
    for event, label in EVENTS.items():
        groups = events.get(event) if isinstance(events, dict) else None
        for gi, group in enumerate(groups if isinstance(groups, list) else []):
            if not isinstance(group, dict):
                continue
            matcher = group.get("matcher") if isinstance(group.get("matcher"), str) else None
            handlers = group.get("hooks")
            for hi, handler in enumerate(handlers if isinstance(handlers, list) else []):
                command = handler.get("command") if isinstance(handler, dict) else None
                if not isinstance(command, str) or handler.get("type", "command") != "command":
                    continue
                key = f"{hooks_json}:{label}:{gi}:{hi}"
                why = judge(command, ours)
                if why is None:
                    found.append((key, hook_hash(label, matcher, handler), command))
                elif "permission-bot" in command:
                    refused.append((key, why))
    return found, refused


def _state(doc: dict[str, Any], key: str) -> dict[str, Any] | None:
    hooks = doc.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    entry = state.get(key) if isinstance(state, dict) else None
    return entry if isinstance(entry, dict) else None


def _set(text: str, key: str, value: str | None) -> str:
    """``text`` with ``[hooks.state."key"] trusted_hash = value`` (the table appended or its line set); for
    None, without that line (the table itself kept)."""
    line = f"trusted_hash = {json.dumps(value)}"
    span = _table(text, key)
    if span is None:
        sep = "" if not text or text.endswith("\n") else "\n"
        return text if value is None else f"{text}{sep}\n[hooks.state.{json.dumps(key)}]\n{line}\n"
    start, end = span
    body = text[start:end]
    if value is None:
        body = re.compile(_HASH_LINE + r"(\n|$)", re.M).sub("", body, count=1)
    else:
        old = re.compile(_HASH_LINE + "$", re.M)
        body = old.sub(line, body, count=1) if old.search(body) else f"\n{line}" + body
    return text[:start] + body + text[end:]


def trust(home: Path, ours: Ours) -> tuple[list[Trusted], list[tuple[str, str]]]:
    """Trust permission-bot's hooks in ``home/hooks.json`` by editing ``home/config.toml``: those trusted,
    and (key, why) of the handlers naming permission-bot that were not."""
    config = home / "config.toml"
    try:
        text = config.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as e:
        raise TrustError(f"{config}: cannot read it ({type(e).__name__})") from None
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TrustError(f"{config} is not valid TOML ({e}); fix it first") from None
    out: list[Trusted] = []
    new = text
    hooks_json = home / "hooks.json"
    found, refused = our_hooks(hooks_json, ours)
    for i, (key, why) in enumerate(refused):  # trusted before (by an older version, or by hand): no longer
        if "trusted_hash" in (_state(tomllib.loads(new), key) or {}):
            new = _set(new, key, None)
            refused[i] = (key, f"{why}; its trusted_hash is removed")
    for key, digest, command in found:
        same = (_state(tomllib.loads(new), key) or {}).get("trusted_hash") == digest
        if not same:
            new = _set(new, key, digest)
        out.append(Trusted(key, digest, command, changed=not same))
    if new != text:
        _check(new, out, [k for k, _ in refused], config)
        _write(config, new)
    if not found:
        why = f" ({refused[0][1]})" if refused else ""
        raise TrustError(f"{hooks_json} has no `permission-bot hook codex` hook as print-config writes it for "
                         f"{ours.program}{why}: add print-config's output first")
    return out, refused


def _table(text: str, key: str) -> tuple[int, int] | None:
    """Where the body of ``[hooks.state."key"]`` is in ``text`` (after its header, up to the next table)."""
    header = re.compile(r'^[ \t]*\[[ \t]*hooks[ \t]*\.[ \t]*state[ \t]*\.[ \t]*' + re.escape(json.dumps(key))
                        + r'[ \t]*\][ \t]*(#.*)?$', re.M)
    m = header.search(text)
    if m is None:
        return None
    nxt = re.compile(r"^[ \t]*\[", re.M).search(text, m.end())
    return m.end(), nxt.start() if nxt else len(text)


def _check(text: str, wanted: list[Trusted], unwanted: list[str], config: Path) -> None:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        doc = {}
    for key in unwanted:
        if "trusted_hash" in (_state(doc, key) or {}) or not doc:
            raise TrustError(f"could not edit {config} safely; remove by hand the trusted_hash of "
                             f"[hooks.state.{json.dumps(key)}] (not a hook print-config writes)")
    for t in wanted:
        if (_state(doc, t.key) or {}).get("trusted_hash") != t.trusted_hash:
            raise TrustError(
                f"could not edit {config} safely (hooks.state is written in a form this command does not edit); "
                f"add by hand: [hooks.state.{json.dumps(t.key)}] trusted_hash = {json.dumps(t.trusted_hash)}"
            )


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(prefix=".config.toml.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
