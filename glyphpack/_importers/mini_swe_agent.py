"""mini-swe-agent trajectories: ``{"info", "messages", "trajectory_format"}`` with the
messages in OpenAI chat form. Older runs act through bash blocks in the assistant's
text and answer in user messages (plain turns); newer ones through tool calls answered
by ``tool`` messages. ``extra.response.usage`` records each response's measured input.

The last record has the role ``exit``: the run's submission, which the model never
saw. When the assistant's last call is still open (the call that submitted), it is that
call's result; otherwise a user message at the end. Either way it is kept and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Message, Text, ToolResult
from .base import CHAT_CACHED, Tally, append_message, measured_usage, objects, repair, usage_in
from .swe_agent import chat_message

FORMAT = "mini-swe-agent"


def detect(document: object) -> bool:
    if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
        return False
    info = document.get("info")
    return str(document.get("trajectory_format", "")).startswith("mini-swe-agent") or (
        isinstance(info, dict) and any(key in info for key in ("mini_version", "exit_status", "model_stats"))
    )


def read(path: Path, document: dict[str, Any]) -> ImportedSession:
    tally = Tally()
    messages: list[Message] = []
    usage: list[Usage] = []
    for number, entry in objects(document["messages"], tally):
        if entry.get("role") == "exit":
            _exit(entry, messages, f"mini-{number}", tally)
            continue
        message = chat_message(entry, f"mini-{number}", tally)
        if message is None:
            continue
        append_message(messages, message)
        measured = _measured(entry, len(messages) - 1)
        if message.role == "assistant" and measured:
            usage.append(measured)
    repaired = repair(messages, tally)
    agents = (ImportedAgent("main", tuple(repaired), usage_in(repaired, messages, usage)),)
    title = str(document.get("instance_id") or "")
    return ImportedSession(title, agents, (), tally.report(FORMAT, agents, 0))


def _exit(entry: dict[str, Any], messages: list[Message], message_id: str, tally: Tally) -> None:
    extra = entry.get("extra")
    status = (extra.get("exit_status") if isinstance(extra, dict) else None) or "exit"
    content = entry.get("content")
    text = f"[mini-swe-agent {status}]\n{content if isinstance(content, str) else ''}".rstrip()
    answered = {r.call_id for m in messages for r in m.tool_results}
    last = messages[-1] if messages else None
    open_calls = [c.id for c in last.tool_calls if c.id not in answered] if last is not None and last.role == "assistant" else []
    if open_calls:
        messages.append(Message("tool", (ToolResult(open_calls[0], (Text(text),)),), id=message_id))
        tally.repair("exit records kept as the result of the call that ended the run")
    else:
        messages.append(Message("user", (Text(text),), id=message_id))
        tally.repair("exit records kept as a last user message")


def _measured(entry: dict[str, Any], end: int) -> Usage | None:
    extra = entry.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    return measured_usage(0, end, response.get("usage") if isinstance(response, dict) else None, ("prompt_tokens",), CHAT_CACHED)
