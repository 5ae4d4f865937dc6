"""Metrics in-process: per-daemon registries, counts from the inbox listener, figures read at scrape time."""

from __future__ import annotations

import time
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from bot.inbox.record import Settlement
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from bot.service.metrics import CONTENT_TYPE, Metrics, export_figures
from tests.support.station import request_body


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_inbox_listener_counts_and_pending_is_read_from_the_inbox(sqlite_inbox: Inbox) -> None:
    m = Metrics(pending=sqlite_inbox.count_pending)
    sqlite_inbox.listen(m.on_change)
    ids = []
    for i in range(3):
        rec, _ = await sqlite_inbox.submit(parse_submission(request_body("s", tool_call_id=f"c{i}")), time.time(), 600)
        ids.append(rec.id)
    await sqlite_inbox.settle(ids[0], Settlement(option_id="allow_once", by="@alice:x", via="matrix",
                              now=time.time()))
    m.posted()
    rec = await sqlite_inbox.get(ids[0])
    assert rec is not None
    m.on_change("amended", rec)  # a watched harness did not take the answer: counted, not resolved again
    got = _samples(await m.render())
    assert got[("permission_bot_pending", ())] == 2
    assert got[("permission_bot_submissions_total", ())] == 3
    assert got[("permission_bot_prompts_posted_total", ())] == 1
    assert got[("permission_bot_resolved_total", (("state", "resolved"), ("via", "matrix")))] == 1
    assert got[("permission_bot_time_to_answer_seconds_count", ())] == 1
    assert got[("permission_bot_amended_total", ())] == 1
    assert got[("permission_bot_time_to_answer_seconds_bucket", (("le", "1.0"),))] == 1


async def test_two_daemons_keep_separate_registries_and_components_export_their_own_figures() -> None:
    a, b = Metrics(), Metrics()
    syncer, sender = SimpleNamespace(sync_lag=0.25, connected=True), SimpleNamespace(send_errors=2)
    matrix = SimpleNamespace(syncer=syncer, sender=sender, rate_limited=True, rate_refusals=7)
    hooks = SimpleNamespace(delivered=5, failed=1)
    export_figures(a, lambda: matrix, hooks)
    a.submissions.inc()
    got_a, got_b = _samples(await a.render()), _samples(await b.render())
    assert got_a[("permission_bot_submissions_total", ())] == 1
    assert got_b[("permission_bot_submissions_total", ())] == 0
    assert got_a[("permission_bot_sync_lag_seconds", ())] == 0.25
    assert got_a[("permission_bot_matrix_connected", ())] == 1
    assert got_a[("permission_bot_send_errors_total", ())] == 2
    assert got_a[("permission_bot_rate_limited", ())] == 1
    assert got_a[("permission_bot_rate_limit_refusals_total", ())] == 7
    assert got_a[("permission_bot_webhook_delivered_total", ())] == 5
    assert got_a[("permission_bot_webhook_failed_total", ())] == 1
    assert ("permission_bot_webhook_failed_total", ()) not in got_b
    hooks.failed = 3  # read at scrape time, not copied
    assert _samples(await a.render())[("permission_bot_webhook_failed_total", ())] == 3
    assert got_a[("permission_bot_uptime_seconds", ())] >= 0


def test_content_type_carries_the_exposition_version() -> None:
    assert CONTENT_TYPE.startswith("text/plain") and "version=" in CONTENT_TYPE


async def test_process_and_platform_figures_are_in_each_registry() -> None:
    """prometheus-client's process_* and python_info, as the default registry has them, in each daemon's own."""
    a, b = Metrics(), Metrics()
    for m in (a, b):
        got = _samples(await m.render())
        assert got[("process_resident_memory_bytes", ())] > 0
        assert got[("process_open_fds", ())] > 0
        assert 0 < got[("process_start_time_seconds", ())] <= time.time()
        assert any(name == "python_info" for name, _ in got)
