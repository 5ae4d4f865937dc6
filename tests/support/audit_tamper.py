"""A running station's state copied and its ledger edited by hand, then ``audit verify`` run on the copy:
the three kinds of tampering (an entry changed, deleted, the chain recomputed from some point on) and the
last entries deleted; a room's checkpoints redacted by a moderator. Shared by the plain and the encrypted
room's ledger tests."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bot.demo.homeserver import Homeserver, http
from bot.events.checkpoints import CHECKPOINT_TYPE
from bot.events.ledger import CHECKPOINT_KEY, ZERO, seal
from tests.support.station import Station

Edit = Callable[[sqlite3.Connection], None]


def grant_checkpoints(hs: Homeserver, token: str, room_id: str) -> None:
    """The room's power levels let anyone set the checkpoint state event (the least a bot needs for it)."""
    url = f"{hs.url}/_matrix/client/v3/rooms/{quote(room_id)}/state/m.room.power_levels/"
    pl = http("GET", url, token=token)
    pl.setdefault("events", {})[CHECKPOINT_TYPE] = 0
    http("PUT", url, pl, token=token)


def is_checkpoint(e: dict[str, Any], bot: str, seq: int = 0) -> bool:
    """The bot's checkpoint state event of ``seq`` or later."""
    c = e.get("content") or {}
    return bool(e.get("sender") == bot and e.get("type") == CHECKPOINT_TYPE and e.get("state_key") == ""
                and isinstance(c.get("seq"), int) and c["seq"] >= seq)


def redact_checkpoints(hs: Homeserver, token: str, room_id: str, bot: str) -> int:
    """A moderator redacts every checkpoint of the bot in the room (state events and older notices alike);
    how many."""
    base, n, token_from = f"{hs.url}/_matrix/client/v3/rooms/{quote(room_id)}", 0, ""
    while True:
        page = http("GET", f"{base}/messages?dir=b&limit=500" + (f"&from={quote(token_from)}" if token_from else ""),
                    token=token)
        for e in page.get("chunk") or []:
            c = e.get("content") or {}
            if e.get("sender") == bot and ((e.get("type") == CHECKPOINT_TYPE and c) or CHECKPOINT_KEY in c):
                http("PUT", f"{base}/redact/{quote(e['event_id'])}/{uuid.uuid4().hex}", {"reason": "tidy"},
                     token=token)
                n += 1
        if not page.get("chunk") or page.get("end") in (None, token_from):
            return n
        token_from = page["end"]


def copy_state(st: Station, where: Path, *, config: str | None = None) -> tuple[Path, Path]:
    """The state folder copied (its SQLite files through the backup API, so consistent while the daemon
    runs: the inbox and the bot's crypto store) with a config pointing at it; (config, state folder)."""
    state = where / "state"
    state.mkdir(parents=True)
    for f in st.state_dir.iterdir():
        if f.suffix in (".sqlite3", ".db") and f.is_file():
            src, dst = sqlite3.connect(f"{f.resolve().as_uri()}?mode=ro", uri=True), sqlite3.connect(state / f.name)
            src.backup(dst)
            src.close()
            dst.close()
        elif f.is_file() and not f.name.endswith(("-journal", "-wal", "-shm")):
            shutil.copy2(f, state / f.name)
    cfg = where / "config.toml"
    cfg.write_text((config or st.config_text()).replace(str(st.state_dir), str(state)))
    return cfg, state


def _entry(db: sqlite3.Connection, seq: int) -> dict[str, Any]:
    return dict(json.loads(db.execute("SELECT entry FROM ledger WHERE seq=?", (seq,)).fetchone()[0]))


def rechained(entries: list[dict[str, Any]], prev: str) -> list[dict[str, Any]]:
    """``entries`` (consecutive, from the one to change on) with the first's answer rewritten and every hash
    made anew after ``prev``: a chain consistent in itself."""
    out = []
    for i, e in enumerate(entries):
        e = dict(e, answered_by=["@mallory:example.org"]) if i == 0 else dict(e)
        e = seal(e, int(e["seq"]), prev)
        prev = e["hash"]
        out.append(e)
    return out


def edits(k: int, head: int) -> dict[str, Edit]:
    """The edits, at entry ``k`` of a chain whose last entry is ``head``."""

    def change(db: sqlite3.Connection) -> None:  # an entry's answer rewritten, its hash left
        e = _entry(db, k)
        e["answered_by"] = ["@mallory:example.org"]
        db.execute("UPDATE ledger SET entry=? WHERE seq=?", (json.dumps(e), k))

    def delete(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM ledger WHERE seq=?", (k,))

    def recompute(db: sqlite3.Connection) -> None:  # changed, and every hash from there on made anew
        prev = _entry(db, k - 1)["hash"] if k > 1 else ZERO
        for e in rechained([_entry(db, seq) for seq in range(k, head + 1)], prev):
            db.execute("UPDATE ledger SET entry=?, hash=? WHERE seq=?", (json.dumps(e), e["hash"], e["seq"]))
        db.execute("UPDATE ledger_head SET hash=? WHERE id=1", (e["hash"],))

    def truncate(db: sqlite3.Connection) -> None:  # the last entries removed, the head set back
        db.execute("DELETE FROM ledger WHERE seq>=?", (k,))

    return {"change": change, "delete": delete, "recompute": recompute, "truncate": truncate}


def verify_edited(st: Station, where: Path, edit: Edit, *args: str, config: str | None = None) -> Any:
    """``audit verify ARGS`` on a copy of the state with ``edit`` applied to its inbox."""
    cfg, state = copy_state(st, where, config=config)
    db = sqlite3.connect(state / "inbox.sqlite3")
    edit(db)
    db.commit()
    db.close()
    out = st.cli("audit", "verify", *args, "--config", str(cfg))
    shutil.rmtree(where)
    return out


async def assert_tampering_caught(st: Station, tmp_path: Path, k: int, head: int, config: str | None = None) -> None:
    """Each edit at ``k`` is caught: exit 1 naming the seq (the recomputed chain only against the room)."""
    ed = edits(k, head)

    async def run(case: str, *args: str) -> Any:
        return await asyncio.to_thread(
            verify_edited, st, tmp_path / f"{case}{len(args)}", ed[case], *args, config=config
        )

    for case in ("change", "delete"):
        out = await run(case, "--against-room")
        assert out.returncode == 1 and f"seq {k}" in out.stderr, (case, out.stderr)
    quiet = await run("recompute")
    assert quiet.returncode == 0, quiet.stderr  # consistent in itself: only the rooms' copies of the head tell
    out = await run("recompute", "--against-room")
    assert out.returncode == 1 and "differs from the checkpoint" in out.stderr and "seq " in out.stderr, out.stderr
    out = await run("truncate", "--against-room")
    assert out.returncode == 1 and "missing" in out.stderr, out.stderr


def checkpoints_agree(stdout: str) -> bool:
    """Whether ``audit verify --against-room`` said that one or more checkpoints in the rooms agree."""
    said = r"; ([1-9]\d* checkpoints in the rooms agree|1 checkpoint in the rooms agrees)$"
    return re.search(said, stdout.strip()) is not None
