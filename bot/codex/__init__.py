"""Codex's app-server proxy (``permission-bot codex-app-server``): a front door beside :mod:`bot.acp`, the same
shape. It relays the stdio of ``codex app-server`` (Codex's own JSON-RPC, what its IDE clients speak) byte for
byte, lifts out only the approvals and the questions, submits each to the daemon over HTTP as every door does
(:mod:`bot.door`), and writes the person's answer back in Codex's words. A client of the daemon: it imports
nothing of the daemon's side, and nothing of the ACP door.

Parts: ``run`` (the run: :mod:`bot.door.run` with this door's filters and proxy), ``proxy`` (its state: the
pending approvals, each a command or file-change approval, and questions, what the filters call, the end of a
turn), ``filters`` (which lines are parsed, what is taken), ``wire`` (Codex's requests as daemon records, the
answers as Codex's replies: pure), ``ask`` (one ``requestUserInput``: its questions in the
room, one prompt each, the answers as Codex takes them).
"""
