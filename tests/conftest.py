"""Session fixtures: one real Synapse and one station (room + daemon) for the whole test run."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver
from tests.support.fake_station import fst  # noqa: F401 - fixture: the station on the fake homeserver
from tests.support.postgres import engine_url, inbox, pg_cluster, pg_url, sqlite_inbox  # noqa: F401 - fixtures
from tests.support.station import Station
from tests.support.synapse_template import copy as copy_synapse
from tests.support.synapse_template import template as synapse_template_of
from tests.support.synapse_template import template_root

_counter = itertools.count(1)
WEIGHTS = Path(__file__).parent / "file_weights.json"
# The daemons the tests start post no ledger checkpoint (a notice the tests that wait for the bot's next notice
# would take for theirs); tests/test_audit_e2e.py sets its own intervals.
os.environ.setdefault("PERMISSION_BOT_CHECKPOINT_DELAY", "86400")
# Throwaway accounts: bcrypt's default 12 rounds cost Synapse 0.26 s of CPU per registration and password
# login, a few hundred of them per run; 4 rounds cost 1 ms.
TEST_SYNAPSE = {"bcrypt_rounds": 4}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs the real Synapse (the ``homeserver`` fixture, directly or through another one: the
    station, a fault station, ...) is ``e2e``, marked in its file or not: ``-m "not e2e"`` runs none of them.

    The files run longest first (their seconds in tests/file_weights.json, written by scripts/file_weights.py;
    a new file counts as a long one), each file's tests in their own order: pytest-xdist hands out files in this
    order, so no long file starts last and keeps one worker busy while the others wait."""
    for item in items:
        if "homeserver" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)
    weights = json.loads(WEIGHTS.read_text()) if WEIGHTS.exists() else {}
    unknown = max(weights.values(), default=0.0)
    items.sort(key=lambda item: -weights.get(item.nodeid.split("::")[0], unknown))  # stable: a file's own order


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="pb-tests-"))
    yield d
    if not os.environ.get("PB_KEEP_TESTDIR"):
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def synapse_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's template Synapse (tests/support/synapse_template.py), made once for every worker."""
    return synapse_template_of(template_root(tmp_path_factory), TEST_SYNAPSE)


@pytest.fixture(scope="session")
def homeserver(workdir: Path, synapse_template: Path) -> Iterator[Homeserver]:
    hs = copy_synapse(synapse_template, workdir / "synapse", TEST_SYNAPSE)
    hs.start()
    yield hs
    hs.stop()


@pytest.fixture(scope="session")
async def station(homeserver: Homeserver, workdir: Path) -> AsyncIterator[Station]:
    st = Station(homeserver, workdir / "station")
    await st.setup()
    yield st
    await st.teardown()


@pytest.fixture
def sid(request: pytest.FixtureRequest) -> str:
    """A fresh ACP session id per test."""
    return f"t{next(_counter)}_{request.node.name[:24]}".replace("[", "_").replace("]", "_")
