"""The daemon against a real Synapse: post, decide, edit, survive kill -9 and a homeserver outage."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from bot.events import validate_content
from tests.support.human import content
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e


async def test_http_submission_is_posted_decided_and_edited(station: Station, sid: str) -> None:
    rec = await station.post(request_body(sid))
    assert rec["id"] == f"{sid}:1" and rec["state"] == "pending" and rec["request_seq"] == 1
    prompt = await station.prompt_for(sid)
    assert prompt, "no prompt in the room"
    c = content(prompt)
    validate_content(c)  # the event as received is valid v2
    assert c["request_id"] == rec["id"] and c["subject"]["digest"] == rec["digest"]
    assert c["msgtype"] == "m.text" and c["body"].startswith("Permission needed: Run the test suite")
    assert [o["option_id"] for o in c["dev.agentpod.permission"]["options"]] == [
        o["id"] for o in c["options"]
    ]

    waiter = asyncio.create_task(station.ahttp("GET", f"/permissions/{rec['id']}?wait=30"))
    await asyncio.sleep(0.3)
    assert not waiter.done()
    st, decided = await station.ahttp(
        "POST", f"/permissions/{rec['id']}", {"decision": "approve", "feedback": "go ahead"}
    )
    assert st == 200 and decided["state"] == "resolved", decided
    st, got = await asyncio.wait_for(waiter, 10)
    assert st == 200 and got["outcome"]["option_id"] == "allow_once" and got["outcome"]["via"] == "api"
    edit = await station.edit_of(prompt["event_id"])
    assert edit, "the prompt was not edited"
    new = content(edit)["m.new_content"]
    validate_content(new)
    assert new["resolution"]["option_id"] == "allow_once" and new["resolution"]["via"] == "api"
    # A second decision is refused: resolved once.
    st, body = await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"})
    assert st == 404 and body["error"] == "not_found"


async def test_submit_is_idempotent_on_key(station: Station, sid: str) -> None:
    st1, r1 = await station.ahttp("POST", "/permissions", request_body(sid, key="k1"))
    st2, r2 = await station.ahttp("POST", "/permissions", request_body(sid, key="k1"))
    assert (st1, st2) == (201, 200) and r1["id"] == r2["id"]
    assert await station.prompt_for(sid)
    await asyncio.sleep(1.0)
    assert (
        len(station.alice.find(lambda e: station.is_prompt(e) and content(e).get("session_id") == sid)) == 1
    )
    await station.ahttp("POST", f"/permissions/{r1['id']}", {"decision": "deny"})


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"not json", 422),
        (b"[]", 422),
        (b'{"sessionId": 3}', 422),
        (b'{"sessionId": "s", "toolCall": {"toolCallId": "x"}, "options": []}', 422),
        (b"\xff\xfe", 422),
        (b'{"sessionId": "s", "toolCall": {"toolCallId": "x"}, "options": [{"optionId": "a"}]}', 422),
    ],
)
async def test_bad_bodies_get_4xx_with_reason(station: Station, raw: bytes, status: int) -> None:
    st, body = await station.ahttp("POST", "/permissions", raw=raw)
    assert st == status and body["error"] == "invalid_request" and body["reason"], body


async def test_mutating_routes_need_the_token(station: Station, sid: str) -> None:
    st, body = await station.ahttp("POST", "/permissions", request_body(sid), token=None)
    assert st == 401 and body["error"] == "unauthorized"
    st, body = await station.ahttp("POST", "/permissions", request_body(sid), token="wrong")
    assert st == 401
    st, _ = await station.ahttp("POST", "/permissions/x:1", {"decision": "approve"}, token=None)
    assert st == 401


async def test_decide_errors(station: Station, sid: str) -> None:
    st, body = await station.ahttp("POST", "/permissions/nope:1", {"decision": "approve"})
    assert st == 404
    only_reject = request_body(sid, options=[("no", "Reject", "reject_once")])
    st, rec = await station.ahttp("POST", "/permissions", only_reject)
    st, body = await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"})
    assert st == 409 and body["error"] == "no_fitting_option"
    st, body = await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "maybe"})
    assert st == 422
    st, body = await station.ahttp("GET", f"/permissions/{rec['id']}?wait=abc")
    assert st == 422
    st, body = await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"})
    assert st == 200 and body["outcome"]["option_id"] == "no"


async def test_list_health_metrics(station: Station, sid: str) -> None:
    ids = []
    for _ in range(3):
        _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
        ids.append(rec["id"])
    st, listed = await station.ahttp("GET", f"/permissions?session={sid}")
    assert st == 200 and [r["id"] for r in listed] == ids
    st, health = await station.ahttp("GET", "/healthz")
    assert st == 200 and health["ok"] is True
    for rid in ids:
        await station.ahttp("POST", f"/permissions/{rid}", {"decision": "deny"})
    st, listed = await station.ahttp("GET", f"/permissions?session={sid}")
    assert listed == []
    import urllib.request

    with urllib.request.urlopen(station.api_url + "/metrics") as r:
        text = r.read().decode()
        assert "version=" in r.headers["Content-Type"]
    assert "permission_bot_webhook_failed_total" in text and "permission_bot_send_errors_total" in text
    assert "process_resident_memory_bytes" in text and "process_open_fds" in text  # the daemon process itself
    assert (
        "permission_bot_pending" in text
        and 'permission_bot_resolved_total{state="resolved",via="api"}' in text
    )


async def test_kill_9_with_pending_loses_nothing_and_posts_nothing_twice(station: Station, sid: str) -> None:
    ids = []
    for _ in range(5):
        _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
        ids.append(rec["id"])
    station.kill_daemon()  # maybe mid-post
    station.start_daemon()
    await station.wait_healthy()
    for i in range(1, 6):
        assert await station.prompt_for(sid, seq=i), f"prompt {i} missing after restart"
    st, listed = await station.ahttp("GET", f"/permissions?session={sid}")
    assert [r["id"] for r in listed] == ids
    for rid in ids:
        st, _body = await station.ahttp("POST", f"/permissions/{rid}", {"decision": "approve"})
        assert st == 200
    await asyncio.sleep(1.5)
    prompts = station.alice.find(lambda e: station.is_prompt(e) and content(e).get("session_id") == sid)
    assert sorted(content(p)["request_seq"] for p in prompts) == [1, 2, 3, 4, 5]
    _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
    assert rec["id"] == f"{sid}:6"  # seq never reused


async def test_homeserver_outage_then_everything_is_posted_once(station: Station, sid: str) -> None:
    station.hs.stop()
    try:
        ids = []
        for _ in range(4):
            rec = await station.post(request_body(sid))
            ids.append(rec["id"])
        await asyncio.sleep(6)  # several failed tries, their back-off growing
    finally:
        station.hs.start()
    for i in range(1, 5):
        assert await station.prompt_for(sid, seq=i, timeout=60), f"prompt {i} not posted after the outage"
    await asyncio.sleep(2)
    prompts = station.alice.find(lambda e: station.is_prompt(e) and content(e).get("session_id") == sid)
    assert sorted(content(p)["request_seq"] for p in prompts) == [1, 2, 3, 4]
    for rid in ids:
        await station.ahttp("POST", f"/permissions/{rid}", {"decision": "deny"})


async def test_timeout_settles_and_edits(homeserver, station: Station, sid: str) -> None:
    station.prompts["timeout"] = "2s"
    station.write_config()
    await station.restart_daemon()
    try:
        _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
        _st, got = await station.ahttp("GET", f"/permissions/{rec['id']}?wait=15")
        assert got["state"] == "expired" and got["outcome"]["option_id"] == "reject_once"
        assert got["outcome"]["via"] == "timeout"
        prompt = await station.prompt_for(sid)
        assert prompt and await station.edit_of(prompt["event_id"])
    finally:
        station.prompts["timeout"] = "10m"
        station.write_config()
        await station.restart_daemon()


def _run_with_config(exe: str, tmp: Path, text: str) -> subprocess.CompletedProcess[str]:
    p = tmp / "c.toml"
    p.write_text(text)
    return subprocess.run([exe, "run", "--config", str(p)], capture_output=True, text=True, timeout=30)


GOOD = """
[matrix]
homeserver = "http://127.0.0.1:9"
user_id = "@bot:localhost"
password = "x"
room = "!r:localhost"
"""


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("", "matrix: required"),
        (GOOD.replace('homeserver = "http://127.0.0.1:9"\n', ""), "matrix.homeserver: required"),
        (GOOD + '[answerers]\nmin_power_level = "50"\n', "answerers.min_power_level"),
        (GOOD + '[prompts]\ntimeout = "soon"\n', "prompts.timeout"),
        (GOOD + '[prompts]\non_timeout = "explode"\n', "prompts.on_timeout"),
        (GOOD + '[api]\nlisten = "nowhere"\n', "api.listen"),
        (GOOD.replace('password = "x"\n', ""), "matrix.password"),
        (GOOD + "[matrix2]\n", "matrix2: unknown key"),
        ("this is [not toml", "not valid TOML"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(station: Station, tmp_path: Path, text: str, key: str) -> None:
    t0 = time.monotonic()
    r = _run_with_config(station.exe, tmp_path, text)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], r.stderr
    assert "Traceback" not in r.stderr and time.monotonic() - t0 < 20


async def test_no_secret_reaches_the_log(station: Station, sid: str) -> None:
    import json as _json

    from tests.support.station import BOT_PASSWORD, TOKEN

    _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
    await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"})
    await asyncio.sleep(0.5)
    log_text = station.log_path.read_text(errors="replace")
    session = _json.loads(
        __import__("sqlite3").connect(station.state_dir / "inbox.sqlite3")
        .execute("SELECT v FROM kv WHERE k='matrix.session'").fetchone()[0])
    assert "request_submitted" in log_text  # the log is really being written
    for secret in (BOT_PASSWORD, TOKEN, session["access_token"]):
        assert secret not in log_text
