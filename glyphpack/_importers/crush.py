"""Crush (charmbracelet) project databases (``.crush/crush.db``, SQLite): a ``sessions``
table (title, the parent of a session an agent tool started, the summary message that
compacted it) and a ``messages`` table whose ``parts`` are a JSON list of typed parts:
``text``, ``reasoning``, ``tool_call`` (arguments as a JSON string), ``tool_result``,
``image_url``, ``binary`` and ``finish`` (why the answer ended; an API error's ends an
answer with nothing said). Crush migrates its schema with the goose tool, so the file
also holds a ``goose_db_version`` table: it is told from a Goose agent's database by its
``messages.parts`` column.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._errors import HistoryError
from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Block, Message, Text, Thinking, ToolCall, ToolResult
from .base import (
    Tally,
    append_message,
    epoch_seconds,
    image_or_stub,
    named_model,
    read_only_sqlite,
    repair,
    safe_block,
    text_of,
    tool_call_arguments,
)

FORMAT = "crush"


def is_database(connection: sqlite3.Connection) -> bool:
    """Whether an open SQLite database is Crush's (its messages carry ``parts``)."""
    try:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(messages)")}
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return False
    return "parts" in columns and "sessions" in tables


def read_database(path: Path) -> list[tuple[str, ImportedSession]]:
    """(session id, session) for each top-level session, oldest first; a session an
    agent tool started (``parent_session_id``) is an agent of its parent's."""
    with read_only_sqlite(path) as connection:
        try:
            connection.row_factory = sqlite3.Row
            sessions = [dict(row) for row in connection.execute("SELECT * FROM sessions ORDER BY created_at, id")]
            rows = [dict(row) for row in connection.execute("SELECT * FROM messages ORDER BY created_at, rowid")]
        except sqlite3.Error as exc:
            raise HistoryError(f"{path}: not a Crush database ({exc})") from None
    by_session: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_session.setdefault(str(row.get("session_id")), []).append(row)
    children: dict[str, list[dict[str, Any]]] = {}
    for session in sessions:
        if session.get("parent_session_id"):
            children.setdefault(str(session["parent_session_id"]), []).append(session)
    out = []
    for session in sessions:
        if session.get("parent_session_id"):
            continue
        tally = Tally()
        agents = [_agent("main", session, by_session.get(str(session["id"]), []), tally)]
        for number, child in enumerate(children.get(str(session["id"]), []), start=1):
            agents.append(_agent(f"agent-{number}", child, by_session.get(str(child["id"]), []), tally))
        out.append((str(session["id"]), ImportedSession(str(session.get("title") or ""), tuple(agents), (), tally.report(FORMAT, agents, 0))))
    return out


def _agent(name: str, session: dict[str, Any], rows: Sequence[dict[str, Any]], tally: Tally) -> ImportedAgent:
    messages: list[Message] = []
    model = None
    for row in rows:
        try:
            parts = json.loads(row.get("parts") or "[]")
        except (ValueError, TypeError):
            tally.skip("messages whose parts are not JSON")
            continue
        role = row.get("role")
        if role not in ("user", "assistant", "tool", "system") or not isinstance(parts, list):
            tally.skip("messages of another role or shape")
            continue
        blocks = [block for part in parts if (block := _block(part, tally)) is not None]
        if not blocks:
            ended = next((p.get("data") for p in parts if isinstance(p, dict) and p.get("type") == "finish"), None)
            tally.skip("answers that ended in an error with nothing said" if isinstance(ended, dict) and ended.get("reason") == "error"
                       else "messages with nothing the model reads")
            continue
        if role == "assistant":
            model = named_model(row.get("model")) or model
        append_message(messages, Message(role, tuple(blocks), id=str(row.get("id")), time=epoch_seconds(row.get("created_at"))))
    repaired = repair(messages, tally)
    summary = session.get("summary_message_id")
    compactions: tuple[str, ...] = ()
    start = 0
    if summary and any(m.id == summary for m in repaired):
        compactions = (str(summary),)
        tally.compactions += 1
        start = [m.id for m in repaired].index(str(summary))
    cost = session.get("cost")
    return ImportedAgent(name, tuple(repaired), _last_request(repaired, start, session.get("prompt_tokens")), compactions, model,
                         cost=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost > 0 else None)


def _last_request(messages: Sequence[Message], start: int, prompt_tokens: object) -> tuple[Usage, ...]:
    """The session's last request as Crush counted it: ``prompt_tokens`` is set (not
    added to) after each answer, so it is what the request that produced the last
    answer carried, from the summary in force on (0 after a summary: nothing to learn)."""
    if not isinstance(prompt_tokens, int) or isinstance(prompt_tokens, bool) or prompt_tokens <= 0:
        return ()
    answers = [n for n, m in enumerate(messages) if m.role == "assistant" and n > start]
    return (Usage(start, answers[-1], prompt_tokens),) if answers else ()


def _block(part: object, tally: Tally) -> Block | None:
    if not isinstance(part, dict) or not isinstance(part.get("data"), dict):
        tally.skip("parts that are not objects")
        return None
    kind, data = part.get("type"), part["data"]
    if kind == "text":
        text = text_of(data.get("text"))
        return Text(text) if text else None
    if kind == "reasoning":
        thinking = text_of(data.get("thinking"))
        return Thinking(thinking) if thinking else None
    if kind == "tool_call":
        call_id = str(data.get("id") or "")
        return safe_block(lambda: ToolCall(call_id, str(data.get("name") or "tool"), tool_call_arguments(data.get("input"), call_id)), tally,
                          "malformed tool calls")
    if kind == "tool_result":
        content = text_of(data.get("content"))
        return ToolResult(str(data.get("tool_call_id") or ""), (Text(content),), is_error=bool(data.get("is_error")))
    if kind == "binary":
        return image_or_stub(data.get("mime_type"), data.get("data"), tally)
    if kind == "finish":
        return None
    tally.skip(f"{kind} parts")
    return None
