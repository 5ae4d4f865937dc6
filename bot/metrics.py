"""Prometheus text metrics, kept in process (no client library needed)."""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.daemon import Daemon

BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0, float("inf"))


class Metrics:
    """Counters and a time-to-answer histogram; gauges read from the daemon at scrape time."""

    def __init__(self) -> None:
        self.started = time.time()
        self.submissions = 0
        self.prompts_posted = 0
        self.settled_by: Counter[tuple[str, str]] = Counter()
        self.answer_buckets = [0] * len(BUCKETS)
        self.answer_sum = 0.0
        self.answer_count = 0
        self._daemon: Daemon | None = None

    def bind(self, daemon: Daemon) -> None:
        self._daemon = daemon

    def submitted(self) -> None:
        self.submissions += 1

    def posted(self) -> None:
        self.prompts_posted += 1

    def settled(self, state: str, via: str, seconds: float) -> None:
        self.settled_by[(state, via)] += 1
        self.answer_sum += max(0.0, seconds)
        self.answer_count += 1
        for i, b in enumerate(BUCKETS):
            if seconds <= b:
                self.answer_buckets[i] += 1

    async def render(self) -> str:
        d = self._daemon
        pending = await d.inbox.count_pending() if d else 0
        lines = [
            "# HELP permission_bot_pending Requests waiting for an answer.",
            "# TYPE permission_bot_pending gauge",
            f"permission_bot_pending {pending}",
            "# HELP permission_bot_submissions_total Requests submitted since start.",
            "# TYPE permission_bot_submissions_total counter",
            f"permission_bot_submissions_total {self.submissions}",
            "# HELP permission_bot_prompts_posted_total Prompts posted into the station room since start.",
            "# TYPE permission_bot_prompts_posted_total counter",
            f"permission_bot_prompts_posted_total {self.prompts_posted}",
            "# HELP permission_bot_resolved_total Requests settled since start, by state and path.",
            "# TYPE permission_bot_resolved_total counter",
        ]
        for (state, via), n in sorted(self.settled_by.items()):
            lines.append(f'permission_bot_resolved_total{{state="{state}",via="{via}"}} {n}')
        lines += [
            "# HELP permission_bot_time_to_answer_seconds From submission to settlement.",
            "# TYPE permission_bot_time_to_answer_seconds histogram",
        ]
        for b, n in zip(BUCKETS, self.answer_buckets, strict=True):
            le = "+Inf" if b == float("inf") else f"{b:g}"
            lines.append(f'permission_bot_time_to_answer_seconds_bucket{{le="{le}"}} {n}')
        lines.append(f"permission_bot_time_to_answer_seconds_sum {self.answer_sum:.3f}")
        lines.append(f"permission_bot_time_to_answer_seconds_count {self.answer_count}")
        lag = d.matrix.sync_lag if d else 0.0
        errors = d.matrix.send_errors if d else 0
        connected = 1 if d and d.matrix.connected else 0
        lines += [
            "# HELP permission_bot_sync_lag_seconds Duration of the last completed /sync round trip.",
            "# TYPE permission_bot_sync_lag_seconds gauge",
            f"permission_bot_sync_lag_seconds {lag:.3f}",
            "# HELP permission_bot_matrix_connected 1 when the last sync succeeded.",
            "# TYPE permission_bot_matrix_connected gauge",
            f"permission_bot_matrix_connected {connected}",
            "# HELP permission_bot_send_errors_total Failed sends to the homeserver.",
            "# TYPE permission_bot_send_errors_total counter",
            f"permission_bot_send_errors_total {errors}",
            "# HELP permission_bot_uptime_seconds Seconds since the daemon started.",
            "# TYPE permission_bot_uptime_seconds gauge",
            f"permission_bot_uptime_seconds {time.time() - self.started:.1f}",
        ]
        return "\n".join(lines) + "\n"
