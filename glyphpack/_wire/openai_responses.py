"""OpenAI's Responses API: ``client.responses.create``, input items to and from neutral messages.

Requests are stateless (``store`` is the caller's choice; the full input is sent each
turn): system text becomes ``instructions``; user and assistant text become messages;
each tool call a ``function_call`` item and each result a ``function_call_output`` item
whose output carries the result's images as ``input_image`` parts. Thinking text is
not sent: the API takes reasoning back only as its own items, kept as ``Opaque`` and
sent back when they carry their encrypted content (``include=["reasoning.encrypted_content"]``,
which OpenAI asks for with ``store=False``, so a reasoning model keeps its train of
thought across tool calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import HistoryError
from .._history.messages import Block, Image, Message, Opaque, Text, ToolCall, ToolResult
from .._providers.profile import Profile
from .._types import public
from .base import Json, ProviderApi, usage_tokens
from .common import (
    KNOWN_BLOCKS,
    MALFORMED,
    check_image_count,
    check_image_url,
    content_part,
    each_known,
    image_from_url,
    image_url,
    message_error,
    results_first,
    tool_arguments,
)
from .openai_chat import OpenAIChat


def responses_part(block: Text | Image) -> Json:
    """A text or image block as a Responses ``input_text`` / ``input_image`` part."""
    return content_part(block, "input_text", lambda image: {"type": "input_image", "image_url": image_url(image), "detail": "auto"})


def reasoning_item(block: Block) -> Json | None:
    """A reasoning item the API gave, as it takes it back: only one that carries its
    ``encrypted_content`` (asked for with ``include=["reasoning.encrypted_content"]``),
    which any request can verify; one known by id alone exists only where the response
    was stored, so it stays out. None for any other block."""
    if not isinstance(block, Opaque) or not block.sends_reasoning:
        return None
    payload = block.payload
    return {"type": "reasoning", "id": payload.get("id"), "summary": payload.get("summary") or [],
            "encrypted_content": payload["encrypted_content"]}


@public
def to_openai_responses(messages: Sequence[Message], *, detail: str | None = None) -> tuple[str | None, list[Json]]:
    """(``instructions``, ``input`` items) for ``client.responses.create``; ``detail``
    (the reader's, e.g. ``"original"``) is set on every image part when given."""
    instructions = "\n\n".join(m.text for m in messages if m.role == "system") or None
    items: list[Json] = []

    def part(block: Text | Image) -> Json:
        out = responses_part(block)
        return out | {"detail": detail} if detail and out["type"] == "input_image" else out

    for message in results_first(messages):
        if each_known(message, KNOWN_BLOCKS, "Responses").role == "system":
            continue
        parts = [part(b) for b in message.content if isinstance(b, (Text, Image))]
        if message.role == "assistant":
            # In the order the model wrote them: its reasoning, its words, its calls.
            items.extend(sent for sent in map(reasoning_item, message.content) if sent is not None)
            text = "\n".join(p["text"] for p in parts if p["type"] == "input_text")
            if parts:
                items.append({"role": "assistant", "content": text})
            items.extend(
                {"type": "function_call", "call_id": b.id, "name": b.name, "arguments": b.arguments_json}
                for b in message.content
                if isinstance(b, ToolCall)
            )
            continue
        for result in message.tool_results:
            text = f"[error] {result.text}" if result.is_error else result.text
            images = [part(b) for b in result.images()]
            output: str | list[Json] = [{"type": "input_text", "text": text}, *images] if images else text
            items.append({"type": "function_call_output", "call_id": result.call_id, "output": output})
        if parts:
            items.append({"role": "user", "content": parts})
    return instructions, items


def _content_blocks(content: object) -> list[Block]:
    if isinstance(content, str):
        return [Text(content)]
    blocks: list[Block] = []
    for part in content or ():  # type: ignore[attr-defined]
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            blocks.append(Text(part["text"]))
        elif kind == "input_image":
            blocks.append(image_from_url(part.get("image_url")))
        else:
            blocks.append(Opaque(str(kind), part))
    return blocks


@public
def from_openai_responses(items: Sequence[Json], instructions: str | None = None) -> list[Message]:
    """Neutral messages from Responses input or output items (a response's
    ``output``, as ``response.model_dump()["output"]``). Consecutive assistant items
    (text, calls, reasoning) form one assistant message; consecutive outputs one
    ``tool`` message. Unknown items become ``Opaque`` blocks of an assistant message."""
    out = [Message("system", (Text(instructions),))] if instructions else []

    def add(role: str, blocks: list[Block]) -> None:
        if out and out[-1].role == role and role in ("assistant", "tool"):
            out[-1] = out[-1].with_content(out[-1].content + tuple(blocks))
        else:
            out.append(Message(role, tuple(blocks)))  # type: ignore[arg-type]

    for index, item in enumerate(items):
        try:
            kind = item.get("type", "message")
            if kind == "message":
                role = item["role"]
                role = "system" if role == "developer" else role
                add(role, _content_blocks(item.get("content")))
            elif kind == "function_call":
                call_id = item["call_id"]
                add("assistant", [ToolCall(call_id, item["name"], tool_arguments(item.get("arguments"), call_id))])
            elif kind == "function_call_output":
                output = item.get("output")
                parts = _content_blocks(output) if isinstance(output, list) else [Text(str(output or ""))]
                add("tool", [ToolResult(item["call_id"], tuple(p for p in parts if isinstance(p, (Text, Image))))])
            else:  # reasoning (sent back when encrypted) and server-side tool items: kept as they came
                add("assistant", [Opaque(str(kind), dict(item))])
        except MALFORMED as exc:
            raise message_error(index, exc) from None
    return out


def check_openai_responses(items: Sequence[Json], *, max_images: int | None = None) -> None:
    """Raise ``HistoryError`` where the Responses API would reject ``input``: every
    ``function_call_output`` follows its ``function_call``, every call is answered before
    the next message, there is at least one item, an image sent as bytes is of a
    ``WEB_IMAGE_TYPES`` type, and at most ``max_images`` images."""
    if not items:
        raise HistoryError("input is empty")
    open_calls: set[str] = set()
    images = 0
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        parts = item.get("output") if kind == "function_call_output" else item.get("content")
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict) and part.get("type") == "input_image":
                images += 1
                check_image_url(f"item {index}", part.get("image_url"))
        if kind == "function_call":
            open_calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in open_calls:
                raise HistoryError(f"item {index}: output for call {item['call_id']!r}, which no earlier function_call made")
            open_calls.discard(item["call_id"])
        elif kind == "reasoning" and not (isinstance(item.get("id"), str) and isinstance(item.get("summary"), list)):
            raise HistoryError(f"item {index}: a reasoning item needs its id and a summary list")
        elif kind == "message" and item.get("role") == "user" and open_calls:
            raise HistoryError(f"item {index}: a user message while calls {sorted(open_calls)} are unanswered")
    if open_calls:
        raise HistoryError(f"calls {sorted(open_calls)} have no function_call_output")
    check_image_count(images, max_images)


class OpenAIResponses(ProviderApi):
    """``client.responses.create(**request, tools=...)``: the whole input every turn
    (stateless), so compaction decides what the model sees."""

    name = "openai-responses"
    provider = "openai"
    title = "Responses"
    request_key = "input"
    response_key = "output"
    sdk_module = "openai"
    sdk_package = "openai"
    client_class = "OpenAI"
    output_usage_key = "output_tokens"
    key_variables = OpenAIChat.key_variables
    overflow_patterns = OpenAIChat.overflow_patterns  # one provider, one wording
    overflow_wordings = OpenAIChat.overflow_wordings

    def to_wire(self, messages: Sequence[Message], profile: Profile | None = None, model: str = "") -> tuple[str | None, list[Json]]:
        return to_openai_responses(messages, detail=profile.reader.detail if profile else None)

    def from_wire(self, items: Sequence[Json], system: str | None = None) -> list[Message]:
        return from_openai_responses(items, system)

    def check(self, items: Sequence[Json], *, max_images: int | None = None) -> None:
        check_openai_responses(items, max_images=max_images)

    def recognizes(self, items: Sequence[Json], document: object) -> int:
        typed = any(i.get("type") in ("function_call", "function_call_output", "reasoning") for i in items)
        parts = any(
            isinstance(i.get("content"), list) and any(isinstance(p, dict) and p.get("type") in ("input_text", "output_text") for p in i["content"])
            for i in items
        )
        return 3 if typed or parts else 0

    def put_system(self, request: Json, system: str) -> None:
        request["instructions"] = system

    def send(self, client: Any, request: Json) -> object:
        return client.responses.create(**request)

    def tool(self, name: str, description: str, parameters: Json) -> Json:
        return {"type": "function", "name": name, "description": description, "parameters": parameters}

    def reply_limit(self, tokens: int) -> Json:
        return {"max_output_tokens": tokens}

    def assistant_messages(self, data: Json) -> list[Message]:
        if not isinstance(data.get("output"), list):
            raise self.not_a(data, "no output list")
        return from_openai_responses(data["output"])

    def input_tokens(self, data: Json) -> int | None:
        return usage_tokens(data, "input_tokens")



API = OpenAIResponses()
