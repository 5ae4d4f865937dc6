"""High availability with encryption on (issue 27): two daemons on one PostgreSQL database, an encrypted station
room, trust = "cross-signed", alice on matrix-js-sdk in Element's signed-devices isolation. The device (nio's
crypto store, cross-signing keys) lives in the database: after kill -9 of the leader, the standby takes over
as the same, still cross-signed device; its prompt decrypts for her without a warning and her encrypted `1`
settles it. A leader paused past its lease and resumed demotes itself in-process, and when elected again (the
other killed) it restores the device from the database and still posts and reads encrypted (issue 36)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.demo.homeserver import Homeserver
from bot.matrix.signing import key_of
from bot.matrix.vault import VAULT_KEY
from tests.support.audit_tamper import checkpoints_agree, grant_checkpoints, rechained, redact_checkpoints
from tests.support.ha import peer_of, role_of, until_logged, until_role
from tests.support.postgres import PgCluster, kv_value
from tests.support.station import BOT_PASSWORD, Station, request_body
from tests.test_cross_signing_e2e import XSStation

pytestmark = pytest.mark.e2e


class HaXSStation(XSStation):
    """The first daemon (accounts ``...hx``), its state in PostgreSQL."""

    url = ""

    def kv(self, key: str) -> Any:
        raise AssertionError("the state is in PostgreSQL: use pg_kv")

    async def pg_kv(self, key: str) -> Any:
        return await kv_value(self.url, key)


@pytest.fixture(scope="module")
async def pair(homeserver: Homeserver, workdir: Path, pg_cluster: PgCluster) -> AsyncIterator[
    tuple[HaXSStation, Station]
]:
    a = HaXSStation(homeserver, workdir / "hax-a", "hx", trust="cross-signed")
    a.url = a.env["PERMISSION_BOT_DATABASE_URL"] = await pg_cluster.create_database()
    a.env.update(PERMISSION_BOT_CHECKPOINT_PERIOD="2", PERMISSION_BOT_CHECKPOINT_DELAY="0.4")  # the ledger's
    await a.setup()  # a starts first: the leader
    grant_checkpoints(a.hs, a.alice.token, a.room_id)  # the checkpoint state event: before the first entry
    assert await role_of(a) == "leader"
    b = peer_of(a, workdir / "hax-b")
    b.start_daemon()
    await until_role(b, "standby")
    yield a, b
    await a.teardown()
    b.stop_daemon()


async def _settled_by_her(st: HaXSStation, via: Station, sid: str, tool_call_id: str) -> dict[str, Any]:
    """A request submitted through ``via``, its prompt decrypted by her js-sdk device without a warning,
    her encrypted `1` settling it: the record."""
    rec = await via.post(request_body(sid, tool_call_id=tool_call_id))
    prompt = await st.js_prompt(sid, rec["request_seq"])
    assert prompt["encrypted"] and prompt["shield"] == 0, prompt  # EventShieldColour.NONE: cross-signed
    await st.js_answer("1", prompt["event_id"])
    got = await via.record(rec["id"], wait=40)
    assert got["state"] == "resolved" and got["outcome"]["via"] == "matrix", got
    assert got["outcome"]["answered_by"] == st.alice.user_id and got["outcome"]["option_id"] == "allow_once"
    return got


async def test_the_standby_takes_over_as_the_same_cross_signed_device(
    pair: tuple[HaXSStation, Station], sid: str
) -> None:
    a, b = pair
    session = await a.pg_kv("matrix.session")
    device = session["device_id"]
    saved = await a.pg_kv(VAULT_KEY)
    assert saved["device_id"] == device and a.bot_device_signed(device)
    assert len(saved["archive"]) < 200_000, len(saved["archive"])  # a sane size for one kv value
    print(f"crypto store in the database: {len(saved['archive'])} base64 characters")
    assert not list(b.state_dir.glob("*.db")), "the standby opened the crypto store"
    await _settled_by_her(a, b, sid, "before")
    a.kill_daemon()  # kill -9: its lock frees when its connection closes
    took = await until_role(b, "leader")
    print(f"take-over after kill -9: {took:.2f} s")
    await b.wait_healthy()
    assert (await a.pg_kv("matrix.session"))["device_id"] == device  # no new login
    assert "crypto_store_restored" in b.log_path.read_text()
    assert (b.state_dir / f"{a.bot_id}_{device}.db").is_file()
    await _settled_by_her(a, b, sid, "after")  # posted by the new leader: still the cross-signed device
    assert a.bot_device_signed(device)
    assert (await a.pg_kv(VAULT_KEY))["device_id"] == device


async def test_a_leader_deposed_while_paused_leads_again_in_the_same_process(
    pair: tuple[HaXSStation, Station], sid: str
) -> None:
    a, b = pair  # b leads since the take-over above; a was killed
    a.start_daemon()
    await until_role(a, "standby")
    assert b.daemon is not None
    mark = b.log_path.stat().st_size
    os.kill(b.daemon.pid, signal.SIGSTOP)
    try:
        await until_role(a, "leader")  # b's beat is older than its lease: a takes over
        await a.wait_healthy()
        await _settled_by_her(a, a, sid, "while-paused")
    finally:
        os.kill(b.daemon.pid, signal.SIGCONT)
    await until_logged(b, "leader_demoted", mark)  # no exit: a standby again, its old Matrix side closed
    await until_role(b, "standby")
    a.kill_daemon()
    await until_role(b, "leader")  # a fresh term in the same process: the device restored from the database
    await b.wait_healthy()
    await _settled_by_her(a, b, sid, "elected-again")
    after = b.log_path.read_bytes()[mark:].decode(errors="replace")
    assert "Traceback" not in after and after.count("event='leader_elected'") == 1, after[-3000:]
    a.start_daemon()
    await until_role(a, "standby")


async def test_e2ee_commands_use_the_database(pair: tuple[HaXSStation, Station]) -> None:
    """``e2ee accept-identity`` pins in the PostgreSQL database (the standby's folder holds no inbox)."""
    a, b = pair
    await a.pg_kv(f"matrix.identity.{a.alice.user_id}")  # pinned on first sight, by whichever daemon led
    env = {"PERMISSION_BOT_DATABASE_URL": a.url}
    r = await asyncio.to_thread(b.cli, "e2ee", "accept-identity", a.alice.user_id, "--config", str(b.config_path),
                                env=env)
    assert r.returncode == 0 and "accepted" in r.stdout, r
    assert (await a.pg_kv(f"matrix.identity.{a.alice.user_id}"))["master"]
    assert not (b.state_dir / "inbox.sqlite3").exists()


async def test_audit_reads_the_checkpoints_of_an_encrypted_room_on_postgresql(
    pair: tuple[HaXSStation, Station],
) -> None:
    """``audit verify --against-room`` on PostgreSQL: the checkpoints are state events, read with the saved
    session alone (the folder the command runs from holds nothing of the device)."""
    a, b = pair
    for _ in range(100):  # the two settlements of the take-over test, checkpointed by the new leader
        if ((await a.pg_kv("ledger.checkpoint.default")) or {}).get("seq", 0) >= 2:
            break
        await asyncio.sleep(0.2)
    else:
        raise AssertionError("no checkpoint of the settlements")
    env = {"PERMISSION_BOT_DATABASE_URL": a.url}
    folder = a.dir / "audit-here"
    folder.mkdir(exist_ok=True)
    cfg = folder / "config.toml"
    cfg.write_text(b.config_text().replace(str(b.state_dir), str(folder / "state")))
    r = await asyncio.to_thread(b.cli, "audit", "verify", "--against-room", "--config", str(cfg), env=env)
    assert r.returncode == 0 and checkpoints_agree(r.stdout), r
    assert " 0 checkpoints" not in r.stdout and not (folder / "state").exists()


async def test_a_redacted_checkpoint_and_a_rewritten_chain_fail_on_postgresql(
    pair: tuple[HaXSStation, Station],
) -> None:
    """A moderator who can also edit the database redacts the checkpoints and rewrites the chain in place:
    verify names the seqs the redacted checkpoints covered (exit 1). After the read above: checkpoints exist.
    The redaction waits for the checkpoint of the last entry: one still due (the leader posts at most one per
    period) would land after it, readable, and verify would name the rewrite at its seq instead."""
    a, b = pair
    conn = await asyncpg.connect(a.url)
    try:
        head = await conn.fetchval("SELECT max(seq) FROM ledger")
        for _ in range(100):
            if ((await a.pg_kv("ledger.checkpoint.default")) or {}).get("seq", 0) >= head:
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"the ledger's head (seq {head}) was never checkpointed")
    finally:
        await conn.close()
    assert await asyncio.to_thread(redact_checkpoints, a.hs, a.alice.token, a.room_id, a.bot_id)
    conn = await asyncpg.connect(a.url)
    try:
        rows = [json.loads(r["entry"]) for r in await conn.fetch("SELECT entry FROM ledger ORDER BY seq")]
        k = max(1, len(rows) - 1)
        for e in rechained(rows[k - 1:], rows[k - 2]["hash"] if k > 1 else "0" * 64):
            await conn.execute("UPDATE ledger SET entry=$1, hash=$2 WHERE seq=$3", json.dumps(e), e["hash"], e["seq"])
        await conn.execute("UPDATE ledger_head SET hash=$1 WHERE id=1", e["hash"])
    finally:
        await conn.close()
    folder = a.dir / "audit-here"
    env = {"PERMISSION_BOT_DATABASE_URL": a.url}
    r = await asyncio.to_thread(b.cli, "audit", "verify", "--against-room", "--config", str(folder / "config.toml"),
                                env=env)
    assert r.returncode == 1 and "cannot be read (redacted by" in r.stderr and "seqs 1 to " in r.stderr, r


async def test_reset_identity_on_postgresql_reaches_every_daemon(pair: tuple[HaXSStation, Station]) -> None:
    """``e2ee reset-identity`` with the state in PostgreSQL (last: it replaces the bot's identity): a new identity
    published, its recovery key shown once (never logged); the daemons, restarted with that key, import it from
    secret storage and the device is cross-signed by it. A wrong password changes nothing."""
    a, b = pair
    env = {"PERMISSION_BOT_DATABASE_URL": a.url}
    old = key_of(a.keys(a.bot_id)["master_keys"][a.bot_id])
    r = await asyncio.to_thread(b.cli, "e2ee", "reset-identity", "--config", str(b.config_path), env=env,
                                input="wrong-password\n")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r
    assert key_of(a.keys(a.bot_id)["master_keys"][a.bot_id]) == old
    r = await asyncio.to_thread(b.cli, "e2ee", "reset-identity", "--config", str(b.config_path), env=env,
                                input=BOT_PASSWORD + "\n")
    assert r.returncode == 0 and "restart every daemon" in r.stdout, r
    key = re.search(r"shown once: (.+?) ;", r.stdout)
    assert key is not None and key.group(1) not in r.stderr, r
    new = key_of(a.keys(a.bot_id)["master_keys"][a.bot_id])
    assert new and new != old
    for st in (a, b):
        st.stop_daemon()
        st.env["PERMISSION_BOT_MATRIX_RECOVERY_KEY"] = key.group(1)
    a.start_daemon()
    await until_role(a, "leader")
    await a.wait_healthy()
    device = (await a.pg_kv("matrix.session"))["device_id"]
    assert "cross_signing_imported" in a.log_path.read_text()
    assert a.bot_device_signed(device)  # by the new identity's self-signing key
    assert key.group(1) not in a.log_path.read_text()

