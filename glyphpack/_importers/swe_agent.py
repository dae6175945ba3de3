"""SWE-agent trajectories (``.traj``): ``history`` is OpenAI-chat-like, with tool messages
answering a list of ``tool_call_ids``. Replayed trajectories reuse call ids: the repair
pass makes them unique and keeps each result paired with its call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._history.imported import ImportedAgent, ImportedSession
from .._history.messages import Block, Message, Text, ToolResult
from .base import Tally, append_message, chat_tool_calls, repair, text_of

FORMAT = "swe-agent"


def detect(document: object) -> bool:
    return isinstance(document, dict) and isinstance(document.get("history"), list) and (
        "trajectory" in document or "info" in document
    )


def read(path: Path, document: dict[str, Any]) -> ImportedSession:
    tally = Tally()
    agents: dict[str, list[Message]] = {}
    for number, entry in enumerate(document["history"]):
        if not isinstance(entry, dict):
            tally.skip("history entries that are not objects")
            continue
        agent = str(entry.get("agent") or "main")
        message = chat_message(entry, f"swe-{number}", tally)
        if message is None:
            continue
        append_message(agents.setdefault(agent, []), message)
    imported = tuple(ImportedAgent(name, tuple(repair(messages, tally))) for name, messages in agents.items())
    return ImportedSession("", imported, (), tally.report(FORMAT, imported, 0))


def chat_message(entry: dict[str, Any], message_id: str, tally: Tally) -> Message | None:
    """One OpenAI-chat-like message of a trajectory; None (counted) when it holds nothing
    a history can carry."""
    role = entry.get("role")
    text = text_of(entry.get("content"))
    if role == "tool":
        listed, single = entry.get("tool_call_ids"), entry.get("tool_call_id")
        ids = listed if isinstance(listed, list) and listed else [single] if single else [""]
        # An id that is not a string, or none at all (""), makes a result repair keeps as the user's text.
        answers = tuple(ToolResult(call_id if isinstance(call_id, str) else "", (Text(text),)) for call_id in ids)
        return Message("tool", answers, id=message_id)
    if role not in ("system", "user", "assistant"):
        tally.skip(f"messages of role {role!r}")
        return None
    blocks: list[Block] = [Text(text)] if text else []
    blocks.extend(chat_tool_calls(entry.get("tool_calls"), tally))
    return Message(role, tuple(blocks), id=message_id) if blocks else None
