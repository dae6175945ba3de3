"""Kimi CLI session contexts (``~/.kimi/sessions/<work dir hash>/<session id>.jsonl``): one
message per line in OpenAI chat form (``user``; ``assistant`` with ``tool_calls`` whose
ids read ``Tool:N``; ``tool`` answering by ``tool_call_id``), between ``_checkpoint``
lines (the points ``/rewind`` goes back to) and ``_usage`` lines (the context's token
count), which carry no message. A subagent Kimi CLI started (its ``ReadContext`` tool)
keeps its own context beside the session's, ``<session id>_read_<N>.jsonl``: each is an
agent of the session.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .._history.imported import ImportedAgent, ImportedSession
from .._history.messages import Message
from .base import Tally, append_message, jsonl_records, repair
from .swe_agent import chat_message

FORMAT = "kimi-cli"
#: What Kimi CLI 0.5 on calls a session's context, in the session's own folder (beside
#: its ``wire.jsonl``); before, the context was ``SESSION_ID.jsonl``.
CONTEXT_FILE = "context.jsonl"
#: The lines that carry no message, and why a reader would look for them.
_MARKERS = ("_checkpoint", "_usage")
#: A subagent's context file beside its session's: ``<session id>_<tool>_<N>.jsonl``.
SUBAGENT_FILE = re.compile(r"(?P<session>.+)_(?P<kind>[a-z]+)_(?P<number>\d+)\.jsonl")


def detect(records: list[dict[str, Any]]) -> bool:
    """Every record has a role, and one is Kimi CLI's own marker line."""
    return bool(records) and all(isinstance(r.get("role"), str) for r in records) and any(r.get("role") in _MARKERS for r in records)


def read(path: Path, data: bytes) -> ImportedSession:
    tally = Tally()
    main = _agent("main", data, "kimi", tally)
    agents = [main]
    for sub in subagent_files(path):
        match = SUBAGENT_FILE.fullmatch(sub.name)
        assert match is not None  # subagent_files matched it
        name = f"{match['kind']}-{match['number']}"
        agents.append(_agent(name, sub.read_bytes(), f"kimi-{name}", tally))
    return ImportedSession("", tuple(agents), (), tally.report(FORMAT, tuple(agents), 0))


def subagent_files(path: Path) -> list[Path]:
    """The subagents' context files beside a session's file, by their number."""
    found = []
    for candidate in path.parent.glob(f"{path.stem}_*_*.jsonl"):
        match = SUBAGENT_FILE.fullmatch(candidate.name)
        if match is not None and match["session"] == path.stem:
            found.append((match["kind"], int(match["number"]), candidate))
    return [candidate for _, _, candidate in sorted(found)]


def is_subagent_file(path: Path) -> bool:
    """Whether ``path`` is a subagent's context, read with the session beside it."""
    match = SUBAGENT_FILE.fullmatch(path.name)
    return match is not None and Path(path.parent, match["session"] + ".jsonl").is_file()


def _agent(name: str, data: bytes, prefix: str, tally: Tally) -> ImportedAgent:
    messages: list[Message] = []
    for number, record in jsonl_records(data, tally):
        if record.get("role") in _MARKERS:
            tally.skip(f"{record['role']} lines (no message)")
            continue
        message = chat_message(record, f"{prefix}-{number}", tally)
        if message is not None:
            append_message(messages, message)
    return ImportedAgent(name, tuple(repair(messages, tally)))
