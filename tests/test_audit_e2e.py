"""The ledger end to end: settlements of every kind appended, exported, verified; its head posted into each
station room (a state event where the bot has the power for it, never a message; the older m.notice where
it has not); a database edited by hand caught by ``audit verify --against-room``, and so is a chain
rewritten after a moderator redacted the checkpoints; ``GET /audit`` limited to a decider's rooms."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.homeserver import Homeserver
from bot.events.ledger import CHECKPOINT_KEY
from tests.support.audit_tamper import (
    assert_tampering_caught,
    checkpoints_agree,
    edits,
    grant_checkpoints,
    is_checkpoint,
    redact_checkpoints,
    verify_edited,
)
from tests.support.human import Human, content
from tests.support.station import AGENT_B_TOKEN, OwnStation, request_body

pytestmark = pytest.mark.e2e

INFRA_DECIDER = ("infra-lead", "test-infra-decider-5a1c")


class AuditStation(OwnStation):
    """Two rooms (default, ``infra``: agent-b's requests go there, dave answers), a deny rule, a decider
    limited to ``infra``, checkpoints every 2 s. In the default room the bot may set the checkpoint state
    event; in ``infra`` it may not (power 0, state_default 50): it posts the older notice there."""

    suffix = "audit"

    async def setup(self) -> None:
        self.make_people_and_room()
        self.dave = Human(self.hs, "daveaudit")
        self.infra_id = self.hs.create_room(self.dave.token, invite=[self.bot_id], name="infra")
        await self.dave.start(self.infra_id)
        grant_checkpoints(self.hs, self.alice.token, self.room_id)
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


async def _settle_many(st: AuditStation, sid: str) -> list[str]:
    """100 settlements of mixed kinds and paths, in both rooms; their request ids in order of settling."""
    done: list[str] = []
    for i in range(100):
        k = i % 6
        if k == 0:
            rec = await st.post(request_body(f"{sid}r{i}", command="rm -rf /tmp/x"))  # the deny rule settles it at once
            assert rec["state"] == "resolved", rec
        elif k == 1:
            rec = await st.post(request_body(f"{sid}c{i}"))
            await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "cancel"})
        elif k == 2:
            rec = await st.post(request_body(f"{sid}i{i}"), token=AGENT_B_TOKEN[1])  # room infra
            code, _ = await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny", "feedback": "no"},
                                     token=INFRA_DECIDER[1])
            assert code == 200
        elif k == 3 and i < 30:  # a few answered in the room (a reply, a reaction)
            rec = await st.post(request_body(f"{sid}m{i}"))
            prompt = await st.prompt_for(rec["session_id"])
            assert prompt
            if (i // 6) % 2:
                await st.alice.text("1", reply_to=prompt["event_id"])
            else:
                await st.alice.react(prompt["event_id"], "1\ufe0f\u20e3")
            got = await st.record(rec["id"], wait=20)
            assert got["state"] == "resolved", got
        else:
            rec = await st.post(request_body(f"{sid}a{i}"))
            await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve", "scope": "always"})
        done.append(rec["id"])
    return done


def _cli(st: AuditStation, *args: str, input: str | None = None) -> Any:
    return st.cli("audit", *args, "--config", str(st.config_path), input=input)


def _notice(st: AuditStation, e: dict[str, Any], seq: int = 0) -> bool:
    """The older checkpoint: an m.notice carrying the head (what the bot posts without the power)."""
    return bool(e.get("sender") == st.bot_id and e.get("type") == "m.room.message"
                and CHECKPOINT_KEY in content(e) and content(e)[CHECKPOINT_KEY].get("seq", 0) >= seq)


async def _checkpointed(st: AuditStation, seq: int, human: Human) -> dict[str, Any]:
    """The head of ``seq`` or later: the state event in the default room, the older notice in infra."""
    if human is st.alice:
        ev = await human.wait(lambda e: is_checkpoint(e, st.bot_id, seq), 30)
    else:
        ev = await human.wait(lambda e: _notice(st, e, seq), 30)
    assert ev, f"no checkpoint of seq {seq} in the room"
    return dict(content(ev).get(CHECKPOINT_KEY) or content(ev))


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
        assert cp == {"seq": head["seq"], "hash": head["hash"]}
    assert not st.alice.find(lambda e: _notice(st, e))  # where it may, the bot posts no message for it
    against = _cli(st, "verify", "--against-room")
    assert against.returncode == 0 and checkpoints_agree(against.stdout), against.stderr


async def test_audit_by_a_decider_of_one_room_sees_only_that_room(st: AuditStation, sid: str) -> None:
    rec = await st.post(request_body(f"{sid}i"), token=AGENT_B_TOKEN[1])
    await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"}, token=INFRA_DECIDER[1])
    rec2 = await st.post(request_body(f"{sid}d"))
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


async def test_three_kinds_of_tampering_are_caught_against_the_room(
    st: AuditStation, sid: str, tmp_path: Path
) -> None:
    rec = await st.post(request_body(f"{sid}x"))
    await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"})
    code, entries = await asyncio.to_thread(st.audit)
    assert code == 200 and len(entries) >= 5
    head = entries[-1]["seq"]
    await _checkpointed(st, head, st.alice)
    await assert_tampering_caught(st, tmp_path, head - 3, head)


async def test_a_redacted_checkpoint_and_a_rewritten_chain_fail_naming_the_seqs(
    st: AuditStation, sid: str, tmp_path: Path
) -> None:
    """A moderator who can also edit the database redacts the bot's checkpoints in both rooms and rewrites the
    chain: verify fails naming the seqs the redacted checkpoint covered (older builds said intact). Last: the
    redactions stay in the rooms."""
    rec = await st.post(request_body(f"{sid}y"))
    await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"})
    _, entries = await asyncio.to_thread(st.audit)
    head = entries[-1]["seq"]
    await _checkpointed(st, head, st.alice)
    await _checkpointed(st, head, st.dave)
    assert await asyncio.to_thread(redact_checkpoints, st.hs, st.alice.token, st.room_id, st.bot_id)
    assert await asyncio.to_thread(redact_checkpoints, st.hs, st.dave.token, st.infra_id, st.bot_id)
    out = await asyncio.to_thread(verify_edited, st, tmp_path / "redacted", edits(head - 2, head)["recompute"],
                                  "--against-room")
    assert out.returncode == 1 and "cannot be read (redacted by " in out.stderr, out.stderr
    assert f"to {head}: a checkpoint of the bot's in room default" in out.stderr, out.stderr
