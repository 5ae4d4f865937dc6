"""The container, as far as it can be checked without a Docker engine: the Dockerfile's instructions, and
its entrypoint command, documented container config and healthcheck run here against the test Synapse."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver, free_port
from tests.support.station import exe_path

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "container-bot-password-3d1f"
AGENT_TOKEN = "container-agent-token-8e2a"
DECIDER_TOKEN = "container-decider-token-51c7"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile as (INSTRUCTION, arguments), continuations joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continuation"
    return out


def args_of(name: str) -> list[str]:
    return [a for n, a in instructions() if n == name]


def exec_form(text: str) -> list[str]:
    value = json.loads(text)
    assert isinstance(value, list) and all(isinstance(x, str) for x in value), text
    return value


def healthcheck_command() -> list[str]:
    (hc,) = args_of("HEALTHCHECK")
    cmd = hc[hc.index("CMD ") + 4 :]
    return exec_form(cmd)


# --- the Dockerfile itself --------------------------------------------------------------------------------


def test_instructions() -> None:
    ins = instructions()
    names = [n for n, _ in ins]
    assert names[0] == "FROM" and ins[0][1] == "python:3.11-slim"
    user = args_of("USER")
    assert user and user[-1] not in ("root", "0"), "the image must not run as root"
    assert names.index("USER") > max(i for i, n in enumerate(names) if n == "RUN"), "USER comes after every RUN"
    runs = " ".join(args_of("RUN"))
    assert re.search(r"pip install \.(\s|$)", runs), "installs the package from the source tree"
    assert exec_form(args_of("VOLUME")[0]) == ["/data"]
    assert "8750" in args_of("EXPOSE")[0].split()
    assert exec_form(args_of("ENTRYPOINT")[0]) == ["permission-bot"]
    assert exec_form(args_of("CMD")[-1]) == ["run", "--config", "/config/config.toml"]
    hc = healthcheck_command()
    assert hc[0] == "python" and "urllib" in " ".join(hc)
    copies = " ".join(args_of("COPY"))
    assert "bot" in copies and "pyproject.toml" in copies and "README.md" in copies


def test_dockerignore_keeps_state_and_secrets_out() -> None:
    patterns = {
        x.strip() for x in (ROOT / ".dockerignore").read_text().splitlines() if x.strip() and not x.startswith("#")
    }
    for must in (".venv", ".git", "demo-state", "state", "config.toml"):
        assert must in patterns, must
    for needed in ("bot", "pyproject.toml", "README.md"):
        assert needed not in patterns, needed


def test_pip_install_brings_what_the_default_config_needs() -> None:
    """The image runs `pip install .`: with encryption on by default, that must bring matrix-nio's e2e extra
    (vodozemac), or the daemon stops at its first start with the default config."""
    from bot.config import MatrixConfig

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    if MatrixConfig.model_fields["encryption"].default:
        nio = [d for d in deps if d.replace(" ", "").lower().startswith("matrix-nio")]
        assert nio and all("[e2e" in d.replace(" ", "") for d in nio), (
            f"pyproject.toml: depend on matrix-nio[e2e] (got {nio}); encryption defaults to true"
        )


def container_config() -> str:
    """The container config block documented in docs/deploy.md."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    m = re.search(r"<!-- container-config[^>]*-->\s*```toml\n(.*?)```", text, re.S)
    assert m, "docs/deploy.md has no container-config toml block"
    return m.group(1)


def filled_config(homeserver: str, bot: str, room: str, human: str, port: int, data: Path) -> str:
    """The documented container config with this test's homeserver, accounts, room, port and state folder."""
    return (
        container_config()
        .replace("http://synapse:8008", homeserver)
        .replace("@permbot:example.org", bot)
        .replace("!abc:example.org", room)
        .replace("@alice:example.org", human)
        .replace('"0.0.0.0:8750"', f'"0.0.0.0:{port}"')
        .replace('"/data"', json.dumps(str(data)))
    )


def test_documented_container_config_listens_on_all_interfaces() -> None:
    cfg = container_config()
    assert 'listen = "0.0.0.0:8750"' in cfg
    assert 'path = "/data"' in cfg
    assert "password =" not in cfg.replace("# password", "") and "token =" not in cfg.replace("# token", "")
    tokens = tomllib.loads(cfg)["api"]["tokens"]  # named tokens with roles, their secrets from the environment
    assert {t["role"] for t in tokens} == {"agent", "decider"} and all("secret_env" in t for t in tokens)
    assert all("secret" not in t for t in tokens)


def test_the_image_says_it_is_a_container_and_the_docs_say_how_podman_keeps_the_healthcheck() -> None:
    env = " ".join(args_of("ENV"))
    assert "PERMISSION_BOT_IN_CONTAINER=1" in env
    from bot.cli.doctor.config import CONTAINER_ENV

    assert CONTAINER_ENV == "PERMISSION_BOT_IN_CONTAINER"
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert "podman build --format docker" in deploy and "without systemd" in deploy
    assert "uid 10001" in deploy and ":U" in deploy and "--userns" in deploy


def test_image_builds_with_its_healthcheck(tmp_path: Path) -> None:
    """Needs a container engine; where there is none (this project's machine), skipped, saying so."""
    import shutil

    def works(e: str) -> bool:
        return shutil.which(e) is not None and subprocess.run(
            [e, "info"], capture_output=True, timeout=60, check=False
        ).returncode == 0

    engine = next((e for e in ("podman", "docker") if works(e)), None)
    if engine is None:
        pytest.skip("no working podman or docker engine on this machine: the image build is not checked here")
    fmt = ["--format", "docker"] if engine == "podman" else []  # podman's OCI default drops HEALTHCHECK
    base = next(ln.split()[1] for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.startswith("FROM "))
    have = subprocess.run([engine, "image", "inspect", base], capture_output=True, timeout=60, check=False)
    if have.returncode != 0:  # an offline machine: the engine works, but the base image cannot be had
        pulled = subprocess.run([engine, "pull", base], capture_output=True, text=True, timeout=600, check=False)
        if pulled.returncode != 0:
            pytest.skip(f"{engine} cannot pull the base image {base} (offline?): the image build is not checked here")
    tag = f"permission-bot-test:{tmp_path.name.lower()}"
    subprocess.run([engine, "build", *fmt, "-t", tag, str(ROOT)], check=True, timeout=1800)
    try:
        out = subprocess.run([engine, "image", "inspect", tag], capture_output=True, text=True, check=True)
        assert "Healthcheck" in out.stdout and "healthz" in out.stdout
    finally:
        subprocess.run([engine, "rmi", "-f", tag], capture_output=True, check=False)


# --- the entrypoint command, run here -----------------------------------------------------------------------


@pytest.mark.e2e
def test_entrypoint_with_the_container_config_serves_healthz(homeserver: Homeserver, tmp_path: Path) -> None:
    bot = homeserver.register("containerbot", PASSWORD)
    human = homeserver.register("containerhuman", "container-human-pw")
    room = homeserver.create_room(human["access_token"], invite=[bot["user_id"]], name="container")
    port = free_port()
    data = tmp_path / "data"
    config = tmp_path / "config.toml"
    config.write_text(filled_config(homeserver.url, bot["user_id"], room, human["user_id"], port, data))
    argv = exec_form(args_of("ENTRYPOINT")[0]) + exec_form(args_of("CMD")[-1])
    argv = [exe_path() if a == "permission-bot" else str(config) if a == "/config/config.toml" else a for a in argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERMISSION_BOT_")}
    env.update(PERMISSION_BOT_MATRIX_PASSWORD=PASSWORD, PERMISSION_BOT_AGENT_TOKEN=AGENT_TOKEN,
               PERMISSION_BOT_DECIDER_TOKEN=DECIDER_TOKEN, PERMISSION_BOT_IN_CONTAINER="1")
    log = tmp_path / "daemon.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        health: dict[str, object] = {}
        while time.monotonic() < deadline and not health.get("matrix_ready"):
            assert proc.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                    health = json.loads(r.read())
            except (OSError, ValueError):
                time.sleep(0.2)
        assert health.get("ok") is True and health.get("matrix_ready") is True, log.read_text()[-2000:]

        # the HEALTHCHECK command exactly as written, pointed at this port
        hc = healthcheck_command()
        hc[0] = sys.executable
        hc_env = dict(env, PERMISSION_BOT_HEALTH_URL=f"{url}/healthz")
        r = subprocess.run(hc, env=hc_env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        hc_env["PERMISSION_BOT_HEALTH_URL"] = f"http://127.0.0.1:{free_port()}/healthz"
        assert subprocess.run(hc, env=hc_env, capture_output=True, timeout=30).returncode == 1

        # the named tokens came from the environment: the decider may decide (404 for an unknown id),
        # the agent token may not (403), anything else is 401
        assert post(url + "/permissions/nope:1", DECIDER_TOKEN) == 404
        assert post(url + "/permissions/nope:1", AGENT_TOKEN) == 403
        assert post(url + "/permissions/nope:1", "wrong") == 401
        assert "api_token_legacy" not in log.read_text()  # no warning at start

        assert (data / "inbox.sqlite3").exists(), "state goes under [state] path (the /data volume)"
        assert PASSWORD not in log.read_text() and AGENT_TOKEN not in log.read_text()
        assert DECIDER_TOKEN not in log.read_text()
    finally:
        proc.terminate()
        code = proc.wait(20)
    assert code == 0, f"SIGTERM (docker stop) should stop it cleanly, got {code}: {shlex.join(argv)}"


def post(url: str, token: str) -> int:
    req = urllib.request.Request(url, data=b'{"decision": "approve"}', method="POST")
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
