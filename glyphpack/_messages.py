"""The provider-neutral message model, turn boundaries, and provider converters.

A history is a sequence of ``Message`` values. Roles: ``system``, ``user``,
``assistant``, ``tool``. Content blocks: ``Text``, ``Image``, ``ToolCall``,
``ToolResult``, ``Thinking``. Every value round-trips losslessly through JSON
(``message_to_json`` / ``message_from_json``).

A history is at a turn boundary when every tool call has its result and no result
lacks its call: the only place a history may be saved or cut, because providers reject
a tool call without its result and a result whose call is missing.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Sequence
from typing import Any, Union

from ._errors import GlyphpackError

ROLES = ("system", "user", "assistant", "tool")


class HistoryError(GlyphpackError):
    """A history a provider would reject (an orphaned tool result or call), or a bad message."""


@dataclasses.dataclass(frozen=True)
class Text:
    text: str


@dataclasses.dataclass(frozen=True)
class Image:
    """An image: its bytes and media type, or a reference (URL or file id) instead."""

    media_type: str = "image/png"
    data: bytes | None = dataclasses.field(default=None, repr=False)
    ref: str | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.ref is None):
            raise HistoryError("an Image needs exactly one of data (bytes) or ref (a URL or id)")


@dataclasses.dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict = dataclasses.field(default_factory=dict)

    def __hash__(self) -> int:  # arguments is a dict: hash by identity of the call
        return hash((self.id, self.name))


@dataclasses.dataclass(frozen=True)
class ToolResult:
    call_id: str
    content: tuple = ()  # of Text and Image
    is_error: bool = False


@dataclasses.dataclass(frozen=True)
class Thinking:
    text: str
    signature: str | None = None


Block = Union[Text, Image, ToolCall, ToolResult, Thinking]


def new_id() -> str:
    """A fresh message id (32 hex digits)."""
    return uuid.uuid4().hex


@dataclasses.dataclass(frozen=True)
class Message:
    """One message: a role, content blocks, and an id that stays with it."""

    role: str
    content: tuple = ()
    id: str = dataclasses.field(default_factory=new_id)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise HistoryError(f"role must be one of {', '.join(ROLES)}, not {self.role!r}")
        if isinstance(self.content, str):
            object.__setattr__(self, "content", (Text(self.content),))
        elif not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.content if isinstance(b, ToolCall)]

    @property
    def tool_results(self) -> list[ToolResult]:
        return [b for b in self.content if isinstance(b, ToolResult)]

    @property
    def images(self) -> list[Image]:
        """Every image the message carries, tool results' included."""
        found = []
        for block in self.content:
            if isinstance(block, Image):
                found.append(block)
            elif isinstance(block, ToolResult):
                found.extend(b for b in block.content if isinstance(b, Image))
        return found

    @property
    def text(self) -> str:
        """The text blocks joined (tool results' text included)."""
        parts = []
        for block in self.content:
            if isinstance(block, Text):
                parts.append(block.text)
            elif isinstance(block, ToolResult):
                parts.extend(b.text for b in block.content if isinstance(b, Text))
        return "\n".join(parts)


# ------------------------------------------------------------------------------ JSON


def _block_to_json(block: Block) -> dict:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, Image):
        out: dict[str, Any] = {"type": "image", "media_type": block.media_type}
        if block.data is not None:
            out["data"] = base64.b64encode(block.data).decode("ascii")
        else:
            out["ref"] = block.ref
        return out
    if isinstance(block, ToolCall):
        return {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments}
    if isinstance(block, ToolResult):
        return {
            "type": "tool_result",
            "call_id": block.call_id,
            "content": [_block_to_json(b) for b in block.content],
            "is_error": block.is_error,
        }
    if isinstance(block, Thinking):
        return {"type": "thinking", "text": block.text, "signature": block.signature}
    raise HistoryError(f"not a content block: {block!r}")


def _block_from_json(data: dict) -> Block:
    kind = data.get("type")
    try:
        if kind == "text":
            return Text(data["text"])
        if kind == "image":
            raw = data.get("data")
            return Image(data["media_type"], base64.b64decode(raw, validate=True) if raw is not None else None, data.get("ref"))
        if kind == "tool_call":
            return ToolCall(data["id"], data["name"], dict(data.get("arguments") or {}))
        if kind == "tool_result":
            return ToolResult(data["call_id"], tuple(_block_from_json(b) for b in data.get("content", ())), bool(data.get("is_error")))
        if kind == "thinking":
            return Thinking(data["text"], data.get("signature"))
    except (KeyError, TypeError, ValueError) as exc:
        raise HistoryError(f"a {kind!r} block is missing or has a bad field: {exc}") from None
    raise HistoryError(f"unknown content block type {kind!r}")


def message_to_json(message: Message) -> dict:
    return {"id": message.id, "role": message.role, "content": [_block_to_json(b) for b in message.content]}


def message_from_json(data: dict) -> Message:
    if not isinstance(data, dict) or "role" not in data:
        raise HistoryError(f"a message must be an object with a role, not {str(data)[:80]!r}")
    return Message(data["role"], tuple(_block_from_json(b) for b in data.get("content", ())), data.get("id") or new_id())


def history_to_json(messages: Sequence[Message]) -> list[dict]:
    return [message_to_json(m) for m in messages]


def history_from_json(data: list) -> list[Message]:
    return [message_from_json(m) for m in data]


# --------------------------------------------------------------------- turn boundaries


def pending_calls(messages: Sequence[Message]) -> list[str]:
    """Ids of tool calls that have no result yet, in call order."""
    answered = {r.call_id for m in messages for r in m.tool_results}
    return [c.id for m in messages for c in m.tool_calls if c.id not in answered]


def is_turn_boundary(messages: Sequence[Message]) -> bool:
    """True when every tool call has its result and every result follows its call."""
    try:
        validate_history(messages, allow_pending=False)
    except HistoryError:
        return False
    return True


def turn_boundaries(messages: Sequence[Message]) -> list[int]:
    """Every n (0..len) such that ``messages[:n]`` is at a turn boundary."""
    open_calls: set[str] = set()
    broken = False
    out = [0]
    for n, message in enumerate(messages, start=1):
        for result in message.tool_results:
            if result.call_id not in open_calls:
                broken = True  # an orphaned result: no prefix from here on is valid
            open_calls.discard(result.call_id)
        for call in message.tool_calls:
            open_calls.add(call.id)
        if not broken and not open_calls:
            out.append(n)
    return out


def validate_history(messages: Sequence[Message], *, allow_pending: bool = True) -> None:
    """Raise ``HistoryError`` the way a provider would reject this history.

    Rejected: a tool result whose call is not earlier in the history; a tool call
    whose result does not come before the next assistant message; a duplicate call id.
    With ``allow_pending``, calls at the very end may still await their results
    (mid-turn), otherwise that is an error too.
    """
    open_calls: dict[str, int] = {}
    seen: set[str] = set()
    for index, message in enumerate(messages):
        for result in message.tool_results:
            if result.call_id not in open_calls:
                where = "was already answered" if result.call_id in seen else "has no earlier tool call"
                raise HistoryError(f"message {index}: the tool result for call {result.call_id!r} {where}")
            del open_calls[result.call_id]
        if message.role == "assistant" and open_calls:
            missing = ", ".join(sorted(open_calls))
            raise HistoryError(f"message {index}: tool calls {missing} have no results before the next assistant turn")
        for call in message.tool_calls:
            if call.id in seen:
                raise HistoryError(f"message {index}: duplicate tool call id {call.id!r}")
            seen.add(call.id)
            open_calls[call.id] = index
    if open_calls and not allow_pending:
        missing = ", ".join(sorted(open_calls))
        raise HistoryError(f"mid-turn: tool calls {missing} have no results yet")


# ------------------------------------------------------------------ Anthropic Messages


def _anthropic_image(block: Image) -> dict:
    if block.data is not None:
        data = base64.b64encode(block.data).decode("ascii")
        return {"type": "image", "source": {"type": "base64", "media_type": block.media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": block.ref}}


def _anthropic_block(block: Block) -> dict:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, Image):
        return _anthropic_image(block)
    if isinstance(block, ToolCall):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
    if isinstance(block, ToolResult):
        out = {
            "type": "tool_result",
            "tool_use_id": block.call_id,
            "content": [_anthropic_block(b) for b in block.content],
        }
        if block.is_error:
            out["is_error"] = True
        return out
    if isinstance(block, Thinking):
        return {"type": "thinking", "thinking": block.text, "signature": block.signature or ""}
    raise HistoryError(f"not a content block: {block!r}")


def to_anthropic(messages: Sequence[Message]) -> tuple[str | None, list[dict]]:
    """(system prompt, Messages API ``messages``): tool messages become user messages
    of ``tool_result`` blocks, and consecutive messages of one role are merged (the
    API wants user and assistant to alternate)."""
    system = "\n\n".join(m.text for m in messages if m.role == "system") or None
    out: list[dict] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "user" if message.role in ("user", "tool") else "assistant"
        blocks = [_anthropic_block(b) for b in message.content]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def _from_anthropic_block(data: dict) -> Block:
    kind = data.get("type")
    if kind == "text":
        return Text(data["text"])
    if kind == "image":
        source = data["source"]
        if source.get("type") == "base64":
            return Image(source["media_type"], base64.b64decode(source["data"]))
        return Image(source.get("media_type", "image/png"), ref=source.get("url") or source.get("file_id"))
    if kind == "tool_use":
        return ToolCall(data["id"], data["name"], dict(data.get("input") or {}))
    if kind == "tool_result":
        content = data.get("content", ())
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        return ToolResult(data["tool_use_id"], tuple(_from_anthropic_block(b) for b in content), bool(data.get("is_error")))
    if kind in ("thinking", "redacted_thinking"):
        return Thinking(data.get("thinking", ""), data.get("signature") or None)
    raise HistoryError(f"unsupported Anthropic content block type {kind!r}")


def from_anthropic(messages: Sequence[dict], system: str | None = None) -> list[Message]:
    """Neutral messages from Anthropic Messages ``messages`` (and ``system``): a user
    message of tool results becomes a ``tool`` message (its other blocks a user message)."""
    out = [Message("system", (Text(system),))] if system else []
    for data in messages:
        content = data["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = [_from_anthropic_block(b) for b in content]
        if data["role"] == "user":
            results = tuple(b for b in blocks if isinstance(b, ToolResult))
            others = tuple(b for b in blocks if not isinstance(b, ToolResult))
            if results:
                out.append(Message("tool", results))
            if others:
                out.append(Message("user", others))
        else:
            out.append(Message("assistant", tuple(blocks)))
    return out


# ----------------------------------------------------------- OpenAI Chat Completions


def _openai_part(block: Block) -> dict:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, Image):
        url = block.ref
        if block.data is not None:
            url = f"data:{block.media_type};base64,{base64.b64encode(block.data).decode('ascii')}"
        return {"type": "image_url", "image_url": {"url": url}}
    raise HistoryError(f"{type(block).__name__} cannot be a Chat Completions content part")


def to_openai_chat(messages: Sequence[Message]) -> list[dict]:
    """Chat Completions ``messages``: tool calls as ``tool_calls`` with JSON-string
    arguments, each tool result as its own ``tool`` message. Thinking is left out (the
    API takes none back); images in tool results follow as a user message, since
    ``tool`` messages carry text only."""
    out: list[dict] = []
    for message in messages:
        if message.role == "tool":
            images = []
            for result in message.tool_results:
                text = "\n".join(b.text for b in result.content if isinstance(b, Text))
                if result.is_error:
                    text = f"[error] {text}"
                out.append({"role": "tool", "tool_call_id": result.call_id, "content": text})
                images += [_openai_part(b) for b in result.content if isinstance(b, Image)]
            if images:
                out.append({"role": "user", "content": images})
            continue
        parts = [_openai_part(b) for b in message.content if isinstance(b, (Text, Image))]
        entry: dict[str, Any] = {"role": message.role}
        if message.role == "assistant":
            entry["content"] = "\n".join(p["text"] for p in parts if p["type"] == "text") or None
            calls = message.tool_calls
            if calls:
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for c in calls
                ]
        elif message.role == "system":
            entry["content"] = message.text
        else:
            entry["content"] = parts
        out.append(entry)
    return out


def from_openai_chat(messages: Sequence[dict]) -> list[Message]:
    """Neutral messages from Chat Completions ``messages`` (consecutive ``tool``
    messages become one neutral ``tool`` message)."""
    out: list[Message] = []
    for data in messages:
        role = data["role"]
        content = data.get("content")
        if role == "tool":
            result = ToolResult(data["tool_call_id"], (Text(content if isinstance(content, str) else json.dumps(content)),))
            if out and out[-1].role == "tool":
                out[-1] = Message("tool", out[-1].content + (result,), out[-1].id)
            else:
                out.append(Message("tool", (result,)))
            continue
        blocks: list[Block] = []
        if isinstance(content, str):
            blocks.append(Text(content))
        elif content:
            for part in content:
                if part.get("type") == "text":
                    blocks.append(Text(part["text"]))
                elif part.get("type") == "image_url":
                    url = part["image_url"]["url"]
                    if url.startswith("data:"):
                        header, _, payload = url.partition(",")
                        blocks.append(Image(header[5:].split(";")[0], base64.b64decode(payload)))
                    else:
                        blocks.append(Image(ref=url))
        for call in data.get("tool_calls") or ():
            function = call["function"]
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError as exc:
                raise HistoryError(f"tool call {call['id']!r} has arguments that are not JSON: {exc}") from None
            blocks.append(ToolCall(call["id"], function["name"], arguments))
        out.append(Message("system" if role == "developer" else role, tuple(blocks)))
    return out
