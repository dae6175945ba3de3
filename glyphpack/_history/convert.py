"""Provider formats, in one place: Anthropic Messages and OpenAI Chat Completions, to
and from neutral messages. Each direction dispatches on the block class
(``functools.singledispatch``): a block type a format cannot carry fails loudly."""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Sequence
from typing import Any

from .._errors import HistoryError
from .._types import Role, public
from .messages import Block, Image, Message, Opaque, RedactedThinking, ResultBlock, Text, Thinking, ToolCall, ToolResult

Json = dict[str, Any]

# ------------------------------------------------------------------ Anthropic Messages


@functools.singledispatch
def anthropic_block(block: Block) -> Json | None:
    """One block as an Anthropic Messages content block (None: not sent)."""
    raise HistoryError(f"{type(block).__name__} has no Anthropic Messages form")


@anthropic_block.register
def _(block: Text) -> Json | None:
    # The API rejects a text block that is empty or only white space ("text content
    # blocks must contain non-whitespace text"): such a block says nothing, so it stays out.
    return {"type": "text", "text": block.text} if block.text.strip() else None


@anthropic_block.register
def _(block: Image) -> Json:
    if block.data is not None:
        data = base64.b64encode(block.data).decode("ascii")
        return {"type": "image", "source": {"type": "base64", "media_type": block.media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": block.ref}}


@anthropic_block.register
def _(block: ToolCall) -> Json:
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}


@anthropic_block.register
def _(block: ToolResult) -> Json:
    out: Json = {"type": "tool_result", "tool_use_id": block.call_id, "content": _anthropic_blocks(block.content)}
    if block.is_error:
        out["is_error"] = True
    return out


@anthropic_block.register
def _(block: Thinking) -> Json | None:
    # Anthropic verifies the signature of thinking sent back: unsigned thinking (another
    # provider's reasoning, a harness's own) cannot go, so it is left out.
    if not block.signature:
        return None
    return {"type": "thinking", "thinking": block.text, "signature": block.signature}


@anthropic_block.register
def _(block: RedactedThinking) -> Json:
    return {"type": "redacted_thinking", "data": block.data}


@anthropic_block.register
def _(block: Opaque) -> None:
    return None


def results_first(messages: Sequence[Message]) -> list[Message]:
    """The history in the order both APIs require: an assistant message's tool results
    right after it, ahead of any other message that came between (a harness's note, the
    user's shell command); a user message carrying results split into its results and
    the rest. Nothing is dropped or changed."""
    out: list[Message] = []
    waiting: list[Message] = []  # messages that came between calls and their results
    for message in messages:
        if message.role == "assistant":
            out.extend(waiting)
            waiting = []
            out.append(message)
            continue
        results = tuple(b for b in message.content if isinstance(b, ToolResult))
        others = tuple(b for b in message.content if not isinstance(b, ToolResult))
        if results and out and out[-1].role in ("assistant", "tool") and not waiting:
            out.append(message if not others else Message("tool", results, id=f"{message.id}-results"))
        elif results:
            out.append(Message("tool", results, id=f"{message.id}-results") if others or message.role != "tool" else message)
        if waiting and not _calls_open(out):  # every call answered: what waited goes next
            out.extend(waiting)
            waiting = []
        if others:
            rest = message if not results else message.with_content(others)
            (waiting if _calls_open(out) else out).append(rest)
    out.extend(waiting)
    return out


def _calls_open(out: Sequence[Message]) -> bool:
    """Whether the last assistant message in ``out`` has calls not yet answered in ``out``."""
    answered: set[str] = set()
    for message in reversed(out):
        if message.role == "assistant":
            return any(c.id not in answered for c in message.tool_calls)
        answered.update(r.call_id for r in message.tool_results)
    return False


def _anthropic_blocks(blocks: Sequence[Block]) -> list[Json]:
    return [converted for converted in map(anthropic_block, blocks) if converted is not None]


@public
def to_anthropic(messages: Sequence[Message]) -> tuple[str | None, list[Json]]:
    """(system prompt, Messages API ``messages``): tool messages become user messages
    of ``tool_result`` blocks, and consecutive messages of one role are merged (the
    API wants user and assistant to alternate)."""
    system = "\n\n".join(m.text for m in messages if m.role == "system") or None
    out: list[Json] = []
    for message in results_first(messages):
        if message.role == "system":
            continue
        role = "user" if message.role in ("user", "tool") else "assistant"
        # Anthropic wants a turn's tool results before anything else in the user message.
        ordered = sorted(message.content, key=lambda b: not isinstance(b, ToolResult)) if role == "user" else message.content
        blocks = _anthropic_blocks(ordered)
        if not blocks:
            continue
        add_turn(out, role, "content", blocks)
    if out and out[0]["role"] == "assistant":  # the API wants the user first
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUES}]})
    return system, out


#: The user's first message where a history starts with the assistant's (after a trim
#: or a compaction): Anthropic and Gemini want the user first.
CONTINUES = "[the conversation continues]"


def add_turn(out: list[Json], role: str, key: str, items: list[Json]) -> None:
    """Append a turn of ``role`` whose ``key`` holds ``items``, merged into the last turn
    when that is the same role (APIs that want the roles to alternate)."""
    if out and out[-1]["role"] == role:
        out[-1][key].extend(items)
    else:
        out.append({"role": role, key: items})


def _base64(data: object, what: str) -> bytes:
    if not isinstance(data, str):
        raise HistoryError(f"{what} must be a base64 string, not {type(data).__name__}")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise HistoryError(f"{what} is not valid base64 ({exc})") from None


def _from_anthropic_block(data: object) -> Block:
    if not isinstance(data, dict):
        raise HistoryError(f"a content block must be an object, not {type(data).__name__}")
    kind = data.get("type")
    if kind == "text":
        return Text(data["text"])
    if kind == "image":
        source = data["source"]
        if source.get("type") == "base64":
            return Image(source["media_type"], _base64(source.get("data"), "an image's data"))
        return Image(source.get("media_type", "image/png"), ref=source.get("url") or source.get("file_id"))
    if kind == "tool_use":
        return ToolCall(data["id"], data["name"], data.get("input") or {})
    if kind == "tool_result":
        content = data.get("content") or ()
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        parts: list[ResultBlock] = []
        for item in content:
            part = _from_anthropic_block(item)
            parts.append(part if isinstance(part, (Text, Image)) else Text(json.dumps(part.to_json(), ensure_ascii=False)))
        return ToolResult(data["tool_use_id"], tuple(parts), bool(data.get("is_error")))
    if kind == "thinking":
        return Thinking(data.get("thinking", ""), data.get("signature") or None)
    if kind == "redacted_thinking":
        return RedactedThinking(data["data"])
    # Server tools, model fallbacks and what comes next: kept as they are, never sent.
    return Opaque(str(kind), data)


def split_user_turn(blocks: Sequence[Block]) -> list[Message]:
    """A user turn of an API that carries tool results in it (Anthropic, Gemini): a
    ``tool`` message of its results, then a user message of the rest."""
    results = tuple(b for b in blocks if isinstance(b, ToolResult))
    others = tuple(b for b in blocks if not isinstance(b, ToolResult))
    return ([Message("tool", results)] if results else []) + ([Message("user", others)] if others else [])


def message_error(index: int, exc: Exception) -> HistoryError:
    """A malformed provider message as a ``HistoryError`` naming its index and the key."""
    if isinstance(exc, KeyError):
        return HistoryError(f"message {index}: no {exc.args[0]!r} key where one is needed")
    if isinstance(exc, HistoryError):
        return HistoryError(f"message {index}: {exc}")
    return HistoryError(f"message {index}: malformed ({type(exc).__name__}: {exc})")


MALFORMED = (KeyError, TypeError, AttributeError, ValueError, IndexError, HistoryError)


@public
def from_anthropic(messages: Sequence[Json], system: str | None = None) -> list[Message]:
    """Neutral messages from Anthropic Messages ``messages`` (and ``system``): a user
    message of tool results becomes a ``tool`` message (its other blocks a user message).
    Unknown block types become ``Opaque`` blocks; a malformed message raises
    ``HistoryError`` naming its index."""
    out = [Message("system", (Text(system),))] if system else []
    for index, data in enumerate(messages):
        try:
            content = data["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            blocks = [_from_anthropic_block(b) for b in content]
            if data["role"] == "user":
                out.extend(split_user_turn(blocks))
            elif data["role"] == "assistant":
                out.append(Message("assistant", tuple(blocks)))
            else:
                raise HistoryError(f"role must be user or assistant, not {data['role']!r}")
        except MALFORMED as exc:
            raise message_error(index, exc) from None
    return out


# ----------------------------------------------------------- OpenAI Chat Completions


@functools.singledispatch
def _openai_part(block: Block) -> Json:
    """One block as a Chat Completions content part (text and images only)."""
    raise HistoryError(f"{type(block).__name__} cannot be a Chat Completions content part")


@_openai_part.register
def _(block: Text) -> Json:
    return {"type": "text", "text": block.text}


def image_url(block: Image) -> str | None:
    """An image as OpenAI takes it: its bytes as a ``data:`` URL, else its reference."""
    if block.data is not None:
        return f"data:{block.media_type};base64,{base64.b64encode(block.data).decode('ascii')}"
    return block.ref


@_openai_part.register
def _(block: Image) -> Json:
    return {"type": "image_url", "image_url": {"url": image_url(block)}}


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

    def openai_part(block: Block) -> Json:
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


def image_from_url(url: object) -> Image:
    """An ``Image`` from a URL, or from a ``data:`` URL's bytes."""
    if not isinstance(url, str):
        raise HistoryError(f"an image URL must be a string, not {type(url).__name__}")
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        return Image(header[5:].split(";")[0] or "image/png", _base64(payload, "a data URL"))
    return Image(ref=url)


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


def tool_arguments(raw: object, call_id: str) -> dict[str, Any]:
    """A tool call's arguments from a JSON string (or an object); ``HistoryError`` if neither."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError as exc:
        raise HistoryError(f"tool call {call_id!r} has arguments that are not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        return {"input": raw}  # a custom tool's free-form input, kept as it came
    return arguments


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
