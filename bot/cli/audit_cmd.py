"""`permission-bot audit`: the ledger of settlements (bot.inbox.ledger), exported and verified.

    export [--since TIME] [--room NAME] [--format jsonl|csv]   the entries, streamed (constant memory)
    verify [FILE|-] [--against-room] [--partial]               recompute the chain (bot.events.ledger)

Both read the configured state (SQLite under ``[state] path`` or ``[state] database``) without changing it.
``verify`` exits 0 when the chain is intact, 1 naming the first bad or missing seq, 2 on a bad config or
argument. ``--against-room`` also compares the chain with the checkpoints the bot posted in its rooms.
``--partial`` (a FILE exported with ``--since`` or ``--room``): it may start mid-chain and have gaps; each
entry's hash and the link between consecutive seqs are checked, a gap is reported as not checkable.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, TextIO

from bot.cli.flags import fail

if TYPE_CHECKING:
    from bot.config import Config
    from bot.events.checkpoints import Seen
    from bot.events.ledger import Checker
    from bot.inbox.store import Inbox

EXIT_BAD, EXIT_USAGE = 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="audit_command", metavar="ACTION", required=True)
    exp = sub.add_parser("export", help="the ledger's entries as JSON lines or CSV")
    exp.add_argument("--since", metavar="TIME", help="ISO 8601, or an age: 2h, 7d")
    exp.add_argument("--room", metavar="NAME", help="only this station room's entries")
    exp.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    exp.add_argument("--config", default="config.toml")
    ver = sub.add_parser("verify", help="recompute the ledger's chain (exit 1 naming the first bad or missing seq)")
    ver.add_argument("file", nargs="?", help="an export (JSON lines), or - for stdin (default: the configured state)")
    ver.add_argument("--against-room", action="store_true", help="also check the checkpoints posted in the rooms")
    ver.add_argument(
        "--partial",
        action="store_true",
        help="FILE is an export filtered by --since or --room: it may start mid-chain and have gaps (not checkable)",
    )
    ver.add_argument("--config", default="config.toml")


async def _opened(cfg: Config) -> Inbox:
    from bot.inbox.store import Inbox
    from bot.service.state_db import new_holder, state_database

    inbox = Inbox(state_database(cfg, new_holder()))
    await inbox.open_read_only()
    return inbox


def _cell(v: object) -> str:
    """An entry's field as a CSV cell: a list space-separated, None empty."""
    return " ".join(str(x) for x in v) if isinstance(v, list) else "" if v is None else str(v)


async def export(cfg: Config, since: float | None, room: str | None, fmt: str, out: TextIO) -> int:
    import csv
    import json

    from bot.events.ledger import FIELDS
    from bot.inbox import ledger

    inbox = await _opened(cfg)
    try:
        writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
        if writer is not None:
            writer.writerow(FIELDS)
        n = 0
        async for text in ledger.lines(inbox.database, since=since, rooms=None if room is None else [room]):
            if writer is not None:
                entry = json.loads(text)
                writer.writerow([_cell(entry.get(k)) for k in FIELDS])
            else:
                out.write(text + "\n")
            n += 1
            if n % 1000 == 0:
                out.flush()
        out.flush()
    finally:
        await inbox.close()
    return 0


def _summary(checker: Checker) -> str:
    if not checker.partial:
        return f"intact: {checker.count} entries, head seq {checker.last_seq} {checker.last_hash}"
    gaps = f"; {checker.gaps} gaps not checkable from this file (the first after seq {checker.first_gap})"
    return (
        f"intact as far as this file shows: {checker.count} entries, seq {checker.first_seq} to "
        f"{checker.last_seq}, head {checker.last_hash}{gaps if checker.gaps else ''}"
    )


async def verify(cfg: Config | None, file: str | None, against_room: bool, out: TextIO, partial: bool = False) -> int:
    from bot.events.ledger import Checker, against_checkpoints

    rooms: dict[str, list[Seen]] = {}
    if against_room:
        assert cfg is not None
        from bot.cli.audit_room import read_checkpoints

        rooms = await read_checkpoints(cfg)
    checkpoints = [(name, s[0], s[1]) for name, seen in rooms.items() for s in seen if isinstance(s, tuple)]
    checker = Checker(from_start=not partial, partial=partial, wanted={seq for _, seq, _ in checkpoints})
    bad = await _feed(cfg, file, checker)
    if bad is not None:
        return bad
    problem = checker.problem or (against_checkpoints(checker, checkpoints) or _unread(rooms, checker)
                                  if against_room else None)
    if problem is not None:
        if file is not None and not partial and ": missing (the next" in problem:
            problem += "; if FILE is an export --since or --room, check it with --partial"
        return fail(f"audit: verify: {problem}", EXIT_BAD)
    if against_room:
        agree = len([c for c in checkpoints if not partial or c[1] in checker.hashes])
        agreed = "1 checkpoint in the rooms agrees" if agree == 1 else f"{agree} checkpoints in the rooms agree"
        print(f"{_summary(checker)}; {agreed}", file=out)
    else:
        print(_summary(checker), file=out)
    return 0


async def _feed(cfg: Config | None, file: str | None, checker: Checker) -> int | None:
    """Feed the configured ledger, or FILE, to ``checker``; an exit code when FILE is not JSON lines."""
    import fileinput

    from bot.inbox import ledger

    inbox = await _opened(cfg) if file is None and cfg is not None else None
    try:
        if inbox is not None:
            async for text in ledger.lines(inbox.database):
                if not checker.feed_line(text):
                    break
        else:
            assert file is not None
            with fileinput.FileInput(file, encoding="utf-8") as lines:  # "-": stdin
                for number, raw in enumerate(lines, 1):
                    if not raw.strip():
                        continue
                    if not checker.feed_line(raw):
                        if checker.problem and checker.problem.endswith("not JSON"):
                            return fail(f"audit: verify: line {number}: {checker.problem}", EXIT_BAD)
                        break
    finally:
        if inbox is not None:
            await inbox.close()
    return None


def _unread(rooms: dict[str, list[Seen]], checker: Checker) -> str | None:
    """A checkpoint of the bot's that cannot be read (redacted), naming the seqs it covered; a room holding
    no readable checkpoint while the ledger has entries; else None."""
    from bot.events.checkpoints import describe, gaps

    for name, seen in rooms.items():
        for gap in gaps(name, seen):
            return describe(gap, checker.last_seq)
        if checker.count and not checker.partial and not any(isinstance(s, tuple) for s in seen):
            return (f"room {name} holds no checkpoint of the bot's that can be read (the ledger has "
                    f"{checker.count} entries; one is posted within a minute of an entry: wait and run again; "
                    "an encrypted m.notice checkpoint of an older build is not read)")
    return None


def run(args: argparse.Namespace) -> int:
    import asyncio

    from bot.cli.config_file import load_or_exit
    from bot.inbox.db import DatabaseError, DatabaseUrlError
    from bot.matrix.errors import MatrixFatal

    needs_config = args.audit_command == "export" or args.file is None or args.against_room
    cfg = load_or_exit(args.config) if needs_config else None
    try:
        if args.audit_command == "export":
            assert cfg is not None
            from bot.util.durations import parse_since

            try:
                since = None if args.since is None else parse_since(args.since, time.time())
            except ValueError as e:
                return fail(f"audit: {e}", EXIT_USAGE)
            if args.room is not None and args.room not in cfg.room_names:
                return fail(f"audit: --room: {args.room!r:.70} is not a configured room", EXIT_USAGE)
            return asyncio.run(export(cfg, since, args.room, args.format, sys.stdout))
        if args.partial and args.file is None:
            return fail("audit: verify: --partial is for an export FILE (the configured state is checked whole)",
                        EXIT_USAGE)
        return asyncio.run(verify(cfg, args.file, args.against_room, sys.stdout, args.partial))
    except BrokenPipeError:
        return 0
    except (DatabaseError, DatabaseUrlError, MatrixFatal, OSError) as e:
        return fail(f"audit: {e}", EXIT_USAGE)
