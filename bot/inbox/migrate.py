"""Copy a SQLite inbox into an empty PostgreSQL database (``permission-bot state migrate``).

The source is read in one read transaction (a consistent snapshot); a folder at an older schema is first
brought up to date (as ``run`` would), a newer one is refused. The target is brought up to the same schema
by the same upgrade table, then, in ONE transaction: every inbox table is locked, refused unless empty,
filled with the source's rows (``rowid`` / ``pos`` / ``id`` kept, plus the caller's extra ``kv`` entries:
the crypto store), and each identity sequence is set past the largest id copied (and past SQLite's
AUTOINCREMENT high-water mark, so no id is ever reused). A failure anywhere leaves the target's tables empty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.inbox.db import Connection, Database, SchemaTooNew, create, parse
from bot.inbox.db.postgres import PgConnection
from bot.inbox.db.sqlite import SqliteConnection, SqliteDatabase
from bot.inbox.db.url import KEY
from bot.inbox.schema import LATEST, legacy_version, table, upgrade

VERSIONS = "schema_versions"
ExtraKv = Callable[[Mapping[str, str]], Mapping[str, str]]
"""The source's ``kv`` entries -> more entries to write beside them (the same keys replaced)."""


class MigrateError(Exception):
    """The migration cannot go on (one line: what, and what to do)."""


@dataclass(frozen=True)
class Copied:
    """What a migration copied: rows per table, in copy order."""

    rows: dict[str, int]
    upgraded_from: int | None = None  # the source's schema version when it had to be upgraded first


async def _source_version(db: Database) -> int:
    versioned = await db.table_exists(VERSIONS)
    async with db._reader() as conn:  # read only: the source's schema_versions is never made here
        return await table().version(conn) if versioned else await legacy_version(conn)


async def _open_source(path: Path) -> tuple[SqliteDatabase, int | None]:
    """The source opened read-only at the latest schema (upgraded first when older)."""
    if not path.is_file():
        raise MigrateError(f"{path}: no inbox to migrate (state.path has no inbox.sqlite3)")
    target = parse(f"sqlite:{path.resolve()}")
    src = SqliteDatabase(target, read_only=True)
    await src.start()
    try:
        version = await _source_version(src)
        if version > LATEST:
            raise SchemaTooNew(
                f"{path}: the inbox schema is at version {version}, newer than this permission-bot knows ({LATEST}); "
                "migrate with the permission-bot that wrote it"
            )
    except BaseException:
        await src.stop()
        raise
    if version == LATEST:
        return src, None
    await src.stop()
    writer = SqliteDatabase(target)
    await writer.start()
    try:
        await upgrade(writer, str(path))
    finally:
        await writer.stop()
    await src.start()
    return src, version


async def _pg_tables(conn: Connection) -> dict[str, list[tuple[str, str, bool]]]:
    """The target's tables (but ``schema_versions``) by name, each with its (column, data type, is identity)."""
    rows = await conn.fetch(
        "SELECT c.table_name, c.column_name, c.data_type, c.is_identity FROM information_schema.columns c"
        " JOIN information_schema.tables t ON (t.table_schema, t.table_name) = (c.table_schema, c.table_name)"
        " WHERE t.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND t.table_name <> $1"
        " ORDER BY c.table_name, c.ordinal_position",
        VERSIONS,
    )
    tables: dict[str, list[tuple[str, str, bool]]] = {}
    for r in rows:
        tables.setdefault(str(r[0]), []).append((str(r[1]), str(r[2]), str(r[3]) == "YES"))
    return tables


_TYPES: dict[str, Callable[[Any], Any]] = {
    "integer": int, "bigint": int, "smallint": int, "double precision": float, "real": float, "numeric": float,
    "bytea": bytes,
}


def _coerce(data_type: str) -> Callable[[Any], Any]:
    """SQLite keeps any value in any column: each value as the target column's type wants it (text: ``str``)."""
    kind = _TYPES.get(data_type, str)
    return lambda v: None if v is None else kind(v)


async def _read_source(src: SqliteDatabase, wanted: dict[str, list[tuple[str, str, bool]]]) -> tuple[
    dict[str, list[tuple[Any, ...]]], dict[str, int]
]:
    """Every wanted table's rows (in the target's column order) and SQLite's AUTOINCREMENT high-water marks,
    read in one snapshot."""
    have = {str(r[0]) for r in await src.fetch("SELECT name FROM sqlite_master WHERE type='table'")}
    missing = [t for t in wanted if t not in have]
    if missing:
        raise MigrateError(f"{src.path}: the inbox has no table {', '.join(missing)}; is it a permission-bot inbox?")
    out: dict[str, list[tuple[Any, ...]]] = {}
    async with src._reader() as conn:  # one read transaction over every table
        assert isinstance(conn, SqliteConnection)
        raw = conn.raw
        raw.execute("BEGIN").close()
        try:
            for name, cols in wanted.items():
                present = {str(r[1]) for r in await conn.fetch(f"PRAGMA table_info({name})")}
                exprs = [c for c, _, _ in cols]  # "rowid": SQLite's implicit one where the table has no such column
                absent = [c for c in exprs if c not in present and c != "rowid"]
                if absent:
                    raise MigrateError(f"{src.path}: table {name} lacks column(s) {', '.join(absent)}")
                fix = [_coerce(t) for _, t, _ in cols]
                rows = await conn.fetch(f"SELECT {', '.join(exprs)} FROM {name}")  # names from the schema, not input
                out[name] = [tuple(f(r[i]) for i, f in enumerate(fix)) for r in rows]
            high = {}
            if "sqlite_sequence" in have:
                high = {str(r[0]): int(r[1]) for r in await conn.fetch("SELECT name, seq FROM sqlite_sequence")}
        finally:
            raw.execute("COMMIT").close()
    return out, high


def _with_extra(rows: list[tuple[Any, ...]], cols: list[str], extra: ExtraKv) -> list[tuple[Any, ...]]:
    """The ``kv`` rows with the extra entries ``extra`` makes from them."""
    ki, vi = cols.index("k"), cols.index("v")
    more = dict(extra({str(r[ki]): str(r[vi]) for r in rows}))
    return [r for r in rows if r[ki] not in more] + [
        tuple({"k": k, "v": v}.get(c) for c in cols) for k, v in more.items()
    ]


async def _copy(target: Database, src: SqliteDatabase, extra: ExtraKv | None = None) -> dict[str, int]:
    counts: dict[str, int] = {}
    async with target.transaction() as conn:
        conn.allow_slow()
        wanted = await _pg_tables(conn)
        names = list(wanted)
        await conn.execute(f"LOCK TABLE {', '.join(names)} IN EXCLUSIVE MODE")
        used = []
        for name in names:
            n = int(await conn.fetchval(f"SELECT count(*) FROM {name}"))
            if n:
                used.append(f"{name} ({n})")
        if used:
            raise MigrateError(
                f"{target.target.shown}: not empty ({', '.join(used)}); migrate only into a new, empty database"
            )
        rows, high = await _read_source(src, wanted)
        if extra is not None:
            rows["kv"] = _with_extra(rows["kv"], [c for c, _, _ in wanted["kv"]], extra)
        assert isinstance(conn, PgConnection)
        raw = conn.raw  # asyncpg's COPY: every row in one round trip
        for name, cols in wanted.items():
            if rows[name]:
                await raw.copy_records_to_table(name, records=rows[name], columns=[c for c, _, _ in cols],
                                                timeout=conn.timeout)
            counts[name] = len(rows[name])
            for i, (col, _, identity) in enumerate(cols):
                if identity:
                    top = max([r[i] for r in rows[name] if r[i] is not None] + [high.get(name, 0), 0])
                    await conn.execute(
                        "SELECT setval(pg_get_serial_sequence($1, $2), $3, false)", name, col, top + 1
                    )
    return counts


async def migrate(source: Path, url: str, extra: ExtraKv | None = None, key: str = KEY) -> Copied:
    """Copy the SQLite inbox at ``source`` into the empty PostgreSQL database at ``url`` (with ``extra``'s
    ``kv`` entries, in the same transaction); ``key`` names where the URL came from in messages.
    Raises MigrateError / SchemaTooNew / DatabaseError / DatabaseUrlError (one line each, no password)."""
    target = create(url, key=key)
    if target.dialect.name != "postgresql":
        raise MigrateError(f"{target.target.shown}: the target must be a postgresql:// database")
    src, upgraded_from = await _open_source(source)
    try:
        await target.start()
        try:
            await upgrade(target, target.target.shown)
            counts = await _copy(target, src, extra)
        finally:
            await target.stop()
    finally:
        await src.stop()
    return Copied(counts, upgraded_from)


def summary(copied: Copied, source: Path, shown: str) -> Sequence[str]:
    """The lines the command prints: rows per table, then the total."""
    lines = [f"{name}: {n} rows" for name, n in copied.rows.items()]
    if copied.upgraded_from is not None:
        lines.insert(0, f"{source}: upgraded from schema version {copied.upgraded_from} to {LATEST} first")
    lines.append(f"migrated {sum(copied.rows.values())} rows in {len(copied.rows)} tables from {source} to {shown}")
    return lines
