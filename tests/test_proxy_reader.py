"""The proxy reads a request in proportion to what is new in it (``RequestReader``):
the same history, digests and refusals as reading each request whole."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from glyphpack import HistoryError

_READ_TEXTS = st.sampled_from(["ls", "cat a.py", "x" * 50, "done", "é\u0301"])


@st.composite
def _request_sequences(draw):
    """Requests one client sends: each continues, edits, cuts or restarts the last."""
    def wire_turn(n: int) -> list[dict]:
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "bash", "input": {"cmd": draw(_READ_TEXTS)}}
        thinking = [{"type": "thinking", "thinking": "hm", "signature": "s"}] if draw(st.booleans()) else []
        return [
            {"role": "assistant", "content": [*thinking, {"type": "text", "text": draw(_READ_TEXTS)}, call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": draw(_READ_TEXTS)},
                                         *([{"type": "text", "text": "and"}] if draw(st.booleans()) else [])]},
        ]

    messages = [{"role": "user", "content": draw(_READ_TEXTS)}]
    system = draw(st.sampled_from([None, "be brief", [{"type": "text", "text": "be brief"}]]))
    requests = []
    for n in range(draw(st.integers(1, 8))):
        action = draw(st.sampled_from(["continue", "continue", "edit", "cut", "system", "restart", "bad"]))
        if action == "continue":
            messages = [*messages, *wire_turn(n)]
        elif action == "edit" and len(messages) > 1:
            at = draw(st.integers(0, len(messages) - 1))
            messages = [*messages[:at], {"role": messages[at]["role"], "content": "edited"}, *messages[at + 1 :]]
        elif action == "cut":
            messages = messages[: draw(st.integers(1, len(messages)))]
        elif action == "system":
            system = draw(st.sampled_from([None, "be brief", "be long"]))
        elif action == "restart":
            messages = [{"role": "user", "content": draw(_READ_TEXTS)}]
        elif action == "bad":
            requests.append((system, [*messages, {"role": "robot", "content": "?"}]))
            continue
        requests.append((system, json.loads(json.dumps(messages))))  # each request parsed anew, as from the wire
    return requests


@settings(max_examples=150, deadline=None)
@given(_request_sequences())
def test_a_request_read_in_proportion_to_what_is_new_is_read_as_a_whole(requests):
    """``RequestReader`` reuses what a client's recent request began with: its history
    (but ids), digests, thinking marks and refusals are those of reading each request
    whole, whatever the client does between requests."""
    from glyphpack._proxy.histories import RequestReader, _read_request, digests, thinking_marks

    reader = RequestReader()
    for system, messages in requests:
        body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages, **({"system": system} if system else {})}
        _, history, chain = reader.read("anthropic", body, b"client")
        _, whole = _read_request("anthropic", json.loads(json.dumps(body)))
        if isinstance(whole, HistoryError):
            assert isinstance(history, HistoryError) and str(history) == str(whole) and chain is None
            continue
        assert [(m.role, m.content) for m in history] == [(m.role, m.content) for m in whole]
        assert chain == (digests(whole), thinking_marks(whole))


def test_a_request_nested_too_deep_is_refused_alike_read_whole_or_in_part():
    from glyphpack._proxy.histories import MAX_NESTING, RequestReader, _read_request

    deep: object = "x"
    for _ in range(MAX_NESTING):
        deep = {"k": deep}
    first = [{"role": "user", "content": "hi"}]
    reader = RequestReader()
    reader.read("anthropic", {"model": "m", "messages": first}, b"c")
    for body in (
        {"model": "m", "messages": [*first, {"role": "assistant", "content": [{"type": "text", "text": "a", "extra": deep}]}]},
        {"model": "m", "messages": first, "metadata": deep},
    ):
        _, history, _ = reader.read("anthropic", body, b"c")
        _, whole = _read_request("anthropic", body)
        assert isinstance(history, HistoryError) and isinstance(whole, HistoryError) and str(history) == str(whole)
