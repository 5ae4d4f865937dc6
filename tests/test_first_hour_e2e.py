"""The first hour of a real deployment, against the test Synapse: what `run` says when the homeserver URL is
not Matrix, when it is https:// to a plain-HTTP port, and when the homeserver rate-limits the log-in (one
structured line, the wait, never "check the password", no raw library line); doctor tells the same story;
a failed start logs out the device it logged in; the startup log names the state folder's absolute path."""

from __future__ import annotations

import asyncio
import http.server
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver, free_port
from bot.demo.homeserver import http as hs_http
from tests.support.faultproxy import FaultProxy
from tests.support.station import exe_path
from tests.test_doctor import doctor, line

pytestmark = pytest.mark.e2e

PASSWORD = "first-hour-bot-password-5c1e"


@pytest.fixture(scope="module")
def bot(homeserver: Homeserver) -> str:
    return str(homeserver.register("firsthour", PASSWORD)["user_id"])


def config(path: Path, homeserver: str, user: str, state: Path) -> Path:
    path.write_text(f"""
[matrix]
homeserver = "{homeserver}"
user_id = "{user}"
password = "{PASSWORD}"
room = "!nowhere:localhost"

[answerers]
users = ["@alice:localhost"]

[api]
listen = "127.0.0.1:{free_port()}"

[state]
path = "{state}"
""")
    return path


def run(cfg: Path, cwd: Path, timeout: float = 90) -> tuple[int, str, float]:
    started = time.monotonic()
    p = subprocess.run([exe_path(), "run", "--config", str(cfg)], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, cwd=cwd)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - started


def fatal(out: str) -> str:
    lines = [ln for ln in out.splitlines() if "matrix_fatal" in ln]
    assert len(lines) == 1, out
    return lines[0]


class _NotMatrix(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>a web site</html>")

    do_POST = do_GET

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web_site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotMatrix)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


async def test_a_url_that_is_not_matrix_and_https_to_plain_http_fail_fast_and_say_so(
    homeserver: Homeserver, bot: str, web_site: str, tmp_path: Path
) -> None:
    cfg = config(tmp_path / "web.toml", web_site, bot, tmp_path / "s1")
    code, out, took = await asyncio.to_thread(run, cfg, tmp_path)
    line_ = fatal(out)
    assert code == 1 and "answered HTTP 404, not Matrix" in line_ and "matrix.homeserver" in line_, out
    assert "password" not in line_ and took < 20
    dcode, lines, _ = await asyncio.to_thread(doctor, cfg)
    assert dcode == 1 and "answered HTTP 404, not Matrix" in line(lines, "FAIL homeserver:")  # the same story
    tls = homeserver.url.replace("http://", "https://")
    cfg = config(tmp_path / "tls.toml", tls, bot, tmp_path / "s2")
    code, out, took = await asyncio.to_thread(run, cfg, tmp_path)
    line_ = fatal(out)
    assert code == 1 and "the TLS handshake with https://" in line_ and "use http://" in line_, out
    assert took < 25, f"took {took:.0f} s"
    assert "Timed out, sleeping" not in out and "Traceback" not in out
    dcode, lines, _ = await asyncio.to_thread(doctor, cfg)
    assert dcode == 1 and "use http://" in line(lines, "FAIL homeserver: the TLS handshake")


async def test_a_rate_limited_login_is_said_waited_out_and_the_failed_start_logs_out(
    homeserver: Homeserver, bot: str, tmp_path: Path
) -> None:
    port = int(homeserver.url.rsplit(":", 1)[1])
    proxy = FaultProxy("127.0.0.1", port)
    proxy.start()
    try:
        limited = {"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": 1200}
        proxy.answer("POST /_matrix/client/v3/login", 5, 429, limited)
        cfg = config(tmp_path / "limited.toml", proxy.url, bot, Path("relative-state"))
        code, out, _ = await asyncio.to_thread(run, cfg, tmp_path)
    finally:
        proxy.stop()
    waits = [ln for ln in out.splitlines() if "matrix_rate_limited" in ln]
    assert waits and all("rate-limited by the homeserver, retrying in 1.2 s" in ln for ln in waits), out
    assert "Got 429" not in out and "check matrix.user_id" not in out  # no raw line, not a password problem
    assert "matrix_logged_in" in out and code == 1 and "matrix.room" in fatal(out)  # then the room it cannot join
    assert "matrix_logged_out" in out  # the failed start left no device behind
    state = tmp_path / "relative-state"
    assert f"path='{state}'" in out and "relative to the working directory" in out  # where the state went
    token = hs_http("POST", homeserver.url + "/_matrix/client/v3/login", {
        "type": "m.login.password", "identifier": {"type": "m.id.user", "user": bot}, "password": PASSWORD})
    devices = hs_http("GET", homeserver.url + "/_matrix/client/v3/devices", token=token["access_token"])["devices"]
    assert all(d["display_name"] != "permission-bot" for d in devices), devices


async def test_doctor_says_a_rate_limit_is_not_a_wrong_password(homeserver: Homeserver, bot: str,
                                                                tmp_path: Path) -> None:
    port = int(homeserver.url.rsplit(":", 1)[1])
    proxy = FaultProxy("127.0.0.1", port)
    proxy.start()
    try:
        proxy.answer("POST /_matrix/client/v3/login", 1, 429,
                     {"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": 4000})
        cfg = config(tmp_path / "doctor.toml", proxy.url, bot, tmp_path / "empty-state")
        code, lines, out = await asyncio.to_thread(doctor, cfg)
    finally:
        proxy.stop()
    got = line(lines, "FAIL login:")
    assert code == 1 and "rate-limited by the homeserver" in got and "retry after 4 s" in got, out
    assert "check matrix.user_id" not in got
