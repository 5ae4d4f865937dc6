"""The HTTP API (aiohttp) over the service: one module per resource, shared helpers apart.

Parts: ``app`` (the application: the permissions routes, /events, /healthz, /metrics, the error
middleware; registers the other route modules), ``hook_hold`` (``/hooks/{cli}``: one hook request held
in the daemon until it settles or its hook goes away; ``POST /sessions/claim``, the other door's claim),
``rules`` (``/rules``: session rules), ``events`` (GET /events: aiohttp-sse, ids, the ring), ``common``
(the app keys, the JSON error, the caller check, the body read: what route modules share; none
imports the app), ``auth`` (who calls and what each role may do; pure), ``limits`` (connection
cap and whom to close at it, header-read timeout, long-poll cap, agent budgets; /events holds a slot;
each request's caller marked, agent requests counted, the body-read deadline).

Also: ``audit`` (``GET /audit[?since=&room=]``).
"""
