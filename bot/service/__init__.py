"""The running service: the daemon's wiring, the supervisor, health, metrics, webhooks."""
