"""The daemons and commands the tests start, forked from a process that has already imported them.

Every ``permission-bot run`` starts by importing nio, aiohttp, pydantic and the daemon's own modules: 0.5-0.8 s
of CPU, which the suite paid some 140 times a run on two busy cores (``doctor``, ``audit`` and ``e2ee`` alike).
A test worker's stations start them through one server process per worker that has done those imports once:
for each command it forks, and the child becomes the console script (its argv, environment, working folder,
stdin, stdout and stderr are the caller's, handed over on a Unix socket) and runs ``bot.cli.main.entry``, the
function the installed script calls. :func:`spawn` gives a :class:`Forked`, which answers for the child as
``subprocess.Popen`` does (``pid``, ``poll``, ``wait``, ``terminate``, ``kill``, ``returncode``); :func:`run` is
``subprocess.run`` with the output captured. ``PB_TESTS_EXEC=1`` runs the console script instead, and the tests
of the console script itself (its exit codes, its log, the container, the demo) always do.

The server is single-threaded (it forks): a ``selectors`` loop over its listening socket, the SIGCHLD wake-up
pipe (each caller is told its child's exit status) and a pipe from the worker, whose end stops it.
"""

from __future__ import annotations

import array
import gc
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# What the commands the tests run most import before they work (bot.cli.run_cmd imports the rest lazily).
PRELOAD = (
    "bot.cli.main",
    "bot.cli.log_setup",
    "bot.cli.run_cmd",
    "bot.cli.doctor",
    "bot.cli.audit_cmd",
    "bot.cli.e2ee_cmd",
    "bot.cli.state_cmd",
    "bot.cli.permissions",
    "bot.api.app",
    "bot.api.auth",
    "bot.api.limits",
    "bot.service.daemon",
    "bot.service.supervisor",
    "bot.inbox.db",
    "bot.inbox.schema",
)


def _child(server_fds: list[int], req: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become ``permission-bot ARGS`` with the caller's stdio, folder and environment."""
    try:
        signal.set_wakeup_fd(-1)
        for fd in server_fds:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the rest as Python starts (SIGPIPE ignored, SIGINT raises)
        sys.argv = [req["argv0"], *req["args"]]  # the console script's path, as an exec of it gives
        from bot.cli.main import entry

        code = entry()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve(path: str) -> None:
    """The server: preload, listen on ``path``, fork a child per request, tell each caller its exit status."""
    import importlib

    from bot.cli.main import UNUSED_MODULES

    for name in UNUSED_MODULES:  # as bot.cli.main.entry: kept out of every start
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]

    for module in PRELOAD:
        importlib.import_module(module)
    gc.collect()
    gc.freeze()  # what the imports made is never collected: a child's collections skip it (no copy-on-write)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(sys.stdin, selectors.EVENT_READ, "parent")  # the worker's end: EOF when it is gone
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel.register(wake_r, selectors.EVENT_READ, "sigchld")
    children: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in sel.select():
            if key.data == "parent":
                if not os.read(sys.stdin.fileno(), 4096):
                    return
            elif key.data == "accept":
                conn, _ = listener.accept()
                fds = array.array("i")
                msg, anc, _, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(3 * fds.itemsize))
                for level, kind, data in anc:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
                req = json.loads(msg)
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    _child([listener.fileno(), conn.fileno(), wake_r, wake_w], req, list(fds))
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            elif key.data == "sigchld":
                os.read(wake_r, 4096)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            told = children.pop(pid, None)
            if told is not None:
                code = os.waitstatus_to_exitcode(status)
                try:
                    told.sendall(json.dumps({"returncode": code}).encode() + b"\n")
                except OSError:
                    pass
                told.close()


class Forked:
    """A child of the fork server, answered for as ``subprocess.Popen`` answers for its child."""

    def __init__(self, conn: socket.socket, pid: int, args: list[str], buf: bytes = b"") -> None:
        self.conn = conn
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._buf = buf  # what the server sent after the pid line (a quick child's exit status)

    def _read(self, timeout: float | None) -> None:
        if self.returncode is not None:
            return
        self.conn.settimeout(timeout)
        try:
            while b"\n" not in self._buf:
                chunk = self.conn.recv(4096)
                if not chunk:  # the server went away: the child's status is lost with it
                    self.returncode = -signal.SIGKILL
                    return
                self._buf += chunk
        except (TimeoutError, BlockingIOError):
            return
        self.returncode = int(json.loads(self._buf.split(b"\n", 1)[0])["returncode"])
        self.conn.close()

    def poll(self) -> int | None:
        self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._read(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """This worker's fork server, started at its first use."""

    _proc: subprocess.Popen[bytes] | None = None
    _path = ""
    _lock = threading.Lock()

    @classmethod
    def _ensure(cls) -> str:
        """The listening socket's path, the server started first if it is not running (it listens before it
        says ready)."""
        with cls._lock:
            if cls._proc is None or cls._proc.poll() is not None:
                cls._path = str(Path(tempfile.mkdtemp(prefix="pb-fork-")) / "sock")
                cls._proc = subprocess.Popen(
                    [sys.executable, "-m", "tests.support.forkserver", cls._path],
                    stdin=subprocess.PIPE,  # closed when this worker ends: the server ends too
                    stdout=subprocess.PIPE,
                    cwd=Path(__file__).resolve().parents[2],
                    env={k: v for k, v in os.environ.items() if not k.startswith("PERMISSION_BOT_")},
                )
                assert cls._proc.stdout is not None
                if cls._proc.stdout.readline() != b"ready\n":
                    raise RuntimeError("the tests' fork server did not start")
            return cls._path

    @classmethod
    def start(cls, args: list[str], stdin: int, stdout: int, stderr: int, env: dict[str, str]) -> Forked:
        """``permission-bot ARGS`` with these file descriptors and this environment (all of it), here."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(cls._ensure())
        req = json.dumps({"argv0": exe_path(), "args": args, "env": env, "cwd": os.getcwd()}).encode()
        conn.sendmsg([req], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [stdin, stdout, stderr]))])
        reply = b""
        while b"\n" not in reply:
            chunk = conn.recv(4096)
            if not chunk:
                raise RuntimeError("the tests' fork server closed the connection")
            reply += chunk
        line, _, rest = reply.partition(b"\n")  # a child that exits at once: its status may come in the same read
        return Forked(conn, int(json.loads(line)["pid"]), [exe_path(), *args], rest)


def exe_path() -> str:
    """The installed console script next to this interpreter."""
    p = Path(sys.executable).parent / "permission-bot"
    return str(p) if p.exists() else (shutil.which("permission-bot") or str(p))


def forking() -> bool:
    """Whether commands start forked (the default), or by their console script (``PB_TESTS_EXEC=1``)."""
    return os.environ.get("PB_TESTS_EXEC") != "1"


def spawn(args: list[str], *, log: int, env: dict[str, str]) -> subprocess.Popen[bytes] | Forked:
    """``permission-bot ARGS`` in the background, stdout and stderr to ``log``, stdin /dev/null."""
    if not forking():
        return subprocess.Popen([exe_path(), *args], env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    with open(os.devnull, "rb") as null:
        return ForkServer.start(args, null.fileno(), log, log, env)


def run(
    args: list[str], *, timeout: float, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([permission-bot, *args], capture_output=True, text=True)``, forked: stdin is ``input``
    (from a file), else /dev/null."""
    if not forking():
        return subprocess.run(
            [exe_path(), *args], capture_output=True, text=True, timeout=timeout, env=env, input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        with tempfile.TemporaryFile() as stdin:
            stdin.write((input or "").encode())
            stdin.seek(0)
            child = ForkServer.start(args, stdin.fileno(), out_w, err_w, dict(os.environ) if env is None else env)
    finally:
        os.close(out_w)
        os.close(err_w)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    sel = selectors.DefaultSelector()
    for fd in chunks:
        sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                child.kill()
                child.wait()
                raise subprocess.TimeoutExpired(child.args, timeout)
            for key, _ in sel.select(left):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
        code = child.wait(max(deadline - time.monotonic(), 0.1))
    finally:
        sel.close()
        os.close(out_r)
        os.close(err_r)
    text = [b"".join(chunks[fd]).decode().replace("\r\n", "\n").replace("\r", "\n") for fd in (out_r, err_r)]
    return subprocess.CompletedProcess(child.args, code, text[0], text[1])


if __name__ == "__main__":
    serve(sys.argv[1])
