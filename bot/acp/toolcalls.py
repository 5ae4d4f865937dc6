"""What the agent has said about its tool calls, to complete sparse permission requests.

Agents announce a tool call with a ``session/update`` (``sessionUpdate: "tool_call"``),
refine it with ``tool_call_update`` and may then ask permission with only the
``toolCallId``. The cache keeps the latest known fields per ``(sessionId, toolCallId)``,
bounded by entry count and approximate size (least recently touched go first). The updates are
read with the SDK's models (:mod:`bot.acp.messages`); what is kept is their wire form.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from bot.acp.messages import CONTEXT_FIELDS, ToolCallFields, context_fields, empty, tool_call_note

CONTEXT_BYTES = 256 * 1024  # the context rides in the daemon's request body; keep it modest


class ToolCallCache:
    """Latest known fields of each tool call, keyed by ``(sessionId, toolCallId)``."""

    def __init__(self, max_entries: int = 4096, max_bytes: int = 16 << 20) -> None:
        self._entries: OrderedDict[tuple[str, str], tuple[dict[str, Any], int]] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def observe(self, params: Any, size: int = 0) -> None:
        """Take in one ``session/update`` params object (anything but a valid tool call is ignored).

        ``size`` is the length of the line it came in, the entry's size estimate.
        """
        note = tool_call_note(params)
        if note is not None:
            self.merge(note[0], note[1], size, replace=note[2])

    def merge(self, session_id: str, tool_call: ToolCallFields, size: int = 0, *, replace: bool = False) -> None:
        """Record the non-empty fields of ``tool_call``; ``replace`` starts the entry afresh."""
        key = (session_id, tool_call.tool_call_id)
        old = self._entries.pop(key, None)
        fields: dict[str, Any] = {}
        est = 0
        if old is not None:
            self._bytes -= old[1]
            if not replace:
                fields, est = dict(old[0]), old[1]
        long_line = size > CONTEXT_BYTES
        for f, v in context_fields(tool_call).items():
            # from a long line, keep only what could ever ride in a context
            if long_line and _size(v) > CONTEXT_BYTES:
                fields.pop(f, None)
                continue
            fields[f] = v
        est = _size(fields) if long_line else max(est, size)
        self._entries[key] = (fields, est)
        self._bytes += est
        self._evict()

    def completion(self, session_id: str, tool_call: Any) -> dict[str, Any] | None:
        """The fields ``tool_call`` lacks that the cache knows (a ``toolCallContext``), or None.

        ``tool_call`` is the request's ``toolCall`` as sent: what it lacks is judged on what the
        daemon reads, the agent's values, not on the model's salvaged ones. When the result would
        be larger than :data:`CONTEXT_BYTES`, the bulkiest fields (content, then rawInput, then
        _meta) are left out.
        """
        if not isinstance(tool_call, dict):
            return None
        tcid = tool_call.get("toolCallId")
        if not isinstance(tcid, str) or (entry := self._entries.get((session_id, tcid))) is None:
            return None
        self._entries.move_to_end((session_id, tcid))
        known = entry[0]  # what it lacks: missing, null or empty as sent (as the daemon reads it)
        ctx = {f: known[f] for f in CONTEXT_FIELDS if f in known and empty(tool_call.get(f))}
        for bulky in ("content", "rawInput", "_meta", "locations"):
            if not ctx or _size(ctx) <= CONTEXT_BYTES:
                break
            ctx.pop(bulky, None)
        return ctx or None

    def _evict(self) -> None:
        while self._entries and (len(self._entries) > self._max_entries or self._bytes > self._max_bytes):
            _, (_, est) = self._entries.popitem(last=False)
            self._bytes -= est


def _size(obj: Any) -> int:
    return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
