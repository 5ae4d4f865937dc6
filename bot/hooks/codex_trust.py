"""`permission-bot hook trust codex`: mark permission-bot's hooks in ``CODEX_HOME/hooks.json`` trusted.

Codex runs a hook from ``hooks.json`` only when ``config.toml`` holds, under
``[hooks.state."<key>"]``, a ``trusted_hash`` equal to the hash it computes for that hook (what the
app-server's ``hooks/list`` reports as ``currentHash``). As Codex computes them
(codex-rs/hooks/src/engine/discovery.rs, config/src/fingerprint.rs):

- key: ``<absolute path of hooks.json>:<event, snake_case>:<group index>:<handler index>``;
- hash: ``sha256:`` + hex SHA-256 of the compact, key-sorted JSON of ``{"event_name", "matcher"
  (when set), "hooks": [{"type": "command", "command", "timeout" (default 600, at least 1),
  "async" (default false), "statusMessage" (when set)}]}``.

Only handlers whose command is ``permission-bot hook codex ...`` are trusted, never another hook.
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

EVENTS = {"PermissionRequest": "permission_request", "PreToolUse": "pre_tool_use"}
DEFAULT_TIMEOUT = 600


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


def is_ours(command: object) -> bool:
    """Whether a hook command runs ``permission-bot hook codex``."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) >= 3 and os.path.basename(words[0]) == "permission-bot" and words[1:3] == ["hook", "codex"]


def our_hooks(hooks_json: Path) -> list[tuple[str, str, str]]:
    """(key, hash, command) of each permission-bot handler in ``hooks_json``."""
    try:
        data = json.loads(hooks_json.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrustError(f"{hooks_json} does not exist: write `permission-bot hook print-config codex` there") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TrustError(f"{hooks_json}: cannot read it as JSON ({type(e).__name__})") from None
    events = data.get("hooks") if isinstance(data, dict) else None
    found: list[tuple[str, str, str]] = []
    for event, label in EVENTS.items():
        groups = events.get(event) if isinstance(events, dict) else None
        for gi, group in enumerate(groups if isinstance(groups, list) else []):
            if not isinstance(group, dict):
                continue
            matcher = group.get("matcher") if isinstance(group.get("matcher"), str) else None
            handlers = group.get("hooks")
            for hi, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if isinstance(handler, dict) and handler.get("type", "command") == "command" \
                        and is_ours(handler.get("command")):
                    key = f"{hooks_json}:{label}:{gi}:{hi}"
                    found.append((key, hook_hash(label, matcher, handler), str(handler["command"])))
    if not found:
        raise TrustError(f"{hooks_json} has no `permission-bot hook codex` hook: add print-config's output first")
    return found


def _state(doc: dict[str, Any], key: str) -> dict[str, Any] | None:
    hooks = doc.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    entry = state.get(key) if isinstance(state, dict) else None
    return entry if isinstance(entry, dict) else None


def _set(text: str, key: str, value: str) -> str:
    """``text`` with ``[hooks.state."key"] trusted_hash = value`` (the table appended or its line set)."""
    line = f"trusted_hash = {json.dumps(value)}"
    header = re.compile(r'^[ \t]*\[[ \t]*hooks[ \t]*\.[ \t]*state[ \t]*\.[ \t]*' + re.escape(json.dumps(key))
                        + r'[ \t]*\][ \t]*(#.*)?$', re.M)
    m = header.search(text)
    if m is None:
        sep = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{sep}\n[hooks.state.{json.dumps(key)}]\n{line}\n"
    start = m.end()
    nxt = re.compile(r"^[ \t]*\[", re.M).search(text, start)
    end = nxt.start() if nxt else len(text)
    body = text[start:end]
    old = re.compile(r"^[ \t]*trusted_hash[ \t]*=.*$", re.M)
    body = old.sub(line, body, count=1) if old.search(body) else f"\n{line}" + body
    return text[:start] + body + text[end:]


def trust(home: Path) -> list[Trusted]:
    """Trust permission-bot's hooks in ``home/hooks.json`` by editing ``home/config.toml``."""
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
    for key, digest, command in our_hooks(home / "hooks.json"):
        entry = _state(tomllib.loads(new), key)
        same = entry is not None and entry.get("trusted_hash") == digest
        if not same:
            new = _set(new, key, digest)
        out.append(Trusted(key, digest, command, changed=not same))
    if new != text:
        _check(new, out, config)
        _write(config, new)
    return out


def _check(text: str, wanted: list[Trusted], config: Path) -> None:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        doc = {}
    for t in wanted:
        entry = _state(doc, t.key)
        if entry is None or entry.get("trusted_hash") != t.trusted_hash:
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
