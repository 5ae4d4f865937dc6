"""The station room at work: what the inbox holds, made visible in the room, and the room's answers
taken back to the inbox.

Parts: ``outbox`` (post / settle / pace / seed / clear workers, a back-off per record; a 413 gets a
short fallback prompt or edit), ``posts`` (a record -> the prompt as posted and its settled edit, and
their short fallbacks; completeness remembered for answers; at submit, will the prompt and its worst-case
settled edit fit one event), ``event_size`` (an event's size against 64 KiB, Megolm growth too; pure),
``keycaps`` (keycap reactions under
prompts still pending, taken back once settled; background work behind the outbox's foreground),
``quiet`` (when the room is quiet enough for the bot's own events; ``EditPacer``: held edits at most
3 s; pure), ``answers`` (one room event: timeline mark, classify, look up, bind, check the sender,
settle, notice), ``targets`` (a record as the answer cores see it: pure), ``pages`` (the escalation page: one ``m.text``
mentioning who is paged and naming the prompts waiting; pure), ``timing``
(``request_timing``: one log event per request with the time between its stages; bench/latency.py reads it).

Also: ``api_answers`` (A decision from the HTTP API (or a rule) on a question or a plan), ``backlog`` (in which
order the poster sends the prompts not in the room yet (pure)), ``poster`` (the outbox's poster).
"""
