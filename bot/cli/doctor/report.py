"""doctor's printer: one line per check (``ok   ...``, ``WARN ...``, ``FAIL ... -> what to do``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Report:
    """Prints check lines and remembers whether any failed."""

    failed: bool = False
    lines: list[str] = field(default_factory=list)

    def _emit(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)

    def ok(self, what: str) -> None:
        self._emit(f"ok   {what}")

    def warn(self, what: str, todo: str | None = None) -> None:
        self._emit(f"WARN {what}" + (f" -> {todo}" if todo else ""))

    def fail(self, what: str, todo: str) -> None:
        self.failed = True
        self._emit(f"FAIL {what} -> {todo}")
