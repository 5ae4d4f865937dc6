"""Allow/deny rules for `permissions watch` and the daemon's ``[[rules]]`` table (pure, no I/O but @FILE).

A rule (the wire form of agentproto's ``--rules-json``, seed 002)::

    {"match": {"toolName": "Read*", "sessionId": "s-abc"}, "decision": "approve",
     "scope": "always", "optionId": "allow_edits"}

- ``match`` needs at least one of ``toolName``, ``kind``, ``command``, ``sessionId`` and ``label``;
  every field given must match. Each field matches only its own fact, never the agent's title:
- ``toolName`` is an :func:`fnmatch.fnmatchcase` glob, **case-sensitive** (``Bash`` is not ``bash``;
  write ``[Bb]ash`` for both), over the harness's tool name only (``tool_name``, e.g. from
  ``_meta.claudeCode.toolName``). A request without a tool name matches only ``*``.
- ``kind`` is a glob over the ACP tool kind (``read``, ``edit``, ``execute``...). The kind is what
  the agent declares: ``kind = "read"`` trusts the agent to say so.
- ``command`` is a glob over the command line the prompt shows: ``rawInput.command`` (a list is
  joined as a shell line) with its ``args`` appended (:mod:`bot.prompts.shown`), so ``rm *`` matches
  ``{command: rm, args: [-rf, /]}`` and ``make`` does not match ``make -f /tmp/evil.mk``; a request
  without one never matches. An approve rule with a ``command`` never matches a request that sets
  ``env`` or asks to leave the sandbox (``dangerouslyDisableSandbox``...). The command is what would
  run, written by the model.
- ``sessionId`` matches the record's ``session_id`` exactly; the agent chooses its session ids.
- ``label`` matches the record's ``label`` exactly: the name the proxy (``--label``) or the
  submitter set, never a session id the agent chose.
- ``decision`` is ``approve`` or ``deny``; ``scope`` (``once``/``always``) is for approve rules only;
  ``optionId`` picks an exact option. Both are forwarded to the daemon verbatim.
- Unknown keys are refused, so a typo never silently widens or narrows a rule.

:func:`decide` lets deny rules win: if any deny rule matches, the first such deny rule is the
answer; otherwise the first matching approve rule; otherwise ``None`` (the request stays pending).
Rules are numbered from 1 in error messages and in ``watch`` output.

The parts, one job each: :mod:`.model` (what a rule is and what it matches, :func:`decide`),
:mod:`.parse` (rules from JSON or TOML data and ``--rules-json``; errors in one line),
:mod:`.flags` (``watch``'s command line: the tool flags, ``--session``/``--label``, ``--always``).

Also: ``parse`` (rules from their data (JSON, TOML ``[[rules]]``, ``--rules-json`` or its ``@FILE``),…).
"""

from bot.inbox.rules.flags import build_rules, flag_rule, restrict_to_session
from bot.inbox.rules.model import Rule, decide
from bot.inbox.rules.parse import RuleError, parse_rules, parse_rules_json

__all__ = [
    "Rule",
    "RuleError",
    "build_rules",
    "decide",
    "flag_rule",
    "parse_rules",
    "parse_rules_json",
    "restrict_to_session",
]
