"""Encrypted rooms as Element enforces them (real Synapse): the bot is cross-signed, and the answering
person is matrix-js-sdk with its Rust crypto in ``OnlySignedDevicesIsolationMode`` (Element's
"exclude insecure devices"). trust = "cross-signed": answers only from devices cross-signed by
their owner, identities pinned. alice's matrix-nio device is her device that is NOT cross-signed."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.homeserver import Homeserver, free_port, http
from bot.events import validate_content
from bot.matrix.crypto import fingerprint
from bot.matrix.signing import device_signed_by, key_of
from tests.support.e2e_human import E2EStation
from tests.support.human import Human, content, rel
from tests.support.js_human import JSHuman
from tests.support.station import BOT_PASSWORD, request_body
from tests.test_cross_signing import encode_recovery_key

pytestmark = pytest.mark.e2e


class XSStation(E2EStation):
    """An encrypted station under trust = "cross-signed" with alice also on a js-sdk device."""

    js: JSHuman

    async def start_all(self) -> None:
        # Her identity is published before the bot first sees her, so it is pinned on first sight (a member the
        # bot saw with devices but no identity must have a later one accepted: bob, see the last test).
        self.js = JSHuman()
        await self.js.start()
        self.her = await self.js.call("login", name="alice", hs=self.hs.url, user=self.alice.user_id,
                                      password=self.alice.password, cross_sign=True, isolation="signed")
        await super().start_all()

    async def teardown(self) -> None:
        await self.js.close()
        await super().teardown()

    def keys(self, user: str = "") -> dict[str, Any]:
        """/keys/query for the bot (or ``user``), as alice's client asks it."""
        return dict(http("POST", self.hs.url + "/_matrix/client/v3/keys/query",
                         {"device_keys": {user or self.bot_id: []}}, self.alice.token))

    def bot_device_signed(self, device_id: str, bot: str = "") -> bool:
        bot = bot or self.bot_id
        q = self.keys(bot)
        ssk = key_of(q["self_signing_keys"][bot])
        return device_signed_by(q["device_keys"][bot][device_id], bot, ssk)

    async def js_prompt(self, sid: str, seq: int) -> dict[str, Any]:
        got = await self.js.call("wait_event", name="alice", room=self.room_id, session_id=sid, seq=seq,
                                 timeout=40, sender=self.bot_id)
        assert got["event_id"], "the prompt never decrypted for alice's js-sdk device"
        assert got["content"]["request_seq"] == seq
        return got

    async def prompt(self, sid: str, seq: int, human: Human | None = None) -> dict[str, Any]:
        """The prompt as her js-sdk device decrypted it (``submit`` waits for this one; her nio device gets no
        room keys)."""
        assert human is None, "an XSStation reads its prompts on alice's js-sdk device"
        return await self.js_prompt(sid, seq)

    async def js_notice(self, contains: str, after: int) -> dict[str, Any]:
        """The bot's notice, as her js-sdk device reads it (her nio device gets no room keys)."""
        got = await self.js.call("wait_event", name="alice", room=self.room_id, body=contains, sender=self.bot_id,
                                 after=after, timeout=20)
        assert got["event_id"], f"no notice saying {contains!r}"
        return got

    async def js_answer(self, text: str, reply_to: str) -> str:
        return str((await self.js.call("send", name="alice", room=self.room_id, body=text, reply_to=reply_to))
                   ["event_id"])


@pytest.fixture(scope="module")
async def xs(homeserver: Homeserver, workdir: Path) -> AsyncIterator[XSStation]:
    st = XSStation(homeserver, workdir / "xsign", "xs", trust="cross-signed")
    await st.setup()
    yield st
    await st.teardown()


async def test_bot_publishes_its_identity_and_signs_its_device(xs: XSStation) -> None:
    q = xs.keys()
    assert key_of(q["master_keys"].get(xs.bot_id)), "no published master key"
    device = xs.kv("matrix.session")["device_id"]
    assert xs.bot_device_signed(device), "the bot's device is not signed by its self-signing key"
    path = xs.state_dir / "cross_signing.json"
    assert os.stat(path).st_mode & 0o777 == 0o600
    saved = json.loads(path.read_text())
    assert set(saved) == {"master", "self_signing", "user_signing"}
    assert saved["master"] not in xs.log_text()  # the private keys never reach the log


async def test_prompt_decrypts_without_warning_and_her_1_settles(xs: XSStation, sid: str) -> None:
    rec, prompt = await xs.submit(request_body(sid))
    assert prompt["encrypted"] and prompt["shield"] == 0, prompt  # EventShieldColour.NONE: no warning
    validate_content(prompt["content"])
    await xs.js_answer("1", prompt["event_id"])
    got = await xs.record(rec["id"], wait=20)
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "allow_once"
    assert got["outcome"]["answered_by"] == xs.alice.user_id
    assert xs.kv(f"matrix.identity.{xs.alice.user_id}")["master"]  # her identity pinned on first sight


async def test_device_not_cross_signed_cannot_answer(xs: XSStation, sid: str) -> None:
    rec, prompt = await xs.submit(request_body(sid))
    mark = int(time.time() * 1000) - 2000
    ev = await xs.alice.text("1", reply_to=prompt["event_id"])  # her matrix-nio device: not cross-signed
    told = await xs.js_notice("cross-signed", mark)
    assert rel(told)["m.in_reply_to"]["event_id"] == ev and xs.alice.device_id in content(told)["body"]
    assert (await xs.record(rec["id"], wait=1))["state"] == "pending"  # nothing settled
    reply = {"m.in_reply_to": {"event_id": prompt["event_id"]}}
    plain = await xs.alice.put_event("m.room.message", {"msgtype": "m.text", "body": "1", "m.relates_to": reply})
    told = await xs.js_notice("unencrypted message", mark)
    assert rel(told)["m.in_reply_to"]["event_id"] == plain
    assert (await xs.record(rec["id"], wait=1))["state"] == "pending"
    assert xs.alice.find(lambda e: e.get("event_id") == prompt["event_id"] and e.get("type") == "m.room.encrypted")
    await xs.js_answer("2", prompt["event_id"])  # her cross-signed device still can
    assert (await xs.record(rec["id"], wait=20))["outcome"]["option_id"] == "allow_always"


async def test_restart_keeps_the_identity_and_a_new_device_is_signed(xs: XSStation, sid: str) -> None:
    master = key_of(xs.keys()["master_keys"][xs.bot_id])
    before = xs.kv("matrix.session")["device_id"]
    await xs.restart_daemon()
    assert key_of(xs.keys()["master_keys"][xs.bot_id]) == master
    assert xs.kv("matrix.session")["device_id"] == before
    rec, prompt = await xs.submit(request_body(sid))
    await xs.js_answer("1", prompt["event_id"])
    assert (await xs.record(rec["id"], wait=20))["outcome"]["option_id"] == "allow_once"
    # A fresh login (a new device of the bot): signed automatically with the kept identity.
    xs.stop_daemon()
    db = sqlite3.connect(xs.state_dir / "inbox.sqlite3")
    with db:
        db.execute("DELETE FROM kv WHERE k='matrix.session'")
    db.close()
    xs.start_daemon()
    await xs.wait_healthy()
    after = xs.kv("matrix.session")["device_id"]
    assert after != before and xs.bot_device_signed(after)
    assert key_of(xs.keys()["master_keys"][xs.bot_id]) == master
    rec, prompt = await xs.submit(request_body(sid))
    assert prompt["shield"] == 0
    await xs.js_answer("3", prompt["event_id"])
    assert (await xs.record(rec["id"], wait=20))["outcome"]["option_id"] == "reject_once"


async def test_her_identity_reset_is_refused_until_accepted(xs: XSStation, sid: str) -> None:
    rec, prompt = await xs.submit(request_body(sid))
    pinned = xs.kv(f"matrix.identity.{xs.alice.user_id}")["master"]
    new = (await xs.js.call("reset_identity", name="alice"))["master"]
    assert new and new != pinned
    mark = int(time.time() * 1000) - 2000
    await xs.js_answer("1", prompt["event_id"])
    told = await xs.js_notice("identity changed", mark)
    assert f"e2ee accept-identity {xs.alice.user_id}" in content(told)["body"]
    assert (await xs.record(rec["id"], wait=1))["state"] == "pending"
    doc = (await asyncio.to_thread(xs.cli, "doctor", "--config", str(xs.config_path))).stdout.splitlines()
    assert any(ln.startswith("ok   identity: published, master key") for ln in doc), doc
    assert any(ln.startswith("ok   identity: the bot's device") and "cross-signed" in ln for ln in doc), doc
    assert any(ln.startswith(f"WARN pinned identity: {xs.alice.user_id} changed identity")
               and f"e2ee accept-identity {xs.alice.user_id}" in ln for ln in doc), doc
    r = await asyncio.to_thread(xs.cli, "e2ee", "accept-identity", xs.alice.user_id, "--config", str(xs.config_path))
    assert r.returncode == 0, r.stderr
    assert xs.kv(f"matrix.identity.{xs.alice.user_id}")["master"] == new
    await xs.js_answer("4", prompt["event_id"])
    got = await xs.record(rec["id"], wait=20)
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "reject_always"
    doc = (await asyncio.to_thread(xs.cli, "doctor", "--config", str(xs.config_path))).stdout.splitlines()
    assert f"ok   pinned identity: {xs.alice.user_id} master {fingerprint(new)}" in doc, doc


# -- an identity made elsewhere, and bad input: another bot account that is in no room -----------------


def _run_bot(st: XSStation, config: str, timeout: float = 90) -> tuple[int, str]:
    """Run the daemon until it exits (within ``timeout``); its exit code and output."""
    path = st.dir / "other.toml"
    path.write_text(config)
    r = subprocess.run([st.exe, "run", "--config", str(path)], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout + r.stderr


def _fatal_line(out: str) -> str:
    """The one line saying why the daemon stopped."""
    lines = [ln for ln in out.splitlines() if "matrix_fatal" in ln]
    assert len(lines) == 1, out
    return lines[0]


def _fatal(out: str) -> str:
    assert "matrix_joined" not in out and "prompt_posted" not in out  # stopped before the room
    return _fatal_line(out)


async def test_identity_made_elsewhere_needs_the_recovery_key(xs: XSStation) -> None:
    bot = xs.hs.register("permbotss", BOT_PASSWORD)["user_id"]
    await xs.js.call("login", name="elsewhere", hs=xs.hs.url, user=bot, password=BOT_PASSWORD,
                            cross_sign=False, isolation="all")
    ss = await xs.js.call("setup_secret_storage", name="elsewhere")  # as Element's "set up secure backup"
    await xs.js.call("stop", name="elsewhere")
    state = xs.dir / "other-state"
    base = (xs.config_text().replace(xs.bot_id, bot).replace(str(xs.state_dir), str(state))
            .replace(f"127.0.0.1:{xs.api_port}", f"127.0.0.1:{free_port()}").replace(xs.room_id, "!nowhere:localhost"))

    def with_key(key: str) -> str:
        return base.replace('trust = "cross-signed"', f'trust = "cross-signed"\nrecovery_key = "{key}"')

    token = http("POST", xs.hs.url + "/_matrix/client/v3/login", {
        "type": "m.login.password", "identifier": {"type": "m.id.user", "user": bot}, "password": BOT_PASSWORD})

    def devices() -> list[str]:
        got = http("GET", xs.hs.url + "/_matrix/client/v3/devices", token=token["access_token"])["devices"]
        return sorted(d["device_id"] for d in got)

    before = devices()
    code, out = await asyncio.to_thread(_run_bot, xs, base)
    line = _fatal(out)
    assert code != 0 and "made elsewhere" in line and "matrix.recovery_key" in line and "reset-identity" in line
    assert not (state / "cross_signing.json").exists()
    wrong = encode_recovery_key(os.urandom(32))  # well-formed, but another key
    code, out = await asyncio.to_thread(_run_bot, xs, with_key(wrong))
    assert code != 0 and "matrix.recovery_key: this recovery key does not open" in _fatal(out)
    assert ss["recovery_key"] not in out and wrong not in out  # never echoed
    # The right key: imported, the device signed; then the bot stops at the room it cannot join.
    code, out = await asyncio.to_thread(_run_bot, xs, with_key(ss["recovery_key"]))
    assert "cross_signing_imported" in out and "device_cross_signed" in out, out
    assert code != 0 and "matrix.room" in _fatal_line(out)
    q = xs.keys(bot)
    assert key_of(q["master_keys"][bot]) == ss["master"]
    assert "matrix_logged_out" in out  # the failed start left no device behind (its session forgotten)
    assert json.loads(sqlite3.connect(state / "inbox.sqlite3").execute(
        "SELECT v FROM kv WHERE k='matrix.session'").fetchone()[0]) is None
    assert not (state / "recovery-key.txt").exists()  # already in (Element's) secret storage: nothing written
    # A damaged key file: one line, exit non-zero, nothing else done.
    (state / "cross_signing.json").write_text('{"master": "garbage"}')
    code, out = await asyncio.to_thread(_run_bot, xs, base)
    assert code != 0 and "damaged" in _fatal(out)
    # A replacement the server refuses (the wrong password): one line, the published identity kept.
    cfg = str(xs.dir / "other.toml")
    (state / "cross_signing.json").unlink()
    r = await asyncio.to_thread(xs.cli, "e2ee", "reset-identity", "--config", cfg, input="wrong-password\n")
    assert r.returncode != 0 and "refused" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    q = xs.keys(bot)
    assert key_of(q["master_keys"][bot]) == ss["master"]
    r = await asyncio.to_thread(xs.cli, "e2ee", "reset-identity", "--config", cfg, input=BOT_PASSWORD + "\n")
    assert r.returncode == 0, r.stderr  # no saved session (the failed starts logged out): it logs in itself
    q = xs.keys(bot)
    assert key_of(q["master_keys"][bot]) not in (ss["master"], None)
    assert (state / "cross_signing.json").exists()
    assert "secret storage" in r.stdout and (state / "recovery-key.txt").exists()
    assert devices() == before  # four failed starts and two resets: no device of theirs left behind


async def test_a_fresh_state_folder_takes_the_bot_identity_back(xs: XSStation, sid: str) -> None:
    """deploy.md's "log in afresh" (delete the state folder): one line saying what happened and what fixes
    it, then the recovery key the bot wrote at its first start brings the same identity back."""
    master = key_of(xs.keys()["master_keys"][xs.bot_id])
    key_path = xs.state_dir / "recovery-key.txt"
    assert os.stat(key_path).st_mode & 0o777 == 0o600
    key = key_path.read_text().strip()
    assert "recovery_key_written" in xs.log_text() and key not in xs.log_text()
    old_token = xs.kv("matrix.session")["access_token"]
    before = xs.bot_devices()
    xs.stop_daemon()
    xs.state_dir.rename(xs.dir / "old-state")
    code, out = await asyncio.to_thread(_run_bot, xs, xs.config_text())
    line = _fatal(out)
    assert code == 1 and "the cross-signing identity this bot made" in line and "recovery-key.txt" in line, line
    assert "matrix.recovery_key" in line and "e2ee reset-identity" in line
    assert str(xs.state_dir / "cross_signing.json") in line  # the absolute path it looked in
    assert "matrix_logged_out" in out
    devices = http("GET", xs.hs.url + "/_matrix/client/v3/devices", token=old_token)["devices"]
    assert sorted(d["device_id"] for d in devices) == before  # the failed start's device is gone
    xs.config_path.write_text(xs.config_text(recovery_key=f'"{key}"'))
    xs.start_daemon()
    await xs.wait_healthy()
    assert "cross_signing_imported" in xs.log_text()
    assert key_of(xs.keys()["master_keys"][xs.bot_id]) == master  # the same identity: nobody sees a change
    device = xs.kv("matrix.session")["device_id"]
    assert device not in before and xs.bot_device_signed(device)
    assert not key_path.exists()  # secret storage already held it under this key: no new key
    rec, prompt = await xs.submit(request_body(sid))
    assert prompt["shield"] == 0
    await xs.js_answer("1", prompt["event_id"])
    assert (await xs.record(rec["id"], wait=20))["outcome"]["option_id"] == "allow_once"


async def _cancel_and_show(xs: XSStation, recs: list[dict[str, Any]]) -> None:
    """Cancel ``recs`` and wait until alice's js-sdk device shows each one's settled edit."""
    for rec in recs:
        mark = int(time.time() * 1000) - 200
        await xs.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "cancel"})
        got = await xs.js.call("wait_event", name="alice", room=xs.room_id, body=rec["title"], sender=xs.bot_id,
                               after=mark, timeout=40)  # the driver waits 30 s
        assert got["event_id"], "the cancelled prompt was never edited"


async def test_a_refused_devices_fake_prompt_still_makes_a_plain_answer_ask(xs: XSStation, sid: str) -> None:
    """bob's nio device is not cross-signed, so nothing it sends is an answer; but his copy of the prompt,
    posted after the real one, is on alice's screen too: her plain `1` settles nothing, the bot asks (issue 12)."""
    _, pending = await xs.ahttp("GET", "/permissions")
    await _cancel_and_show(xs, pending)
    rec, prompt = await xs.submit(request_body(sid, title=f"Run the tests ({sid} 1)"))
    await xs.bob.send({**prompt["content"], "request_id": "evil:1"})
    mark = int(time.time() * 1000) - 2000
    await xs.js.call("send", name="alice", room=xs.room_id, body="1")
    told = await xs.js.call("wait_event", name="alice", room=xs.room_id, body="Which request do you mean?",
                            sender=xs.bot_id, after=mark, timeout=40)  # the driver waits 30 s
    assert (await xs.record(rec["id"], wait=1))["state"] == "pending", "the plain `1` settled it"
    assert told["event_id"] and rec["id"] in told["content"]["body"]
    await _cancel_and_show(xs, [rec])
    # no look-alike after it: `1` answers
    again, _ = await xs.submit(request_body(sid, title=f"Run the tests ({sid} 2)"))
    await xs.js.call("send", name="alice", room=xs.room_id, body="1")
    got = await xs.record(again["id"], wait=20)
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "allow_once", got


async def test_a_stolen_password_cannot_make_an_answerers_first_identity(xs: XSStation, sid: str) -> None:
    """Issue 32, item 1. bob (an answerer) has no identity; the bot saw his device without one, and refused
    its answer. With his password only, an attacker logs in a js-sdk device, uploads bob's *first* identity
    (no password asked: MSC3967), signed by that new device and signing it, and answers: refused with one
    notice (the device that signed the identity is not one the bot saw before it), until an operator runs
    `e2ee accept-identity`."""
    bob = xs.bob.user_id
    rec, prompt = await xs.submit(request_body(sid))
    mark = int(time.time() * 1000) - 2000
    ev = await xs.bob.text("1", reply_to=prompt["event_id"])  # his identity-less nio device: refused
    deadline = time.monotonic() + 20
    while not any("event_from_unverified_device" in ln and ev in ln for ln in xs.log_text().splitlines()):
        assert time.monotonic() < deadline, "bob's answer was never refused"
        await asyncio.sleep(0.2)
    known = {xs.bob.device_id: xs.bob.ed25519}  # the devices the bot saw him with: his nio device
    assert xs.kv(f"matrix.identity.{bob}") == {"master": None, "seen_without": True, "devices": known}
    thief = await xs.js.call("login", name="thief", hs=xs.hs.url, user=bob, password=xs.bob.password,
                             cross_sign=True, isolation="signed")
    q = xs.keys(bob)
    first = key_of(q["master_keys"][bob])
    assert first, "the attacker's first identity was not published"
    # signed by the attacker's new device (as any client makes it), which the bot had not seen before
    assert f"ed25519:{thief['device_id']}" in q["master_keys"][bob]["signatures"][bob]
    for answer in ("1", "2"):
        await xs.js.call("send", name="thief", room=xs.room_id, body=answer, reply_to=prompt["event_id"])
    told = await xs.js_notice("appeared", mark)
    body = content(told)["body"]
    assert body.startswith(f"{bob}: ") and f"e2ee accept-identity {bob}" in body and fingerprint(first) in body
    assert (await xs.record(rec["id"], wait=2))["state"] == "pending", "the attacker's answer settled it"
    assert xs.kv(f"matrix.identity.{bob}") == {"master": None, "seen_without": True, "devices": known}  # not pinned
    assert xs.log_text().count("event_from_appeared_identity") >= 2
    again = await xs.js.call("wait_event", name="alice", room=xs.room_id, body="appeared", sender=xs.bot_id,
                             after=mark, timeout=1)
    assert again["count"] == 1, "the notice was said more than once"
    doc = (await asyncio.to_thread(xs.cli, "doctor", "--config", str(xs.config_path))).stdout.splitlines()
    assert any(ln.startswith(f"WARN pinned identity: {bob} published an identity") for ln in doc), doc
    r = await asyncio.to_thread(xs.cli, "e2ee", "accept-identity", bob, "--config", str(xs.config_path))
    assert r.returncode == 0, r.stderr
    assert xs.kv(f"matrix.identity.{bob}") == {"master": first}
    await xs.js.call("send", name="thief", room=xs.room_id, body="3", reply_to=prompt["event_id"])
    got = await xs.record(rec["id"], wait=20)
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "reject_once", got
    assert got["outcome"]["answered_by"] == bob
    await xs.js.call("stop", name="thief")
