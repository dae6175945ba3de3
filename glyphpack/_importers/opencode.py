"""OpenCode sessions, as ``opencode export SESSION`` writes them (1.x): ``{info,
messages: [{info, parts}]}``.

``info`` holds the session's ``title`` and times. Each message's ``info`` has its
``role`` and ``time.created`` (milliseconds); its ``parts`` are what it holds. A user
message's ``text`` parts are its words (``file`` parts name what was attached; an image
attached as a data URL comes in whole). An assistant message is one or more *steps*, each
one model call between ``step-start`` and ``step-finish``: its ``text``, ``reasoning`` and
``tool`` parts (a tool part is the call and, once run, its result: ``state.output``, or
``state.error`` when it failed; one still ``pending`` or ``running`` has none), and the
step's measured tokens on ``step-finish`` (input plus the cache read and written).
``compaction`` parts are OpenCode's own compactions. Patches, snapshots and other
bookkeeping parts are counted and left out.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Block, Image, Message, Text, Thinking, ToolCall, ToolResult
from .base import (
    Tally,
    append_message,
    compaction_ids,
    count_at,
    epoch_seconds,
    named_model,
    objects,
    repair,
    safe_block,
    tool_call_arguments,
    usage_in,
)

FORMAT = "opencode"


def detect(document: object) -> bool:
    if not isinstance(document, dict) or not isinstance(document.get("info"), dict) or not isinstance(document.get("messages"), list):
        return False
    return any(isinstance(m, dict) and isinstance(m.get("info"), dict) and isinstance(m.get("parts"), list) for m in document["messages"])


def read(path: Path, document: dict[str, Any]) -> ImportedSession:
    tally = Tally()
    messages: list[Message] = []
    usage: list[Usage] = []
    starts: list[int] = []
    model: str | None = None
    for number, entry in objects(document["messages"], tally):
        info: dict[str, Any] = entry["info"] if isinstance(entry.get("info"), dict) else {}
        parts = [p for p in entry.get("parts") or () if isinstance(p, dict)]
        created = info["time"].get("created") if isinstance(info.get("time"), dict) else None
        time = epoch_seconds(created)
        message_id = str(info.get("id") or f"opencode-{number}")
        if info.get("role") == "user":
            blocks = [b for p in parts for b in _user_blocks(p, tally)]
            if blocks:
                append_message(messages, Message("user", tuple(blocks), id=message_id, time=time))
        elif info.get("role") == "assistant":
            model = named_model(info.get("modelID")) or model
            _Steps(messages, usage, starts, tally, message_id, time).read(parts)
        else:
            tally.skip(f"messages of role {info.get('role')!r}")
    repaired = repair(messages, tally)
    agents = (ImportedAgent("main", tuple(repaired), usage_in(repaired, messages, usage), compaction_ids(repaired, messages, starts), model),)
    title = document["info"].get("title")
    return ImportedSession(title if isinstance(title, str) else "", agents, (), tally.report(FORMAT, agents, 0))


def _user_blocks(part: dict[str, Any], tally: Tally) -> list[Block]:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str) and part["text"]:
        return [Text(part["text"])]
    if kind == "file":
        url, mime = part.get("url"), str(part.get("mime") or "")
        if isinstance(url, str) and url.startswith("data:") and mime.startswith("image/") and "," in url:
            try:
                return [Image(mime, base64.b64decode(url.split(",", 1)[1], validate=True))]
            except (binascii.Error, ValueError):
                tally.repair("images without valid data kept as a text stub")
        return [Text(f"[file attached: {part.get('filename') or part.get('url') or 'unnamed'}]")]
    if kind == "text":
        return []
    tally.skip(f"{kind or 'untyped'} parts (not sent to the model)")
    return []


class _Steps:
    """One assistant message's parts, read step by step: each step an assistant message
    (its text, reasoning and calls) followed by a ``tool`` message (the calls' results)."""

    def __init__(self, messages: list[Message], usage: list[Usage], starts: list[int], tally: Tally, message_id: str, time: float | None):
        self.messages, self.usage, self.starts, self.tally = messages, usage, starts, tally
        self.message_id, self.time = message_id, time
        self.blocks: list[Block] = []
        self.results: list[ToolResult] = []
        self.step = 0

    def read(self, parts: list[dict[str, Any]]) -> None:
        for part in parts:
            kind = part.get("type")
            if kind == "step-start":
                self.flush()
            elif kind == "text" and isinstance(part.get("text"), str):
                if part["text"]:
                    self.blocks.append(Text(part["text"]))
            elif kind == "reasoning" and isinstance(part.get("text"), str):
                if part["text"]:
                    self.blocks.append(Thinking(part["text"]))
            elif kind == "tool":
                self.tool(part)
            elif kind == "step-finish":
                end = self.flush()
                self.measured(part.get("tokens"), end)
            elif kind == "compaction":
                self.flush()
                self.tally.compactions += 1
                self.starts.append(len(self.messages))
            else:
                self.tally.skip(f"{kind or 'untyped'} parts (not sent to the model)")
        self.flush()

    def tool(self, part: dict[str, Any]) -> None:
        state: dict[str, Any] = part["state"] if isinstance(part.get("state"), dict) else {}
        call_id = part.get("callID")
        call = safe_block(lambda: ToolCall(str(call_id), str(part["tool"]), tool_call_arguments(state.get("input") or {}, call_id)), self.tally,
                          "malformed tool calls")
        if not isinstance(call, ToolCall):
            return
        self.blocks.append(call)
        status = state.get("status")
        if status == "completed":
            self.results.append(ToolResult(call.id, (Text(str(state.get("output") or "")),)))
        elif status == "error":
            self.results.append(ToolResult(call.id, (Text(str(state.get("error") or "")),), True))
        # pending or running: no result yet (the import's repair says so)

    def flush(self) -> int | None:
        """Append the step read so far; the index of its assistant message, if any."""
        end = None
        if self.blocks:
            self.step += 1
            suffix = "" if self.step == 1 else f"-{self.step}"
            self.messages.append(Message("assistant", tuple(self.blocks), id=f"{self.message_id}{suffix}", time=self.time))
            end = len(self.messages) - 1
        if self.results:
            append_message(self.messages, Message("tool", tuple(self.results), id=f"{self.message_id}-results-{self.step}", time=self.time))
        self.blocks, self.results = [], []
        return end

    def measured(self, tokens: object, end: int | None) -> None:
        """A step's measured input: OpenCode counts input apart from the cache read and written."""
        if end is None:
            return
        read, written = count_at(tokens, ("cache", "read")), count_at(tokens, ("cache", "write"))
        total = count_at(tokens, ("input",)) + read + written
        if total > 0:
            self.usage.append(Usage(self.starts[-1] if self.starts else 0, end, total, read, written))
