"""Importing a module that declares many pydantic models, without the work nobody uses (:func:`lean`).

A module such as the ACP SDK's ``acp.schema`` (~280 models with ``use_attribute_docstrings``) makes pydantic
read and tokenize its source again for every class, for field descriptions only JSON Schema output shows, and
build every model's validator at import although a process uses a few. Declared inside :func:`lean`,
descriptions are skipped and validators are built on first use. Validation is the same; if pydantic's
internals move, the import is a plain one.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any


def no_docstrings(cls: type[Any], use_inspect: bool = False) -> dict[str, str]:
    return {}


@contextlib.contextmanager
def lean() -> Iterator[None]:
    """Models declared inside skip attribute docstrings and build their validators when first used."""
    try:
        from pydantic._internal import _config, _fields
    except ImportError:  # pragma: no cover - another pydantic layout: a plain import
        yield
        return
    if not hasattr(_fields, "extract_docstrings_from_cls") or "defer_build" not in _config.config_defaults:
        yield  # pragma: no cover
        return
    docs, defer = _fields.extract_docstrings_from_cls, _config.config_defaults["defer_build"]
    _fields.extract_docstrings_from_cls = no_docstrings  # type: ignore[assignment]
    _config.config_defaults["defer_build"] = True
    try:
        yield
    finally:
        _fields.extract_docstrings_from_cls = docs
        _config.config_defaults["defer_build"] = defer


def load(module: str) -> None:
    """Import ``module`` inside :func:`lean`, unless something imported it already."""
    if module not in sys.modules:
        with lean():
            importlib.import_module(module)
