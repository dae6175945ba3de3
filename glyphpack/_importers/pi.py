"""pi (and oh-my-pi) session JSONL: ``session``, ``message``, ``model_change``,
``thinking_level_change`` and ``compaction`` lines; roles user, assistant,
``toolResult`` and ``bashExecution``. Files with entry ids and parent ids are walked from
their last entry; v1 files are read in order. Assistant turns that ended in an error or
an abort can hold calls that never got results: the repair pass answers each with an
error result (counted)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from .base import (
    Tally,
    append_message,
    compaction_ids,
    epoch_seconds,
    image_or_stub,
    jsonl_records,
    measured_usage,
    named_model,
    repair,
    safe_block,
    text_of,
    usage_in,
)

FORMAT = "pi"
_ROLES = ("user", "assistant", "toolResult", "bashExecution")


def detect(records: list[dict[str, Any]]) -> bool:
    if any(r.get("type") == "session" and ("cwd" in r or "modelId" in r) for r in records[:3]):
        return True
    return any(r.get("type") == "message" and isinstance(r.get("message"), dict) and r["message"].get("role") in _ROLES
               and "uuid" not in r for r in records)


def read(path: Path, data: bytes) -> ImportedSession:
    tally = Tally()
    records = [record for _, record in jsonl_records(data, tally)]
    records = _live_path(records)
    messages: list[Message] = []
    usage: list[Usage] = []
    numbers: list[int] = []  # each message's entry number, for compactions' first kept entry
    context_start = 0
    starts: list[int] = []  # where the requests after each compaction began
    model: str | None = None
    for number, record in enumerate(records):
        kind = record.get("type")
        if kind == "compaction":
            tally.compactions += 1
            kept = record.get("firstKeptEntryIndex")
            if isinstance(kept, int) and not isinstance(kept, bool):
                # Later requests carry the summary and the entries from the first kept one.
                context_start = next((n for n, entry in enumerate(numbers) if entry >= kept), len(messages))
                starts.append(context_start)
            summary = record.get("summary")
            if isinstance(summary, str) and summary:
                messages.append(Message("user", (Text(f"[pi compaction summary]\n{summary}"),), id=f"pi-{number}",
                                        time=epoch_seconds(record.get("timestamp"))))
                numbers.append(number)
            continue
        if kind != "message" or not isinstance(record.get("message"), dict):
            tally.skip(f"{kind or 'untyped'} lines (no message)")
            continue
        message = _message(record["message"], f"pi-{number}", tally)
        if message is None:
            continue
        message = dataclasses.replace(message, time=epoch_seconds(record.get("timestamp")))
        if message.role == "assistant":
            model = named_model(record["message"].get("model")) or model
            measured = measured_usage(
                context_start, len(messages), record["message"].get("usage"), ("input", "cacheRead", "cacheWrite"), ("cacheRead",), ("cacheWrite",)
            )
            if measured:
                usage.append(measured)
        if append_message(messages, message):
            numbers.append(number)
    repaired = repair(messages, tally)
    agents = (ImportedAgent("main", tuple(repaired), usage_in(repaired, messages, usage), compaction_ids(repaired, messages, starts), model),)
    return ImportedSession("", agents, (), tally.report(FORMAT, agents, 0))


def _live_path(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries on the path to the last entry when entries carry ids and parent ids (the
    tree form); the file in order otherwise."""
    by_id = {r["id"]: r for r in records if isinstance(r.get("id"), str)}
    if not any("parentId" in r for r in records) or not by_id:
        return records
    last = next((r for r in reversed(records) if isinstance(r.get("id"), str)), None)
    path, seen = [], set()
    while last is not None and id(last) not in seen:
        seen.add(id(last))
        path.append(last)
        parent = last.get("parentId")
        last = by_id.get(parent) if isinstance(parent, str) else None
    header = [r for r in records if r.get("type") == "session"]
    return header + path[::-1]


def _message(data: dict[str, Any], message_id: str, tally: Tally) -> Message | None:
    role = data.get("role")
    if role == "toolResult":
        content = tuple(b for b in _blocks(data.get("content"), tally) if isinstance(b, (Text, Image)))
        call_id = data.get("toolCallId")
        # Without a call id ("" for repair to keep it as the user's text): nothing is lost.
        result = ToolResult(call_id if isinstance(call_id, str) else "", content, bool(data.get("isError")))
        return Message("tool", (result,), id=message_id)
    if role == "bashExecution":
        status = f" (exit code {data.get('exitCode')})" if data.get("exitCode") not in (0, None) else ""
        text = f"[the user ran a shell command{status}] $ {data.get('command', '')}\n{text_of(data.get('output'))}"
        return Message("user", (Text(text),), id=message_id)
    if role not in ("user", "assistant"):
        tally.skip(f"messages of role {role!r}")
        return None
    blocks = _blocks(data.get("content"), tally)
    if not blocks and role == "assistant" and data.get("stopReason") in ("error", "aborted"):
        tally.skip(f"assistant turns that ended in an {data.get('stopReason')} with nothing said")
        return None
    return Message(role, tuple(blocks), id=message_id)


def _blocks(content: object, tally: Tally) -> list[Block]:
    if isinstance(content, str):
        return [Text(content)] if content else []
    blocks: list[Block] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            tally.skip("content items that are not objects")
            continue
        kind = item.get("type")
        block: Block | None
        if kind == "text":
            block = safe_block(lambda: Text(item["text"]), tally, "malformed text blocks")
        elif kind == "thinking":
            signature = item.get("thinkingSignature") or item.get("signature") or None
            block = safe_block(lambda: Thinking(str(item.get("thinking") or ""), signature), tally, "malformed thinking")
        elif kind == "toolCall":
            arguments: dict[str, Any] = item["arguments"] if isinstance(item.get("arguments"), dict) else {}
            block = safe_block(lambda: ToolCall(item["id"], str(item["name"]), arguments), tally, "malformed tool calls")
        elif kind == "image":
            block = image_or_stub(item.get("mimeType"), item.get("data"), tally)
        else:
            block = Opaque(str(kind), item)
        if block is not None:
            blocks.append(block)
    return blocks
