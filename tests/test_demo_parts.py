"""The demo's config writers in-process: Synapse's YAML adjusted as data, the daemon's TOML escaped."""

from __future__ import annotations

import importlib.util
import sqlite3
import tomllib
from pathlib import Path

import yaml

from bot.config import load_config
from bot.demo import synapse_config
from bot.demo.daemon import write_config
from bot.demo.homeserver import Homeserver
from bot.demo.saved import Saved

GENERATED = """\
# a comment Synapse writes
server_name: "localhost"
listeners:
  - port: 8008
    tls: false
    type: http
    bind_addresses: ['::1', '127.0.0.1']
    resources:
      - names: [client, federation]
        compress: false
report_stats: true
registration_shared_secret: "generated-secret"
trusted_key_servers:
  - server_name: "matrix.org"
"""


def test_synapse_config_is_adjusted_as_yaml(tmp_path: Path) -> None:
    path = tmp_path / "homeserver.yaml"
    path.write_text(GENERATED)
    assert not synapse_config.complete(path)
    synapse_config.adjust(path, 41234)
    data = yaml.safe_load(path.read_text())
    assert data["listeners"][0]["port"] == 41234 and data["listeners"][0]["bind_addresses"] == ["127.0.0.1"]
    assert data["trusted_key_servers"] == [] and data["report_stats"] is False
    assert data["registration_shared_secret"] == synapse_config.SECRET and synapse_config.complete(path)
    assert data["rc_login"]["failed_attempts"]["per_second"] == 10000
    assert data["server_name"] == "localhost"
    synapse_config.set_port(path, 5000)
    assert synapse_config.port(path) == 5000 and synapse_config.complete(path)


def test_synapse_log_is_made_quieter(tmp_path: Path) -> None:
    path = tmp_path / "log.config"
    path.write_text("version: 1\nloggers:\n  synapse.storage.SQL:\n    level: INFO\nroot:\n  level: INFO\n")
    synapse_config.quieter_log(path)
    data = yaml.safe_load(path.read_text())
    assert data["root"]["level"] == "WARNING" and data["loggers"]["synapse.storage.SQL"]["level"] == "WARNING"


def test_broken_or_missing_yaml_reads_as_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "homeserver.yaml"
    assert not synapse_config.complete(path) and synapse_config.port(path) is None
    path.write_text("listeners: [unclosed\n")
    assert not synapse_config.complete(path) and synapse_config.port(path) is None


def test_daemon_config_is_toml_with_values_escaped(tmp_path: Path) -> None:
    saved = Saved(tmp_path)
    odd = 'pass"word\\with\nnewline'
    path, url = write_config(tmp_path, saved, "http://127.0.0.1:8008", "@permbot:localhost", "@alice:localhost",
                             "!room:localhost", odd)
    data = tomllib.loads(path.read_text())
    assert data["matrix"]["password"] == odd and data["answerers"]["users"] == ["@alice:localhost"]
    assert url == f"http://127.0.0.1:{saved['api_port']}" and "token" not in data["api"]  # no legacy token
    assert {(t["name"], t["role"], t["secret"]) for t in data["api"]["tokens"]} == {
        ("demo-agent", "agent", saved["agent_token"]), ("demo-decider", "decider", saved["decider_token"])}
    assert path.stat().st_mode & 0o077 == 0
    cfg = load_config(str(path))  # the daemon reads it
    assert cfg.matrix.room == "!room:localhost" and cfg.api.token is None and len(cfg.api.tokens) == 2
    again, _ = write_config(tmp_path, saved, "http://127.0.0.1:8008", "@permbot:localhost", "@alice:localhost",
                            "!room:localhost", odd)
    assert tomllib.loads(again.read_text())["api"] == data["api"]  # port and token kept between runs


def _synapse_schema() -> str:
    """Synapse's own SQLite schema, the newest full snapshot its package ships."""
    spec = importlib.util.find_spec("synapse")  # found, not imported
    assert spec is not None and spec.submodule_search_locations, "the tests need matrix-synapse"
    where = Path(spec.submodule_search_locations[0]) / "storage" / "schema" / "main" / "full_schemas"
    snapshots = where.glob("*/full.sql.sqlite")
    return max(snapshots, key=lambda p: int(p.parent.name)).read_text()


# Synapse's bundled-edits query on SQLite (synapse/storage/databases/main/relations.py, get_applicable_edits)
_APPLICABLE_EDITS = """
SELECT original.event_id, edit.event_id FROM events AS edit
INNER JOIN event_relations USING (event_id)
INNER JOIN events AS original ON original.event_id = relates_to_id AND edit.type = original.type
  AND edit.sender = original.sender AND edit.room_id = original.room_id
WHERE relates_to_id IN (?, ?, ?) AND relation_type = ? ORDER BY edit.origin_server_ts, edit.event_id
"""


def _plan(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute("EXPLAIN QUERY PLAN " + _APPLICABLE_EDITS, ("$e1", "$e2", "$e3", "m.replace"))
        return [str(r[3]) for r in rows]
    finally:
        db.close()


def test_analyze_lets_sqlite_find_edits_without_reading_the_room(tmp_path: Path) -> None:
    """Synapse's schema, one room of 3,000 events, 1,000 of them edits. Without statistics SQLite finds the
    edits of an event by reading the room's events; with them, through the relation index."""
    path = tmp_path / "homeserver.db"
    db = sqlite3.connect(path)
    db.executescript(_synapse_schema())
    insert = ("INSERT INTO events (stream_ordering, topological_ordering, event_id, type, room_id, processed,"
              " outlier, origin_server_ts, sender) VALUES (?, ?, ?, 'm.room.message', '!r', 1, 0, ?, '@b')")
    for i in range(2000):
        db.execute(insert, (i, i, f"$e{i}", i))
    for i in range(1000):
        db.execute(insert, (3000 + i, 3000 + i, f"$x{i}", 3000 + i))
        db.execute("INSERT INTO event_relations (event_id, relates_to_id, relation_type) VALUES (?, ?, 'm.replace')",
                   (f"$x{i}", f"$e{i}"))
    db.commit()
    db.close()
    assert any("events_room_stream" in step for step in _plan(path))  # the room, read per event
    Homeserver(tmp_path).analyze()
    plan = _plan(path)
    assert "event_relations_relates" in plan[0] and not any("events_room_stream" in p for p in plan), plan
    db = sqlite3.connect(path)
    try:
        assert db.execute(_APPLICABLE_EDITS, ("$e1", "$e2", "$e2500", "m.replace")).fetchall() == [
            ("$e1", "$x1"), ("$e2", "$x2")
        ]
    finally:
        db.close()
