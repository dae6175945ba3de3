"""The free rungs: dropping old reasoning items, eliding old tool results, dropping old
images."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._history.messages import Block, Image, Message, Opaque, Text, ToolCall, ToolResult
from .._history.recall import arguments_ref, image_ref, recall_hint, result_ref
from .cost import CostModel, image_size
from .results import CompactionPolicy, RungReport, RungResult

#: Width of the arguments preview in an elision stub.
STUB_ARGUMENTS_WIDTH = 60
#: How every elision stub and dropped-image stub begins (a reader of a view counts them by it).
ELIDED_MARK = "[elided by glyphpack: "
DROPPED_MARK = "[image dropped by glyphpack: "


#: An agent's loop can run hundreds of model calls on one user message: the protected
#: user turns then keep at most this many of their newest assistant rounds whole.
PROTECTED_ROUNDS = 8


def protected_from(messages: Sequence[Message], protect_turns: int) -> int:
    """Index of the first message in the last ``protect_turns`` user turns, or of the
    last ``PROTECTED_ROUNDS`` assistant messages when those turns hold more (a long tool
    loop on one task would otherwise protect everything it read)."""
    if protect_turns <= 0:
        return len(messages)
    user_starts = [i for i, m in enumerate(messages) if m.role == "user"]
    start = 0 if len(user_starts) < protect_turns else user_starts[-protect_turns]
    rounds = [i for i in range(start, len(messages)) if messages[i].role == "assistant"]
    if len(rounds) > PROTECTED_ROUNDS:
        return rounds[-PROTECTED_ROUNDS]
    return start


def drop_reasoning(messages: Sequence[Message], cost: CostModel) -> RungResult:
    """The reasoning items a model gave that go back to it (Responses' encrypted
    reasoning, sent so a reasoning model keeps its train of thought), all but the newest
    answer's, left out of the request: the API takes a request without them, and the
    newest carries the train of thought into the pending calls. The transcript keeps
    them; an answer left with nothing else is left out whole."""
    started = time.perf_counter()
    before = cost.history(messages)
    newest = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    out: list[Message] = []
    changed = 0
    for index, message in enumerate(messages):
        kept = tuple(b for b in message.content if not (isinstance(b, Opaque) and b.sends_reasoning))
        if index == newest or len(kept) == len(message.content):
            out.append(message)
            continue
        changed += len(message.content) - len(kept)
        if kept:
            out.append(message.with_content(kept))
    report = RungReport(rung="reasoning drop", tokens_before=before, tokens_after=cost.history(out), changed=changed, seconds=time.perf_counter() - started)
    return RungResult(tuple(out), report)


def _short(arguments: dict[str, Any], width: int = STUB_ARGUMENTS_WIDTH) -> str:
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def _image_stub(block: Image, ref: str) -> Text:
    if block.data is None:
        return Text(f"{DROPPED_MARK}{block.media_type}, {block.ref}; {recall_hint(ref)}]")
    width, height = image_size(block.data)
    return Text(f"{DROPPED_MARK}{block.media_type}, {width}x{height}, {len(block.data):,} bytes; {recall_hint(ref)}]")


def elide(messages: Sequence[Message], cost: CostModel, policy: CompactionPolicy = CompactionPolicy()) -> RungResult:
    """Outside the last ``policy.protect_turns`` turns: tool results of at least
    ``policy.elide_min_chars`` characters become a one-line stub, unless remarkable
    (errors always are, and ``policy.remarkable(result, call)`` may say so of others);
    and tool calls whose arguments are that long (an edit's or a write's body) keep
    their name and a preview of their arguments. Messages with nothing to elide are kept
    as they are (their prices stay cached)."""
    started = time.perf_counter()
    before = cost.history(messages)
    calls = {c.id: c for m in messages for c in m.tool_calls}
    protected = protected_from(messages, policy.protect_turns)
    out: list[Message] = []
    changed = 0
    for index, message in enumerate(messages):
        if index >= protected or not (message.tool_results or message.tool_calls):
            out.append(message)
            continue
        content: list[Block] = []
        for block in message.content:
            if isinstance(block, ToolResult) and not _keep(block, calls.get(block.call_id), policy):
                block = elided_result(block, calls.get(block.call_id))
                changed += 1
            elif isinstance(block, ToolCall) and len(block.arguments_json) >= policy.elide_min_chars:
                block = elided_call(block)
                changed += 1
            content.append(block)
        out.append(message if tuple(content) == message.content else message.with_content(tuple(content)))
    report = RungReport(rung="elision", tokens_before=before, tokens_after=cost.history(out), changed=changed, seconds=time.perf_counter() - started)
    return RungResult(tuple(out), report)


def _keep(result: ToolResult, call: ToolCall | None, policy: CompactionPolicy) -> bool:
    short = len(result.text) < policy.elide_min_chars
    marked = policy.remarkable is not None and policy.remarkable(result, call)
    return result.is_error or short or marked


def elided_result(result: ToolResult, call: ToolCall | None) -> ToolResult:
    text = result.text
    described = f"{call.name}({_short(call.arguments)})" if call else "a tool call"
    lines = text.count("\n") + 1
    stub = Text(f"{ELIDED_MARK}result of {described}, {len(text):,} chars, {lines:,} lines; {recall_hint(result_ref(result.call_id))}]")
    return dataclasses.replace(result, content=(stub, *result.images()))


def elided_call(call: ToolCall) -> ToolCall:
    """The call with its arguments replaced by a preview (the call stays, so its result
    stays paired)."""
    text = call.arguments_json
    hint = recall_hint(arguments_ref(call.id))
    stub = f"{ELIDED_MARK}{len(text):,} chars of arguments; {hint}] {_short(call.arguments, 2 * STUB_ARGUMENTS_WIDTH)}"
    return dataclasses.replace(call, arguments={"elided_by_glyphpack": stub})


def drop_images(messages: Sequence[Message], cost: CostModel, protect_turns: int = 2, note: str = "") -> RungResult:
    """Old images (outside the last ``protect_turns`` turns) become a one-line stub;
    with ``protect_turns=0`` every image does. Messages without images are kept as
    they are."""
    started = time.perf_counter()
    before = cost.history(messages)
    protected = protected_from(messages, protect_turns)
    out: list[Message] = []
    changed = 0
    for index, message in enumerate(messages):
        if index >= protected or not message.images:
            out.append(message)
            continue
        changed += len(message.images)
        out.append(message.with_content(_content_without_images(message)))
    report = RungReport(rung="image drop", tokens_before=before, tokens_after=cost.history(out), changed=changed, seconds=time.perf_counter() - started, note=note)
    return RungResult(tuple(out), report)


def cap_images(messages: Sequence[Message], cost: CostModel, limit: int) -> RungResult:
    """Images dropped oldest first (each a one-line stub) until the request carries at
    most ``limit``: a provider rejects a request with more, whatever its tokens."""
    started = time.perf_counter()
    before = cost.history(messages)
    excess = sum(len(m.images) for m in messages) - limit
    out: list[Message] = []
    changed = 0

    def kept(block: Block) -> bool:  # oldest first, a block's images together
        nonlocal excess, changed
        if excess <= 0:
            return True
        excess -= len(block.images())
        changed += len(block.images())
        return False

    for message in messages:
        if excess <= 0 or not message.images:
            out.append(message)
            continue
        out.append(message.with_content(_content_without_images(message, kept)))
    note = f"a request may carry at most {limit} images"
    report = RungReport(rung="image drop", tokens_before=before, tokens_after=cost.history(out), changed=changed, seconds=time.perf_counter() - started, note=note)
    return RungResult(tuple(out), report)


def _content_without_images(message: Message, keep: Callable[[Block], bool] = lambda block: False) -> tuple[Block, ...]:
    """``message``'s content with the images of every block ``keep`` refuses made stubs,
    each naming its ref (the message's id and the image's number in it)."""
    content: list[Block] = []
    number = 0
    for block in message.content:
        carried = block.images()
        if carried and not keep(block):
            first = number + 1
            if isinstance(block, Image):
                block = _image_stub(block, image_ref(message.id, first))
            elif isinstance(block, ToolResult):
                stubs = iter(_image_stub(image, image_ref(message.id, first + n)) for n, image in enumerate(carried))
                block = dataclasses.replace(block, content=tuple(next(stubs) if isinstance(b, Image) else b for b in block.content))
        number += len(carried)
        content.append(block)
    return tuple(content)
