"""The running service: the daemon's wiring and its lifecycle, in one place.

Parts: ``daemon`` (wires inbox, matrix, outbox, room answers, harness watchers, webhooks, metrics and
timers; submit and decide for the API), ``by_rule`` (a new request settled by the config's rules, then
the session's own, before it is posted), ``rooms`` (one room-answer handler per station room, routing
by credential, each room's health and metrics), ``supervisor`` (the one place that starts and stops
every task:
timer, webhooks, sync, outbox workers, notices, harness watchers; SIGTERM and the first failure end
them all; the exit code), ``health`` (/healthz: ok or degraded, with reasons; pure), ``metrics``
(prometheus-client, a CollectorRegistry per daemon: the inbox listener counts submissions and
settlements, the outbox its posts; the Matrix side's and the webhooks' counts read at scrape time;
knows no daemon), ``webhooks`` (signed outgoing webhooks).
"""
