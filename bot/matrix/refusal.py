"""``[matrix] encryption = false`` in an encrypted station room: refused, logged, said once."""

from __future__ import annotations

import structlog
from nio import RoomSendResponse

from bot.matrix.station import Station
from bot.matrix.txn import txn_id

log = structlog.get_logger("matrix")

REFUSAL_KEY = "matrix.refusal_told."  # + room id: the "I cannot read encrypted messages" notice went out


class Refusal:
    """Whether the station room is refused; once it is, nothing is posted there."""

    def __init__(self, st: Station) -> None:
        self.st = st
        self.refused = False

    async def check(self) -> None:
        """With encryption off, an encrypted station room is refused: logged, said once, nothing posted."""
        st = self.st
        if st.cfg.encryption or not st.encrypted:
            return
        if not self.refused:
            self.refused = True
            log.error("station_room_encrypted_refused", room_id=st.room_id,
                      reason="the room is encrypted and [matrix] encryption = false",
                      hint="set [matrix] encryption = true (the default), or use an unencrypted room; "
                      "until then nothing is posted and requests are answered through the API only")
        told_key = REFUSAL_KEY + st.room_id
        if await st.kv.get_json(told_key):
            return
        body = ("I cannot read encrypted messages: this room is encrypted and my configuration has "
                "encryption turned off ([matrix] encryption = false). I will not post permission prompts "
                "here. Ask my operator to turn encryption on or to move me to an unencrypted room.")
        content = {"msgtype": "m.notice", "body": body, "m.mentions": {}}
        try:
            r = await st.client.room_send(st.room_id, "m.room.message", content, tx_id=txn_id("refuse", st.room_id))
        except Exception as e:
            log.warning("refusal_notice_failed", error=f"{type(e).__name__}: {e}")
            return
        if isinstance(r, RoomSendResponse):
            await st.kv.set_json(told_key, True)
        else:
            log.warning("refusal_notice_failed", error=f"{getattr(r, 'status_code', '')}: {getattr(r, 'message', r)}")
