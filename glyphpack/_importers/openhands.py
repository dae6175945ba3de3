"""OpenHands event histories: evaluation output JSONL (one instance a line, its
``history`` a list of events) and a conversation's events saved as one JSON list.

An event is an ``action`` or an ``observation`` with a ``source``. The model's own words
and calls come from ``tool_call_metadata.model_response`` (the chat completion that
produced the action: its text, every tool call with its id and JSON arguments, and its
``usage``); actions sharing a response are one assistant message. An observation with
``tool_call_metadata`` is the result of that call; an ``error`` observation without one
(OpenHands refused a malformed call) is told to the model as the user's text, as
OpenHands does. ``recall`` events (workspace context OpenHands renders with its own
prompt template) are kept, not sent: an ``Opaque`` block on the message before them.
Each instance of an evaluation file is an agent of its own, named by its instance id.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .._history.ids import unique_name
from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Block, Message, Opaque, Text, ToolCall, ToolResult
from .base import (
    CHAT_CACHED,
    Tally,
    append_message,
    chat_tool_calls,
    epoch_seconds,
    jsonl_records,
    measured_usage,
    repair,
    safe_block,
    text_of,
    usage_in,
)

FORMAT = "openhands"
EVENTS_FORMAT = "openhands-events"


def _is_event(value: object) -> bool:
    return isinstance(value, dict) and "source" in value and ("action" in value or "observation" in value)


def _is_instance(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("history"), list) and any(_is_event(e) for e in value["history"][:20])


def detect(records: list[dict[str, Any]]) -> bool:
    """JSONL: evaluation instances, or one event a line."""
    return any(_is_instance(r) for r in records) or sum(_is_event(r) for r in records) >= 2


def detect_events(document: object) -> bool:
    """JSON: a list of events (one instance as a JSON object reads as a one-line JSONL file)."""
    return isinstance(document, list) and sum(_is_event(e) for e in document[:20]) >= 2


def read(path: Path, data: bytes) -> ImportedSession:
    tally = Tally()
    records = [record for _, record in jsonl_records(data, tally)]
    instances = [r for r in records if _is_instance(r)]
    if instances:
        tally.skip("lines that are not evaluation instances", len(records) - len(instances))
        runs = [(str(r.get("instance_id") or f"instance-{n}"), r["history"]) for n, r in enumerate(instances, start=1)]
    else:
        runs = [("main", [r for r in records if _is_event(r)])]
    return _session(runs, tally, FORMAT)


def read_events(path: Path, document: Any) -> ImportedSession:
    return _session([("main", document)], Tally(), EVENTS_FORMAT)


def _session(runs: list[tuple[str, list[Any]]], tally: Tally, format: str) -> ImportedSession:
    agents: list[ImportedAgent] = []
    for name, events in runs:
        messages, usage = _history(events, name, tally)
        repaired = repair(messages, tally)
        agents.append(ImportedAgent(unique_name(_clean(name), {a.name for a in agents}), tuple(repaired), usage_in(repaired, messages, usage)))
    if len(agents) > 1:
        tally.assume(f"each of the {len(agents)} evaluation instances is an agent of its own, named by its instance id")
    title = agents[0].name if len(agents) == 1 and agents[0].name != "main" else ""
    return ImportedSession(title, tuple(agents), (), tally.report(format, agents, 0))


def _clean(name: str) -> str:
    """``name`` with only letters, digits, ``.``, ``_`` and ``-`` (an agent name, an id prefix)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "instance"


def _history(events: list[Any], name: str, tally: Tally) -> tuple[list[Message], list[Usage]]:
    messages: list[Message] = []
    usage: list[Usage] = []
    responses: set[str] = set()  # ids of the model responses read
    prefix = _clean(name)

    def add(role: str, blocks: list[Block], number: int) -> None:
        if blocks:
            time = epoch_seconds(events[number].get("timestamp"))
            append_message(messages, Message(role, tuple(blocks), id=f"{prefix}-{number}", time=time))  # type: ignore[arg-type]

    for number, event in enumerate(events):
        if not _is_event(event):
            tally.skip("history entries that are not events")
            continue
        metadata = event.get("tool_call_metadata")
        metadata = metadata if isinstance(metadata, dict) else None
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if "action" in event:
            action = event["action"]
            if metadata is not None:
                _add_response(event, metadata, args, messages, responses, usage, f"{prefix}-{number}", tally)
            elif action == "system":
                add("system", _texts(args.get("content") or event.get("message")), number)
            elif action == "message":
                role = "user" if event.get("source") == "user" else "assistant"
                add(role, _texts(args.get("content") or event.get("message")), number)
            elif action == "recall":
                _keep(messages, event, tally)
            else:
                tally.skip(f"{action} actions without a model response")
            continue
        observation = event["observation"]
        content = text_of(event.get("content"))
        if metadata is not None:
            call_id = metadata.get("tool_call_id")
            block = safe_block(lambda: ToolResult(call_id, (Text(content),), observation == "error"), tally, "malformed observations")  # type: ignore[arg-type]
            add("tool", [block] if block is not None else [], number)
        elif observation == "error":
            add("user", _texts(f"[OpenHands error] {content}"), number)
        elif observation == "recall":
            _keep(messages, event, tally)
        else:
            tally.skip(f"{observation} observations without a call")
    return messages, usage


def _texts(value: object) -> list[Block]:
    text = text_of(value)
    return [Text(text)] if text else []


def _keep(messages: list[Message], event: dict[str, Any], tally: Tally) -> None:
    """An event kept in the store but not sent: an ``Opaque`` block on the last message."""
    if not messages:
        tally.skip("recall events before any message")
        return
    messages[-1] = messages[-1].with_content((*messages[-1].content, Opaque("openhands-recall", event)))


def _add_response(
    event: dict[str, Any],
    metadata: dict[str, Any],
    args: dict[str, Any],
    messages: list[Message],
    responses: set[str],
    usage: list[Usage],
    message_id: str,
    tally: Tally,
) -> None:
    found = metadata.get("model_response")
    response: dict[str, Any] = found if isinstance(found, dict) else {}
    response_id = str(response.get("id") or message_id)
    if response_id in responses:  # another action of a response already read: its calls are there
        return
    choices = response.get("choices") if isinstance(response.get("choices"), list) else []
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    blocks: list[Block] = []
    if isinstance(message, dict):
        blocks.extend(_texts(message.get("content")))
        blocks.extend(chat_tool_calls(message.get("tool_calls"), tally))
    if not any(isinstance(b, ToolCall) for b in blocks):  # no response recorded: the action itself
        thought = args.get("thought")
        blocks = _texts(thought) + blocks
        call_id, name = metadata.get("tool_call_id"), metadata.get("function_name")
        arguments = {k: v for k, v in args.items() if k != "thought"}
        block = safe_block(lambda: ToolCall(call_id, str(name), json.loads(json.dumps(arguments, default=str))), tally, "malformed tool calls")  # type: ignore[arg-type]
        if block is not None:
            blocks.append(block)
        tally.assume("actions without their model response: the call is rebuilt from the action's arguments")
    if not blocks:
        return
    responses.add(response_id)
    messages.append(Message("assistant", tuple(blocks), id=message_id, time=epoch_seconds(event.get("timestamp"))))
    measured = measured_usage(0, len(messages) - 1, response.get("usage"), ("prompt_tokens",), CHAT_CACHED)
    if measured:
        usage.append(measured)
