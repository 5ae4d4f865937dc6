"""The ACP stdio proxy (``permission-bot acp``): relays an agent's stdio and takes its
permission requests to the daemon's HTTP API. A client of the daemon: it imports nothing of the
daemon's side (inbox, matrix, room, service).

Parts: ``run`` (the run: the agent started, both pumps, the end), ``proxy`` (its state: pending
requests, the hooks the filters call, its own lines, forwarding), ``config`` (ProxyConfig),
``relay`` (bytes), ``filters`` (which lines are parsed, what is taken: the JSON-RPC envelope),
``ids`` (JSON-RPC ids as keys, the forwarded-id prefix), ``messages`` (the ACP params read with the
SDK's acp.schema models), ``request`` (one request's state machine; what it needs of the proxy is
its ``Host`` protocol), ``submission`` (the body the daemon gets for it: the proxy's fields set, the
tool call completed from earlier updates), ``timing`` (its ``request_timing`` fields: pure),
``outcomes`` (what the agent is told), ``process`` (the agent process),
``toolcalls`` (tool-call cache), ``sdk`` (acp.schema imported lean), ``daemon_client`` (the daemon's
routes; DaemonBackoff),
``inflight`` (a submission unanswered at a cancel: the same body again, idempotent by key, to learn
the record to cancel), ``log`` (the proxy's stderr logging), ``elicit`` (one ``elicitation/create``: its
questions in the room, its copy at an elicitation-capable client, the first answer wins), ``forms`` (an
elicitation's schema as questions, the answers as its content: pure), ``questions`` (one question as a
daemon request), ``qwen`` (Qwen Code's ``ask_user_question`` permission request asked as a form, answered with
its top-level ``answers``).
"""

from bot.acp import sdk  # noqa: F401 - first: acp.schema imported lean, before any module of ours uses it
from bot.acp.config import ProxyConfig
from bot.acp.log import configure_stderr_logging
from bot.acp.run import run_proxy

__all__ = ["ProxyConfig", "configure_stderr_logging", "run_proxy"]
