"""One Synapse made per test run, copied for every homeserver the run starts.

Making a Synapse costs about 8 s of CPU before it answers: ``--generate-config`` (Synapse's whole import for a
config file and a key) and, at its first start, its database schema. A run starts one per pytest worker and a
few more (the rate-limited one): the first to come makes the template under a file lock (started once, so its
database has the schema, then stopped); each homeserver is a copy of it, with its own paths, port and overrides,
whose first start only opens the database. Every copy has the template's signing key: these homeservers never
federate.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.demo import synapse_config
from bot.demo.homeserver import Homeserver

LEFT_OUT = ("homeserver.log", "stdout.log", "homeserver.pid")  # the template's own run, not part of a copy


def template_root(factory: pytest.TempPathFactory) -> Path:
    """The folder every pytest worker of this run shares (the run's base temp, or its parent under xdist)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def template(root: Path, overrides: dict[str, Any]) -> Path:
    """The run's template Synapse in ``root``, made by the first caller while the others wait."""
    where = root / "synapse-template"
    with open(root / "synapse-template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (where / "ready").exists():
            shutil.rmtree(where, ignore_errors=True)  # a template left half made by a worker that failed
            hs = Homeserver(where, overrides=overrides)
            hs.start()
            hs.stop()
            (where / "ready").touch()
    return where


def copy(source: Path, workdir: Path, overrides: dict[str, Any]) -> Homeserver:
    """A homeserver in ``workdir`` made from the template ``source``, with ``overrides`` on top of its config."""
    shutil.copytree(source, workdir, ignore=shutil.ignore_patterns(*LEFT_OUT, "ready"))
    for name in ("homeserver.yaml", "localhost.log.config"):
        path = workdir / name
        path.write_text(path.read_text().replace(str(source), str(workdir)))
    cfg = workdir / "homeserver.yaml"
    synapse_config.adjust(cfg, synapse_config.port(cfg) or 0, overrides)
    return Homeserver(workdir, overrides=overrides)  # finds its config: takes a port of its own at start
