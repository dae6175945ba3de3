"""Codex CLI rollout JSONL: ``{timestamp, type, payload}`` lines. ``session_meta``
instructions become the system prompt; ``response_item`` lines are Responses API items
(messages, reasoning, function and custom tool calls and their outputs); ``compacted``
lines are compaction points with their summary. UI events (``event_msg``) and turn
settings are counted and left out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Block, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from .._wire.common import image_from_url
from .base import (
    Tally,
    compaction_ids,
    epoch_seconds,
    jsonl_records,
    measured_usage,
    named_model,
    repair,
    safe_block,
    text_of,
    tool_call_arguments,
    usage_in,
)

FORMAT = "codex"


def detect(records: list[dict[str, Any]]) -> bool:
    return any(r.get("type") in ("session_meta", "response_item", "turn_context") and "payload" in r for r in records)


def read(path: Path, data: bytes) -> ImportedSession:
    tally = Tally()
    messages: list[Message] = []
    usage = _Usage()
    starts: list[int] = []  # where the requests after each compaction began
    model: str | None = None  # each turn's context names the model it calls
    window: int | None = None  # and its events the input window it ran with

    def add(role: str, blocks: list[Block], number: str, time: float | None = None) -> None:
        if not blocks:
            return
        if messages and messages[-1].role == role and role in ("assistant", "tool"):
            messages[-1] = messages[-1].with_content(messages[-1].content + tuple(blocks))
        else:
            messages.append(Message(role, tuple(blocks), id=f"codex-{number}", time=time))  # type: ignore[arg-type]
            usage.message(role, len(messages) - 1)

    for number, record in jsonl_records(data, tally):
        kind, payload = record.get("type"), record.get("payload")
        if not isinstance(payload, dict):
            tally.skip(f"{kind or 'untyped'} lines without a payload")
            continue
        if kind == "session_meta":
            instructions = payload.get("instructions")
            if isinstance(instructions, str) and instructions and not any(m.role == "system" for m in messages):
                messages.insert(0, Message("system", (Text(instructions),), id=f"codex-{number}"))
            continue
        if kind == "turn_context":  # not a message (counted below), but it names the model
            model = named_model(payload.get("model")) or model
        if kind == "event_msg":  # task_started and token_count carry the window the turn ran with
            info = payload.get("info")
            for found in (payload.get("model_context_window"), info.get("model_context_window") if isinstance(info, dict) else None):
                if isinstance(found, int) and not isinstance(found, bool) and found > 0:
                    window = found
        if kind == "event_msg" and payload.get("type") == "token_count":
            usage.measured(_last_input(payload.get("info")))
            continue
        if kind == "compacted":
            tally.compactions += 1
            usage.start = len(messages)
            starts.append(len(messages))
            summary = payload.get("message")
            if isinstance(summary, str) and summary:
                add("user", [Text(f"[codex compaction summary]\n{summary}")], number, epoch_seconds(record.get("timestamp")))
            continue
        if kind != "response_item":
            tally.skip(f"{kind or 'untyped'} lines (no message)")
            continue
        role, blocks = _item(payload, tally)
        add(role, blocks, number, epoch_seconds(record.get("timestamp")))
    repaired = repair(messages, tally)
    agents = (ImportedAgent("main", tuple(repaired), usage_in(repaired, messages, usage.records), compaction_ids(repaired, messages, starts), model, window),)
    return ImportedSession("", agents, (), tally.report(FORMAT, agents, 0))


class _Usage:
    """Pairs ``token_count`` events with the responses they measured. Some Codex
    versions write the event before the response's items, others after them; the
    file's first event tells which (a response read and not yet measured: after)."""

    def __init__(self) -> None:
        self.records: list[Usage] = []
        self.start = 0  # the first message requests carry (after a compaction, its summary)
        self.events_first: bool | None = None
        self.unmeasured: int | None = None  # events after: the response read since the last message of another role
        self.pending: Usage | None = None  # events first: an event's count waiting for its response

    def message(self, role: str, index: int) -> None:
        if role != "assistant":
            self.pending, self.unmeasured = None, None  # a turn ended without its response or its event
        elif self.events_first and self.pending:
            self.records.append(self.pending._replace(start=self.start, end=index))
            self.pending = None
        else:
            self.unmeasured = index

    def measured(self, counted: Usage | None) -> None:
        """``counted``: an event's count (its start and end are placed here)."""
        if self.events_first is None:
            self.events_first = self.unmeasured is None
        if not counted:
            return
        if self.events_first:
            self.pending = counted
        elif self.unmeasured is not None:
            self.records.append(counted._replace(start=self.start, end=self.unmeasured))
            self.unmeasured = None


def _last_input(info: object) -> Usage | None:
    """The count of a ``token_count`` event's last request (its input tokens include the cached ones)."""
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    return measured_usage(0, 0, last, ("input_tokens",), ("cached_input_tokens",))


def _item(item: dict[str, Any], tally: Tally) -> tuple[str, list[Block]]:
    """(neutral role, blocks) of one Responses API item."""
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        neutral = "system" if role in ("developer", "system") else "assistant" if role == "assistant" else "user"
        return neutral, _content(item.get("content"), tally)
    if kind == "reasoning":
        parts = item.get("summary")
        summary = text_of([s for s in parts if isinstance(s, dict)] if isinstance(parts, list) else [])
        blocks: list[Block] = [Thinking(summary)] if summary else []
        if item.get("encrypted_content"):
            blocks.append(Opaque("encrypted_reasoning", {"encrypted_content": item["encrypted_content"]}))
        return "assistant", blocks
    if kind in ("function_call", "custom_tool_call"):
        call_id = str(item.get("call_id") or item.get("id") or "")
        raw = item.get("arguments") if kind == "function_call" else item.get("input")
        block = safe_block(lambda: ToolCall(call_id, str(item.get("name") or "tool"), tool_call_arguments(raw, call_id)), tally, "malformed tool calls")
        return "assistant", [block] if block is not None else []
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        block = safe_block(lambda: ToolResult(item["call_id"], (Text(text_of(output)),)), tally, "malformed tool outputs")
        return "tool", [block] if block is not None else []
    return "assistant", [Opaque(str(kind), item)]


def _content(content: object, tally: Tally) -> list[Block]:
    if isinstance(content, str):
        return [Text(content)]
    blocks: list[Block] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            block = safe_block(lambda: Text(part["text"]), tally, "malformed text parts")
        elif kind == "input_image":
            url = part.get("image_url")
            block = safe_block(lambda: image_from_url(url), tally, "images without a URL") if url else None
            if block is None and not url:
                tally.skip("images without a URL")
        else:
            block = Opaque(str(kind), part)
        if block is not None:
            blocks.append(block)
    return blocks
