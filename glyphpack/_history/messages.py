"""The provider-neutral message model and turn boundaries.

A history is a sequence of ``Message`` values. Roles: ``system``, ``user``,
``assistant``, ``tool``. Content blocks: ``Text``, ``Image``, ``ToolCall``,
``ToolResult``, ``Thinking``, each a frozen dataclass checked at construction. What a
block is (its JSON, its text, its images, its price, how it reads in Markdown) is a
method of its class, so adding a block type is adding one class; the provider
formats dispatch on the class in ``convert.py``.

A history is at a turn boundary when every tool call has its result and no result
lacks its call: the only place a history may be saved or cut, because providers reject
a tool call without its result and a result whose call is missing.
"""

from __future__ import annotations

import abc
import base64
import binascii
import dataclasses
import json
import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Protocol

from .._errors import HistoryError
from .._types import ROLES, Role, check_kind, public
from .ids import new_id
from .prefixes import PrefixFolds

#: What a block counts as in a context breakdown (``CostModel.breakdown``).
Category = Literal["system", "user", "assistant", "thinking", "tool calls", "tool results", "images"]
CATEGORIES: tuple[Category, ...] = ("system", "user", "assistant", "thinking", "tool calls", "tool results", "images")

#: Tokens a provider adds around a tool call or result (markers): a published-order guess.
TOOL_BLOCK_OVERHEAD = 4
#: Tokens per character of a tool call id: ids are random strings (``toolu_01Ab..``),
#: which tokenizers split about every two characters. Checked against the measured
#: input tokens of the real sessions (``benchmarks/test_bench_estimate.py``).
ID_TOKENS_PER_CHAR = 0.5


def id_tokens(call_id: str) -> int:
    """Estimated tokens of a tool call id."""
    return math.ceil(len(call_id) * ID_TOKENS_PER_CHAR)


#: A Responses reasoning item sent back costs about its encrypted text's price as text
#: divided by this (the provider counts the reasoning, not the ciphertext: priced whole,
#: Codex's grew the estimate of a real session 2.3x faster than the provider's count).
#: A divisor, not a share of 1/2.3: ``23 * (1 / 2.3)`` is 10.000000000000002.
ENCRYPTED_REASONING_DIVISOR = 2.3


class Pricer(Protocol):
    """Prices text and images in tokens (the ladder's ``CostModel``, the store's trim)."""

    def text(self, text: str) -> int: ...

    def image(self, block: Image) -> int: ...


def _require(value: object, kind: type | tuple[type, ...], what: str) -> None:
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise HistoryError(f"{what} must be {names}, not {type(value).__name__} {str(value)[:60]!r}")


class Block(abc.ABC):
    """A content block. Subclasses are frozen dataclasses registered by their ``tag`` (the
    ``type`` of their JSON form)."""

    tag: ClassVar[str]
    registry: ClassVar[dict[str, type[Block]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Block.registry[cls.tag] = cls

    @abc.abstractmethod
    def to_json(self) -> dict[str, Any]:
        """glyphpack's own JSON form (lossless)."""

    @classmethod
    @abc.abstractmethod
    def from_fields(cls, data: dict[str, Any]) -> Block:
        """The block from its JSON form (``data["type"] == cls.tag``)."""

    @staticmethod
    def from_json(data: object) -> Block:
        """Any block from its JSON form; ``HistoryError`` names what is wrong."""
        _require(data, dict, "a content block")
        assert isinstance(data, dict)
        kind = data.get("type")
        cls = Block.registry.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise HistoryError(f"unknown content block type {kind!r}; known: {', '.join(Block.registry)}")
        try:
            return cls.from_fields(data)
        except KeyError as exc:
            raise HistoryError(f"a {kind!r} block has no {exc.args[0]!r} field") from None

    def texts(self) -> tuple[str, ...]:
        """The plain text this block shows a reader (tool results' text included)."""
        return ()

    def images(self) -> tuple[Image, ...]:
        """Every image this block carries."""
        return ()

    @abc.abstractmethod
    def tokens(self, pricer: Pricer) -> int:
        """What this block costs in a request."""

    def category(self, role: Role) -> Category:
        """What the block counts as in a context breakdown."""
        return "user" if role == "user" else "system" if role == "system" else "assistant" if role == "assistant" else "tool results"

    @abc.abstractmethod
    def markdown(self) -> str:
        """The block as Markdown (exports)."""

    @abc.abstractmethod
    def outline(self) -> str:
        """A few words for a one-line summary (tree drawings)."""


@public
@dataclasses.dataclass(frozen=True)
class Text(Block):
    tag: ClassVar[str] = "text"
    text: str

    def __post_init__(self) -> None:
        _require(self.text, str, "Text.text")

    def to_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}

    @classmethod
    def from_fields(cls, data: dict[str, Any]) -> Text:
        return cls(data["text"])

    def texts(self) -> tuple[str, ...]:
        return (self.text,)

    def tokens(self, pricer: Pricer) -> int:
        return pricer.text(self.text)

    def markdown(self) -> str:
        return self.text

    def outline(self) -> str:
        return self.text


@public
@dataclasses.dataclass(frozen=True)
class Image(Block):
    """An image: its bytes and media type, or a reference (URL or file id) instead."""

    tag: ClassVar[str] = "image"
    media_type: str = "image/png"
    data: bytes | None = dataclasses.field(default=None, repr=False)
    ref: str | None = None

    def __post_init__(self) -> None:
        _require(self.media_type, str, "Image.media_type")
        _require(self.data, (bytes, type(None)), "Image.data")
        _require(self.ref, (str, type(None)), "Image.ref")
        if (self.data is None) == (self.ref is None):
            raise HistoryError("an Image needs exactly one of data (bytes) or ref (a URL or id)")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "image", "media_type": self.media_type}
        if self.data is not None:
            out["data"] = base64.b64encode(self.data).decode("ascii")
        else:
            out["ref"] = self.ref
        return out

    @classmethod
    def from_fields(cls, data: dict[str, Any]) -> Image:
        raw = data.get("data")
        if raw is None:
            return cls(data["media_type"], None, data.get("ref"))
        _require(raw, str, "an image's data")
        try:
            decoded = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise HistoryError(f"an image's data is not valid base64 ({exc})") from None
        return cls(data["media_type"], decoded, data.get("ref"))

    def images(self) -> tuple[Image, ...]:
        return (self,)

    def tokens(self, pricer: Pricer) -> int:
        return pricer.image(self)

    def category(self, role: Role) -> Category:
        return "images"

    def markdown(self) -> str:
        size = f"{len(self.data):,} bytes" if self.data is not None else self.ref
        return f"*[image {self.media_type}, {size}]*"

    def outline(self) -> str:
        return "[image]"


@public
@dataclasses.dataclass(frozen=True)
class ToolCall(Block):
    tag: ClassVar[str] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Gemini's thought signature for this call (base64), which Gemini 3 wants sent back.
    signature: str | None = None

    def __post_init__(self) -> None:
        _require(self.id, str, "ToolCall.id")
        _require(self.name, str, "ToolCall.name")
        _require(self.arguments, dict, "ToolCall.arguments")
        _require(self.signature, (str, type(None)), "ToolCall.signature")

    def __hash__(self) -> int:  # arguments is a dict: hash by the call's identity
        return hash((self.id, self.name))

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)

    def to_json(self) -> dict[str, Any]:
        out = {"type": "tool_call", "id": self.id, "name": self.name, "arguments": self.arguments}
        return out if self.signature is None else out | {"signature": self.signature}

    @classmethod
    def from_fields(cls, data: dict[str, Any]) -> ToolCall:
        return cls(data["id"], data["name"], data.get("arguments") or {}, data.get("signature"))

    def tokens(self, pricer: Pricer) -> int:
        return pricer.text(self.name) + pricer.text(self.arguments_json) + TOOL_BLOCK_OVERHEAD + id_tokens(self.id)

    def category(self, role: Role) -> Category:
        return "tool calls"

    def markdown(self) -> str:
        arguments = json.dumps(self.arguments, indent=2, ensure_ascii=False)
        return f"**tool call** `{self.name}` (`{self.id}`)\n\n```json\n{arguments}\n```"

    def outline(self) -> str:
        """The call by what it does: its name and its key argument (a path, a command,
        a pattern, a URL; else its first text argument), as a tree line shows it."""
        value = " ".join(self.key_argument()[1].split())
        return f"{self.name}({value[:40] + '...' if len(value) > 40 else value})"

    def key_argument(self) -> tuple[str, str]:
        """(name, value) of the argument that says what the call does: the first of
        ``KEY_ARGUMENTS`` it has as text, else its first text argument; ("", "") when
        it has none."""
        key = next((k for k in KEY_ARGUMENTS if isinstance(self.arguments.get(k), str)), None)
        if key is None:
            key = next((k for k, v in self.arguments.items() if isinstance(v, str)), "")
        return key, self.arguments.get(key, "") if key else ""


#: The arguments that say what a call does, in the order ``ToolCall.outline`` looks for
#: them (the names Claude Code, Codex, pi, OpenHands and SWE-agent tools use).
KEY_ARGUMENTS = ("file_path", "path", "command", "cmd", "pattern", "query", "url", "description", "prompt")


#: Blocks a tool result may hold.
ResultBlock = Text | Image


@public
@dataclasses.dataclass(frozen=True)
class ToolResult(Block):
    tag: ClassVar[str] = "tool_result"
    call_id: str
    content: tuple[ResultBlock, ...] = ()
    is_error: bool = False

    def __post_init__(self) -> None:
        _require(self.call_id, str, "ToolResult.call_id")
        if not isinstance(self.content, tuple):
            _require(self.content, (list, tuple), "ToolResult.content")
            object.__setattr__(self, "content", tuple(self.content))
        for block in self.content:
            _require(block, (Text, Image), "a block in a tool result")
        _require(self.is_error, bool, "ToolResult.is_error")

    @property
    def text(self) -> str:
        """The result's text blocks joined by newlines."""
        return "\n".join(b.text for b in self.content if isinstance(b, Text))

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "tool_result",
            "call_id": self.call_id,
            "content": [b.to_json() for b in self.content],
            "is_error": self.is_error,
        }

    @classmethod
    def from_fields(cls, data: dict[str, Any]) -> ToolResult:
        content = data.get("content", [])
        _require(content, list, "a tool result's content")
        return cls(data["call_id"], tuple(Block.from_json(b) for b in content), data.get("is_error", False))  # type: ignore[misc]

    def texts(self) -> tuple[str, ...]:
        return tuple(b.text for b in self.content if isinstance(b, Text))

    def images(self) -> tuple[Image, ...]:
        return tuple(b for b in self.content if isinstance(b, Image))

    def tokens(self, pricer: Pricer) -> int:
        return sum(b.tokens(pricer) for b in self.content) + TOOL_BLOCK_OVERHEAD + id_tokens(self.call_id)

    def category(self, role: Role) -> Category:
        return "tool results"

    def markdown(self) -> str:
        status = "error" if self.is_error else "result"
        body = "\n\n".join(b.markdown() for b in self.content)
        return f"**tool {status}** for `{self.call_id}`\n\n```\n{body}\n```"

    def outline(self) -> str:
        return "[error]" if self.is_error else "[result]"


@public
@dataclasses.dataclass(frozen=True)
class Thinking(Block):
    tag: ClassVar[str] = "thinking"
    text: str
    signature: str | None = None

    def __post_init__(self) -> None:
        _require(self.text, str, "Thinking.text")
        _require(self.signature, (str, type(None)), "Thinking.signature")

    def to_json(self) -> dict[str, Any]:
        return {"type": "thinking", "text": self.text, "signature": self.signature}

    @classmethod
    def from_fields(cls, data: dict[str, Any]) -> Thinking:
        return cls(data["text"], data.get("signature"))

    def tokens(self, pricer: Pricer) -> int:
        return pricer.text(self.text)

    def category(self, role: Role) -> Category:
        return "thinking"

    def markdown(self) -> str:
        return "> " + self.text.replace("\n", "\n> ")

    def outline(self) -> str:
        return ""


@public
@dataclasses.dataclass(frozen=True)
class RedactedThinking(Block):
    """Thinking the provider encrypted (Anthropic ``redacted_thinking``): its ``data``
    goes back to the provider unchanged."""

    tag: ClassVar[str] = "redacted_thinking"
    data: str

    def __post_init__(self) -> None:
        _require(self.data, str, "RedactedThinking.data")

    def to_json(self) -> dict[str, Any]:
        return {"type": "redacted_thinking", "data": self.data}

    @classmethod
    def from_fields(cls, data: dict[str, Any]) -> RedactedThinking:
        return cls(data["data"])

    def tokens(self, pricer: Pricer) -> int:
        return pricer.text(self.data)

    def category(self, role: Role) -> Category:
        return "thinking"

    def markdown(self) -> str:
        return f"*[redacted thinking, {len(self.data):,} characters]*"

    def outline(self) -> str:
        return ""


@public
@dataclasses.dataclass(frozen=True)
class Opaque(Block):
    """A block of a kind glyphpack does not model (a server tool's block, a model
    fallback marker), kept as it came: ``kind`` is its type, ``payload`` its JSON. It
    round-trips through glyphpack's JSON and is not sent to a provider, so it costs a
    request nothing, with one exception: a Responses reasoning item with its encrypted
    content goes back to the API (``sends_reasoning``), priced at
    its encrypted text's tokens over ``ENCRYPTED_REASONING_DIVISOR`` (priced as its text,
    Codex's encrypted reasoning made the estimate of a real session grow 2.3x faster
    than the provider's count)."""

    tag: ClassVar[str] = "opaque"
    kind: str
    payload: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        _require(self.kind, str, "Opaque.kind")
        _require(self.payload, dict, "Opaque.payload")

    def __hash__(self) -> int:  # payload is a dict
        return hash((self.kind, json.dumps(self.payload, sort_keys=True, default=str)))

    def to_json(self) -> dict[str, Any]:
        return {"type": "opaque", "kind": self.kind, "payload": self.payload}

    @classmethod
    def from_fields(cls, data: dict[str, Any]) -> Opaque:
        return cls(data["kind"], data.get("payload") or {})

    @property
    def sends_reasoning(self) -> bool:
        """A reasoning item the Responses API takes back: one with its encrypted content."""
        return self.kind == "reasoning" and isinstance(self.payload.get("encrypted_content"), str) and bool(self.payload["encrypted_content"])

    def tokens(self, pricer: Pricer) -> int:
        if self.sends_reasoning:
            return math.ceil(pricer.text(self.payload["encrypted_content"]) / ENCRYPTED_REASONING_DIVISOR)
        return 0  # never sent

    def markdown(self) -> str:
        where = "sent back to the Responses API alone" if self.sends_reasoning else "not sent to providers"
        return f"*[{self.kind} block, {where}]*"

    def outline(self) -> str:
        return f"[{self.kind}]"


@public
@dataclasses.dataclass(frozen=True)
class Message:
    """One message: a role, content blocks, and an id that stays with it.

    ``time``: when the harness that wrote it recorded it (seconds since the epoch, UTC),
    when known (imports keep the session's own times). It is not content: two messages
    that differ only in their times are equal, and no provider is sent it."""

    role: Role
    content: tuple[Block, ...] = ()
    id: str = dataclasses.field(default_factory=new_id)
    time: float | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_kind(self.role, ROLES, "a message's role", HistoryError)
        if isinstance(self.content, str):
            object.__setattr__(self, "content", (Text(self.content),))
        elif not isinstance(self.content, tuple):
            _require(self.content, (list, tuple), "a message's content")
            object.__setattr__(self, "content", tuple(self.content))
        for block in self.content:
            _require(block, Block, "a message's content block")
        _require(self.id, str, "a message's id")
        if not self.id:
            raise HistoryError("a message's id must not be empty")
        if self.time is not None:
            _require(self.time, (int, float), "a message's time")
            if isinstance(self.time, bool) or not math.isfinite(self.time):
                raise HistoryError(f"a message's time must be seconds since the epoch, not {self.time!r}")

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.content if isinstance(b, ToolCall)]

    @property
    def tool_results(self) -> list[ToolResult]:
        return [b for b in self.content if isinstance(b, ToolResult)]

    @property
    def images(self) -> list[Image]:
        """Every image the message carries, tool results' included."""
        return [image for block in self.content for image in block.images()]

    @property
    def text(self) -> str:
        """The text blocks joined (tool results' text included)."""
        return "\n".join(text for block in self.content for text in block.texts())

    def with_content(self, content: tuple[Block, ...]) -> Message:
        """The same message (same id) with other content."""
        return dataclasses.replace(self, content=content)


# --------------------------------------------------------------------- turn boundaries


def pending_calls(messages: Sequence[Message]) -> list[str]:
    """Ids of tool calls that have no result yet, in call order."""
    answered = {r.call_id for m in messages for r in m.tool_results}
    return [c.id for m in messages for c in m.tool_calls if c.id not in answered]


@public
def is_turn_boundary(messages: Sequence[Message]) -> bool:
    """True when every tool call has its result and every result follows its call."""
    try:
        validate_history(messages, allow_pending=False)
    except HistoryError:
        return False
    return True


@public
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


def last_answered_boundary(messages: Sequence[Message]) -> int:
    """The largest n such that ``messages[:n]`` is at a turn boundary and ends with the
    assistant's answer (0: none), for a stored history (every call answered after it).
    Read from the end: a prefix is at a boundary when no result after it answers a call
    in it, and the answer sought is nearly always among the last few messages."""
    answered_after: set[str] = set()  # the calls the results after n answer
    pending = 0  # of those, the calls made before n
    for n in range(len(messages), 0, -1):
        if pending == 0 and messages[n - 1].role == "assistant":
            return n
        message = messages[n - 1]  # moves after n
        for call in message.tool_calls:
            pending -= call.id in answered_after
        for result in message.tool_results:
            answered_after.add(result.call_id)
            pending += 1
    return 0


#: validate_history's state (the calls still open, every call id) at the end of the
#: histories it checked: a history that extends one is checked from there on.
_VALIDATED: PrefixFolds[tuple[dict[str, int], frozenset[str]]] = PrefixFolds()


def call_ids(messages: Sequence[Message]) -> frozenset[str]:
    """Every tool call id in ``messages`` (from where ``validate_history`` left off,
    when it checked a history ``messages`` extends)."""
    start, state = _VALIDATED.resume(messages)
    return (state[1] if state else frozenset()).union(c.id for m in messages[start:] for c in m.tool_calls)


@public
def validate_history(messages: Sequence[Message], *, allow_pending: bool = True) -> None:
    """Raise ``HistoryError`` the way a provider would reject this history.

    Rejected: a tool result whose call is not earlier in the history; a tool call
    whose result does not come before the next assistant message; a duplicate call id.
    With ``allow_pending``, calls at the very end may still await their results
    (mid-turn), otherwise that is an error too.
    """
    start, state = _VALIDATED.resume(messages)
    open_calls: dict[str, int] = dict(state[0]) if state else {}
    seen: set[str] = set(state[1]) if state else set()
    for index in range(start, len(messages)):
        message = messages[index]
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
    if len(messages) > start:
        _VALIDATED.keep(messages, (dict(open_calls), frozenset(seen)))
    if open_calls and not allow_pending:
        missing = ", ".join(sorted(open_calls))
        raise HistoryError(f"mid-turn: tool calls {missing} have no results yet")


# --------------------------------------------------------------------- titles


def title_from(text: str, limit: int = 120) -> str:
    """A one-line title from a task's text: white space folded, at most ``limit`` characters."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


#: What harnesses wrap around, or put before, what a person typed, dropped whole with
#: what they hold: reminders, command output and caveats, the environment and session
#: context, instruction files, a compaction's state snapshot, a slash command's echo.
_WRAPPER = re.compile(
    r"<(system-reminder|local-command-caveat|local-command-stdout|local-command-stderr|bash-stdout|bash-stderr|"
    r"environment_context|environment_details|session_context|state_snapshot|user_instructions|INSTRUCTIONS|"
    r"command-message|user-prompt-submit-hook)>.*?</\1>",
    re.DOTALL,
)
_TAG = re.compile(r"</?[A-Za-z][\w-]*>")
_NOTE = re.compile(r"\[[^\]\n]*\]")
#: How a message no person typed begins: an instruction file (Codex's AGENTS.md), a
#: skill's text, Claude Code's caveat and its compaction's summary.
_NOT_TYPED = (
    "# AGENTS.md instructions for", "Base directory for this skill:", "Caveat: The messages below were generated",
    "This session is being continued from a previous conversation",
)
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>", re.DOTALL)
_ARGUMENTS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
#: The line after which an IDE's message holds what the person asked (Codex in VS Code).
_IDE_REQUEST = re.compile(r"^## My request for \w+:\s*$", re.MULTILINE)


def first_typed(messages: Sequence[Message]) -> tuple[int, str] | None:
    """The first user message a person typed, as (its index, its text without what the
    harness wrapped around it or put before it: reminders, slash commands' echoes,
    environment context, instruction files); None when there is none."""
    for index, message in enumerate(messages):
        if message.role != "user":
            continue
        text = "\n".join(b.text for b in message.content if isinstance(b, Text)).strip()
        if text.startswith(_NOT_TYPED):
            continue
        asked = _IDE_REQUEST.search(text)
        text = _WRAPPER.sub(" ", text[asked.end() :] if asked else text)
        command = _COMMAND.search(text)
        if command is not None:  # a slash command is a task with what was typed after it, else none
            arguments = _ARGUMENTS.search(text)
            text = f"{command.group(1)} {arguments.group(1)}" if arguments and arguments.group(1).strip() else ""
        text = _TAG.sub(" ", text).strip()
        if text and not _NOTE.fullmatch(text):  # a note an importer wrote ("[mini-swe-agent exit]") is no task
            return index, text
    return None


def first_task(messages: Sequence[Message]) -> str:
    """A title from the first user message a person typed (``first_typed``,
    ``title_from``); "" when there is none."""
    typed = first_typed(messages)
    if typed is not None:
        return title_from(typed[1])
    # No prompt at all (a session of slash commands only): the first command run.
    named = (_COMMAND.search(b.text) for m in messages if m.role == "user" for b in m.content if isinstance(b, Text))
    first = next((found.group(1).strip() for found in named if found and found.group(1).strip()), "")
    return title_from(first if first.startswith("/") or not first else f"/{first}")
