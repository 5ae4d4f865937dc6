"""Issue 24, invariant 3 (only the bot's own events are prompts, whatever they look like), against the real
Synapse: bob (in the room, not an answerer) posts a fake prompt spelled so that a plain substring check misses
it, between the real `rm -rf` prompt and alice's plain `1`. The `1` settles nothing: the bot asks which."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.human import content
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e

DANGER = {"title": "Clean up", "command": "rm -rf ~/work ~/.ssh"}
HARMLESS = "ls -la /tmp"


def _msg(body: str, html: str | None = None, msgtype: str = "m.text") -> dict[str, Any]:
    c: dict[str, Any] = {"msgtype": msgtype, "body": body}
    if html is not None:
        c.update({"format": "org.matrix.custom.html", "formatted_body": html})
    return c


async def _copy_with_cyrillic_e(station: Station, prompt: dict[str, Any]) -> None:
    """The whole prompt, copied as plain text (no v2 key), with a Cyrillic е in its banner."""
    c = content(prompt)
    await station.bob.send(_msg(c["body"].replace("Permission", "P\u0435rmission", 1),
                                c["formatted_body"].replace("Permission", "P\u0435rmission", 1)))


async def _edited_into_a_fake(station: Station, prompt: dict[str, Any]) -> None:
    """A harmless line, then its edit into a fake: a reader sees the fake in its place."""
    first = await station.bob.text("lgtm")
    fake = f"Permis\u200bsion needed: {HARMLESS}"
    await station.bob.send({**_msg(f"* {fake}"), "m.new_content": _msg(fake),
                            "m.relates_to": {"rel_type": "m.replace", "event_id": first}})


async def _in_the_prompts_thread(station: Station, prompt: dict[str, Any]) -> None:
    """A fake in the real prompt's thread: the main timeline shows it as the thread's summary."""
    await station.bob.text(f"P\u0435rmission needed: {HARMLESS}", thread=prompt["event_id"])


def _sends(c: dict[str, Any]) -> Callable[[Station, dict[str, Any]], Awaitable[None]]:
    async def send(station: Station, prompt: dict[str, Any]) -> None:
        await station.bob.send(c)
    return send


FAKES = {
    "cyrillic_e": _sends(_msg(f"P\u0435rmission needed: {HARMLESS}")),
    "zero_width_space": _sends(_msg(f"Permis\u200bsion needed: {HARMLESS}")),
    "html_only": _sends(_msg(f"done: {HARMLESS}", f"Permission <span></span>needed: <code>{HARMLESS}</code>")),
    "fullwidth": _sends(_msg(f"\uff30\uff45\uff52\uff4d\uff49\uff53\uff53\uff49\uff4f\uff4e needed: {HARMLESS}")),
    "bidi_override": _sends(_msg(f"\u202e{HARMLESS[::-1]} :DEDEEN NOISSIMREP")),  # shown: PERMISSION NEEDED: ls…
    "notice": _sends(_msg(f"P\u0435rmission needed: {HARMLESS}", msgtype="m.notice")),
    "options_only": _sends(_msg(f"{HARMLESS}? 1\ufe0f\u20e3 Sure")),
    "copy_with_cyrillic_e": _copy_with_cyrillic_e,
    "edit": _edited_into_a_fake,
    "thread": _in_the_prompts_thread,
}


@pytest.mark.parametrize("fake", sorted(FAKES))
async def test_a_disguised_fake_prompt_makes_the_bot_ask(station: Station, sid: str, fake: str) -> None:
    """bob's look-alike sits between the real prompt and alice's plain `1`: nothing is settled, the bot asks."""
    await station.drain()
    rec, prompt = await station.submit(request_body(sid, **DANGER))
    await FAKES[fake](station, prompt)
    mark = station.alice.mark()
    await station.alice.text("1")
    notice = await station.notice_after(mark, contains="Which request do you mean?")
    assert notice, "the bot did not ask which request the `1` meant"
    assert rec["id"] in content(notice)["body"]
    got = await station.record(rec["id"], 1)
    assert got["state"] == "pending", f"the plain `1` under bob's {fake} fake settled the real rm -rf prompt"
    await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"})
    assert await station.edit_of(prompt["event_id"])


async def test_harmless_chat_in_between_keeps_the_binding(station: Station, sid: str) -> None:
    """A chat line from bob that no reader takes for a prompt: alice's plain `1` still answers the prompt."""
    await station.drain()
    rec, prompt = await station.submit(request_body(sid, **DANGER))
    await station.bob.text("lgtm, looking at the logs")
    await station.alice.text("1")
    got = await station.record(rec["id"])
    assert got["state"] == "resolved", got
    assert got["outcome"]["option_id"] == "allow_once" and got["outcome"]["answered_by"] == station.alice.user_id
    assert await station.edit_of(prompt["event_id"])
