"""The relay: bytes pass unchanged both ways (unit and through real processes), exit codes."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.door.relay import FdSink, LineRelay, read_fd
from tests.agents.session import ECHO_AGENT, PY, proxy_cmd

CLOSED_URL = "http://127.0.0.1:9"


class ListSink:
    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.held = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out.append(bytes(data))

    def hold(self) -> None:
        self.held += 1

    def release(self) -> None:
        self.held -= 1


class DropMarked:
    """Inspects lines holding MARK; drops those that also hold DROP."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def wants(self, data: bytes | bytearray) -> bool:
        return b"MARK" in data

    def inspect(self, line: bytes | bytearray) -> bool:
        self.seen.append(bytes(line))
        return b"DROP" not in line


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


line_st = st.one_of(
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([b"MARK keep", b"MARK DROP", b'{"a": "MARK"}', b"", b"\r", b"DROP"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(line_st, max_size=30), st.booleans(), st.lists(st.integers(0, 10_000), max_size=12))
def test_relay_passes_all_but_dropped_lines_for_any_chunking(
    lines: list[bytes], final_newline: bool, cuts: list[int]
) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    sink = ListSink()
    filt = DropMarked()
    relay = LineRelay(sink, filt, inspect_limit=1 << 20)
    for chunk in chunked(data, cuts):
        relay.feed(chunk)
    relay.finish()
    pieces = data.split(b"\n")
    whole = [p + b"\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    expected = b"".join(p for p in whole if not (b"MARK" in p and b"DROP" in p))
    assert b"".join(sink.out) == expected
    assert filt.seen == [p for p in whole if b"MARK" in p]
    assert sink.held == 0


def test_oversize_line_streams_uninspected_and_injected_lines_stay_whole() -> None:
    big = b"MARK " + b"x" * 500_000 + b" DROP\n"  # would be dropped, but it is too long to inspect
    r, w = os.pipe()
    sink = FdSink(w, owned=True)
    sizes: list[int] = []
    filt = DropMarked()
    relay = LineRelay(sink, filt, inspect_limit=1000, on_oversize=sizes.append)
    got = bytearray()
    reader = threading.Thread(target=lambda: got.extend(iter_read(r)))
    reader.start()
    injector = threading.Thread(target=lambda: [sink.write(b"INJECTED\n") for _ in range(50)])
    chunks = [big[i : i + 700] for i in range(0, len(big), 700)] + [b"MARK DROP\nafter\n"]
    injector.start()
    for c in chunks:
        relay.feed(c)
    relay.finish()
    injector.join()
    sink.close()
    reader.join()
    assert bytes(got).replace(b"INJECTED\n", b"") == big + b"after\n"
    assert got.count(b"INJECTED\n") == 50
    assert big in got  # never split by an injected line
    assert sizes and filt.seen == [b"MARK DROP\n"]


def iter_read(fd: int) -> bytes:
    buf = bytearray()
    while chunk := read_fd(fd):
        buf += chunk
    os.close(fd)
    return bytes(buf)


def _payloads(tmp: Path) -> tuple[bytes, bytes]:
    rnd = random.Random(7)
    big = "".join(rnd.choice("abcdefghij \u00e9\u4e2d") for _ in range(1000))
    up_lines = [
        # (an initialize without elicitation in form and URL mode is given it: bot.acp.proxy.advertise_elicitation)
        b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
        b'"clientCapabilities":{"elicitation":{"form":{},"url":{}}}}}',
        b'{ "jsonrpc" : "2.0", "method" : "session/cancel", "params" : { "sessionId" : "s1" } }',
        b"this is not json, but it has cancel in it",
        b'{"jsonrpc":"2.0","id":"x","result":{"outcome":{"outcome":"cancelled"}}}',
        b"\xff\xfe invalid utf-8 \x00 bytes",
        b"",
        b'{"a": 1}\r',
        json.dumps(
            {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"text": big}}, ensure_ascii=False
        ).encode(),
        # a 60 MB line: a JSON prompt that also mentions "cancel", so the proxy parses it whole
        b'{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"cancel":"' + b"y" * (60 * 1024 * 1024) + b'"}}',
        b"[1, 2, 3]",
    ]
    up = b"\n".join(up_lines) + b"\n" + b'{"jsonrpc":"2.0","method":"partial/at/eof"'
    down_lines = [
        b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}',
        b'{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": '
        b'{"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "T", "rawInput": {"command": "ls"}}}}',
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
        b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"tool_call request_permission"}}}}',
        b'{"jsonrpc":"2.0","method":"session/request_permission","params":{"note":"a notification: relayed"}}',
        b"not json at all: request_permission tool_call",
        b"\x00\x01\x02",
        b"",
        b"{'single': 'quotes'}",
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
        b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
        + b"z" * (60 * 1024 * 1024)
        + b' tool_call"}}}}',
        json.dumps({"text": big}, ensure_ascii=False).encode() + b"\r",
    ]
    down = b"\n".join(down_lines) + b"\n" + b"tail without newline"
    return up, down


def test_relay_is_byte_faithful_both_ways_with_60mb_lines(tmp_path: Path) -> None:
    up, down = _payloads(tmp_path)
    emit = tmp_path / "emit.bin"
    emit.write_bytes(down)
    record = tmp_path / "record.bin"
    cmd = [
        *proxy_cmd(),
        "--url",
        CLOSED_URL,
        "--",
        PY,
        ECHO_AGENT,
        "--record",
        str(record),
        "--emit",
        str(emit),
        "--exit-code",
        "7",
    ]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin and proc.stdout and proc.stderr
    stdin = proc.stdin

    def feed() -> None:
        rnd = random.Random(3)
        pos = 0
        while pos < len(up):
            n = rnd.choice([1, 3, 50, 4096, 100_000, 3_000_000])
            stdin.write(up[pos : pos + n])
            stdin.flush()
            pos += n
        stdin.close()

    err: list[bytes] = []
    feeder = threading.Thread(target=feed)
    errs = threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else b""))
    feeder.start()
    errs.start()
    got = proc.stdout.read()
    rc = proc.wait(120)
    feeder.join()
    errs.join()
    assert got == down, f"stdout differs: {len(got)} vs {len(down)} bytes"
    # byte for byte, but initialize: the proxy advertises elicitation to the agent (it answers it from the room)
    init = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
    told = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
            b'"clientCapabilities":{"elicitation":{"form":{},"url":{}}}}}')
    assert record.read_bytes() == up.replace(init, told, 1)
    assert rc == 7
    for line in err[0].decode().splitlines():
        assert line.startswith("timestamp=") and " level=" in line, line


def test_exit_code_and_usage_errors(tmp_path: Path) -> None:
    base = [*proxy_cmd(), "--url", CLOSED_URL]
    r = subprocess.run(
        [*base, "--", PY, ECHO_AGENT, "--echo", "--exit-code", "42"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )  # /dev/null: EOF reaches the agent
    assert r.returncode == 42 and r.stdout == b""
    r = subprocess.run(
        [*base, "--", PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 128 + 9
    r = subprocess.run([*base, "--", str(tmp_path / "no-such-agent")], capture_output=True, timeout=60)
    assert r.returncode == 127 and b"agent_command_not_found" in r.stderr and r.stdout == b""
    r = subprocess.run(base, capture_output=True, timeout=60)
    assert r.returncode == 2 and b"no agent command" in r.stderr
    r = subprocess.run([*base, "--connect-timeout", "soon", "--", PY, "-c", "pass"], capture_output=True, timeout=60)
    assert r.returncode == 2 and b"connect-timeout" in r.stderr


def test_stdin_from_a_file_and_sigterm(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes(b"line one\nline two\n")
    out = tmp_path / "out.txt"
    with open(src, "rb") as i, open(out, "wb") as o:
        r = subprocess.run(
            [*proxy_cmd(), "--url", CLOSED_URL, "--", PY, ECHO_AGENT, "--echo"],
            stdin=i,
            stdout=o,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    assert r.returncode == 0 and out.read_bytes() == b"line one\nline two\n"
    # SIGTERM: the agent is terminated and its code (143) comes back
    p = subprocess.Popen(
        [*proxy_cmd(), "--url", CLOSED_URL, "--", PY, "-c", "import time; time.sleep(60)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert p.stderr is not None
        first = p.stderr.readline()  # agent_started: the handlers are in place
        assert b"agent_started" in first
        p.terminate()
        assert p.wait(20) == 128 + 15
    finally:
        if p.poll() is None:
            p.kill()


def test_agent_exit_is_noticed_while_a_child_holds_its_stdout() -> None:
    # the background sleep keeps the agent's stdout (and our stderr) open: wait for the proxy only
    p = subprocess.Popen(
        [*proxy_cmd(), "--url", CLOSED_URL, "--", "sh", "-c", "exec 2>/dev/null; sleep 30 & exit 4"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert p.wait(15) == 4
    finally:
        if p.poll() is None:
            p.kill()


def test_agent_that_closes_stdout_first_still_gets_the_client_eof(tmp_path: Path) -> None:
    emit = tmp_path / "emit.bin"
    emit.write_bytes(b'{"jsonrpc":"2.0","method":"bye"}\n')
    record = tmp_path / "record.bin"
    p = subprocess.Popen(
        [
            *proxy_cmd(),
            "--url",
            CLOSED_URL,
            "--",
            PY,
            ECHO_AGENT,
            "--record",
            str(record),
            "--emit",
            str(emit),
            "--exit-code",
            "9",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert p.stdin and p.stdout
    try:
        p.stdin.write(b"first\n")
        p.stdin.flush()
        assert p.stdout.readline() == b'{"jsonrpc":"2.0","method":"bye"}\n'
        time.sleep(1.0)  # the agent's stdout is closed by now; it still reads
        p.stdin.write(b"second\n")
        p.stdin.close()
        assert p.wait(20) == 9
        assert record.read_bytes() == b"first\nsecond\n"
    finally:
        if p.poll() is None:
            p.kill()
