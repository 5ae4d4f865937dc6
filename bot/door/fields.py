"""The fields a proxy sets on every submission it makes (bot.util.digest's ``EXTRAS``), never its agent."""

from __future__ import annotations

from typing import Any


def proxy_fields(body: dict[str, Any], *, key: str, label: str | None, cwd: str | None) -> dict[str, Any]:
    """``body`` with the proxy's ``key``, and its ``label`` and the session's ``cwd`` when they are set."""
    body["key"] = key
    if label:
        body["label"] = label
    if cwd:
        body["cwd"] = cwd
    return body
