"""`permission-bot run --config PATH`: the daemon in the foreground."""

from __future__ import annotations

import os

import structlog
from aiohttp import web

from bot.cli.config_file import load_or_exit
from bot.cli.flags import fail
from bot.config import Config
from bot.util import aio, statedir


async def _serve(cfg: Config) -> int:
    from bot.api.app import create_app
    from bot.api.auth import Tokens
    from bot.api.limits import LimitedRunner
    from bot.service.daemon import Daemon
    from bot.service.supervisor import Supervisor

    log = structlog.get_logger("run")
    from bot.inbox.db import DatabaseError, DatabaseUrlError, SchemaTooNew

    state = cfg.state_dir
    if (bad := statedir.problem(state)) is not None:  # one line, not a traceback from deep in the start-up
        return fail("{} -> {}".format(*bad), 2)
    try:
        daemon = Daemon(cfg)
    except DatabaseUrlError as e:  # one line naming state.database, never the password
        return fail(f"{e}", 2)
    supervisor = Supervisor(daemon)
    supervisor.catch_signals()  # before start-up: a SIGTERM at any stage stops cleanly
    try:
        await daemon.start()
    except (SchemaTooNew, DatabaseError) as e:
        code = fail(str(e), 2)  # the one line first: closing may log, or fail too
        await daemon.close()
        return code
    # after the state opened: a bad database stays one line (state.database), as the contract says
    log.info("state_folder", path=str(state.absolute()),
             **({} if state.is_absolute() else {"note": "state.path is relative to the working directory"}))
    if not cfg.api.token and not cfg.api.tokens:
        log.warning("api_token_missing", hint="add [[api.tokens]] (or api.token); all routes but /healthz are closed")
    elif cfg.api.token:
        log.warning(
            "api_token_legacy",
            hint="api.token is one secret for both roles: whatever holds it to submit (a proxy, a hook, an agent "
            "that reads its environment) can also approve; give agents [[api.tokens]] role = \"agent\" and keep "
            "a role = \"decider\" token where only people reach it",
        )
    runner = LimitedRunner(create_app(daemon, Tokens.from_config(cfg.api)), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, cfg.api.host, cfg.api.port, reuse_address=True)
    try:
        await site.start()
    except OSError as e:
        log.error("api_listen_failed", listen=cfg.api.listen, error=e.strerror)
        await daemon.close()
        return 1
    log.info("api_listening", listen=cfg.api.listen)
    code = 0
    try:
        code = await supervisor.run()
    finally:
        await runner.cleanup()
        await daemon.close()
        log.info("stopped", code=code)
    return code


def run(config_path: str) -> int:
    """Load the config (one line naming the key on error, exit 2: :func:`load_or_exit`; it also sets the log up,
    every secret of the config masked) and run until stopped."""
    os.umask(0o077)  # everything the daemon writes (state, keys, logs it creates) is its owner's only
    cfg = load_or_exit(config_path)
    try:
        return aio.run(_serve(cfg))
    except KeyboardInterrupt:
        return 130
