"""How each real ACP agent runs behind ``permission-bot acp`` so that it asks: the command line and settings that
docs/agents.md quotes (``tests/test_agents_doc.py`` checks it does, the matrix test runs them), the model's steps
for a shell command and a file write, and what makes each run offline against ``tests.support.model_api``.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NPM = Path(__file__).resolve().parent.parent / "agents-npm" / "node_modules"
ARCH = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
Step = dict[str, Any]


@dataclass(frozen=True)
class Setup:
    """One agent: what a person runs (``command``, ``settings`` at ``settings_path`` under HOME) and what the
    tests add to run it offline (``offline(api_url, home)`` gives extra arguments and environment)."""

    name: str
    command: tuple[str, ...]
    exe: Path
    shell: Callable[[str], Step]
    write: Callable[[Path, str], Step]
    offline: Callable[[str, Path], tuple[list[str], dict[str, str]]]
    settings_path: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    rejected: str | None = None  # what the model gets back from a rejected tool (None: the turn just ends)

    @property
    def line(self) -> str:
        """The command line as docs/agents.md gives it."""
        return "permission-bot acp -- " + " ".join(self.command)

    @property
    def settings_text(self) -> str:
        return json.dumps(self.settings)


def _codex_offline(api: str, home: Path) -> tuple[list[str], dict[str, str]]:
    # Codex's sandbox helper refuses a CODEX_HOME under the temp dir: the caller gives ``home`` outside /tmp.
    (home / "config.toml").write_text(
        'model = "gpt-5.4"\nmodel_provider = "mock"\n[model_providers.mock]\nname = "mock"\n'
        f'base_url = "{api}/v1"\nwire_api = "responses"\nrequires_openai_auth = false\n'
        "request_max_retries = 0\nstream_max_retries = 0\n"
    )
    return [], {"CODEX_HOME": str(home)}


def _qwen_offline(api: str, home: Path) -> tuple[list[str], dict[str, str]]:
    args = ["--auth-type", "openai", "--openai-base-url", f"{api}/v1", "--openai-api-key", "mock", "-m", "mock-model"]
    return args, {}


def _opencode_offline(api: str, home: Path) -> tuple[list[str], dict[str, str]]:
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                "options": {"baseURL": f"{api}/v1", "apiKey": "mock"},
                "models": {"mock-model": {"name": "Mock model", "tool_call": True}}}
    config = {"provider": {"mock": provider}, "model": "mock/mock-model", "small_model": "mock/mock-model",
              "autoupdate": False, "share": "disabled"}
    env = {f"XDG_{d.upper()}_HOME": str(home / d) for d in ("data", "cache", "state")}
    flags = ("MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "SHARE")
    return [], {**env, "OPENCODE_CONFIG_CONTENT": json.dumps(config), **{f"OPENCODE_DISABLE_{f}": "1" for f in flags}}


def _copilot_offline(api: str, home: Path) -> tuple[list[str], dict[str, str]]:
    # BYOK: no GitHub login. A Claude model name makes Copilot offer plain ``create``/``edit`` functions.
    return [], {"COPILOT_PROVIDER_BASE_URL": f"{api}/v1", "COPILOT_PROVIDER_TYPE": "openai",
                "COPILOT_PROVIDER_API_KEY": "mock", "COPILOT_PROVIDER_WIRE_API": "completions",
                "COPILOT_MODEL": "claude-sonnet-4.5"}


def _gemini_offline(api: str, home: Path) -> tuple[list[str], dict[str, str]]:
    return [], {"GOOGLE_GEMINI_BASE_URL": api, "GEMINI_API_KEY": "dummy", "GEMINI_TELEMETRY_ENABLED": "false"}


def _patch(path: Path, text: str) -> Step:
    return {"custom": "apply_patch", "input": f"*** Begin Patch\n*** Add File: {path.name}\n+{text}\n*** End Patch\n"}


SETUPS = {
    s.name: s
    for s in (
        Setup(
            "codex",
            ("codex-acp",),
            NPM / ".bin" / "codex-acp",
            # Codex asks for a command only when the model asks to leave the sandbox.
            lambda cmd: {"tool": "exec_command", "args": {"cmd": cmd, "sandbox_permissions": "require_escalated",
                                                          "justification": "Run it outside the sandbox?"}},
            _patch,
            _codex_offline,
        ),
        Setup(
            "gemini",
            ("gemini", "--experimental-acp"),
            NPM / ".bin" / "gemini",
            lambda cmd: {"tool": "run_shell_command", "args": {"command": cmd}},
            lambda path, text: {"tool": "write_file", "args": {"file_path": str(path), "content": text}},
            _gemini_offline,
            rejected="canceled by the user",
        ),
        Setup(
            "qwen",
            ("qwen", "--acp", "--approval-mode", "default"),
            NPM / ".bin" / "qwen",
            lambda cmd: {"tool": "run_shell_command", "args": {"command": cmd, "description": "Run it",
                                                               "is_background": False}},
            lambda path, text: {"tool": "write_file", "args": {"file_path": str(path), "content": text}},
            _qwen_offline,
            rejected="canceled by the user",
        ),
        Setup(
            "opencode",
            ("opencode", "acp"),
            NPM / f"opencode-linux-{ARCH}" / "bin" / "opencode",
            lambda cmd: {"tool": "bash", "args": {"command": cmd, "description": "Run it"}},
            lambda path, text: {"tool": "write", "args": {"filePath": str(path), "content": text}},
            _opencode_offline,
            settings_path=".config/opencode/opencode.json",
            settings={"permission": {"bash": "ask", "edit": "ask"}},
            rejected="The user rejected permission",
        ),
        Setup(
            "copilot",
            ("copilot", "--acp"),
            NPM / ".bin" / "copilot",
            lambda cmd: {"tool": "bash", "args": {"command": cmd, "description": "Run it"}},
            lambda path, text: {"tool": "create", "args": {"path": str(path), "file_text": text}},
            _copilot_offline,
            rejected="The user rejected this tool call.",
        ),
    )
}
