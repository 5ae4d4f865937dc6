"""The Matrix side (matrix-nio): session, sync, send, crypto, trust. Knows nothing of ACP or the inbox.

Parts: ``client`` (the façade: join; its parts built and wired at construction), ``session`` (log-in,
restore, re-login, crypto store, cross-signing), ``sender`` (sends and redactions, send_errors /
send_failing), ``sync`` (its own sync loop; a failing batch is fetched again), ``backfill`` (a limited
timeline's gap), ``sync_filter`` (the station-room filter: made once, its id kept in the inbox kv
``matrix.sync_filter``, made again when the server no longer knows it), ``retry`` (what is
transient, ``retry()``, ``MatrixBackoff``, ``retry_after`` of a refusal for rate), ``rate`` (the homeserver's
message limit as the bot counts it, and which waiting send goes next: pure), ``gate`` (every send's turn under
that limit, one gate for the account; the log lines and ``/healthz`` figures of a limit),
``key_upload`` (shielded upload), ``e2ee`` / ``trust`` /
``undecryptable`` / ``refusal`` (encrypted rooms), ``crypto``, ``identities``, ``signing``,
``cross_signing`` (the bot's identity: published, imported from secret storage, devices signed) over
``secret_storage`` (the SSSS crypto, pure), ``room`` (power levels, who may answer), ``station`` (the
room and its settings), ``station_room`` (one station room's parts: trust, encryption, sends, notices; one
per ``[[rooms]]`` entry and the default room, over the one client and sync), ``notices`` (the bot's
m.notice chatter, threaded under the prompt it concerns), ``store`` (nio's crypto store without its
write on every sync), ``vault`` (PostgreSQL: the device's crypto store and cross-signing keys packed
into the key/value store, restored before the store opens), ``txn`` (txn ids), ``errors``.

Also: ``identity_backup`` (the bot's cross-signing keys in the account's secret storage (SSSS), so that a fresh…),
``probe`` (before logging in, the same story doctor tells).
"""
