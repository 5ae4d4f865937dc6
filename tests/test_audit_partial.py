"""``audit verify FILE --partial`` (issue 37): an export filtered by ``--since`` or ``--room`` starts mid-chain
and has gaps; what it holds is checked (each entry's hash, ``prev`` between consecutive seqs), a gap is
reported as not checkable from the file, never as tampering; a whole export is checked as before."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from bot.cli.audit_cmd import verify
from bot.events.ledger import ZERO, Checker, against_checkpoints, entry_hash, line, seal


def _chain(n: int) -> list[dict[str, object]]:
    out, prev = [], ZERO
    for i in range(1, n + 1):
        e = seal({"request_id": f"s:{i}", "room": "infra" if i % 3 == 0 else "default", "answered_by": []}, i, prev)
        out.append(e)
        prev = str(e["hash"])
    return out


def _run(
    tmp_path: Path, entries: list[dict[str, object]], partial: bool, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    f = tmp_path / "export.jsonl"
    f.write_text("".join(line(e) + "\n" for e in entries))

    out = io.StringIO()
    code = asyncio.run(verify(None, str(f), False, out, partial))
    return code, out.getvalue(), capsys.readouterr().err


def test_a_room_export_with_gaps_is_checked_as_far_as_it_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _chain(12)
    infra = [e for e in good if e["room"] == "infra"]  # seqs 3, 6, 9, 12: every one after a gap
    code, out, err = _run(tmp_path, infra, True, capsys)
    assert code == 0, err
    assert "intact as far as this file shows: 4 entries, seq 3 to 12" in out
    assert "3 gaps not checkable from this file (the first after seq 3)" in out
    code, _, err = _run(tmp_path, infra, False, capsys)  # without --partial: missing, and the hint
    assert code == 1 and "seq 1: missing (the next entry is seq 3)" in err and "--partial" in err
    assert len(err.strip().splitlines()) == 1


def test_a_since_export_starts_mid_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _chain(8)
    code, out, err = _run(tmp_path, good[4:], True, capsys)
    assert code == 0 and "4 entries, seq 5 to 8" in out and "gaps" not in out, err
    code, out, err = _run(tmp_path, good, False, capsys)  # a whole export: as before
    assert code == 0 and out.startswith("intact: 8 entries, head seq 8"), err


def test_tampering_within_a_partial_export_is_still_caught(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _chain(10)
    part = [dict(e) for e in good[3:]]  # seqs 4..10
    part[2]["answered_by"] = ["@mallory:example.org"]  # seq 6 changed, its hash left
    code, _, err = _run(tmp_path, part, True, capsys)
    assert code == 1 and "seq 6: hash does not match" in err
    rehashed = [dict(e) for e in good[3:]]
    rehashed[2]["answered_by"] = ["@mallory:example.org"]
    rehashed[2]["hash"] = entry_hash(rehashed[2])  # seq 6 rehashed: seq 7's prev tells
    code, _, err = _run(tmp_path, rehashed, True, capsys)
    assert code == 1 and "seq 7: prev is not the previous entry's hash" in err
    code, _, err = _run(tmp_path, [good[5], good[4]], True, capsys)  # reordered
    assert code == 1 and "seq 5: out of order" in err
    forged_first = seal({**good[0], "via": "api"}, 1, "f" * 64)  # type: ignore[call-overload]
    code, _, err = _run(tmp_path, [forged_first, *good[1:3]], True, capsys)
    assert code == 1 and "seq 1: prev of the first entry" in err


def test_a_partial_chain_meets_only_the_checkpoints_it_holds() -> None:
    good = _chain(9)
    infra = [e for e in good if e["room"] == "infra"]
    cps = [("default", 2, str(good[1]["hash"])), ("infra", 6, str(good[5]["hash"])), ("x", 11, "0" * 64)]
    c = Checker(from_start=False, partial=True, wanted={2, 6, 11})
    assert all(c.feed(e) for e in infra)
    assert against_checkpoints(c, cps) is None  # 2 and 11 are not in the file: not checkable here
    c = Checker(from_start=False, partial=True, wanted={6})
    assert all(c.feed(e) for e in infra)
    assert against_checkpoints(c, [("infra", 6, "a" * 64)]) == (
        "seq 6: differs from the checkpoint in room infra (the chain was rewritten from there on)"
    )
