"""The running service: the daemon's wiring and its lifecycle, in one place.

Parts: ``daemon`` (wires inbox, matrix, outbox, room answers, harness watchers, webhooks, metrics and
timers; submit and decide for the API), ``by_rule`` (a new request settled by the config's rules, then
the session's own, before it is posted), ``rooms`` (one room-answer handler per station room, routing
by credential, each room's health and metrics), ``supervisor`` (the one place that starts and stops
every task: timer, webhooks, sync, outbox workers, notices, harness watchers; SIGTERM and the first
failure end them all; the exit code), ``health`` (/healthz: ok or degraded, with reasons; pure), ``metrics``
(prometheus-client, a CollectorRegistry per daemon: the inbox listener counts submissions and
settlements, the outbox its posts; the Matrix side's and the webhooks' counts read at scrape time;
knows no daemon), ``webhooks`` (signed outgoing webhooks).

Also: ``checkpoints`` (the ledger's head posted into each station room (docs/audit.md)), ``escalation`` (a prompt
unanswered too long paged, one page per room per window), ``floods`` (the caps on pending requests, and the room's
notice at a cap), ``hook_leases`` (each daemon owns the hooks it holds), ``leadership`` (leader or standby, and
what is left of a term's Matrix side once it is over), ``state_db`` (which database the daemon's state lives in),
``tick_loop`` (one loop for a leader's timed worker).
"""
