"""The bot's Matrix session: restore the saved one, else the configured token, else log in; log in
again when the homeserver revokes the token; open the device's crypto store and cross-sign it."""

from __future__ import annotations

import asyncio
import contextlib
import os
from functools import partial

import structlog
from nio import KeysUploadError, LoginResponse, WhoamiResponse
from nio.crypto import ENCRYPTION_ENABLED

from bot.matrix import cross_signing, key_upload, probe
from bot.matrix.crypto import accept_forwards_from_session_owner, fingerprint
from bot.matrix.errors import REVOKED, MatrixFatal, TokenRevoked
from bot.matrix.retry import NETWORK_ERRORS, retry
from bot.matrix.station import Station
from bot.matrix.vault import TRUST_SUFFIXES, Vault
from bot.util.logs import add_secret

log = structlog.get_logger("matrix")

SESSION_KEY = "matrix.session"
CRYPTO_KEY = "matrix.crypto"  # {"device_id", "ed25519", "curve25519"}: for doctor, written after login


class Session:
    """Log-in, restore and re-login of one bot account; its device and identity keys."""

    def __init__(self, st: Station, store_path: str, vault: Vault | None = None) -> None:
        """``vault``: the device is kept in the database (PostgreSQL), restored before nio opens it."""
        self.st = st
        self.cfg = st.cfg
        self.client = st.client
        self.kv = st.kv
        self.store_path = store_path
        self.encryption = st.cfg.encryption
        self.vault = vault if self.encryption else None
        self.new_device = False  # this start logged in with the password: a failed start logs it out again

    async def restore(self) -> bool:
        """Restore the saved session (and open its crypto store); False when none is saved."""
        saved = await self.kv.get_json(SESSION_KEY)
        if not (isinstance(saved, dict) and saved.get("user_id") == self.cfg.user_id and saved.get("access_token")):
            return False
        add_secret(saved["access_token"])
        device_id = str(saved.get("device_id") or "")
        if self.vault is not None:  # the database's copy of the device wins over the local files
            await self.vault.restore(self.cfg.user_id, device_id)
        store = os.path.join(self.store_path, f"{self.cfg.user_id}_{device_id}.db")
        if self.encryption and not os.path.exists(store):
            log.warning("crypto_store_missing", device_id=device_id, path=store, hint="the device's keys are gone: "
                        "encrypted rooms may fail; delete state/ to log in as a new device")
        self.client.restore_login(saved["user_id"], device_id, saved["access_token"])
        self._open_crypto()
        return True

    async def login(self) -> None:
        """Restore the saved session, else use the configured token, else log in once."""
        c = self.client
        self.new_device = False  # only a device this very start logs in is logged out when the start fails
        await probe.homeserver(self.cfg.homeserver)  # not Matrix, or https:// to plain HTTP: said as doctor says it
        if await self.restore():
            try:
                await self._whoami("the saved session (delete state/ to log in afresh)")
            except TokenRevoked as e:
                await self.relogin(e.code)
                return
            log.info("matrix_session_restored", user_id=c.user_id, device_id=c.device_id)
            await self._ready()
            return
        if self.cfg.access_token:
            c.access_token = self.cfg.access_token
            who = await self._whoami("matrix.access_token")
            c.restore_login(who.user_id, who.device_id or "", self.cfg.access_token)
        else:
            await self._password_login()
        await self._logged_in()

    async def relogin(self, code: str) -> None:
        """The homeserver revoked the token: log in again with the password (a new device), inbox kept."""
        if not self.cfg.password:
            raise MatrixFatal(
                f"the homeserver no longer accepts the bot's access token ({code}) and no matrix.password "
                "is configured to log in again; set one, or a new matrix.access_token and delete the saved session"
            )
        log.warning("matrix_token_revoked", code=code, action="logging in again as a new device")
        c = self.client
        c.device_id = ""  # else nio asks for the old device id, whose keys the server forgot
        c.olm, c.store = None, None  # the new device gets a crypto store of its own
        await self._password_login()
        await self._logged_in()

    async def _password_login(self) -> None:
        login = partial(self.client.login, self.cfg.password or "", device_name=self.cfg.device_name)
        r = await probe.until_allowed("login", login)
        if not isinstance(r, LoginResponse):
            raise MatrixFatal(f"matrix.password: login as {self.cfg.user_id} failed ({probe.why(r)}); "
                              "check matrix.user_id and matrix.password")
        self.new_device = True

    async def forget_new_device(self) -> None:
        """The start failed after this start logged in: log that device out and forget its session, so
        failed starts leave no devices behind on the account."""
        if not self.new_device:
            return
        self.new_device = False
        device = self.client.device_id
        try:
            await asyncio.wait_for(self.client.logout(), 15)
        except NETWORK_ERRORS as e:
            log.warning("matrix_logout_failed", device_id=device, error=str(e))
            return
        await self.kv.set_json(SESSION_KEY, None)
        for suffix in (".db", *TRUST_SUFFIXES):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.store_path, f"{self.cfg.user_id}_{device}{suffix}"))
        log.info("matrix_logged_out", device_id=device, reason="the start failed; no device is left behind")

    async def _logged_in(self) -> None:
        """Open the new device's crypto store and save the session."""
        c = self.client
        self._open_crypto()
        add_secret(c.access_token)
        session = {"user_id": c.user_id, "device_id": c.device_id, "access_token": c.access_token}
        if self.vault is None:
            await self.kv.set_json(SESSION_KEY, session)
        else:  # the session and its device in one transaction: a session has its keys
            await self.vault.write({SESSION_KEY: session})
        log.info("matrix_logged_in", user_id=c.user_id, device_id=c.device_id)
        await self._ready()

    async def _ready(self) -> None:
        """The device's keys noted and cross-signed; PostgreSQL: the device saved before anything is posted."""
        await self._save_identity()
        await self._cross_sign()
        if self.vault is not None:
            await self.vault.write({})

    async def _cross_sign(self) -> None:
        """Publish the bot's cross-signing identity (once) and sign this device with it (see cross_signing.py)."""
        c = self.client
        if not self.encryption or c.olm is None:
            return
        if c.should_upload_keys:  # the device keys must be on the server before they can be signed
            r = await key_upload.upload_keys(c)
            if isinstance(r, KeysUploadError) and not key_upload.is_conflict(r):
                raise MatrixFatal(
                    f"matrix: the homeserver refused the bot's device keys ({r.status_code}: {r.message})"
                )
        api = cross_signing.Api(self.cfg.homeserver, c.access_token)
        await cross_signing.ensure(api, self.st.user_id, c.device_id, self.store_path, password=self.cfg.password,
                                   recovery_key=self.cfg.recovery_key)

    def _open_crypto(self) -> None:
        """Make sure nio's crypto store is loaded for this device (restore_login usually did it)."""
        c = self.client
        if not self.encryption:
            return
        if not ENCRYPTION_ENABLED:
            raise MatrixFatal("matrix.encryption: matrix-nio's e2e extra (vodozemac) is not installed; "
                              "install matrix-nio[e2e] or set encryption = false")
        if c.olm is None and c.user_id and c.device_id:
            c.load_store()
        if c.olm is None:
            raise MatrixFatal(f"matrix.encryption: cannot open the crypto store under {self.store_path}")
        accept_forwards_from_session_owner(c.olm)

    async def _save_identity(self) -> None:
        """The bot's device and its identity keys (None where unknown), for doctor."""
        c = self.client
        keys: dict[str, str] = dict(c.olm.account.identity_keys) if c.olm is not None else {}
        device_id = c.device_id or None
        await self.kv.set_json(CRYPTO_KEY, {"device_id": device_id, "ed25519": keys.get("ed25519"),
                                            "curve25519": keys.get("curve25519")})
        if self.encryption:
            log.info("matrix_device", device_id=device_id, ed25519=fingerprint(keys.get("ed25519")))

    async def _whoami(self, source: str) -> WhoamiResponse:
        r = await retry("whoami", self.client.whoami)
        if isinstance(r, WhoamiResponse):
            if r.user_id != self.cfg.user_id:
                raise MatrixFatal(f"{source}: the token belongs to {r.user_id}, not matrix.user_id {self.cfg.user_id}")
            return r
        code = getattr(r, "status_code", "")
        why = f"{source}: the homeserver refused the access token ({code}: {getattr(r, 'message', r)})"
        raise TokenRevoked(why, code) if code in REVOKED else MatrixFatal(why)
