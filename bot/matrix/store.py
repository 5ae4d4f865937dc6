"""nio's crypto store, minus a write on every sync.

nio saves the set of rooms a sync found newly encrypted after every sync, and
does so even when the set is empty: a query (built by peewee on the event loop)
that took ~1.5 ms of each sync, on the way from an answer's arrival to its
settlement. This store does that work only when there is a room to save.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from nio.crypto import ENCRYPTION_ENABLED

if ENCRYPTION_ENABLED:
    from nio.store import DefaultStore

    class Store(DefaultStore):  # type: ignore[misc]
        """``DefaultStore`` whose ``save_encrypted_rooms`` does nothing for no rooms."""

        def save_encrypted_rooms(self, rooms: Collection[str]) -> Any:
            if rooms:
                return super().save_encrypted_rooms(rooms)
            return None

    STORE: type[Any] | None = Store
else:  # nio without its e2e extra: no store at all, as nio's own default
    STORE = None
