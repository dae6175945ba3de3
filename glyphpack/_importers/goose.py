"""Goose sessions: the SQLite database Goose keeps today
(``~/.local/share/goose/sessions/sessions.db``, every session in one file: a ``sessions``
table and a ``messages`` table whose ``content_json`` holds each message's content), and
the JSONL files it wrote before (``sessions/<name>.jsonl``: a first line of session
metadata, then one message per line).

A message is ``{role, created, content, metadata}``: ``created`` in seconds; each
content item has a ``type``: ``text``, ``image`` (``data``, ``mimeType``), ``thinking``
(with its ``signature``), ``redactedThinking``, ``toolRequest`` (``id`` and ``toolCall``:
``{status: "success", value: {name, arguments}}``, or ``{status: "error", error}`` for a
call the model wrote that Goose could not read), ``frontendToolRequest`` (the same, run
by the app), ``toolResponse`` (``id`` and ``toolResult``: ``{status: "success", value}``,
``value`` holding ``content`` items and ``isError`` or, in older files, being the list of
items; ``{status: "error", error}``), and what the app showed its user alone
(``toolConfirmationRequest``, ``actionRequired``, ``systemNotification``: counted and
left out). ``metadata.agentVisible`` false marks what Goose's compaction put away (kept
here, whole); the summary it sent instead is where a compaction starts.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._history.imported import ImportedAgent, ImportedSession
from .._history.messages import Block, Image, Message, RedactedThinking, Text, Thinking, ToolCall, ToolResult, title_from
from .._types import Role
from .base import (
    Tally,
    compaction_ids,
    epoch_seconds,
    image_or_stub,
    jsonl_records,
    named_model,
    read_only_sqlite,
    repair,
    text_of,
)

FORMAT = "goose"
_SQLITE = b"SQLite format 3\x00"
_SHOWN_TO_THE_USER = ("toolConfirmationRequest", "actionRequired", "systemNotification")


def detect(records: list[dict[str, Any]]) -> bool:
    """JSONL: a first line of session metadata, or messages with Goose's content types."""
    if records and "working_dir" in records[0] and "role" not in records[0]:
        return True
    return any(
        isinstance(r.get("created"), int) and isinstance(r.get("content"), list)
        and any(isinstance(c, dict) and c.get("type") in ("toolRequest", "toolResponse") for c in r["content"])
        for r in records
    )


def read(path: Path, data: bytes) -> ImportedSession:
    tally = Tally()
    records = [record for _, record in jsonl_records(data, tally)]
    head = records[0] if records and "role" not in records[0] else {}
    rows = [(str(n), r, r.get("metadata")) for n, r in enumerate(records) if "role" in r]
    return _session(rows, str(head.get("description") or ""), None, tally)


def is_database(data: bytes) -> bool:
    return data.startswith(_SQLITE)


def read_database(path: Path) -> list[tuple[str, ImportedSession]]:
    """(session id, session) for each session in a Goose ``sessions.db``, oldest first;
    ``HistoryError`` naming the file when it is not one Goose wrote."""
    from .._errors import HistoryError

    with read_only_sqlite(path) as connection:
        try:
            connection.row_factory = sqlite3.Row
            sessions = [dict(row) for row in connection.execute("SELECT * FROM sessions ORDER BY created_at, id")]
            out = []
            for session in sessions:
                rows = connection.execute("SELECT * FROM messages WHERE session_id = ? ORDER BY id", (session["id"],))
                out.append((str(session["id"]), _session_from_rows(session, [dict(r) for r in rows])))
            return out
        except (sqlite3.Error, KeyError) as exc:
            raise HistoryError(f"{path}: not a Goose sessions database ({exc})") from None


def _session_from_rows(session: dict[str, Any], rows: list[dict[str, Any]]) -> ImportedSession:
    tally = Tally()
    messages = []
    for row in rows:
        try:
            content = json.loads(row["content_json"])
        except (ValueError, TypeError):
            tally.skip("messages whose content is not JSON")
            continue
        try:
            metadata = json.loads(row.get("metadata_json") or "{}")
        except (ValueError, TypeError):
            metadata = {}  # visibility unreadable: the message is kept as one the model saw
            tally.assume("messages whose metadata is not JSON read as seen by the model")
        message = {"role": row.get("role"), "created": row.get("created_timestamp"), "content": content}
        messages.append((str(row.get("message_id") or f"goose-{row.get('id')}"), message, metadata))
    try:
        config = json.loads(session.get("model_config_json") or "{}")
    except (ValueError, TypeError):
        config = {}
    model = named_model(config.get("model_name")) if isinstance(config, dict) else None
    return _session(messages, str(session.get("name") or session.get("description") or ""), model, tally)


def _session(rows: Iterable[tuple[str, dict[str, Any], object]], title: str, model: str | None, tally: Tally) -> ImportedSession:
    """One session from its messages: (id, message, metadata) each."""
    messages: list[Message] = []
    starts: list[int] = []
    put_away = False  # the messages before were ones Goose's compaction took from the model's view
    for message_id, raw, metadata in rows:
        hidden = isinstance(metadata, dict) and metadata.get("agentVisible") is False
        blocks, results = _blocks(raw.get("content"), tally)
        time = epoch_seconds(raw.get("created"))
        if put_away and not hidden:
            starts.append(len(messages))
            tally.compactions += 1
        put_away = hidden
        if results:
            messages.append(Message("tool", tuple(results), id=f"{message_id}-results", time=time))
        if blocks:
            role: Role = "assistant" if raw.get("role") == "assistant" else "user"
            messages.append(Message(role, tuple(blocks), id=message_id, time=time))
        if not blocks and not results:
            tally.skip("messages with nothing the model reads")
    repaired = repair(messages, tally)
    agents = (ImportedAgent("main", tuple(repaired), (), compaction_ids(repaired, messages, starts), model),)
    return ImportedSession(title_from(title), agents, (), tally.report(FORMAT, agents, 0))


def _blocks(content: object, tally: Tally) -> tuple[list[Block], list[Block]]:
    """A message's content as (blocks, tool results)."""
    blocks: list[Block] = []
    results: list[Block] = []
    for item in content if isinstance(content, list) else []:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text" and isinstance(item.get("text"), str):
            blocks.append(Text(item["text"]))
        elif kind == "image":
            blocks.append(image_or_stub(item.get("mimeType"), item.get("data"), tally))
        elif kind == "thinking":
            blocks.append(Thinking(str(item.get("thinking") or ""), item.get("signature") or None))
        elif kind == "redactedThinking":
            blocks.append(RedactedThinking(str(item.get("data") or "")))
        elif kind in ("toolRequest", "frontendToolRequest"):
            call = item.get("toolCall")
            value = call.get("value") if isinstance(call, dict) and call.get("status") == "success" else None
            if not isinstance(value, dict) or not isinstance(item.get("id"), str):
                tally.skip("tool calls Goose could not read")
                continue
            arguments = value.get("arguments")
            blocks.append(ToolCall(item["id"], str(value.get("name") or "tool"), arguments if isinstance(arguments, dict) else {}))
        elif kind == "toolResponse" and isinstance(item.get("id"), str):
            results.append(_result(item["id"], item.get("toolResult"), tally))
        elif kind in _SHOWN_TO_THE_USER:
            tally.skip(f"{kind} items shown to the user, never sent to the model")
        else:
            tally.skip(f"{kind or 'untyped'} content items")
    return blocks, results


def _result(call_id: str, result: object, tally: Tally) -> ToolResult:
    if not isinstance(result, dict) or result.get("status") != "success":
        error = result.get("error") if isinstance(result, dict) else None
        return ToolResult(call_id, (Text(str(error or "the tool failed")),), True)
    value = result.get("value")
    items = value.get("content") if isinstance(value, dict) else value
    content: list[Text | Image] = []
    for part in items if isinstance(items, list) else []:
        if isinstance(part, dict) and part.get("type") == "image":
            content.append(image_or_stub(part.get("mimeType"), part.get("data"), tally))
        elif isinstance(part, dict) and part.get("type") == "resource" and isinstance(part.get("resource"), dict):
            content.append(Text(str(part["resource"].get("text") or f"[resource {part['resource'].get('uri', '')}]")))
        else:
            content.append(Text(text_of(part)))
    failed = isinstance(value, dict) and value.get("isError") is True
    return ToolResult(call_id, tuple(content) or (Text(""),), failed)
