"""Small helpers that know no side (the lowest layer: they import nothing of bot but each other).

Parts: ``aio`` (small asyncio waits; ``on_signals``, where signal handlers are installed; ``run``, on
uvloop where installed), ``backoff`` (the one back-off policy: first pause doubling to a cap, jittered,
reset; ``KeyedBackoff`` one per record; each caller passes its numbers: matrix/retry.py,
acp/daemon_client.py, matrix/notices.py, service/webhooks.py, harness/watcher.py), ``durations``
("90s" / "5m" / "1h" -> seconds, for the CLI and the config), ``ids`` (the safe id charset of session
ids, keys, labels, token names; URL segments), ``jsonhttp`` (the one blocking JSON-over-HTTP helper,
urllib, no proxy for loopback: doctor, demo), ``logs`` (the one structlog set-up of every command, key=value
or JSON lines, and its masking, the ACP proxy's too), ``liblogs`` (library records, stdlib logging, into it),
``statedir`` (the state folder 0700, files 0600, fixed at every start), ``discovery``
(how a client, the CLI, the proxy or a hook, finds the daemon and its token: flags, environment,
default; never a token on argv), ``hide`` (clients' tokens out of an agent's view of /proc), ``words``
(``clip()``, the one text trimmer), ``linkhost`` (the host a person opens from a link, read as a browser
reads it, WHATWG by ada-url; links any common reading disagrees on refused).

Also: ``digest`` (the request digest), ``lean_models`` (importing a module that declares many pydantic models,
without the work nobody uses…), ``outage`` (what one retry loop says about an outage (the state's database away, for
now)), ``plainhttp`` (does a ``https://`` URL's port speak plain HTTP? (A TLS handshake to such a port hangs or…),
``urlsecrets`` (A URL's own credentials kept out of logs).
"""
