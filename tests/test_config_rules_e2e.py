"""[[rules]] in the daemon's config settle matching requests on arrival, recorded and posted settled."""

from __future__ import annotations

import pytest

from tests.support.human import content
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e

RULES = """
[[rules]]
match = { toolName = "Read*" }
decision = "approve"

[[rules]]
match = { toolName = "Read secrets*" }
decision = "deny"
"""


async def test_config_rules_apply_on_arrival(station: Station, sid: str) -> None:
    station.extra_config = RULES
    station.write_config()
    await station.restart_daemon()
    try:
        st, rec = await station.ahttp("POST", "/permissions", request_body(sid, title="Read README.md", kind="read"))
        assert st == 201 and rec["state"] == "resolved", rec
        assert rec["outcome"]["via"] == "rule" and rec["outcome"]["option_id"] == "allow_once"
        st, rec2 = await station.ahttp("POST", "/permissions",
                                       request_body(sid, title="Read secrets.env", kind="read"))
        assert rec2["state"] == "resolved" and rec2["outcome"]["option_id"] == "reject_once"  # deny wins
        st, rec3 = await station.ahttp("POST", "/permissions", request_body(sid, title="Run rm -rf /"))
        assert rec3["state"] == "pending"
        prompt = await station.prompt_for(sid, seq=1)
        assert prompt, "a rule-settled request is still posted for the record"
        edit = await station.edit_of(prompt["event_id"])
        assert edit and content(edit)["m.new_content"]["resolution"]["via"] == "rule"
        await station.ahttp("POST", f"/permissions/{rec3['id']}", {"decision": "deny"})
    finally:
        station.extra_config = ""
        station.write_config()
        await station.restart_daemon()


def test_bad_rules_in_config_name_the_rule(station: Station, tmp_path) -> None:
    import subprocess

    text = station.config_text() + '\n[[rules]]\nmatch = { toolName = "x" }\ndecision = "allow"\n'
    p = tmp_path / "c.toml"
    p.write_text(text)
    r = subprocess.run([station.exe, "run", "--config", str(p)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "rule 1" in r.stderr and "decision" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
