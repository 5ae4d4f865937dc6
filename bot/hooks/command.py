"""`permission-bot hook claude-code|codex`: one hook input on stdin, the decision on stdout.

It posts the input to the daemon's ``/hooks/{cli}`` route (the daemon builds the prompt and
holds the request) and prints what comes back. For a Write it first reads the file on disk, so
the room sees a real diff, when :mod:`bot.hooks.preview_files` allows (else its size and
SHA-256). A daemon busy (429, 503) is retried for ``BUSY_RETRY`` seconds. When the hook is told
to stop (SIGTERM, SIGINT, SIGHUP), its parent goes away or stops reading stdout, it exits and its
connection closes; the daemon then withdraws the request. A SIGKILL closes the connection too.

Fail safe: on any error it never allows. A decision counts only for the record it names: the
answer's ``Permission-Bot-Digest`` must be the digest of the request this input makes (else an error).
``fallback="ask"`` prints nothing (the CLI asks as usual); ``"deny"`` prints an explicit deny. Either
way one line goes to stderr and it exits 0, except a deny for an input whose event is unknown, which
exits 2 (a deny for Codex and for Claude Code's PreToolUse).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import sys
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from bot.hooks.clis import NAMES as CLI_NAMES
from bot.hooks.models import MAX_INPUT, Cli, HookInput, HookInputError, event_of, parse_hook_input
from bot.hooks.output import failure_notice, reply
from bot.hooks.preview_files import read_before
from bot.hooks.snippet import default_token_file
from bot.hooks.translate import build_submissions, form_digest
from bot.util.aio import on_signals
from bot.util.digest import HEADER, submission_digest
from bot.util.discovery import TOKEN_ENV, TokenFileError, discover, is_http_url

Fallback = Literal["ask", "deny"]
TOKEN_FILE_ENV = "PERMISSION_BOT_TOKEN_FILE"  # a token file named by the environment is never previewed
BUSY_RETRY = 60.0  # seconds to keep retrying a daemon that answers 429/503 (busy)


class HookFailure(Exception):
    """Anything that keeps the hook from a decision; the message is the stderr line."""


@dataclass
class HookArgs:
    cli: Cli
    url: str | None = None
    token_file: str | None = None
    fallback: Fallback = "ask"
    connect_timeout: float = 5.0


def credentials(url: str | None, token_file: str | None) -> tuple[str, str | None]:
    """The daemon URL and the agent token: ``--token-file``, else ``$PERMISSION_BOT_TOKEN``, else the default
    token file (``~/.config/permission-bot/agent-token``) when it exists; never argv."""
    if token_file is None and not os.environ.get(TOKEN_ENV):  # the file print-config names by default
        default = default_token_file(os.environ)
        token_file = default if os.path.isfile(default) else None
    try:
        base, token = discover(url, None, token_file)
    except TokenFileError as e:
        raise HookFailure(str(e)) from None
    if not is_http_url(base):
        raise HookFailure(f"the daemon URL must look like http://HOST:PORT (got {base[:80]!r})")
    if token is None:
        raise HookFailure(f"no agent token: pass --token-file PATH (as print-config prints it), set {TOKEN_ENV}, "
                          f"or put it in {default_token_file(os.environ)}")
    return base, token


def read_input(fd: int, limit: int = MAX_INPUT) -> bytes:
    """Read one hook input: up to EOF, or as soon as a whole JSON value has arrived (or ``limit``)."""
    buf = b""
    decoder = json.JSONDecoder()
    while len(buf) <= limit:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        try:
            decoder.raw_decode(buf.decode("utf-8").lstrip())
        except (ValueError, RecursionError):
            continue
        break
    return buf


def prepare(cli: Cli, raw: bytes, secret_files: tuple[str, ...] = ()) -> tuple[HookInput, dict[str, Any]]:
    """Parse stdin; the validated input and the body to post (with the old file for a Write)."""
    if len(raw) > MAX_INPUT:
        raise HookInputError(f"hook input: larger than {MAX_INPUT} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise HookInputError("hook input: not valid JSON") from None
    inp = parse_hook_input(cli, data)
    body = dict(data)
    body.pop("_permission_bot", None)
    if inp.tool_name == "Write":
        b = read_before(str(inp.tool_input.get("file_path") or ""), inp.cwd, secret_files)
        body["_permission_bot"] = {"write_before": b.text, "write_before_known": b.known, "write_withheld": b.withheld}
    return inp, body


async def _post(url: str, token: str | None, body: dict[str, Any], connect_timeout: float) -> tuple[Any, str | None]:
    """The daemon's answer (a JSON object) and its digest header; HookFailure otherwise."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + connect_timeout
    busy_until = loop.time() + BUSY_RETRY
    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as http:
        while True:
            try:
                async with http.post(url, json=body, headers=headers) as r:
                    raw = await r.read()
                    status = r.status
                    digest = r.headers.get(HEADER)
                    retry_after = r.headers.get("Retry-After", "")
                if status in (429, 503) and loop.time() < busy_until:  # refused for load, nothing stored
                    wait = float(retry_after) if retry_after.isascii() and retry_after.isdigit() else 2.0
                    await asyncio.sleep(min(5.0, max(0.5, wait)))
                    continue
                break
            except aiohttp.ClientConnectorError as e:  # nothing sent yet: safe to try again
                if loop.time() >= deadline:
                    raise HookFailure(f"daemon unreachable at {url} ({e.os_error.strerror or e})") from None
                await asyncio.sleep(0.25)
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                raise HookFailure(f"daemon connection lost ({type(e).__name__})") from None
    try:
        parsed = json.loads(raw) if raw.strip() else None
    except ValueError:
        parsed = None
    if status != 200:
        reason = parsed.get("reason") if isinstance(parsed, dict) else None
        raise HookFailure(f"daemon refused the hook: HTTP {status}" + (f": {reason}" if reason else ""))
    if not isinstance(parsed, dict):
        raise HookFailure("daemon answered with something that is not a JSON object")
    return parsed, digest


def expected_digest(cli: Cli, body: dict[str, Any]) -> str | None:
    """The digest of the request the daemon makes of ``body`` (it builds the same submissions: several for a
    question form, whose decision is bound to all of them, bot.hooks.translate.form_digest)."""
    try:
        return form_digest([submission_digest(b) for b in build_submissions(cli, parse_hook_input(cli, body), key="")])
    except HookInputError:
        return None


def _watch_stop(stop: asyncio.Event) -> list[asyncio.Task[None]]:
    """Set ``stop`` on SIGTERM/SIGINT/SIGHUP, when the parent goes or stdout's reader closes."""
    on_signals(lambda _sig: stop.set(), (signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
    parent = os.getppid()

    async def watch() -> None:
        poller = select.poll()
        try:
            poller.register(sys.stdout.fileno(), 0)  # only POLLERR/POLLHUP, always reported
        except (OSError, ValueError):
            poller = None  # type: ignore[assignment]
        while not stop.is_set():
            hup = poller is not None and any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
            if os.getppid() != parent or hup:
                stop.set()
            await asyncio.sleep(0.2)

    return [asyncio.ensure_future(watch())]


async def ask(args: HookArgs, body: dict[str, Any]) -> dict[str, Any] | None:
    """Post ``body`` and wait; the decision or None; HookFailure on errors (a decision for another request than
    ``body`` makes is never relayed), None when told to stop."""
    url, token = credentials(args.url, args.token_file)
    stop = asyncio.Event()
    watchers = _watch_stop(stop)
    post = asyncio.ensure_future(_post(f"{url}/hooks/{args.cli}", token, body, args.connect_timeout))
    halt = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({post, halt}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (halt, *watchers):
            t.cancel()
    if not post.done():
        post.cancel()  # closes the connection: the daemon withdraws the request
        await asyncio.gather(post, return_exceptions=True)
        return None
    out: dict[str, Any]
    out, digest = post.result()
    if not out:
        return None
    want = expected_digest(args.cli, body)
    if want is None or digest != want:
        raise HookFailure("the daemon's decision is for another request (its digest is not this input's)")
    return out


def run(args: HookArgs, raw: bytes, out: Any, err: Any) -> int:
    """One hook run: returns the exit code; writes the decision to ``out``, one line to ``err`` on errors."""
    event: str | None = None
    try:
        with contextlib.suppress(ValueError, UnicodeDecodeError, RecursionError):
            event = event_of(json.loads(raw))
        named = (args.token_file, os.environ.get(TOKEN_FILE_ENV), default_token_file(os.environ))
        secrets_ = tuple(p for p in named if p)
        _, body = prepare(args.cli, raw, secrets_)
        decision = asyncio.run(ask(args, body))
    except (HookFailure, HookInputError) as e:
        return _fail(args, str(e), event, out, err)
    if decision is not None:
        with contextlib.suppress(OSError):  # nobody reads any more: the CLI went on without us
            out.write(json.dumps(decision) + "\n")
            out.flush()
    return 0


def _fail(args: HookArgs, why: str, event: str | None, out: Any, err: Any) -> int:
    if args.fallback == "ask":
        err.write(f"permission-bot hook: {why}; no decision, so {CLI_NAMES[args.cli]} asks as usual\n")
        if (notice := failure_notice(args.cli, why)) is not None:
            with contextlib.suppress(OSError):
                out.write(json.dumps(notice) + "\n")
                out.flush()
        return 0
    err.write(f"permission-bot hook: {why}; denied (--fallback deny)\n")
    if event is None:
        return 2
    out.write(json.dumps(reply(event, "deny", f"permission-bot: {why}; denied.")) + "\n")
    out.flush()
    return 0
