"""Gemini CLI chat recordings: what Gemini CLI writes to disk
(``~/.gemini/tmp/<project hash>/chats/session-*.json``), not a ``Content[]`` list.

The document is ``{sessionId, projectHash, startTime, lastUpdated, messages}``. Each
message has a ``type``: ``user`` and ``gemini`` are the conversation; ``info``,
``error`` and ``warning`` are lines the CLI showed its user and never sent the model
(counted and left out). A ``gemini`` message holds the model's text (``content``), its
thought summaries (``thoughts``: subject and description, no signature), its tool calls
with their results inside them (``toolCalls``: ``id``, ``name``, ``args``, ``result``
as Gemini parts, ``status``) and the request's token counts (``tokens``: ``input``
counts the whole prompt, ``cached`` the part read from the cache).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Block, Message, Text, Thinking, ToolCall, ToolResult, title_from
from .._wire.gemini import response_text
from .base import Tally, append_message, epoch_seconds, image_or_stub, measured_usage, named_model, objects, repair, usage_in

FORMAT = "gemini-cli"
_SHOWN_NOT_SENT = ("info", "error", "warning")


def detect(document: object) -> bool:
    if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
        return False
    return ("sessionId" in document or "projectHash" in document) and any(
        isinstance(m, dict) and m.get("type") in ("user", "gemini") for m in document["messages"]
    )


def read(path: Path, document: dict[str, Any]) -> ImportedSession:
    tally = Tally()
    messages: list[Message] = []
    usage: list[Usage] = []
    model: str | None = None
    for number, entry in objects(document["messages"], tally):
        kind = entry.get("type")
        message_id = str(entry.get("id") or f"gemini-cli-{number}")
        time = epoch_seconds(entry.get("timestamp"))
        if kind in _SHOWN_NOT_SENT:
            tally.skip(f"{kind} lines shown to the user, never sent to the model")
            continue
        if kind == "user":
            blocks = _parts(entry.get("content"), tally)
            if blocks:
                messages.append(Message("user", tuple(blocks), id=message_id, time=time))
            continue
        if kind != "gemini":
            tally.skip(f"{kind or 'untyped'} messages")
            continue
        model = named_model(entry.get("model")) or model
        calls, results = _tool_calls(entry.get("toolCalls"), tally)
        blocks = [*_thoughts(entry.get("thoughts")), *_parts(entry.get("content"), tally), *calls]
        if not blocks:
            continue
        if messages and messages[-1].role == "assistant" and not messages[-1].tool_calls:
            # A response with no calls followed by another: Gemini CLI split one turn.
            messages[-1] = messages[-1].with_content(messages[-1].content + tuple(blocks))
        else:
            messages.append(Message("assistant", tuple(blocks), id=message_id, time=time))
        measured = measured_usage(0, len(messages) - 1, entry.get("tokens"), ("input",), ("cached",))
        if measured:
            usage.append(measured)
        if results:
            append_message(messages, Message("tool", tuple(results), id=f"{message_id}-results", time=time))
    repaired = repair(messages, tally)
    agents = (ImportedAgent("main", tuple(repaired), usage_in(repaired, messages, usage), model=model),)
    title = title_from(str(document.get("summary") or ""))  # else the first task (import_file)
    return ImportedSession(title, agents, (), tally.report(FORMAT, agents, 0))


def _thoughts(thoughts: object) -> list[Block]:
    """Thought summaries as one thinking block (Gemini CLI keeps no signature)."""
    lines = []
    for thought in thoughts if isinstance(thoughts, list) else []:
        if isinstance(thought, dict):
            subject, description = str(thought.get("subject") or ""), str(thought.get("description") or "")
            lines.append(f"{subject}: {description}" if subject and description else subject or description)
    text = "\n".join(line for line in lines if line)
    return [Thinking(text)] if text else []


def _parts(content: object, tally: Tally) -> list[Block]:
    """A ``PartListUnion`` (a string, a part, or a list of either) as text and images."""
    if isinstance(content, str):
        return [Text(content)] if content else []
    blocks: list[Block] = []
    for part in content if isinstance(content, list) else [content] if isinstance(content, dict) else []:
        if isinstance(part, str):
            blocks.extend([Text(part)] if part else [])
        elif isinstance(part, dict) and isinstance(part.get("inlineData"), dict):
            blocks.append(image_or_stub(part["inlineData"].get("mimeType"), part["inlineData"].get("data"), tally))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            blocks.extend([Text(part["text"])] if part["text"] else [])
        elif part is not None:
            tally.skip("content parts that are neither text nor images")
    return blocks


def _tool_calls(calls: object, tally: Tally) -> tuple[list[Block], list[Block]]:
    """Each recorded call and its result (a call with no result is left open: the
    repair answers it). Calls without an id are named by their position."""
    made: list[Block] = []
    answers: list[Block] = []
    for position, call in enumerate(calls if isinstance(calls, list) else []):
        if not isinstance(call, dict) or not call.get("name"):
            tally.skip("malformed tool calls")
            continue
        call_id = str(call.get("id") or f"gemini-cli-call-{position}-{len(made)}")
        args = call.get("args")
        made.append(ToolCall(call_id, str(call["name"]), args if isinstance(args, dict) else {"input": args}))
        if call.get("result") is None:
            continue
        text = _result_text(call["result"])
        answers.append(ToolResult(call_id, (Text(text),), call.get("status") in ("error", "cancelled")))
    return made, answers


def _result_text(result: object) -> str:
    """A result's parts as text: each ``functionResponse``'s response, other parts' text."""
    pieces = []
    for part in result if isinstance(result, list) else [result]:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            pieces.append(response_text(response.get("response")))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        else:
            pieces.append(response_text(part))
    return "\n".join(pieces)
