"""A local Synapse on 127.0.0.1 (SQLite, rate limits lifted) for the demo and the tests; needs the
`demo` extra (matrix-synapse). Users are registered through the shared-secret admin API."""

from __future__ import annotations

import hashlib
import hmac
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bot.demo import synapse_config
from bot.demo.synapse_config import SECRET
from bot.util import jsonhttp

SYNAPSE = [sys.executable, "-m", "synapse.app.homeserver"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(method: str, url: str, body: Any = None, token: str | None = None, timeout: float = 30) -> Any:
    """The JSON body of a 2xx answer (``jsonhttp.HTTPStatusError`` otherwise, ``Unreachable`` when none)."""
    return jsonhttp.ok(method, url, body, token=token, timeout=timeout)


class Homeserver:
    """One Synapse process with its data in ``workdir``."""

    def __init__(self, workdir: Path, server_name: str = "localhost", overrides: dict[str, Any] | None = None) -> None:
        """``overrides``: Synapse config keys set on a newly generated config (the tests' cheaper hashing)."""
        self.dir = workdir
        self.overrides = dict(overrides or {})
        self.port = free_port()
        self.server_name = server_name
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def _generate(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        cfg = self.dir / "homeserver.yaml"
        if cfg.exists():  # reused state: listen on this run's port
            synapse_config.set_port(cfg, self.port)
            return
        generate = ["--server-name", self.server_name, "--config-path", str(cfg), "--data-directory", str(self.dir),
                    "--generate-config", "--report-stats=no"]
        subprocess.run([*SYNAPSE, *generate], check=True, cwd=self.dir, capture_output=True)
        synapse_config.adjust(cfg, self.port, self.overrides)
        synapse_config.quieter_log(self.dir / f"{self.server_name}.log.config")

    def start(self, timeout: float = 90) -> None:
        self._generate()
        out = open(self.dir / "stdout.log", "ab")
        cmd = [*SYNAPSE, "-c", str(self.dir / "homeserver.yaml")]
        self.proc = subprocess.Popen(cmd, cwd=self.dir, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"synapse exited {self.proc.returncode}; see {self.dir}/stdout.log")
            try:
                http("GET", self.url + "/_matrix/client/versions", timeout=2)
                return
            except Exception:
                time.sleep(0.2)
        raise RuntimeError("synapse did not come up")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def analyze(self) -> None:
        """Give SQLite's query planner statistics of Synapse's database as it is now (~20 ms: sampled).

        Synapse never runs ANALYZE on SQLite, and without statistics the planner reads the bundled-edits
        query (get_applicable_edits, run for every batch of events a sync or /messages returns) room
        first: a scan of the whole room per event delivered, 0.15 s for 10 events in a room of 34,000.
        With statistics it is an index lookup (0.1 ms). Long benchmarks call this now and then."""
        db = sqlite3.connect(self.dir / "homeserver.db", timeout=30)
        try:
            db.execute("PRAGMA analysis_limit=1000")
            db.execute("ANALYZE")
            db.commit()
        finally:
            db.close()

    def register(self, localpart: str, password: str, admin: bool = False) -> dict[str, Any]:
        url = self.url + "/_synapse/admin/v1/register"
        nonce = http("GET", url)["nonce"]
        signed = [nonce.encode(), localpart.encode(), password.encode(), b"admin" if admin else b"notadmin"]
        mac = hmac.new(SECRET.encode(), b"\x00".join(signed), digestmod=hashlib.sha1).hexdigest()
        body = {"nonce": nonce, "username": localpart, "password": password, "admin": admin, "mac": mac}
        return dict(http("POST", url, body))

    def create_room(self, token: str, invite: list[str] | tuple[str, ...] = (), encrypted: bool = False,
                    power: dict[str, int] | None = None, name: str = "station") -> str:
        body: dict[str, Any] = {"preset": "private_chat", "name": name, "invite": list(invite)}
        if encrypted:
            encryption = {"algorithm": "m.megolm.v1.aes-sha2"}
            body["initial_state"] = [{"type": "m.room.encryption", "state_key": "", "content": encryption}]
        if power:
            body["power_level_content_override"] = {"users": power}
        return str(http("POST", self.url + "/_matrix/client/v3/createRoom", body, token)["room_id"])

    def join(self, token: str, room_id: str) -> None:
        http("POST", self.url + f"/_matrix/client/v3/join/{jsonhttp.quote(room_id)}", {}, token)
