"""The ledger end to end (issue 37): settlements of every kind appended, exported, verified; its head
posted into each station room; a database edited by hand caught by ``audit verify --against-room``;
``GET /audit`` limited to a decider's rooms."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.homeserver import Homeserver
from bot.events.ledger import CHECKPOINT_KEY, seal
from tests.support.human import Human, content
from tests.support.station import AGENT_B_TOKEN, OwnStation, request_body

pytestmark = pytest.mark.e2e

INFRA_DECIDER = ("infra-lead", "test-infra-decider-5a1c")


class AuditStation(OwnStation):
    """Two rooms (default, ``infra``: agent-b's requests go there, dave answers), a deny rule, a decider
    limited to ``infra``, checkpoints every 2 s."""

    suffix = "audit"

    async def setup(self) -> None:
        self.make_people_and_room()
        self.dave = Human(self.hs, "daveaudit")
        self.infra_id = self.hs.create_room(self.dave.token, invite=[self.bot_id], name="infra")
        await self.dave.start(self.infra_id)
        self.env = {"PERMISSION_BOT_CHECKPOINT_PERIOD": "2", "PERMISSION_BOT_CHECKPOINT_DELAY": "0.4"}
        self.extra_config = (
            f'[[rooms]]\nname = "infra"\nroom = "{self.infra_id}"\n'
            f'answerers = {{ users = ["{self.dave.user_id}"] }}\ntokens = ["{AGENT_B_TOKEN[0]}"]\n'
            f'[[api.tokens]]\nname = "{INFRA_DECIDER[0]}"\nrole = "decider"\nsecret = "{INFRA_DECIDER[1]}"\n'
            'rooms = ["infra"]\n'
            '[[rules]]\nmatch = { command = "rm -rf*" }\ndecision = "deny"\n'
        )
        await self.start_all()

    async def teardown(self) -> None:
        await self.dave.close()
        await super().teardown()

    def audit(self, query: str = "", token: str | None = None) -> tuple[int, list[dict[str, Any]] | Any]:
        req = urllib.request.Request(f"{self.api_url}/audit{query}")
        req.add_header("Authorization", f"Bearer {token or self.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, [json.loads(x) for x in r.read().decode().splitlines()]
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
async def st(homeserver: Homeserver, workdir: Path) -> AsyncIterator[AuditStation]:
    s = AuditStation(homeserver, workdir / "audit")
    await s.setup()
    yield s
    await s.teardown()


async def _post(st: AuditStation, sid: str, token: str | None = None, **kw: Any) -> dict[str, Any]:
    code, rec = await st.ahttp("POST", "/permissions", request_body(sid, **kw), **({"token": token} if token else {}))
    assert code == 201, rec
    return dict(rec)


async def _settle_many(st: AuditStation, sid: str) -> list[str]:
    """100 settlements of mixed kinds and paths, in both rooms; their request ids in order of settling."""
    done: list[str] = []
    for i in range(100):
        k = i % 6
        if k == 0:
            rec = await _post(st, f"{sid}r{i}", command="rm -rf /tmp/x")  # the deny rule settles it at once
            assert rec["state"] == "resolved", rec
        elif k == 1:
            rec = await _post(st, f"{sid}c{i}")
            await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "cancel"})
        elif k == 2:
            rec = await _post(st, f"{sid}i{i}", token=AGENT_B_TOKEN[1])  # room infra
            code, _ = await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny", "feedback": "no"},
                                     token=INFRA_DECIDER[1])
            assert code == 200
        elif k == 3 and i < 30:  # a few answered in the room (a reply, a reaction)
            rec = await _post(st, f"{sid}m{i}")
            prompt = await st.prompt_for(rec["session_id"])
            assert prompt
            if (i // 6) % 2:
                await st.alice.text("1", reply_to=prompt["event_id"])
            else:
                await st.alice.react(prompt["event_id"], "1\ufe0f\u20e3")
            got = await st.record(rec["id"], wait=20)
            assert got["state"] == "resolved", got
        else:
            rec = await _post(st, f"{sid}a{i}")
            await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve", "scope": "always"})
        done.append(rec["id"])
    return done


def _cli(st: AuditStation, *args: str, input: str | None = None) -> Any:
    return st.cli("audit", *args, "--config", str(st.config_path), input=input)


async def _checkpointed(st: AuditStation, seq: int, human: Human) -> dict[str, Any]:
    ev = await human.wait(
        lambda e: e.get("sender") == st.bot_id
        and (content(e).get(CHECKPOINT_KEY) or {}).get("seq", 0) >= seq, 30)
    assert ev, f"no checkpoint of seq {seq} in the room"
    return dict(content(ev))


async def test_a_hundred_settlements_exported_verified_and_checkpointed(st: AuditStation, sid: str) -> None:
    ids = await _settle_many(st, sid)
    out = _cli(st, "export")
    assert out.returncode == 0, out.stderr
    entries = [json.loads(x) for x in out.stdout.splitlines()]
    assert len(entries) >= 100 and [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    mine = [e for e in entries if e["request_id"] in set(ids)]
    assert len(mine) == 100
    vias = {e["via"] for e in mine}
    assert {"rule", "cancel", "api", "matrix", "reaction"} <= vias, vias
    rule = next(e for e in mine if e["via"] == "rule")
    assert rule["answered_by"] == ["rule:1"] and rule["meaning"] == "reject"
    infra = [e for e in mine if e["room"] == "infra"]
    assert infra and all(e["answered_by"] == [f"api:{INFRA_DECIDER[0]}"] for e in infra)
    assert all(e["answered_by"] == [] for e in mine if e["via"] == "cancel")
    ok = _cli(st, "verify", "-", input=out.stdout)
    assert ok.returncode == 0 and f"{len(entries)} entries" in ok.stdout, ok.stderr
    assert _cli(st, "verify").returncode == 0
    csv = _cli(st, "export", "--format", "csv", "--room", "infra")
    assert csv.returncode == 0 and len(csv.stdout.splitlines()) == 1 + len([e for e in entries if e["room"] == "infra"])
    assert _cli(st, "export", "--since", "1h").stdout == out.stdout
    assert _cli(st, "export", "--since", "2999-01-01").stdout == ""
    bad = _cli(st, "export", "--since", "yesterday")
    assert bad.returncode == 2 and "since" in bad.stderr
    # the head reaches both rooms; the rooms agree with the chain
    head = entries[-1]
    for human in (st.alice, st.dave):
        cp = await _checkpointed(st, head["seq"], human)
        assert cp[CHECKPOINT_KEY]["seq"] == head["seq"] and cp[CHECKPOINT_KEY]["hash"] == head["hash"]
        assert cp["msgtype"] == "m.notice"
    against = _cli(st, "verify", "--against-room")
    assert against.returncode == 0 and "checkpoints in the rooms agree" in against.stdout, against.stderr


async def test_audit_by_a_decider_of_one_room_sees_only_that_room(st: AuditStation, sid: str) -> None:
    rec = await _post(st, f"{sid}i", token=AGENT_B_TOKEN[1])
    await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"}, token=INFRA_DECIDER[1])
    rec2 = await _post(st, f"{sid}d")
    await st.ahttp("POST", f"/permissions/{rec2['id']}", {"decision": "approve"})
    code, seen = await asyncio.to_thread(st.audit, "", INFRA_DECIDER[1])
    assert code == 200 and seen and {e["room"] for e in seen} == {"infra"}
    assert rec["id"] in {e["request_id"] for e in seen} and rec2["id"] not in {e["request_id"] for e in seen}
    code, err = await asyncio.to_thread(st.audit, "?room=default", INFRA_DECIDER[1])
    assert code == 404, err
    code, err = await asyncio.to_thread(st.audit, "?room=nowhere")
    assert code == 404, err
    code, every = await asyncio.to_thread(st.audit, "?since=1h")
    assert code == 200 and {"default", "infra"} <= {e["room"] for e in every}
    code, err = await asyncio.to_thread(st.audit, "?since=soon")
    assert code == 400 and "since" in err["reason"]
    code, err = await asyncio.to_thread(st.audit, "", AGENT_B_TOKEN[1])
    assert code == 403, err


def _copy(st: AuditStation, where: Path) -> tuple[Path, sqlite3.Connection]:
    """The state folder copied (a consistent SQLite backup) with a config pointing at it."""
    state = where / "state"
    state.mkdir(parents=True)
    src = sqlite3.connect(st.state_dir / "inbox.sqlite3")
    dst = sqlite3.connect(state / "inbox.sqlite3")
    src.backup(dst)
    src.close()
    cfg = where / "config.toml"
    cfg.write_text(st.config_text().replace(str(st.state_dir), str(state)))
    return cfg, dst


def _entry(db: sqlite3.Connection, seq: int) -> dict[str, Any]:
    return dict(json.loads(db.execute("SELECT entry FROM ledger WHERE seq=?", (seq,)).fetchone()[0]))


async def test_three_kinds_of_tampering_are_caught_against_the_room(
    st: AuditStation, sid: str, tmp_path: Path
) -> None:
    rec = await _post(st, f"{sid}x")
    await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"})
    code, entries = await asyncio.to_thread(st.audit)
    assert code == 200 and len(entries) >= 5
    head = entries[-1]["seq"]
    await _checkpointed(st, head, st.alice)
    k = head - 3

    def verify(case: str, edit: Any, *against: str) -> Any:
        cfg, db = _copy(st, tmp_path / case)
        edit(db)
        db.commit()
        db.close()
        out = st.cli("audit", "verify", *against, "--config", str(cfg))
        shutil.rmtree(tmp_path / case)
        return out

    def change(db: sqlite3.Connection) -> None:  # an entry's answer rewritten, its hash left
        e = _entry(db, k)
        e["answered_by"] = ["@mallory:example.org"]
        db.execute("UPDATE ledger SET entry=? WHERE seq=?", (json.dumps(e), k))

    def delete(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM ledger WHERE seq=?", (k,))

    def recompute(db: sqlite3.Connection) -> None:  # changed, and every hash from there on made anew
        prev = _entry(db, k - 1)["hash"]
        for seq in range(k, head + 1):
            e = _entry(db, seq)
            if seq == k:
                e["answered_by"] = ["@mallory:example.org"]
            e = seal(e, seq, prev)
            prev = e["hash"]
            db.execute("UPDATE ledger SET entry=?, hash=? WHERE seq=?", (json.dumps(e), prev, seq))
        db.execute("UPDATE ledger_head SET hash=? WHERE id=1", (prev,))

    for case, edit in (("change", change), ("delete", delete)):
        out = await asyncio.to_thread(verify, case, edit)
        assert out.returncode == 1 and f"seq {k}" in out.stderr, (case, out.stderr)
    quiet = await asyncio.to_thread(verify, "recompute", recompute)
    assert quiet.returncode == 0  # consistent in itself: only the rooms' copies of the head tell
    out = await asyncio.to_thread(verify, "recompute2", recompute, "--against-room")
    assert out.returncode == 1 and "differs from the checkpoint" in out.stderr, out.stderr

    def truncate(db: sqlite3.Connection) -> None:  # the last entries removed, the head set back
        db.execute("DELETE FROM ledger WHERE seq>=?", (k,))

    out = await asyncio.to_thread(verify, "truncate", truncate, "--against-room")
    assert out.returncode == 1 and "missing" in out.stderr, out.stderr
