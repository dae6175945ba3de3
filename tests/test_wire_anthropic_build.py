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
from glyphpack._wire import REGISTRY
from glyphpack._wire import anthropic as wire

PROFILE = glyphpack.resolve("claude-sonnet-4-5")


def _reference(view: tuple[Message, ...], prefix: int) -> dict[str, Any]:
    """The build as the whole: convert, check every message, mark the prefix's last
    block where the prefix converts alone to the request's first messages, mark the last."""
    system, messages = wire.to_anthropic(view, system_messages=True)
    wire.check_anthropic(messages, max_images=PROFILE.max_images)
    if 0 < prefix < len(view):
        _, alone = wire.to_anthropic(view[:prefix])
        if alone:
            last, own = len(alone) - 1, len(alone[-1]["content"])
            if messages[:last] == alone[:last] and messages[last]["content"][:own] == alone[-1]["content"]:
                wire._mark(messages[last], own)
    request: dict[str, Any] = {"model": "claude-sonnet-4-5", "messages": messages}
    if system:
        REGISTRY["anthropic"].put_system(request, system)
    if messages:
        wire._mark(messages[-1])
    return request


def _outcome(build: Any, view: tuple[Message, ...], prefix: int) -> object:
    try:
        return build(view, prefix)
    except HistoryError as exc:
        return f"HistoryError: {exc}"


@settings(max_examples=150, deadline=None)
@given(base=histories(), cut=st.integers(0, 60), dropped=st.none() | st.integers(0, 60), stray=st.booleans(), data=st.data())
def test_a_build_is_the_whole_converted_checked_and_marked(base: list[Message], cut: int, dropped: int | None, stray: bool, data: st.DataObject) -> None:
    """Any history, valid or not (a message dropped, a call left without its result),
    any prefix, built twice over (the second time the prefix remembered, more messages
    after it): the same request as the reference builds, or the same error."""
    messages = list(base)
    if dropped is not None and messages:
        del messages[dropped % len(messages)]
    if stray:
        messages.append(Message("assistant", (ToolCall("stray_1", "read", {}),)))
    view = tuple(messages)
    prefix = cut % (len(view) + 1)
    build = lambda v, p: REGISTRY["anthropic"].build("claude-sonnet-4-5", v, p, PROFILE)
    assert _outcome(build, view, prefix) == _outcome(_reference, view, prefix)
    more = (*view, *history(data.draw(st.integers(0, 2)), system=False))
    assert _outcome(build, more, prefix) == _outcome(_reference, more, prefix)


def test_the_prefix_is_converted_once_for_its_very_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = wire.to_anthropic

    def counted(messages: Any, **options: Any) -> Any:
        calls.append(len(messages))
        return real(messages, **options)

    monkeypatch.setattr(wire, "to_anthropic", counted)
    view = tuple(history(4))
    api = REGISTRY["anthropic"]
    first = api.build("claude-sonnet-4-5", view, 10, PROFILE)
    assert calls == [len(view), 10]
    grown = (*view, *history(1, system=False))
    second = api.build("claude-sonnet-4-5", grown, 10, PROFILE)
    assert calls == [len(view), 10, len(grown)]  # the prefix remembered
    assert first["messages"][:4] == second["messages"][:4]
    marked = [(i, j) for i, m in enumerate(second["messages"]) for j, b in enumerate(m["content"]) if "cache_control" in b]
    assert len(marked) == 2 and marked[-1][0] == len(second["messages"]) - 1
    api.build("claude-sonnet-4-5", tuple(Message(m.role, m.content, id=m.id) for m in grown), 10, PROFILE)
    assert calls[-1] == 10  # equal messages, other objects: converted again
    other = (Message("user", (Text("another task"),)), *grown[1:])  # the same tenth message, another first
    assert _outcome(lambda v, p: api.build("claude-sonnet-4-5", v, p, PROFILE), other, 10) == _outcome(_reference, other, 10)
    assert calls[-2:] == [len(other), 10]


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
