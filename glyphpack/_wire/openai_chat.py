"""OpenAI's Chat Completions API: ``client.chat.completions.create``.

System text stays a message; tool calls are ``tool_calls`` with JSON-string arguments;
each tool result its own ``tool`` message right after the call's message (text only:
the results' images follow in one user message). Thinking is not sent (the API takes
none back). OpenAI caches prefixes without marks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .._errors import HistoryError
from .._history.messages import Block, Image, Message, Opaque, Text, ToolCall, ToolResult
from .._providers.profile import Profile
from .._types import ROLES, Role, public
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


def _openai_part(block: Text | Image) -> Json:
    """A text or image block as a Chat Completions content part."""
    return content_part(block, "text", lambda image: {"type": "image_url", "image_url": {"url": image_url(image)}})


@public
def to_openai_chat(messages: Sequence[Message], *, detail: str | None = None) -> list[Json]:
    """Chat Completions ``messages``: tool calls as ``tool_calls`` with JSON-string
    arguments, each tool result as its own ``tool`` message (from ``tool`` messages and
    from user messages that carry results, the Anthropic shape). Thinking is left out
    (the API takes none back). ``tool`` messages carry text only, and OpenAI wants every
    result of an assistant turn before any other message: the results' images follow
    all of them, in one user message, with the user's own words of that turn. ``detail``
    (the reader's, e.g. ``"original"``, so pages are not downscaled) is set on every image."""
    out: list[Json] = []

    def openai_part(block: Text | Image) -> Json:
        part = _openai_part(block)
        if detail and part["type"] == "image_url":
            part["image_url"]["detail"] = detail
        return part

    images: list[Json] = []  # images of the results written so far in this run of results

    def flush(parts: Sequence[Json] = ()) -> None:
        if images or parts:
            out.append({"role": "user", "content": [*images, *parts]})
        images.clear()

    for message in results_first(messages):
        each_known(message, KNOWN_BLOCKS, "Chat Completions")
        results = message.tool_results
        if results:
            for result in results:
                text = f"[error] {result.text}" if result.is_error else result.text
                out.append({"role": "tool", "tool_call_id": result.call_id, "content": text})
                images.extend(openai_part(b) for b in result.images())
            own = [openai_part(b) for b in message.content if isinstance(b, (Text, Image))]
            if own:
                flush(own)
            continue
        flush()
        parts = [openai_part(b) for b in message.content if isinstance(b, (Text, Image)) and not (isinstance(b, Text) and not b.text)]
        entry: Json = {"role": message.role}
        if message.role == "assistant":
            entry["content"] = "\n".join(p["text"] for p in parts if p["type"] == "text") or None
            calls = message.tool_calls
            if entry["content"] is None and not calls:
                continue  # nothing said and nothing called (only thinking, say): the API takes no such message
            if calls:
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for c in calls
                ]
        elif message.role == "system":
            entry["content"] = message.text
        elif parts:
            entry["content"] = parts
        else:
            continue  # a user message with nothing to send
        out.append(entry)
    flush()
    return out


def _openai_blocks(content: object) -> list[Block]:
    blocks: list[Block] = []
    if isinstance(content, str):
        blocks.append(Text(content))
    elif isinstance(content, list):
        for part in content:
            kind = part.get("type")
            if kind == "text":
                blocks.append(Text(part["text"]))
            elif kind == "image_url":
                image = part["image_url"]
                blocks.append(image_from_url(image["url"] if isinstance(image, dict) else image))
            else:
                blocks.append(Opaque(str(kind), part))
    elif content is not None:
        raise HistoryError(f"content must be a string or a list of parts, not {type(content).__name__}")
    return blocks


@public
def from_openai_chat(messages: Sequence[Json]) -> list[Message]:
    """Neutral messages from Chat Completions ``messages`` (consecutive ``tool``
    messages become one neutral ``tool`` message)."""
    out: list[Message] = []
    for index, data in enumerate(messages):
        try:
            _from_openai_message(data, out)
        except MALFORMED as exc:
            raise message_error(index, exc) from None
    return out


def _from_openai_message(data: Json, out: list[Message]) -> None:
    role = data["role"]
    content = data.get("content")
    if role == "tool":
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        result = ToolResult(data["tool_call_id"], (Text(text),))
        if out and out[-1].role == "tool":
            out[-1] = out[-1].with_content(out[-1].content + (result,))
        else:
            out.append(Message("tool", (result,)))
        return
    blocks = _openai_blocks(content)
    for call in data.get("tool_calls") or ():
        function = call["function"]
        blocks.append(ToolCall(call["id"], function["name"], tool_arguments(function.get("arguments"), call["id"])))
    neutral_role: Role = "system" if role == "developer" else role
    out.append(Message(neutral_role, tuple(blocks)))


def check_openai_chat(messages: Sequence[Json], *, max_images: int | None = None) -> None:
    """Raise ``HistoryError`` where Chat Completions would reject ``messages``: the
    results of an assistant message's ``tool_calls`` come right after it as ``tool``
    messages, one per call, before any other message; no ``tool`` message otherwise;
    ``tool`` messages carry text; an assistant message has content or tool calls, and
    no other message's content is an empty list; an image sent as bytes is of a
    ``WEB_IMAGE_TYPES`` type; at most ``max_images`` images."""
    waiting: set[str] = set()
    images = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:
                raise HistoryError(f"message {index}: a tool message for {call_id!r}, which no open call made")
            if not isinstance(message.get("content"), str):
                raise HistoryError(f"message {index}: a tool message must carry text")
            waiting.discard(call_id)
            continue
        if waiting:
            raise HistoryError(f"message {index}: {role} message before the results of calls {sorted(waiting)}")
        content = message.get("content")
        if role == "assistant":
            waiting = {c["id"] for c in message.get("tool_calls") or ()}
            if content is None and not waiting:
                raise HistoryError(f"message {index}: an assistant message needs content or tool_calls")
        elif isinstance(content, list) and not content:
            raise HistoryError(f"message {index}: a {role} message with empty content")
        for part in content if isinstance(content, list) else ():
            if part.get("type") == "image_url":
                images += 1
                image = part.get("image_url")
                check_image_url(f"message {index}", image.get("url") if isinstance(image, dict) else None)
    if waiting:
        raise HistoryError(f"tool calls {sorted(waiting)} at the end have no results")
    check_image_count(images, max_images)


class OpenAIChat(ProviderApi):
    """``client.chat.completions.create(**request, tools=...)``."""

    name = "openai-chat"
    provider = "openai"
    title = "Chat Completions"
    request_key = "messages"
    response_key = "choices"
    sdk_module = "openai"
    sdk_package = "openai"
    client_class = "OpenAI"
    output_usage_key = "completion_tokens"
    key_variables = ("OPENAI_API_KEY",)
    overflow_patterns = (
        # OpenAI, Azure, DeepSeek: "... maximum context length is 128000 tokens. However, you requested
        # 140000 tokens (130000 in the messages, 10000 in the completion)." The messages' part is what
        # compaction can change.
        (
            "openai",
            re.compile(
                r"maximum context length is (?P<limit>\d+) tokens.*?requested (?:about )?\d+ tokens \((?P<measured>\d+) in the messages,\s*(?P<completion>\d+) in the completion",
                re.I | re.S,
            ),
        ),
        # "... However, your messages resulted in 130532 tokens."
        ("openai", re.compile(r"maximum context length is (?P<limit>\d+) tokens.*?resulted in (?P<measured>\d+) tokens", re.I | re.S)),
    )
    overflow_wordings = (("openai", re.compile(r"context_length_exceeded|exceeds the context window|reduce the length of the messages", re.I)),)

    def to_wire(self, messages: Sequence[Message], profile: Profile | None = None, model: str = "") -> tuple[str | None, list[Json]]:
        return None, to_openai_chat(messages, detail=profile.reader.detail if profile else None)

    def from_wire(self, items: Sequence[Json], system: str | None = None) -> list[Message]:
        return ([Message("system", (Text(system),))] if system else []) + from_openai_chat(items)

    def check(self, items: Sequence[Json], *, max_images: int | None = None) -> None:
        check_openai_chat(items, max_images=max_images)

    def recognizes(self, items: Sequence[Json], document: object) -> int:
        blocks = [b for i in items if isinstance(i.get("content"), list) for b in i["content"] if isinstance(b, dict)]
        if any(i.get("role") in ("tool", "developer") or i.get("tool_calls") for i in items) or any(b.get("type") == "image_url" for b in blocks):
            return 2
        return 1 if all(i.get("role") in ROLES for i in items) else 0  # plain text turns read the same in every chat format

    def send(self, client: Any, request: Json) -> object:
        return client.chat.completions.create(**request)

    def tool(self, name: str, description: str, parameters: Json) -> Json:
        return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}

    def tool_names(self, definition: object) -> set[str]:
        function = definition.get("function") if isinstance(definition, dict) else None
        return super().tool_names(function)

    def reply_limit(self, tokens: int) -> Json:
        return {"max_completion_tokens": tokens}

    def assistant_messages(self, data: Json) -> list[Message]:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self.not_a(data, "no choices")
        found = choices[0].get("message")
        reason = choices[0].get("finish_reason")
        if not isinstance(found, dict):
            raise HistoryError(f"a Chat Completions response whose first choice has no message (finish_reason {reason!r})")
        message = dict(found, role="assistant")
        refusal = message.pop("refusal", None)
        if not message.get("content") and not message.get("tool_calls"):
            if not isinstance(refusal, str) or not refusal:
                raise HistoryError(f"a Chat Completions response with neither content, tool calls nor a refusal (finish_reason {reason!r})")
            message["content"] = refusal  # the refusal's words are the answer, and resend as its text
        return from_openai_chat([message])

    def input_tokens(self, data: Json) -> int | None:
        return usage_tokens(data, "prompt_tokens")



API = OpenAIChat()
