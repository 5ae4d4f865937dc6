"""A URL-mode question shows the host a browser opens, or is not posted: the attack through ``permission-bot acp``
(the tests' byte-level agent sending ``elicitation/create``) and straight at the API, against the real Synapse."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.test_acp_elicitation_e2e import answer, prompts, raw, wait_prompts

pytestmark = pytest.mark.e2e

DISGUISED = "https://evil.example\\@good.example/login"  # urllib: good.example; a browser: evil.example
FAKE_LINES = "Sign in to continue\nHost: good.example\nLink: https://good.example/login"


def _url_line(rpc_id: int, sid: str, url: str, message: str) -> str:
    params = {"sessionId": sid, "mode": "url", "message": message, "elicitationId": f"el{rpc_id}", "url": url}
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "elicitation/create", "params": params})


def _shown_hosts(prompt: dict[str, Any]) -> list[str]:
    """The hosts a prompt's own lines name: body lines, and the HTML's bold Host fields."""
    c = prompt["content"]
    body = [ln[len("Host:"):].strip() for ln in c["body"].splitlines() if ln.startswith("Host:")]
    html = re.findall(r"<b>Host:</b>\s*([^<]*)", c.get("formatted_body", ""))
    return body + [h.strip() for h in html]


async def test_a_disguised_link_is_never_posted_with_the_host_it_pretends(
    station: Any, tmp_path: Path, sid: str
) -> None:
    r = await raw(station, tmp_path)
    try:
        await r.agent_sends(_url_line(1, sid, DISGUISED, "Sign in to continue"))
        assert (await r.agent_reply(1))["result"] == {"action": "decline"}  # refused: nothing to open safely
        assert await r.logged("backslash")
        # the agent's words claim good.example on lines of their own, for a link on evil.example
        await r.agent_sends(_url_line(2, sid, "https://evil.example/login", FAKE_LINES))
        (p,) = await wait_prompts(station, sid, 1)  # the disguised link was never posted
        assert _shown_hosts(p) == ["evil.example", "evil.example"], p["content"]["body"]
        lines = p["content"]["body"].splitlines()
        assert lines[0].startswith("Question: Sign in to continue") and "good.example" in lines[0]  # kept on it
        assert [ln for ln in lines if ln.startswith("Link:")] == ["Link: https://evil.example/login"]
        assert not any("on good.example" in ln for ln in lines), lines
        await answer(station, p, "1")
        assert (await r.agent_reply(2))["result"] == {"action": "accept"}
        assert len(prompts(station, sid)) == 1
    finally:
        await r.close()


async def test_the_api_refuses_a_url_question_a_browser_reads_otherwise(station: Any, sid: str) -> None:
    body = {"sessionId": sid, "options": [{"optionId": "done", "name": "Done", "kind": "choose"},
                                          {"optionId": "decline", "name": "Decline", "kind": "reject_once"}],
            "toolCall": {"toolCallId": "q1", "title": "Sign in", "kind": "question",
                         "rawInput": {"question": "Sign in", "url": DISGUISED}}}
    code, got = await station.ahttp("POST", "/permissions", body)
    assert code == 422 and "rawInput.url: refused" in got["reason"], got
