"""What every front door shares (``permission-bot acp``, ``permission-bot codex-app-server``): a stdio proxy
between an agent and its client that takes requests to the daemon's HTTP API. A client of the daemon: it
imports nothing of the daemon's side (inbox, matrix, room, service), and nothing of any one door.

Parts: ``run`` (one run: the agent process started, both pumps, the end, the agent stopped; the door gives its
proxy and line filters), ``config`` (ProxyConfig), ``relay`` (bytes), ``ids`` (JSON-RPC ids as keys,
the forwarded-id prefix), ``daemon_client`` (the daemon's routes; DaemonBackoff), ``request`` (one request's
state machine: submitted, long-polled, cancelled, answered; what it needs of the proxy is its ``Host``
protocol; the proxy's own fields of a submission; its ``request_timing`` fields), ``questions`` (one question
as a daemon request), ``forms`` (questions for the room, and their answers read back: pure), ``outcomes`` (a
settled record as the daemon's ACP result: pure), ``inflight`` (a submission unanswered at a cancel: the same
body again, idempotent by key, to learn the record to cancel), ``log`` (the proxy's stderr logging). Importing
the package first imports the ACP SDK's ``acp.schema`` lean (``bot.util.lean_models``: the record's shape):
0.39 s of CPU becomes 0.18 s, on every proxy start.

Also: ``linefilter`` (what every door's line filters share (they run in the relay threads)).
"""

from bot.util.lean_models import load

load("acp.schema")  # first: before any module of ours uses it
