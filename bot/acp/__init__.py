"""The ACP stdio proxy (``permission-bot acp``): relays an agent's stdio and takes its
permission requests to the daemon's HTTP API. A client of the daemon: it imports nothing of the
daemon's side (inbox, matrix, room, service).

Parts: ``run`` (the ACP run: :mod:`bot.door.run` with this door's filters and proxy), ``proxy`` (its state:
pending requests, the hooks the filters call, its own lines, forwarding), ``filters`` (which lines are parsed,
what is taken: the JSON-RPC envelope), ``messages`` (the ACP params read with the SDK's acp.schema models),
``request`` (one ``session/request_permission``: the door's request with the agent's params, and the body the
daemon gets for it: the tool call completed from earlier updates), ``toolcalls`` (tool-call cache), ``elicit``
(one ``elicitation/create``: its questions in the room, its copy at an elicitation-capable client, the first
answer wins), ``qwen`` (Qwen Code's ``ask_user_question`` permission request asked as a form, answered with its
top-level ``answers``). What every door shares (the relay, the agent process, the
daemon's routes, one request's life, questions and forms) is in :mod:`bot.door`.
"""

import bot.door  # noqa: F401 - first: acp.schema imported lean, before any module of ours uses it
