"""The proxy's pure parts: which lines are parsed, what the agent is told, what a submission keeps."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.acp.filters import FromAgent, FromClient, loads, may_matter
from bot.door import outcomes
from bot.door.ids import id_key
from bot.door.relay import LineRelay
from bot.inbox.store import Inbox
from bot.inbox.submission import SubmissionError, parse_submission
from tests.support.station import request_body

WORDS = (b"request_permission", b"cancel")


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        (b'{"jsonrpc":"2.0","method":"session/update","params":{}}', False),
        (b'{"method":"session/request_permission"}', True),
        (b'{"method":"session/request_permissio\\u006e"}', True),  # an escape may spell anything
        (b'{"m\\u0065thod":"x"}', True),
        (b'{"method":"session/canc\\u0065l"}', True),
        (b'{"text":"plain words only"}', False),
    ],
)
def test_may_matter(line: bytes, parsed: bool) -> None:
    assert may_matter(line, WORDS) is parsed


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["session/request_permission", "session/cancel"]), st.data())
def test_any_spelling_of_a_method_is_parsed(method: str, data: st.DataObject) -> None:
    """Whatever characters are written as JSON escapes, the line is parsed and names the method."""
    escaped = data.draw(st.lists(st.booleans(), min_size=len(method), max_size=len(method)))
    spelt = "".join(f"\\u{ord(c):04x}" if e else c for c, e in zip(method, escaped, strict=True))
    line = ('{"jsonrpc":"2.0","method":"' + spelt + '","params":{}}').encode()
    assert may_matter(line, WORDS)
    msg = loads(line)
    assert msg is not None and msg["method"] == method


def test_loads_and_id_key() -> None:
    assert loads(b"[1]") is None and loads(b"not json") is None and loads(b"{}") == {}
    assert id_key(1) != id_key("1") and id_key(True) is None and id_key(1) != id_key(1.0)
    assert id_key([1]) is None and id_key(None) is None


def test_after_cancel_gives_the_answer_that_came_first() -> None:
    cancelled_rec = {"state": "cancelled", "outcome": {"option_id": None}}
    approved = {"state": "resolved", "outcome": {"option_id": "allow_once", "feedback": None}}
    assert outcomes.after_cancel(cancelled_rec, None) == outcomes.cancelled()
    assert outcomes.after_cancel(None, approved) == {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    assert outcomes.after_cancel(None, None) == outcomes.cancelled()  # unknown to the daemon
    assert outcomes.after_cancel(None, {"state": "pending"}) == outcomes.cancelled()
    err = outcomes.withdrawn_error(9)
    assert err == {"jsonrpc": "2.0", "id": 9, "error": {"code": -32800, "message": "Request cancelled"}}
    assert outcomes.selected("a", "why")["_meta"] == {"feedback": "why"}


class _FakeProxy:
    """What the filters read and call on the proxy, recorded."""

    def __init__(self) -> None:
        self.cwd_by_rpc: dict[Any, str] = {}
        self.cwd_by_session: dict[str, str] = {}
        self.forwarded: dict[str, Any] = {}
        self.withdrawn_fwd: set[str] = set()
        self.taken: list[Any] = []
        self.cancelled: list[str] = []
        self.sessions: list[str] = []  # the sessions the proxy claims
        self.elicitations: dict[int, Any] = {}  # the forms the proxy holds (filters read whether any)

        class _Cfg:
            cancel_budget = 1.0

        self.cfg = _Cfg()

        class _Cache:
            def observe(self, *_a: Any) -> None:
                pass

        self.cache = _Cache()

    def on_permission_request(self, msg: Any) -> None:
        self.taken.append(msg["id"])

    async def on_cancel_request(self, params: Any) -> bool:
        return bool(isinstance(params, dict) and params.get("requestId") in self.taken)

    async def cancel_session(self, sid: str) -> None:
        self.cancelled.append(sid)

    def on_session(self, sid: str) -> None:
        self.sessions.append(sid)


async def test_filters_take_handled_lines_and_note_working_directories() -> None:
    loop = asyncio.get_running_loop()
    p = _FakeProxy()
    agent, client = FromAgent(p, loop), FromClient(p, loop)  # type: ignore[arg-type]

    def run(f: Any, line: bytes) -> bool:
        return bool(f.inspect(line))

    req = b'{"jsonrpc":"2.0","id":7,"method":"session/request_permissio\\u006e","params":{"sessionId":"s"}}'
    assert agent.wants(req) and not await asyncio.to_thread(run, agent, req)
    await asyncio.sleep(0)
    assert p.taken == [7]
    cancel_req = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}'
    assert not await asyncio.to_thread(run, agent, cancel_req)  # ours: taken
    other = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":8}}'
    assert await asyncio.to_thread(run, agent, other)  # not ours: relayed
    esc_cancel = b'{"jsonrpc":"2.0","method":"session/canc\\u0065l","params":{"sessionId":"s"}}'
    assert client.wants(esc_cancel) and await asyncio.to_thread(run, client, esc_cancel)
    assert p.cancelled == ["s"]
    new = b'{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}'
    assert client.wants(new) and await asyncio.to_thread(run, client, new)
    answer = b'{"jsonrpc":"2.0","id":3,"result":{"sessionId":"s9"}}'
    assert agent.wants(answer) and await asyncio.to_thread(run, agent, answer)
    assert p.cwd_by_session == {"s9": "/w"} and p.cwd_by_rpc == {}
    load = b'{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"cwd":"/v","sessionId":"s8"}}'
    assert await asyncio.to_thread(run, client, load)
    assert p.cwd_by_session["s8"] == "/v"
    await asyncio.sleep(0)
    assert p.sessions == ["s9", "s8"]  # each session the proxy relays is claimed in the daemon


class _Ordered:
    """A filter that records, when it inspects a line, what the sink had already got."""

    def __init__(self, sink: list[bytes]) -> None:
        self.sink = sink
        self.before: list[list[bytes]] = []

    def wants(self, data: bytes | bytearray) -> bool:
        return b"X" in data

    def inspect(self, line: bytes | bytearray) -> bool:
        self.before.append(list(self.sink))
        return True


def test_relay_writes_earlier_lines_before_inspecting() -> None:
    out: list[bytes] = []

    class Sink:
        def write(self, data: bytes | bytearray | memoryview) -> None:
            out.append(bytes(data))

        def hold(self) -> None: ...

        def release(self) -> None: ...

    f = _Ordered(out)
    LineRelay(Sink(), f).feed(b"a\nb\nX1\nc\nX2\n")
    assert [b"".join(x) for x in f.before] == [b"a\nb\n", b"a\nb\nX1\nc\n"]
    assert b"".join(out) == b"a\nb\nX1\nc\nX2\n"


def test_submission_keeps_cwd_out_of_the_digest() -> None:
    body = request_body("s")
    plain = parse_submission(body)
    with_cwd = parse_submission({**body, "cwd": "/srv/app", "label": "l"})
    assert with_cwd.cwd == "/srv/app" and plain.cwd is None
    assert with_cwd.digest == plain.digest and "cwd" not in with_cwd.params
    with pytest.raises(SubmissionError, match="cwd"):
        parse_submission({**body, "cwd": 5})
    with pytest.raises(SubmissionError, match="cwd"):
        parse_submission({**body, "cwd": "x" * 5000})


async def test_record_keeps_cwd(sqlite_inbox: Inbox) -> None:
    rec, _ = await sqlite_inbox.submit(parse_submission({**request_body("s"), "cwd": "/srv/app"}), 1.0, 60)
    assert rec.cwd == "/srv/app" and rec.to_api()["cwd"] == "/srv/app"
    got = await sqlite_inbox.get(rec.id)
    assert got is not None and got.cwd == "/srv/app"
    assert json.loads(json.dumps(got.to_api()))["cwd"] == "/srv/app"


async def test_filters_take_elicitations_and_advertise_elicitation() -> None:
    loop = asyncio.get_running_loop()
    p = _FakeProxy()
    got: list[Any] = []
    p.on_elicitation = lambda msg: got.append(msg["id"])  # type: ignore[attr-defined]
    written: list[bytes] = []

    class _Sink:
        def write(self, data: bytes) -> None:
            written.append(data)

    p.to_agent = _Sink()  # type: ignore[attr-defined]
    agent, client = FromAgent(p, loop), FromClient(p, loop)  # type: ignore[arg-type]
    esc = b'{"jsonrpc":"2.0","id":5,"method":"elicitation\\u002fcreate","params":{"mode":"form"}}'
    assert agent.wants(esc) and not await asyncio.to_thread(agent.inspect, esc)
    note = b'{"jsonrpc":"2.0","method":"elicitation/create","params":{"mode":"form"}}'  # no id: not a request
    assert await asyncio.to_thread(agent.inspect, note)
    await asyncio.sleep(0)
    assert got == [5]
    init = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
            b'"clientCapabilities":{"fs":{"readTextFile":true},"elicitation":{"form":{"x":1}}}}}')
    assert client.wants(init) and not await asyncio.to_thread(client.inspect, init)
    (line,) = written
    sent = json.loads(line)
    assert sent["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": True}, "elicitation": {"form": {"x": 1}, "url": {}}}
    assert p.client_elicitation == frozenset({"form"})  # type: ignore[attr-defined]


async def test_an_answer_read_right_after_its_tied_form_still_cancels_the_form() -> None:
    """The agent's form tied to the client's request 3, then its answer to request 3, both read by the relay
    thread before the loop registered the form: the form is still told its request was answered."""
    loop = asyncio.get_running_loop()
    p = _FakeProxy()
    answered: list[Any] = []
    p.on_elicitation = lambda msg: p.elicitations.update({1: msg})  # type: ignore[attr-defined]
    p.on_agent_answered = answered.append  # type: ignore[attr-defined]
    agent = FromAgent(p, loop)  # type: ignore[arg-type]
    form = b'{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"requestId":3,"mode":"form"}}'
    reply = b'{"jsonrpc":"2.0","id":3,"result":{"sessionId":"s1"}}'

    # both lines read before the loop runs the form's registration (here: the loop is busy reading them)
    got = [agent.inspect(line) if agent.wants(line) else True for line in (form, reply)]
    assert got == [False, True]  # the form taken, the answer relayed
    await asyncio.sleep(0)
    assert answered == [3]
    p.elicitations.clear()  # the form over: the agent's other answers are not parsed for it any more
    assert not agent.wants(b'{"jsonrpc":"2.0","id":4,"result":{}}')
