"""permission-bot: approve what coding agents (ACP) want to do, from a Matrix room."""

__version__ = "0.1.0"
