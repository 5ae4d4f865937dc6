"""matrix-nio's private API that bot/matrix/crypto.py relies on: fails loudly when a nio upgrade changes it."""

from __future__ import annotations

import inspect
from importlib.metadata import version

from nio import AsyncClient
from nio.crypto import Olm, OlmDevice
from nio.crypto.sessions import InboundGroupSession

from bot.matrix.crypto import accept_forwards_from_session_owner


def _params(fn: object) -> list[str]:
    return list(inspect.signature(fn).parameters)  # type: ignore[arg-type]


def test_nio_version_is_the_one_checked() -> None:
    v = version("matrix-nio")
    assert v.startswith("0.26."), f"matrix-nio {v}: re-check every private use in bot/matrix/crypto.py"


def test_raw_send_and_sharing_mark() -> None:
    assert _params(AsyncClient._send)[:5] == ["self", "response_class", "method", "path", "data"]
    assert _params(AsyncClient._send)[5] == "response_data"
    c = AsyncClient("http://127.0.0.1:1", "@a:hs")
    assert isinstance(c.sharing_session, dict)


def test_forward_acceptance_hook() -> None:
    assert _params(Olm._should_accept_forward) == ["self", "sender", "sender_key", "event"]

    class FakeOlm:
        def _should_accept_forward(self, sender: str, sender_key: str, event: object) -> bool:
            return False

    olm = FakeOlm()
    accept_forwards_from_session_owner(olm)
    assert getattr(olm._should_accept_forward, "_pb_patched", False)


def test_what_trust_reads_from_nio() -> None:
    assert "forwarding_chain" in _params(InboundGroupSession.__init__) or hasattr(InboundGroupSession,
                                                                                  "forwarding_chain")
    assert "ed25519" in dir(OlmDevice) or "ed25519" in _params(OlmDevice.__init__)
    for name in ("verify_device", "blacklist_device", "unblacklist_device", "share_group_session"):
        assert callable(getattr(AsyncClient, name)), name
