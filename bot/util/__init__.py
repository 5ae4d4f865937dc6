"""Small helpers that know no side: asyncio waits, back-off, durations, ids, logs, the state folder."""
