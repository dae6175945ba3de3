"""Anthropic's Messages API: ``client.messages.create``.

The system prompt goes apart; tool messages become user messages of ``tool_result``
blocks, first in the message; a role's consecutive messages merge (user and assistant
alternate, the user first). Thinking goes back only with its signature. Prompt-cache
breakpoints: the system prompt, the end of a stored compaction (byte-identical until the
next one) and the newest message, which the next turn reads from the cache.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import functools
import hashlib
import json
import re
import threading
from collections.abc import Sequence
from typing import Any

from .._errors import HistoryError
from .._history.messages import Block, Image, Message, Opaque, RedactedThinking, ResultBlock, Text, Thinking, ToolCall, ToolResult
from .._history.prefixes import begins_with
from .._providers.profile import Profile
from .._providers.resolve import takes_system_messages
from .._types import public
from .base import Json, ProviderApi, usage_tokens
from .common import (
    CONTINUES,
    MALFORMED,
    add_turn,
    calls_open,
    check_image_count,
    check_image_type,
    decode_base64,
    message_error,
    results_first,
    split_user_turn,
    unsendable,
    web_image,
)

#: ``max_tokens`` for a call that does not say (the Messages API requires one).
DEFAULT_MAX_TOKENS = 4096

#: Anthropic marks a prompt-cache breakpoint on one of these block types only.
_CACHEABLE = ("text", "image", "tool_use", "tool_result")
_EPHEMERAL = {"type": "ephemeral"}


@functools.singledispatch
def anthropic_block(block: Block) -> Json | None:
    """One block as an Anthropic Messages content block (None: not sent)."""
    raise unsendable(block, "Anthropic Messages")


@anthropic_block.register
def _(block: Text) -> Json | None:
    # The API rejects a text block that is empty or only white space ("text content
    # blocks must contain non-whitespace text"): such a block says nothing, so it stays out.
    return {"type": "text", "text": block.text} if block.text.strip() else None


@anthropic_block.register
def _(image: Image) -> Json:
    block = web_image(image)
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if block.data is not None:
        data = base64.b64encode(block.data).decode("ascii")
        return {"type": "image", "source": {"type": "base64", "media_type": block.media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": block.ref}}


#: The ids the Messages API takes for a ``tool_use`` (it answers 400 "String should match pattern" otherwise).
TOOL_ID_PATTERN = re.compile(r"[a-zA-Z0-9_-]+")
_NOT_IN_TOOL_ID = re.compile(r"[^a-zA-Z0-9_-]")


def anthropic_tool_id(call_id: str) -> str:
    """``call_id`` as the Messages API takes it: itself when it fits ``TOOL_ID_PATTERN``;
    else its other characters made ``_`` and a digest of the whole appended, so the call
    and its result map alike on every request (the prompt cache stays warm) and two ids
    that differ only in those characters stay apart. Ids from other harnesses and ones an
    import made unique (``id#2``) need this."""
    if TOOL_ID_PATTERN.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{_NOT_IN_TOOL_ID.sub('_', call_id)}_{digest}"


@anthropic_block.register
def _(block: ToolCall) -> Json:
    return {"type": "tool_use", "id": anthropic_tool_id(block.id), "name": block.name, "input": block.arguments}


@anthropic_block.register
def _(block: ToolResult) -> Json:
    out: Json = {"type": "tool_result", "tool_use_id": anthropic_tool_id(block.call_id), "content": _anthropic_blocks(block.content)}
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


def _anthropic_blocks(blocks: Sequence[Block]) -> list[Json]:
    return [converted for converted in map(anthropic_block, blocks) if converted is not None]


#: Each message's blocks as converted before, by the message (frozen: the same object is
#: the same message): a session sends its whole view again with each request, pages and
#: all. At most this many kept; past it the memo starts again.
_CONVERTED_KEPT = 8192
_converted: dict[int, tuple[Message, list[Json]]] = {}


def _message_blocks(message: Message, role: str) -> list[Json]:
    """``message``'s content as Messages API blocks (a turn's tool results first: Anthropic
    wants them before anything else in a user message). Each call gets blocks of its own
    (a cache breakpoint is set on one); what is inside a block is shared, as a tool call's
    input always was."""
    hit = _converted.get(id(message))
    if hit is None or hit[0] is not message:
        ordered = sorted(message.content, key=lambda b: not isinstance(b, ToolResult)) if role == "user" else message.content
        hit = (message, _anthropic_blocks(ordered))
        if len(_converted) >= _CONVERTED_KEPT:
            _converted.clear()
        _converted[id(message)] = hit
    return [dict(block) for block in hit[1]]


@public
def to_anthropic(messages: Sequence[Message], *, system_messages: bool = False) -> tuple[str | None, list[Json]]:
    """(system prompt, Messages API ``messages``): tool messages become user messages
    of ``tool_result`` blocks, and consecutive messages of one role are merged (the
    API wants user and assistant to alternate). System messages go to the system
    prompt, except, with ``system_messages`` (a model that takes them), those after
    the first turn: they stay where they are, as ``system`` messages."""
    leading = _leading_system(messages)
    hoisted = [m for i, m in enumerate(messages) if m.role == "system" and (i < leading or not system_messages)]
    system = "\n\n".join(m.text for m in hoisted) or None
    out = _turns(results_first(messages[leading:]), system_messages, [])
    if out and out[0]["role"] != "user":  # the API wants the user first
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUES}]})
    return system, out


def _leading_system(messages: Sequence[Message]) -> int:
    """How many system messages ``messages`` begin with (they go to the system prompt)."""
    return next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))


def _turns(ordered: Sequence[Message], system_messages: bool, out: list[Json]) -> list[Json]:
    """``ordered`` (``results_first``'s order, leading system messages taken out) as
    Messages API turns, appended to ``out``: a turn of the role ``out`` ends with goes
    into that last turn."""
    for message in ordered:
        if message.role == "system":
            if system_messages and (blocks := _anthropic_blocks(message.content)):
                out.append({"role": "system", "content": blocks})
            continue
        role = "user" if message.role in ("user", "tool") else "assistant"
        blocks = _message_blocks(message, role)
        if blocks:
            add_turn(out, role, "content", blocks)
    return out


def _from_anthropic_block(data: object) -> Block:
    if not isinstance(data, dict):
        raise HistoryError(f"a content block must be an object, not {type(data).__name__}")
    kind = data.get("type")
    if kind == "text":
        return Text(data["text"])
    if kind == "image":
        source = data["source"]
        if source.get("type") == "base64":
            return Image(source["media_type"], decode_base64(source.get("data"), "an image's data"))
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


@public
def from_anthropic(messages: Sequence[Json], system: str | None = None) -> list[Message]:
    """Neutral messages from Anthropic Messages ``messages`` (and ``system``): a user
    message of tool results becomes a ``tool`` message (its other blocks a user message).
    Unknown block types become ``Opaque`` blocks; a malformed message raises
    ``HistoryError`` naming its index."""
    out = [Message("system", (Text(system),))] if system else []
    for index, data in enumerate(messages):
        out.extend(from_anthropic_message(data, index))
    return out


def from_anthropic_message(data: Json, index: int) -> list[Message]:
    """The neutral messages of Anthropic message ``data``, number ``index`` of its
    request (each message converts on its own: what the proxy reads again only where a
    request's messages are new)."""
    try:
        content = data["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = [_from_anthropic_block(b) for b in content]
        if data["role"] == "user":
            return split_user_turn(blocks)
        if data["role"] in ("assistant", "system"):  # system: a mid-conversation system message
            return [Message(data["role"], tuple(blocks))]
        raise HistoryError(f"role must be user, assistant or system, not {data['role']!r}")
    except MALFORMED as exc:
        raise message_error(index, exc) from None


def with_result_content(blocks: Sequence[Json]) -> list[Json]:
    """A message's blocks, then the blocks inside its ``tool_result`` blocks."""
    return [*blocks, *(b for r in blocks if r.get("type") == "tool_result" and isinstance(r.get("content"), list) for b in r["content"])]


def check_anthropic(messages: Sequence[Json], *, max_images: int | None = None) -> None:
    """Raise ``HistoryError`` where the Anthropic Messages API would reject ``messages``:
    roles alternate starting with the user; every ``tool_use`` is answered by a
    ``tool_result`` in the next message, which holds its results first; no result
    without its call; a call's id matches ``TOOL_ID_PATTERN``; thinking carries a
    signature; no text block is empty or only white space; an image's bytes are of a
    ``WEB_IMAGE_TYPES`` type; at most ``max_images`` images. A ``system`` message (a
    mid-conversation system message) may come after the first, of text only, where
    no tool call waits for its result; it does not count in the alternation."""
    _checked_to_end(_checked(messages, 0, _UNCHECKED), max_images)


#: What ``check_anthropic`` carries from one message to the next: (images so far, the
#: calls waiting for their results, turns so far).
_CheckState = tuple[int, frozenset[str], int]
_UNCHECKED: _CheckState = (0, frozenset(), 0)


def _checked(messages: Sequence[Json], start: int, state: _CheckState) -> _CheckState:
    """``check_anthropic``'s rules for ``messages[start:]``, from ``state`` (what the
    messages before ``start`` left); the state after them."""
    images, open_calls, turns = state
    for index in range(start, len(messages)):
        message = messages[index]
        role, content = message.get("role"), message.get("content")
        blocks: list[Json] = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if role == "system" and index > 0:
            if open_calls:
                raise HistoryError(f"message {index}: a system message between tool calls and their results")
            if any(b.get("type") != "text" for b in blocks):
                raise HistoryError(f"message {index}: a system message holds text blocks only")
        else:
            expected = "user" if turns % 2 == 0 else "assistant"
            turns += 1
            if role != expected:
                raise HistoryError(f"message {index}: role {role!r} where {expected!r} must come (roles alternate from user)")
        if not blocks:
            raise HistoryError(f"message {index}: empty content")
        results = [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"]
        if role == "system":
            pass
        elif role == "user":
            if set(results) != open_calls:
                missing, extra = sorted(open_calls - set(results)), sorted(set(results) - open_calls)
                raise HistoryError(f"message {index}: tool results {extra} without calls, calls {missing} without results")
            kinds = [b.get("type") for b in blocks]
            if results and kinds[: len(results)] != ["tool_result"] * len(results):
                raise HistoryError(f"message {index}: tool results must come before the other blocks")
            open_calls = frozenset()
        else:
            if results:
                raise HistoryError(f"message {index}: an assistant message holds tool results")
            open_calls = frozenset(str(b.get("id")) for b in blocks if b.get("type") == "tool_use")
            malformed = sorted(c for c in open_calls if not TOOL_ID_PATTERN.fullmatch(c))
            if malformed:
                raise HistoryError(f"message {index}: tool_use ids {malformed} do not match ^{TOOL_ID_PATTERN.pattern}$")
            for block in blocks:
                if block.get("type") == "thinking" and not block.get("signature"):
                    raise HistoryError(f"message {index}: thinking without a signature")
        for block in with_result_content(blocks):
            if block.get("type") == "text" and not str(block.get("text") or "").strip():
                raise HistoryError(f"message {index}: text content blocks must contain non-whitespace text")
            if block.get("type") == "image":
                images += 1
                source = block.get("source")
                if isinstance(source, dict) and source.get("type") == "base64":
                    check_image_type(f"message {index}", source.get("media_type"))
    return images, open_calls, turns


def _checked_to_end(state: _CheckState, max_images: int | None) -> None:
    """What ``check_anthropic`` checks of the whole once every message was (``state``)."""
    images, open_calls, _ = state
    if open_calls:
        raise HistoryError(f"tool calls {sorted(open_calls)} at the end have no results")
    check_image_count(images, max_images)




class AnthropicMessages(ProviderApi):
    """``client.messages.create(**request, max_tokens=..., tools=...)``."""

    name = "anthropic"
    provider = "anthropic"
    title = "Messages"
    request_key = "messages"
    response_key = "stop_reason"
    sdk_module = "anthropic"
    sdk_package = "anthropic"
    client_class = "Anthropic"
    output_usage_key = "output_tokens"
    key_variables = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    overflow_patterns = (
        # Also on Vertex and Bedrock: "prompt is too long: 215000 tokens > 200000 maximum"
        ("anthropic", re.compile(r"prompt is too long:\s*(?P<measured>\d+)\s*tokens\s*>\s*(?P<limit>\d+)\s*maximum", re.I)),
        # "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000"
        (
            "anthropic",
            re.compile(
                r"input length and .?max_tokens.? exceed context limit:\s*(?P<measured>\d+)\s*\+\s*(?P<completion>\d+)\s*>\s*(?P<context>\d+)",
                re.I,
            ),
        ),
    )
    overflow_wordings = (("anthropic", re.compile(r"prompt is too long", re.I)),)

    def to_wire(self, messages: Sequence[Message], profile: Profile | None = None, model: str = "") -> tuple[str | None, list[Json]]:
        return to_anthropic(messages, system_messages=takes_system_messages(model or (profile.model if profile else "")))

    def from_wire(self, items: Sequence[Json], system: str | None = None) -> list[Message]:
        return from_anthropic(items, system)

    def check(self, items: Sequence[Json], *, max_images: int | None = None) -> None:
        check_anthropic(items, max_images=max_images)

    def recognizes(self, items: Sequence[Json], document: object) -> int:
        blocks = [b for i in items if isinstance(i.get("content"), list) for b in i["content"] if isinstance(b, dict)]
        if any(b.get("type") in ("tool_use", "tool_result") or (b.get("type") == "image" and "source" in b) for b in blocks):
            return 2
        plain = all(i.get("role") in ("user", "assistant") for i in items)
        return 1 if plain and isinstance(document, dict) and "system" in document else 0

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        """As every API's, with cache breakpoints: on the stable prefix's last block and on
        the last message. The prefix's own conversion is remembered (``_PrefixConversion``):
        where the rest converts on its own (``joins``), only the rest is converted, after
        a copy of the prefix's messages; else the whole is, and the messages it shares with
        the prefix are compared, not checked again."""
        alone = _prefix_conversion(tuple(view[:prefix])) if 0 < prefix < len(view) else None
        rest = view[prefix:]
        if alone is not None and alone.joins and all(m.role != "system" for m in rest):
            # Each message and block copied: marks go on them, and a caller may change them.
            system, messages = alone.system, [{**m, "content": [dict(b) for b in m["content"]]} for m in alone.messages]
            _turns(results_first(rest), False, messages)
            extends = True
        else:
            system, messages = self.to_wire(view, profile, model)
            extends = alone is not None and alone.begins(messages)
        start, state = 0, _UNCHECKED
        if alone is not None and extends:
            _mark(messages[alone.last], alone.own)
            if alone.state is not None:
                start, state = alone.last, alone.state
        _checked_to_end(_checked(messages, start, state), profile.max_images)
        if messages:
            _mark(messages[-1])
        return self.create_arguments(model, system, messages)

    def put_system(self, request: Json, system: str) -> None:
        request["system"] = [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}]

    def send(self, client: Any, request: Json) -> object:
        return client.messages.create(**{"max_tokens": DEFAULT_MAX_TOKENS, **request})

    def tool(self, name: str, description: str, parameters: Json) -> Json:
        return {"name": name, "description": description, "input_schema": parameters}

    def assistant_messages(self, data: Json) -> list[Message]:
        if not isinstance(data.get("content"), list) or data.get("role", "assistant") != "assistant":
            raise self.not_a(data, "no assistant content list")
        # An empty content list is an answer that said nothing (end_turn): kept, and never sent back.
        return from_anthropic([{"role": "assistant", "content": data["content"]}])

    def input_tokens(self, data: Json) -> int | None:
        return usage_tokens(data, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")



def _mark(message: Json, end: int | None = None) -> bool:
    """A cache breakpoint on the last block of ``message`` (before ``end``) that takes one."""
    blocks = message["content"][:end]
    for block in reversed(blocks):
        if block.get("type") in _CACHEABLE and (block.get("type") != "text" or block.get("text")):
            block["cache_control"] = dict(_EPHEMERAL)
            return True
    return False


@dataclasses.dataclass(frozen=True, eq=False)
class _PrefixConversion:
    """A stable prefix converted alone: its system prompt and wire messages (never handed
    out), the last of which the rest of a request may extend (``last``; its own ``own``
    blocks), and the check's state after the ones before it (None: they do not pass it).
    ``joins``: a request that adds messages without a system one converts as this
    conversion followed by theirs alone (no call left open at its end, which would keep
    what comes between calls and results waiting, and no system message but leading ones,
    which a model that takes them would keep in place)."""

    prefix: tuple[Message, ...]
    system: str | None
    messages: list[Json]
    last: int
    own: int
    state: _CheckState | None
    joins: bool

    def begins(self, messages: list[Json]) -> bool:
        """Whether a request's ``messages`` begin as the prefix alone converts: the same
        messages, the last extended at most (its own blocks first)."""
        last = self.last
        return len(messages) > last and messages[:last] == self.messages[:last] and messages[last]["content"][: self.own] == self.messages[last]["content"]


#: The stable prefixes converted lately, by (the id of their last message, their length):
#: a compaction's prefix stays the same objects from one request to the next.
_PREFIXES_KEPT = 64
_prefixes: collections.OrderedDict[tuple[int, int], _PrefixConversion] = collections.OrderedDict()
_prefixes_lock = threading.Lock()


def _prefix_conversion(prefix: tuple[Message, ...]) -> _PrefixConversion | None:
    """``prefix`` converted alone (None: to nothing), remembered for its very messages."""
    key = (id(prefix[-1]), len(prefix))
    with _prefixes_lock:
        known = _prefixes.get(key)
    if known is not None and begins_with(prefix, known.prefix):
        return known
    system, alone = to_anthropic(prefix)
    if not alone:
        return None
    last = len(alone) - 1
    try:
        state: _CheckState | None = _checked(alone[:last], 0, _UNCHECKED)
    except HistoryError:  # the request's check says so, from the start
        state = None
    leading = _leading_system(prefix)
    joins = not calls_open(results_first(prefix[leading:])) and all(m.role != "system" for m in prefix[leading:])
    known = _PrefixConversion(prefix, system, alone, last, len(alone[-1]["content"]), state, joins)
    with _prefixes_lock:
        _prefixes[key] = known
        while len(_prefixes) > _PREFIXES_KEPT:
            _prefixes.popitem(last=False)
    return known


API = AnthropicMessages()
