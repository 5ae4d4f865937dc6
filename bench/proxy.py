"""Benchmark: what `permission-bot acp` costs on the stdio path.

The same raw agent and client are connected directly and through the proxy, alternately,
in one run:

- throughput: the agent writes N ``session/update`` notifications (json.dumps and one
  write per message, like the SDK); the client reads and parses each line (readline +
  json.loads, like the SDK). Messages per second, proxied / direct.
- latency: ping-pong; the agent stamps each notification with CLOCK_MONOTONIC just
  before writing it, the client stamps it on arrival (the clock is system-wide). The
  added latency is the difference of the medians, proxied - direct.

Usage: .venv/bin/python bench/proxy.py [--messages 100000] [--pings 2000] [--rounds 5]
                                      [--tool-call-every 0] [--sdk]
--sdk: the agent and the client on the official ACP SDK (pydantic on every message).
Targets: throughput ratio >= 0.7, added median latency < 0.2 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def proxy_cmd() -> list[str]:
    script = Path(sys.executable).parent / "permission-bot"
    if script.exists():
        return [str(script), "acp"]
    return [sys.executable, "-m", "bot.cli.acp_cmd"]


# ---------------------------------------------------------------- the agent (a child process)


def agent_main() -> int:
    """Answer ``bench/flood`` and ``bench/ping`` requests on stdin; write per message."""
    fd = sys.stdout.fileno()

    def send(obj: dict[str, Any]) -> None:
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    for line in sys.stdin.buffer:
        msg = json.loads(line)
        method = msg.get("method")
        if method == "bench/flood":
            n = int(msg["params"]["n"])
            every = int(msg["params"].get("tool_call_every") or 0)
            for i in range(n):
                if every and i % every == 0:
                    upd: dict[str, Any] = {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": f"call_{i}",
                        "status": "in_progress",
                        "title": f"Step {i}",
                    }
                else:
                    upd = {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": f"chunk {i}: lorem ipsum dolor sit amet"},
                    }
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "bench", "update": upd}})
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})
        elif method == "bench/ping":
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": "bench",
                        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "pong"}},
                        "t": time.monotonic_ns(),
                    },
                }
            )
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
    return 0


def sdk_agent_main() -> int:
    """The same on the official SDK: a prompt "flood N" sends N updates, "ping" one stamped update."""
    from acp import PROTOCOL_VERSION, Agent, InitializeResponse, NewSessionResponse, PromptResponse, run_agent
    from acp import update_agent_message_text as text_update

    class BenchAgent(Agent):
        def on_connect(self, conn: Any) -> None:
            self._conn = conn

        async def initialize(self, protocol_version: int, **kw: Any) -> InitializeResponse:
            return InitializeResponse(protocol_version=PROTOCOL_VERSION)

        async def new_session(self, cwd: str, **kw: Any) -> NewSessionResponse:
            return NewSessionResponse(session_id="bench")

        async def prompt(self, prompt: Any, session_id: str, **kw: Any) -> PromptResponse:
            words = "".join(getattr(b, "text", "") for b in prompt).split()
            if words[0] == "flood":
                for i in range(int(words[1])):
                    await self._conn.session_update(session_id, text_update(f"chunk {i}: lorem ipsum dolor"))
            else:
                await self._conn.session_update(session_id, text_update(f"t={time.monotonic_ns()}"))
            return PromptResponse(stop_reason="end_turn")

    asyncio.run(run_agent(BenchAgent()))
    return 0


class SdkPeer:
    """The client side on the official SDK."""

    def __init__(self) -> None:
        self.count = 0
        self.lat: list[float] = []
        self.ctx: Any = None
        self.conn: Any = None

    async def start(self, proxied: bool) -> SdkPeer:
        from acp import Client, spawn_agent_process

        peer = self

        class Counter(Client):
            async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
                t = getattr(update.content, "text", "")
                if t.startswith("t="):
                    peer.lat.append((time.monotonic_ns() - int(t[2:])) / 1000)
                else:
                    peer.count += 1

        agent = [sys.executable, str(HERE), "--role", "sdk-agent"]
        cmd = [*proxy_cmd(), "--url", "http://127.0.0.1:9", "--", *agent] if proxied else agent
        self.ctx = spawn_agent_process(
            Counter(), cmd[0], *cmd[1:], transport_kwargs={"stderr": asyncio.subprocess.DEVNULL}
        )
        self.conn, _ = await self.ctx.__aenter__()
        await self.conn.initialize(protocol_version=1)
        await self.conn.new_session(cwd="/tmp", mcp_servers=[])
        return self

    async def _prompt(self, text: str) -> None:
        from acp import text_block

        await self.conn.prompt(session_id="bench", prompt=[text_block(text)])

    async def flood(self, n: int, every: int) -> float:
        self.count = 0
        t0 = time.perf_counter()
        await self._prompt(f"flood {n}")
        while self.count < n:
            await asyncio.sleep(0)
        return n / (time.perf_counter() - t0)

    async def pings(self, n: int) -> list[float]:
        self.lat = []
        for _ in range(n):
            await self._prompt("ping")
            while not self.lat or len(self.lat) < _ + 1:
                await asyncio.sleep(0)
        return list(self.lat)

    async def close(self) -> None:
        await self.ctx.__aexit__(None, None, None)


# ---------------------------------------------------------------- the client (this process)


class Peer:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.w = proc.stdin
        self.r = proc.stdout
        self.next_id = 0

    @classmethod
    async def start(cls, proxied: bool) -> Peer:
        agent = [sys.executable, str(HERE), "--role", "agent"]
        cmd = [*proxy_cmd(), "--url", "http://127.0.0.1:9", "--", *agent] if proxied else agent
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=64 << 20,
        )
        return cls(proc)

    async def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.w.write(line.encode() + b"\n")
        await self.w.drain()
        return self.next_id

    async def flood(self, n: int, every: int) -> float:
        """Messages per second for ``n`` notifications (parsed as they come)."""
        t0 = time.perf_counter()
        rid = await self.request("bench/flood", {"n": n, "tool_call_every": every})
        count = 0
        while True:
            msg = json.loads(await self.r.readline())
            if msg.get("id") == rid and "method" not in msg:
                break
            count += 1
        dt = time.perf_counter() - t0
        assert count == n, (count, n)
        return n / dt

    async def pings(self, n: int) -> list[float]:
        """One-way agent -> client latency of ``n`` notifications, in microseconds."""
        out: list[float] = []
        for _ in range(n):
            rid = await self.request("bench/ping", {})
            while True:
                raw = await self.r.readline()
                arrived = time.monotonic_ns()
                msg = json.loads(raw)
                if "t" in msg.get("params", {}):
                    out.append((arrived - msg["params"]["t"]) / 1000)
                if msg.get("id") == rid and "method" not in msg:
                    break
        return out

    async def close(self) -> None:
        self.w.close()
        await self.proc.wait()


def _children_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


async def bench(messages: int, pings: int, rounds: int, every: int, sdk: bool) -> None:
    rates: dict[bool, list[float]] = {False: [], True: []}
    lats: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for proxied in (False, True):
            c0 = _children_cpu()
            p: Peer | SdkPeer = await (SdkPeer().start(proxied) if sdk else Peer.start(proxied))
            await p.pings(50)  # warm up
            rates[proxied].append(await p.flood(messages, every))
            lats[proxied] += await p.pings(pings)
            await p.close()
            cpu[proxied].append(_children_cpu() - c0)  # the agent's, and the proxy's when proxied
    ratios = [pr / dr for dr, pr in zip(rates[False], rates[True], strict=True)]
    d_rate, p_rate = statistics.median(rates[False]), statistics.median(rates[True])
    d_lat, p_lat = statistics.median(lats[False]), statistics.median(lats[True])
    added_ms = (p_lat - d_lat) / 1000
    ratio = statistics.median(ratios)
    per_msg_us = (statistics.median(cpu[True]) - statistics.median(cpu[False])) / (messages + pings + 50) * 1e6
    print(
        f"{'ACP SDK' if sdk else 'raw JSON-RPC'} agent and client, {os.cpu_count()} CPUs; "
        f"{messages} session/update notifications x {rounds} rounds"
        + (f" (every {every}th a tool_call_update)" if every and not sdk else "")
    )
    print(f"throughput direct : {d_rate:12,.0f} msg/s")
    print(f"throughput proxied: {p_rate:12,.0f} msg/s")
    print(
        f"throughput ratio  : {ratio:.2f} median of rounds {', '.join(f'{r:.2f}' for r in ratios)}"
        f"  (target >= 0.7) {'OK' if ratio >= 0.7 else 'MISSED'}"
    )
    print(f"proxy CPU per message: ~{per_msg_us:.1f} us (its start-up included)")
    print(f"latency median one-way (agent -> client), {len(lats[True])} pings each:")
    print(f"  direct {d_lat:.1f} us, proxied {p_lat:.1f} us (p90 {_p90(lats[True]):.1f} us)")
    print(f"  added per message: {added_ms:.3f} ms  (target < 0.2 ms) {'OK' if added_ms < 0.2 else 'MISSED'}")


def _p90(xs: list[float]) -> float:
    return sorted(xs)[int(len(xs) * 0.9)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--role", choices=("bench", "agent", "sdk-agent"), default="bench")
    ap.add_argument("--sdk", action="store_true", help="use the ACP SDK for the agent and the client")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--pings", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tool-call-every", type=int, default=0)
    a = ap.parse_args()
    if a.role == "agent":
        return agent_main()
    if a.role == "sdk-agent":
        return sdk_agent_main()
    asyncio.run(bench(a.messages, a.pings, a.rounds, a.tool_call_every, a.sdk))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
