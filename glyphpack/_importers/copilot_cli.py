"""GitHub Copilot CLI session events JSONL (``~/.copilot/session-state/<id>/events.jsonl``).

Each line is ``{type, data, id, timestamp, parentId}``. The conversation is in
``system.message`` (the system prompt), ``user.message`` (``content`` as typed;
``transformedContent`` is what the model was sent, with the date prepended),
``assistant.message`` (``content``, ``reasoningText``, and ``toolRequests`` with
``toolCallId``, ``name`` and ``arguments``), ``tool.execution_complete`` (the call's
``result.content``, or ``error.message`` when ``success`` is false) and
``system.notification`` (text the CLI hands the model between turns, such as a
background shell finishing). A subagent's events (1.0.74 and later) carry ``agentId``,
the id of the call that dispatched it: each subagent is an agent of its own, named by
``subagent.started``'s ``agentName`` and the call id's end. Hooks, permissions, turn markers and model changes are
the CLI's own bookkeeping: counted and left out. The file records output tokens only,
so there is no measured input to keep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._history.ids import unique_name
from .._history.imported import ImportedAgent, ImportedSession
from .._history.messages import Block, Message, Text, Thinking, ToolCall, ToolResult, first_task
from .base import Tally, append_message, epoch_seconds, jsonl_records, named_model, repair, safe_block, tool_call_arguments

FORMAT = "copilot-cli"
#: The file each session's folder holds; the folder's name is the session's id.
EVENTS_FILE = "events.jsonl"
_CONVERSATION = ("user.message", "assistant.message", "tool.execution_complete", "system.message", "system.notification")


def detect(records: list[dict[str, Any]]) -> bool:
    def is_event(record: dict[str, Any]) -> bool:
        return isinstance(record.get("data"), dict) and isinstance(record.get("type"), str)

    return any(
        is_event(r) and (r["type"] in _CONVERSATION or (r["type"] == "session.start" and r["data"].get("producer") == "copilot-agent"))
        for r in records
    )


def read(path: Path, data: bytes) -> ImportedSession:
    tally = Tally()
    main: list[Message] = []
    typed: list[Message] = []  # what the person wrote to the main agent (not notifications)
    # A subagent's events carry ``agentId``, the id of the call that dispatched it (1.0.74):
    # each subagent's history is its own agent, named as ``subagent.started`` names it.
    histories: dict[str, list[Message]] = {}
    names: dict[str, str] = {}
    models: dict[str | None, str | None] = {}  # each answer names the model that wrote it
    for number, record in jsonl_records(data, tally):
        kind, event = record.get("type"), record.get("data")
        message_id = str(record.get("id") or f"copilot-{number}")
        time = epoch_seconds(record.get("timestamp"))
        agent = record.get("agentId") if isinstance(record.get("agentId"), str) and record.get("agentId") else None
        if kind == "subagent.started" and isinstance(event, dict) and agent is not None:
            names[agent] = str(event.get("agentName") or "subagent")
        if not isinstance(event, dict) or kind not in _CONVERSATION:
            tally.skip(f"{kind or 'untyped'} events (no message)")
            continue
        messages = main if agent is None else histories.setdefault(agent, [])
        content = event.get("content")
        text = content if isinstance(content, str) else ""
        if kind == "system.message":
            if text and not any(m.role == "system" for m in messages):
                messages.insert(0, Message("system", (Text(text),), id=message_id, time=time))
            elif text:  # a later one (a mode change) stays where it came
                messages.append(Message("system", (Text(text),), id=message_id, time=time))
            continue
        if kind in ("user.message", "system.notification"):
            if text:
                messages.append(Message("user", (Text(text),), id=message_id, time=time))
                if kind == "user.message" and agent is None:
                    typed.append(messages[-1])
            continue
        if kind == "assistant.message":
            models[agent] = named_model(event.get("model")) or models.get(agent)
            blocks = _assistant_blocks(event, text, tally)
            if blocks:
                messages.append(Message("assistant", tuple(blocks), id=message_id, time=time))
            continue
        append_message(messages, Message("tool", (_result(event),), id=message_id, time=time))
    agents = [ImportedAgent("main", tuple(repair(main, tally)), model=models.get(None))]
    taken = {"main"}
    for agent_id, history in histories.items():
        name = unique_name(f"{names.get(agent_id, 'subagent')}-{agent_id[-8:]}", taken)
        taken.add(name)
        agents.append(ImportedAgent(name, tuple(repair(history, tally)), model=models.get(agent_id)))
    return ImportedSession(first_task(typed), tuple(agents), (), tally.report(FORMAT, agents, 0))


def _assistant_blocks(event: dict[str, Any], text: str, tally: Tally) -> list[Block]:
    blocks: list[Block] = []
    reasoning = event.get("reasoningText")
    if isinstance(reasoning, str) and reasoning:
        blocks.append(Thinking(reasoning))
    if text:
        blocks.append(Text(text))
    requests = event.get("toolRequests")
    for request in requests if isinstance(requests, list) else []:
        if not isinstance(request, dict):
            tally.skip("malformed tool calls")
            continue
        call = safe_block(
            lambda: ToolCall(request["toolCallId"], str(request["name"]), tool_call_arguments(request.get("arguments"), request["toolCallId"])),
            tally, "malformed tool calls",
        )
        if call is not None:
            blocks.append(call)
    return blocks


def _result(event: dict[str, Any]) -> ToolResult:
    """A tool's result; without a call id, ``""`` (repair keeps it as the user's text)."""
    call_id = event.get("toolCallId")
    call_id = call_id if isinstance(call_id, str) else ""
    failed = event.get("success") is False
    source = event.get("error") if failed else event.get("result")
    body = source.get("message" if failed else "content") if isinstance(source, dict) else source
    return ToolResult(call_id, (Text(body if isinstance(body, str) else "" if body is None else str(body)),), failed)
