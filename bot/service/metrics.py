"""Prometheus metrics (prometheus-client), one CollectorRegistry per daemon.

Components update their own figures: the inbox listener (``on_change``) counts submissions and
settlements, the outbox counts posts, and the Matrix side and the webhooks keep their own counts,
read at scrape time through ``read`` (a collector over plain callables). The pending gauge comes from
the ``pending`` callable (the inbox's count), refreshed at each scrape. The registry also carries
prometheus-client's process (``process_*``: CPU, memory, open fds, start time) and platform
(``python_info``) collectors, as the default registry would. Nothing here knows the daemon.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.inbox.record import Record

if TYPE_CHECKING:
    from bot.matrix.client import Matrix
    from bot.service.webhooks import Webhooks

BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0, float("inf"))
CONTENT_TYPE = CONTENT_TYPE_LATEST
P = "permission_bot_"


class _Read(Collector):
    """Figures a component keeps itself, read when scraped: (name, help, kind, read)."""

    def __init__(self) -> None:
        self.reads: list[tuple[str, str, str, Callable[[], float]]] = []

    def collect(self) -> Iterable[Metric]:
        for name, doc, kind, read in self.reads:
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, doc, value=read())


class Metrics:
    """One daemon's metrics; ``render()`` is the /metrics body (``CONTENT_TYPE``)."""

    def __init__(self, pending: Callable[[], Awaitable[int]] | None = None) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self._pending_source = pending
        self.pending = Gauge(P + "pending", "Requests waiting for an answer.", registry=r)
        self.submissions = Counter(P + "submissions", "Requests submitted since start.", registry=r)
        self.prompts_posted = Counter(P + "prompts_posted", "Prompts posted into the station room since start.",
                                      registry=r)
        self.resolved = Counter(P + "resolved", "Requests settled since start, by state and path.",
                                ["state", "via"], registry=r)
        self.amended = Counter(P + "amended", "Settled requests shown otherwise since start (a watched harness "
                               "did not take the answer).", registry=r)
        self.time_to_answer = Histogram(P + "time_to_answer_seconds", "From submission to settlement.",
                                        buckets=BUCKETS, registry=r)
        started = time.time()
        self._read = _Read()
        r.register(self._read)
        self.read("uptime_seconds", "Seconds since the daemon started.", lambda: time.time() - started)

    def read(self, name: str, doc: str, fn: Callable[[], float], kind: str = "gauge") -> None:
        """Export a figure a component keeps itself (``kind`` "gauge" or "counter"), read at scrape time."""
        self._read.reads.append((P + name, doc, kind, fn))

    # -- where things happen ---------------------------------------------------------------------------
    def on_change(self, kind: str, rec: Record) -> None:
        """Inbox listener: submissions; settlements by state, path and time taken; amendments."""
        if kind == "request":
            self.submissions.inc()
        elif kind == "amended":
            self.amended.inc()
        elif rec.outcome is not None:
            self.resolved.labels(state=rec.state, via=rec.outcome.via).inc()
            self.time_to_answer.observe(max(0.0, rec.outcome.decided_at - rec.requested_at))

    def posted(self) -> None:
        self.prompts_posted.inc()

    async def render(self) -> bytes:
        """The exposition text (refreshing the pending gauge first)."""
        if self._pending_source is not None:
            self.pending.set(await self._pending_source())
        return generate_latest(self.registry)


def export_figures(metrics: Metrics, matrix: Callable[[], Matrix], webhooks: Webhooks) -> None:
    """The figures the Matrix side and the webhooks keep themselves, exported as read at scrape time (``matrix()``:
    the Matrix side of now, never a discarded term's)."""
    metrics.read("sync_lag_seconds", "Duration of the last completed /sync round trip.",
                 lambda: matrix().syncer.sync_lag)
    metrics.read("matrix_connected", "1 when the last sync succeeded.", lambda: 1 if matrix().syncer.connected else 0)
    metrics.read("send_errors", "Failed sends to the homeserver.", lambda: matrix().sender.send_errors, "counter")
    metrics.read("rate_limited", "1 while the homeserver rate-limits the bot's account.",
                 lambda: 1 if matrix().rate_limited else 0)
    metrics.read("rate_limit_refusals", "Sends the homeserver refused for rate (429).",
                 lambda: matrix().rate_refusals, "counter")
    metrics.read("webhook_delivered", "Webhook deliveries answered 2xx.", lambda: webhooks.delivered, "counter")
    metrics.read("webhook_failed", "Webhook deliveries given up or dropped.", lambda: webhooks.failed, "counter")
