"""The station room at work: prompts posted and paced, keycaps, room answers bound and settled."""
