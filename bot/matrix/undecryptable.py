"""Events that cannot be decrypted yet: kept aside (durably), their keys asked for, retried
after every sync; after ``[matrix] undecryptable_wait`` the sender is asked, once, to resend."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import structlog
from nio import BadEvent, EncryptionError, LocalProtocolError, MegolmEvent, UnknownBadEvent

from bot.matrix.crypto import Waiting, is_targeted
from bot.matrix.station import EventHandler, Say, Station
from bot.matrix.trust import Trust

log = structlog.get_logger("matrix")

WAITING_KEY = "matrix.undecryptable"  # events kept aside until their room key arrives
WAITING_KEEP = 24 * 3600.0  # how long an undecryptable event is retried before it is given up
WAITING_MAX = 500  # at most this many events are kept aside (the oldest are given up first)


class Undecryptable:
    """The events kept aside, by event id, until their room key arrives."""

    def __init__(self, st: Station, trust: Trust, say: Say) -> None:
        self.st = st
        self.trust = trust
        self._say = say
        self.waiting: dict[str, Waiting] = {}
        self._requested: set[str] = set()  # session ids whose keys were requested in this run

    async def keep_aside(self, ev: MegolmEvent, *, initial: bool) -> None:
        """Keep an undecryptable event until its key arrives, and ask for the key."""
        if self.st.client.olm is None:
            return  # encryption = false: the refusal notice covers it
        if ev.sender == self.st.user_id:
            return  # the bot's own events are never answers
        if initial:
            log.info("undecryptable_history_skipped", event_id=ev.event_id, sender=ev.sender)
            return
        if ev.event_id in self.waiting:
            return
        self.waiting[ev.event_id] = Waiting(source=dict(ev.source), since=time.time())
        log.info("event_undecryptable", event_id=ev.event_id, sender=ev.sender, device_id=ev.device_id,
                 session_id=ev.session_id)
        while len(self.waiting) > WAITING_MAX:
            oldest = min(self.waiting.values(), key=lambda w: w.since)
            del self.waiting[oldest.event_id]
            log.warning("undecryptable_given_up", event_id=oldest.event_id, sender=oldest.sender, reason="too many")
        await self.save()
        await self._request_key(ev)

    async def _request_key(self, ev: MegolmEvent) -> None:
        """Ask the bot's other devices (nio) and the sender's device for the event's room key."""
        c = self.st.client
        if ev.session_id in self._requested:
            return
        self._requested.add(ev.session_id)
        ev.room_id = self.st.room_id
        try:
            with contextlib.suppress(LocalProtocolError):  # already requested (in an earlier run)
                await c.request_room_key(ev)  # registers the request, so a forwarded key is taken
            if ev.device_id:
                msg = ev.as_key_request(ev.sender, c.device_id or "", ev.session_id, ev.device_id)
                await c.to_device(msg)
            log.info("room_key_requested", session_id=ev.session_id, sender=ev.sender, device_id=ev.device_id)
        except Exception as e:
            log.warning("room_key_request_failed", session_id=ev.session_id, error=f"{type(e).__name__}: {e}")

    async def retry(self, deliver: EventHandler) -> None:
        """Decrypt what the keys that arrived since allow, and hand it to ``deliver`` (oldest first)."""
        c = self.st.client
        if not self.waiting or c.olm is None:
            return
        kept = len(self.waiting)
        for w in sorted(self.waiting.values(), key=lambda w: w.since):
            ev = MegolmEvent.from_dict(w.source)
            if not isinstance(ev, MegolmEvent):
                del self.waiting[w.event_id]
                continue
            ev.room_id = self.st.room_id
            if c.olm.inbound_group_store.get(self.st.room_id, ev.sender_key, ev.session_id) is None:
                continue  # its key has not arrived (asking nio would only log that again)
            try:
                dec = c.decrypt_event(ev)
            except EncryptionError:
                continue
            del self.waiting[w.event_id]
            if isinstance(dec, BadEvent | UnknownBadEvent) or not isinstance(getattr(dec, "source", None), dict):
                log.warning("undecryptable_malformed", event_id=w.event_id, sender=w.sender)
                continue
            plain = await self.trust.admit(dec, wrapper=w.source)
            if plain is None:
                continue
            if w.told and not is_targeted(plain):
                log.info("late_decryption_ignored", event_id=w.event_id, sender=w.sender,
                         reason="a plain message decrypted after its sender was asked to resend")
                continue
            log.info("event_decrypted_late", event_id=w.event_id, sender=w.sender, waited=round(time.time() - w.since))
            await deliver(plain)
        if len(self.waiting) != kept:
            await self.save()

    async def check(self) -> None:
        """Ask, once per Megolm session, the sender of an event still undecryptable to resend it."""
        if not self.waiting:
            return
        now, changed = time.time(), False
        told_sessions = {(w.sender, w.session_id) for w in self.waiting.values() if w.told}
        for w in sorted(self.waiting.values(), key=lambda w: w.since):
            if now - w.since > WAITING_KEEP:
                del self.waiting[w.event_id]
                changed = True
                log.warning("undecryptable_given_up", event_id=w.event_id, sender=w.sender, reason="too old")
                continue
            if w.told or now - w.since < self.st.cfg.undecryptable_wait:
                continue
            w.told = True
            changed = True
            log.warning("undecryptable_resend_asked", event_id=w.event_id, sender=w.sender, session_id=w.session_id)
            if (w.sender, w.session_id) in told_sessions:
                continue
            told_sessions.add((w.sender, w.session_id))
            self._say(f"{w.sender}: I cannot decrypt your message (its room key has not reached my device "
                      f"{self.st.client.device_id}), so it changed nothing. Please send it again.", reply_to=w.event_id)
        if changed:
            await self.save()

    def forget_redacted(self, source: dict[str, Any]) -> None:
        """A redaction of an event kept aside drops it."""
        redacts = source.get("redacts")
        if not isinstance(redacts, str):
            c = source.get("content")
            redacts = c.get("redacts") if isinstance(c, dict) else None
        if isinstance(redacts, str) and self.waiting.pop(redacts, None) is not None:
            log.info("undecryptable_redacted", event_id=redacts)

    async def load(self) -> None:
        saved = await self.st.kv.get_json(self.st.key(WAITING_KEY))
        for d in saved if isinstance(saved, list) else []:
            if (w := Waiting.from_json(d)) is not None:
                self.waiting[w.event_id] = w
        if self.waiting:
            log.info("undecryptable_restored", events=len(self.waiting))

    async def save(self) -> None:
        await self.st.kv.set_json(self.st.key(WAITING_KEY), [w.to_json() for w in self.waiting.values()])
