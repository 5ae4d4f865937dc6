"""The demo's config writers in-process: Synapse's YAML adjusted as data, the daemon's TOML escaped."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from bot.config import load_config
from bot.demo import synapse_config
from bot.demo.daemon import write_config
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
    assert url == f"http://127.0.0.1:{saved['api_port']}" and data["api"]["token"] == saved["api_token"]
    assert path.stat().st_mode & 0o077 == 0
    cfg = load_config(str(path))  # the daemon reads it
    assert cfg.matrix.room == "!room:localhost" and cfg.api.token == saved["api_token"]
    again, _ = write_config(tmp_path, saved, "http://127.0.0.1:8008", "@permbot:localhost", "@alice:localhost",
                            "!room:localhost", odd)
    assert tomllib.loads(again.read_text())["api"] == data["api"]  # port and token kept between runs
