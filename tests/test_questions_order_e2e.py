"""A form's questions land in the room in the form's order, run after run (real Synapse, the real hook).

The poster sends several prompts at once; without an order among a form's questions the homeserver
put the second above the first in two runs of three.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.human import content
from tests.support.station import Station
from tests.test_hooks_e2e import finish, start_hook
from tests.test_questions_e2e import hook_input

pytestmark = pytest.mark.e2e
RUNS = 5


def three_questions(sid: str) -> dict[str, Any]:
    data = hook_input("hook-PermissionRequest-AskUserQuestion", sid)
    third = copy.deepcopy(data["tool_input"]["questions"][0])
    third["question"], third["header"] = "Which port should it listen on?", "Port"
    data["tool_input"]["questions"].append(third)
    return data


async def test_a_forms_questions_are_in_the_forms_order(station: Station, sid: str) -> None:
    for run in range(RUNS):
        session = f"{sid}_{run}"
        proc = await start_hook(station, three_questions(session))
        for seq in (1, 2, 3):
            assert await station.prompt_for(session, seq=seq), f"run {run}: no prompt {seq}"
        shown = [content(e)["request_seq"] for e in station.alice.events
                 if station.is_prompt(e) and content(e).get("session_id") == session]
        assert shown == [1, 2, 3], f"run {run}: the room shows the questions as {shown}"
        await station.drain()
        code, _, _ = await finish(proc)
        assert code == 0
