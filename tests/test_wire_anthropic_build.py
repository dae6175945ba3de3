"""A Messages request built from a view with a stable prefix (``AnthropicMessages.build``):
exactly what converting, checking and marking the whole gives, the prefix's own
conversion remembered for its very messages, and a request's check resumed where the
prefix's messages end."""

from __future__ import annotations

from typing import Any

import pytest
from histories import histories, history
from hypothesis import given, settings
from hypothesis import strategies as st

import glyphpack
from glyphpack import HistoryError, Message, Text, ToolCall, ToolResult
from glyphpack._providers.resolve import takes_system_messages
from glyphpack._wire import REGISTRY
from glyphpack._wire import anthropic as wire

PROFILE = glyphpack.resolve("claude-sonnet-4-5")


def _reference(view: tuple[Message, ...], prefix: int, model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    """The build as the whole: convert, check every message, mark the prefix's last
    block where the prefix converts alone to the request's first messages, mark the last."""
    system, messages = wire.to_anthropic(view, system_messages=takes_system_messages(model))
    wire.check_anthropic(messages, max_images=PROFILE.max_images)
    if 0 < prefix < len(view):
        _, alone = wire.to_anthropic(view[:prefix])
        if alone:
            last, own = len(alone) - 1, len(alone[-1]["content"])
            if messages[:last] == alone[:last] and messages[last]["content"][:own] == alone[-1]["content"]:
                wire._mark(messages[last], own)
    request: dict[str, Any] = {"model": model, "messages": messages}
    if system:
        REGISTRY["anthropic"].put_system(request, system)
    if messages:
        wire._mark(messages[-1])
    return request


def _outcome(build: Any, view: tuple[Message, ...], prefix: int, *model: str) -> object:
    try:
        return build(view, prefix, *model)
    except HistoryError as exc:
        return f"HistoryError: {exc}"


@settings(max_examples=150, deadline=None)
@given(
    base=histories(), cut=st.integers(0, 60), dropped=st.none() | st.integers(0, 60), stray=st.booleans(), note=st.none() | st.integers(0, 80),
    early=st.none() | st.integers(0, 60), model=st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-8"]), data=st.data(),
)
def test_a_build_is_the_whole_converted_checked_and_marked(
    base: list[Message], cut: int, dropped: int | None, stray: bool, note: int | None, early: int | None, model: str, data: st.DataObject,
) -> None:
    """Any history, valid or not (a message dropped, a call left without its result),
    any prefix, built twice over (the second time the prefix remembered, more messages
    after it, a system note among them or not, and one before), for a model that takes system messages
    in the history and for one that does not: the same request as the reference builds,
    or the same error."""
    assert takes_system_messages("claude-opus-4-8") and not takes_system_messages("claude-sonnet-4-5")
    messages = list(base)
    if dropped is not None and messages:
        del messages[dropped % len(messages)]
    if stray:
        messages.append(Message("assistant", (ToolCall("stray_1", "read", {}),)))
    if early is not None:
        messages.insert(early % (len(messages) + 1), Message("system", (Text("an earlier note"),)))
    view = tuple(messages)
    prefix = cut % (len(view) + 1)
    build = lambda v, p, m: REGISTRY["anthropic"].build(m, v, p, glyphpack.resolve(m))
    assert _outcome(build, view, prefix, model) == _outcome(_reference, view, prefix, model)
    added = history(data.draw(st.integers(0, 2)), system=False)
    if note is not None:  # a harness's system note (a model that takes them keeps it in place)
        added.insert(note % (len(added) + 1), Message("system", (Text("a note from the harness"),)))
    more = (*view, *added)
    assert _outcome(build, more, prefix, model) == _outcome(_reference, more, prefix, model)


def test_the_prefix_is_converted_once_for_its_very_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prefix that ends with its calls answered: converted once, and each request then
    converts only what follows it (a compaction in force sent the whole view through the
    conversion with every request: 2,000 messages at request 990 of a growing conversation)."""
    calls: list[int] = []
    real = wire.to_anthropic

    def counted(messages: Any, **options: Any) -> Any:
        calls.append(len(messages))
        return real(messages, **options)

    monkeypatch.setattr(wire, "to_anthropic", counted)
    view = tuple(history(4))
    api = REGISTRY["anthropic"]

    def build(view: tuple[Message, ...], prefix: int) -> tuple[object, list[int]]:
        """The build (or its error) and the conversions it made."""
        before = len(calls)
        outcome = _outcome(lambda v, p: api.build("claude-sonnet-4-5", v, p, PROFILE), view, prefix)
        return outcome, calls[before:]

    def reference(view: tuple[Message, ...], prefix: int) -> object:
        monkeypatch.setattr(wire, "to_anthropic", real)
        try:
            return _outcome(_reference, view, prefix)
        finally:
            monkeypatch.setattr(wire, "to_anthropic", counted)

    assert view[9].role == "tool"  # the tenth message answers the call before it
    first, converted = build(view, 10)
    assert converted == [10] and first == reference(view, 10)
    grown = (*view, *history(1, system=False))
    second, converted = build(grown, 10)
    assert converted == [] and second == reference(grown, 10)  # the prefix remembered, the rest converted alone
    assert isinstance(first, dict) and isinstance(second, dict) and first["messages"][:4] == second["messages"][:4]
    marked = [(i, j) for i, m in enumerate(second["messages"]) for j, b in enumerate(m["content"]) if "cache_control" in b]
    assert len(marked) == 2 and marked[-1][0] == len(second["messages"]) - 1
    assert build(tuple(Message(m.role, m.content, id=m.id) for m in grown), 10)[1] == [10]  # equal messages, other objects: converted again
    other = (Message("user", (Text("another task"),)), *grown[1:])  # the same tenth message, another first
    outcome, converted = build(other, 10)
    assert outcome == reference(other, 10) and converted == [10]
    assert view[8].role == "assistant" and view[8].tool_calls  # a prefix ending with a call left open
    outcome, converted = build(grown, 9)
    assert outcome == reference(grown, 9) and converted == [9, len(grown)]  # what waits for its result: the whole converted


def test_a_request_built_from_the_remembered_prefix_shares_nothing_a_caller_may_change() -> None:
    """Marks go on the request's messages, and a caller may change what it is handed:
    neither reaches the remembered prefix, so the next request is built as before."""
    api = REGISTRY["anthropic"]
    view = tuple(history(4))
    first = api.build("claude-sonnet-4-5", view, 10, PROFILE)
    for message in first["messages"]:
        message["content"][0]["cache_control"] = {"type": "ephemeral"}
        message["content"].append({"type": "text", "text": "changed"})
        message["role"] = "changed"
    assert api.build("claude-sonnet-4-5", view, 10, PROFILE) == _reference(view, 10)


def test_an_error_after_the_remembered_prefix_names_its_message() -> None:
    """The check resumed where the prefix's messages end still names the message that
    breaks a rule by its index in the whole request."""
    api = REGISTRY["anthropic"]
    view = tuple(history(3))
    api.build("claude-sonnet-4-5", view, 8, PROFILE)
    broken = (*view, Message("tool", (ToolResult("nope_1", (Text("x"),)),)))
    expected = _outcome(_reference, broken, 8)
    assert isinstance(expected, str) and f"message {len(view) - 1}: tool results ['nope_1'] without calls" in expected
    assert _outcome(lambda v, p: api.build("claude-sonnet-4-5", v, p, PROFILE), broken, 8) == expected
