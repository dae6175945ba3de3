"""Each API's relay, event by event: two or three upstream rounds in, the one stream
the client gets out, compared whole. The property test in ``test_proxy_recall.py``
reads the relayed stream back through an accumulator, which forgives what a strict
client would not (a block's number, a sequence number, a repeated role, an event's
name); these tests pin every event the client is sent, and the bytes it is sent as."""

from __future__ import annotations

import json
from typing import Any

import pytest

from glyphpack._history.recall import RECALL_TOOL
from glyphpack._proxy.rounds import AnthropicRelay, ChatRelay, Relay, ResponsesRelay
from glyphpack._proxy.streams import SseParser

Json = dict[str, Any]
Event = tuple[str, "Json | str"]


def _stream(events: list[Event], named: bool = True) -> bytes:
    """Events as a provider writes them: ``event:`` lines (when ``named``), one
    ``data:`` line each, JSON payloads compact."""
    out = []
    for name, payload in events:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out.append((f"event: {name}\n" if named else "") + f"data: {data}\n\n")
    return "".join(out).encode()


def _relayed(relay: Relay, rounds: list[bytes], cut: int = 0) -> bytes:
    """What the client is sent for ``rounds`` (the last one final), each fed whole or,
    with ``cut``, in pieces of ``cut`` bytes."""
    sent = b""
    for number, stream in enumerate(rounds, 1):
        pieces = [stream[i : i + cut] for i in range(0, len(stream), cut)] if cut else [stream]
        for piece in pieces:
            sent += relay.feed(piece)
        sent += relay.end_round(final=number == len(rounds))
    return sent


def _read(sent: bytes) -> list[Event]:
    return [(name, data if data == "[DONE]" else json.loads(data)) for name, data in SseParser().feed(sent)]


# ---------------------------------------------------------------------- Anthropic


def _anthropic_round(message_id: str, usage: Json, blocks: list[Json], stop: str, output_tokens: int) -> list[Event]:
    events: list[Event] = [("message_start", {"type": "message_start", "message": {"id": message_id, "role": "assistant", "content": [], "usage": usage}})]
    for index, block in enumerate(blocks):
        start = {**block, "input": {}} if block["type"] == "tool_use" else {"type": "text", "text": ""}
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        if block["type"] == "text":
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": "{}"}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("ping", {"type": "ping"}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": output_tokens}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


_RECALL_USE = {"type": "tool_use", "id": "toolu_r", "name": RECALL_TOOL}
_BASH_USE = {"type": "tool_use", "id": "toolu_b", "name": "Bash"}


def test_the_anthropic_relay_numbers_blocks_on_drops_the_recall_and_sums_the_usage() -> None:
    """Round one: text, a recall call. Round two: text, the client's call. The client
    gets one message_start (round one's), the text blocks and its call numbered 0, 1, 2,
    every ping, one message_delta (still tool use: a call of its own is left) with every
    round's usage summed, one message_stop."""
    first = _anthropic_round("msg_1", {"input_tokens": 100, "output_tokens": 1, "cache_read_input_tokens": 50}, [{"type": "text", "text": "Let me look."}, _RECALL_USE], "tool_use", 10)
    second = _anthropic_round("msg_2", {"input_tokens": 300, "output_tokens": 1, "cache_read_input_tokens": 60}, [{"type": "text", "text": "Now the test."}, _BASH_USE], "tool_use", 20)
    got = _read(_relayed(AnthropicRelay(), [_stream(first), _stream(second)]))
    assert got == [
        first[0],
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me look."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("ping", {"type": "ping"}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Now the test."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("content_block_start", {"type": "content_block_start", "index": 2, "content_block": {**_BASH_USE, "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        ("ping", {"type": "ping"}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                # Round one's start and delta usage, plus round two's: what was billed.
                "usage": {"input_tokens": 400, "output_tokens": 30, "cache_read_input_tokens": 110},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def test_an_anthropic_answer_whose_last_round_calls_only_the_recall_ends_the_turn() -> None:
    """The recall rounds ran out with the model still calling it: the client is told
    ``end_turn`` (no call of its own to answer), with the usage of all three rounds, and
    what happened as text (an answer with no content was refused when the client sent it
    back)."""
    from glyphpack._proxy.rounds import UNANSWERED

    rounds = [_anthropic_round(f"msg_{n}", {"input_tokens": 10 * n, "output_tokens": 1}, [_RECALL_USE], "tool_use", n) for n in (1, 2, 3)]
    got = _read(_relayed(AnthropicRelay(), [_stream(r) for r in rounds], cut=7))
    assert got == [
        rounds[0][0],
        ("ping", {"type": "ping"}),
        ("ping", {"type": "ping"}),
        ("ping", {"type": "ping"}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": UNANSWERED}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"input_tokens": 60, "output_tokens": 6}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def test_an_anthropic_answer_in_one_round_is_relayed_as_it_came() -> None:
    """No recall: the client's stream is the upstream's, event for event, the usage of
    its message_delta untouched (not merged with message_start's)."""
    only = _anthropic_round("msg_1", {"input_tokens": 100, "output_tokens": 1}, [{"type": "text", "text": "Done."}, _BASH_USE], "tool_use", 10)
    assert _read(_relayed(AnthropicRelay(), [_stream(only)])) == only
    ended = _anthropic_round("msg_1", {"input_tokens": 100, "output_tokens": 1}, [{"type": "text", "text": "Done."}], "end_turn", 10)
    assert _read(_relayed(AnthropicRelay(), [_stream(ended)])) == ended


def test_relayed_events_are_written_as_the_provider_writes_them() -> None:
    """Named events keep their ``event:`` line, unnamed ones (Chat's) get none, text
    goes out as UTF-8 (not escaped), and what is not JSON goes on as it came."""
    relay = AnthropicRelay()
    text = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Ünïcode ✓"}}
    assert relay.feed(_stream([("content_block_delta", text)])) == ('event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Ünïcode ✓"}}\n\n').encode()
    assert relay.feed(b"event: error\ndata: not json\n\n") == b"event: error\ndata: not json\n\n"
    assert relay.feed(b"data: [1, 2]\n\n") == b"data: [1, 2]\n\n"
    chat = ChatRelay()
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": "é"}, "finish_reason": None}]}
    assert chat.feed(_stream([("message", chunk)], named=False)) == 'data: {"id": "c", "choices": [{"index": 0, "delta": {"content": "é"}, "finish_reason": null}]}\n\n'.encode()


# ---------------------------------------------------------------------- Chat Completions


def _chunk(delta: Json, finish: str | None = None, index: int = 0) -> Json:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def _call_start(index: int, call_id: str, name: str) -> Json:
    return {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}


def _call_piece(index: int, arguments: str) -> Json:
    return {"index": index, "function": {"arguments": arguments}}


def _usage_chunk(prompt: int, completion: int) -> Json:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


def test_the_chat_relay_says_the_role_once_numbers_calls_on_and_holds_the_end() -> None:
    """Round one: text, a recall call in pieces, its finish, usage, [DONE]. Round two:
    the role again, text, the client's call. The client gets the role once, the
    recall's pieces nowhere, its own call as number 0, one finish (``tool_calls``),
    one usage chunk summing both rounds, one [DONE]."""
    first = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Let me look."}),
        _chunk({"tool_calls": [_call_start(0, "call_r", RECALL_TOOL)]}),
        _chunk({"tool_calls": [_call_piece(0, '{"ref": "x"}')]}),
        _chunk({}, "tool_calls"),
        _usage_chunk(100, 10),
        "[DONE]",
    ]
    second = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Now the test."}),
        _chunk({"tool_calls": [_call_start(0, "call_b", "Bash")]}),
        _chunk({"tool_calls": [_call_piece(0, '{"command": "ls"}')]}),
        _chunk({}, "tool_calls"),
        _usage_chunk(300, 20),
        "[DONE]",
    ]
    got = _relayed(ChatRelay(), [_stream([("message", e) for e in first], named=False), _stream([("message", e) for e in second], named=False)], cut=5)
    assert _read(got) == [
        ("message", first[0]),
        ("message", first[1]),
        ("message", _chunk({"content": ""})),
        ("message", second[1]),
        ("message", second[2]),
        ("message", second[3]),
        ("message", second[4]),
        ("message", {**_usage_chunk(0, 0), "usage": {"prompt_tokens": 400, "completion_tokens": 30, "total_tokens": 430}}),
        ("message", "[DONE]"),
    ]
    assert b"event:" not in got


def test_a_chat_answer_left_with_only_recall_calls_stops_and_the_first_round_keeps_its_numbers() -> None:
    """Two calls in round one, the client's then a recall (numbers 0 and 1 upstream):
    the client's keeps 0, the recall's pieces go; round two calls only the recall and is
    final, so its finish becomes ``stop``... unless a call of the client's was sent
    this round, which here it was not."""
    first = [
        _chunk({"role": "assistant", "tool_calls": [_call_start(0, "call_b", "Bash"), _call_start(1, "call_r", RECALL_TOOL)]}),
        _chunk({"tool_calls": [_call_piece(1, "{}"), _call_piece(0, "{}")]}),
        _chunk({}, "tool_calls"),
        _usage_chunk(100, 10),
        "[DONE]",
    ]
    second = [_chunk({"role": "assistant", "tool_calls": [_call_start(0, "call_r2", RECALL_TOOL)]}), _chunk({}, "tool_calls"), "[DONE]"]
    got = _read(_relayed(ChatRelay(), [_stream([("message", e) for e in first], named=False), _stream([("message", e) for e in second], named=False)]))
    assert got == [
        ("message", _chunk({"role": "assistant", "tool_calls": [_call_start(0, "call_b", "Bash")]})),
        ("message", _chunk({"tool_calls": [_call_piece(0, "{}")]})),
        ("message", _chunk({}, "stop")),
        ("message", "[DONE]"),
    ]


def test_a_chat_finish_that_carries_a_delta_is_split_and_other_choices_and_errors_pass() -> None:
    """A finish chunk with content: the content goes now (finish_reason null), the
    finish is held to the end with an empty delta. A second choice, an error chunk and
    a chunk without choices go on untouched; a one-round answer's usage is its own."""
    events = [
        _chunk({"role": "assistant", "content": "Done"}, "stop"),
        _chunk({"content": "other"}, index=1),
        {"error": {"message": "overloaded"}},
        {"id": "chatcmpl-1", "note": "no choices"},
        _usage_chunk(100, 10),
        "[DONE]",
    ]
    got = _read(_relayed(ChatRelay(), [_stream([("message", e) for e in events], named=False)]))
    assert got == [
        ("message", _chunk({"role": "assistant", "content": "Done"})),
        ("message", events[1]),
        ("message", events[2]),
        ("message", events[3]),
        ("message", _chunk({}, "stop")),
        ("message", events[4]),
        ("message", "[DONE]"),
    ]


def test_a_chat_chunk_of_recall_pieces_and_a_non_object_call_sends_nothing() -> None:
    relay = ChatRelay()
    relay.feed(_stream([("message", _chunk({"role": "assistant", "tool_calls": [_call_start(0, "call_r", RECALL_TOOL)]}))], named=False))
    assert relay.feed(_stream([("message", _chunk({"tool_calls": [_call_piece(0, "{}"), "junk"]}))], named=False)) == b""
    # An empty delta with no finish (a keep-alive) still goes on.
    assert _read(relay.feed(_stream([("message", _chunk({}))], named=False))) == [("message", _chunk({}))]


# ---------------------------------------------------------------------- Responses


def _responses_round(response_id: str, items: list[Json], usage: Json, start: int = 0) -> list[Event]:
    """A Responses stream: created, in_progress, each item added, a delta and done,
    then completed with the items and ``usage``; sequence numbers from ``start``."""
    events: list[Json] = [
        {"type": "response.created", "response": {"id": response_id, "status": "in_progress", "output": []}},
        {"type": "response.in_progress", "response": {"id": response_id, "status": "in_progress", "output": []}},
    ]
    for index, item in enumerate(items):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item["type"] == "message":
            events.append({"type": "response.output_text.delta", "output_index": index, "item_id": item["id"], "content_index": 0, "delta": item["content"][0]["text"]})
        else:
            events.append({"type": "response.function_call_arguments.delta", "output_index": index, "item_id": item["id"], "delta": item["arguments"]})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": {"id": response_id, "status": "completed", "output": items, "usage": usage}})
    return [(e["type"], {**e, "sequence_number": start + n}) for n, e in enumerate(events)]


def _message_item(item_id: str, text: str) -> Json:
    return {"type": "message", "id": item_id, "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def _function_item(item_id: str, name: str) -> Json:
    return {"type": "function_call", "id": item_id, "call_id": f"call_{item_id}", "name": name, "arguments": "{}"}


def test_the_responses_relay_renumbers_items_and_sequence_and_completes_once_with_every_round() -> None:
    """Round one: a message and a recall call. Round two: a message and the client's
    call. The client gets created and in_progress once (round one's), items at output
    index 0, 1, 2 (the recall's events nowhere), sequence numbers 0, 1, 2... without a
    gap, and one response.completed named as created, holding the three items and both
    rounds' usage."""
    usage_1 = {"input_tokens": 100, "output_tokens": 10, "input_tokens_details": {"cached_tokens": 50}}
    usage_2 = {"input_tokens": 300, "output_tokens": 20, "input_tokens_details": {"cached_tokens": 60}}
    items_1 = [_message_item("msg_1", "Let me look."), _function_item("fc_r", RECALL_TOOL)]
    items_2 = [_message_item("msg_2", "Now the test."), _function_item("fc_b", "Bash")]
    first = _responses_round("resp_1", items_1, usage_1, start=0)
    second = _responses_round("resp_2", items_2, usage_2, start=40)
    got = _read(_relayed(ResponsesRelay(), [_stream(first), _stream(second)], cut=11))
    expected: list[Json] = [
        first[0][1],
        first[1][1],
        {"type": "response.output_item.added", "output_index": 0, "item": items_1[0]},
        {"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1", "content_index": 0, "delta": "Let me look."},
        {"type": "response.output_item.done", "output_index": 0, "item": items_1[0]},
        {"type": "response.output_item.added", "output_index": 1, "item": items_2[0]},
        {"type": "response.output_text.delta", "output_index": 1, "item_id": "msg_2", "content_index": 0, "delta": "Now the test."},
        {"type": "response.output_item.done", "output_index": 1, "item": items_2[0]},
        {"type": "response.output_item.added", "output_index": 2, "item": items_2[1]},
        {"type": "response.function_call_arguments.delta", "output_index": 2, "item_id": "fc_b", "delta": "{}"},
        {"type": "response.output_item.done", "output_index": 2, "item": items_2[1]},
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "output": [items_1[0], *items_2],
                "usage": {"input_tokens": 400, "output_tokens": 30, "input_tokens_details": {"cached_tokens": 110}},
            },
        },
    ]
    assert got == [(e["type"], {**e, "sequence_number": n}) for n, e in enumerate(expected)]


def test_a_responses_answer_in_one_round_is_relayed_as_it_came() -> None:
    only = _responses_round("resp_1", [_message_item("msg_1", "Done."), _function_item("fc_b", "Bash")], {"input_tokens": 5, "output_tokens": 1})
    assert _read(_relayed(ResponsesRelay(), [_stream(only)])) == only


@pytest.mark.parametrize("named", [True, False])
def test_a_responses_event_without_a_type_is_read_by_its_event_name(named: bool) -> None:
    """Events are told apart by their payload's ``type`` or, without one, the SSE event
    name: a completed event named only by its ``event:`` line is still held to the end,
    and one with neither goes on at once."""
    relay = ResponsesRelay()
    completed = {"response": {"id": "resp_1", "output": [], "usage": {"input_tokens": 1}}}
    sent = relay.feed(_stream([("response.completed", completed)], named=named))
    if named:
        assert sent == b""
        assert _read(relay.end_round(final=True)) == [("response.completed", completed)]
    else:
        assert _read(sent) == [("message", completed)]
        assert relay.end_round(final=True) == b""


def test_a_held_responses_end_without_a_response_object_is_only_renumbered() -> None:
    relay = ResponsesRelay()
    relay.feed(_stream([("response.created", {"type": "response.created", "sequence_number": 7, "response": {"id": "resp_1"}})]))
    relay.feed(_stream([("response.completed", {"type": "response.completed", "sequence_number": 9, "response": "gone"})]))
    assert _read(relay.end_round(final=True)) == [("response.completed", {"type": "response.completed", "sequence_number": 1, "response": "gone"})]


# ---------------------------------------------------------------------- what the tests above do not reach


def test_events_are_known_by_their_payloads_type_or_else_their_event_name() -> None:
    """A stream without ``event:`` lines (a gateway that strips them) is read by each
    payload's ``type``; a payload without one by its ``event:`` line."""
    first = _anthropic_round("msg_1", {"input_tokens": 100, "output_tokens": 1}, [_RECALL_USE], "tool_use", 10)
    second = _anthropic_round("msg_2", {"input_tokens": 300, "output_tokens": 1}, [{"type": "text", "text": "Done."}], "end_turn", 20)
    got = _read(_relayed(AnthropicRelay(), [_stream(first, named=False), _stream(second, named=False)]))
    assert [payload["type"] for _, payload in got] == [
        "message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "ping", "message_delta", "message_stop",
    ]
    assert got[2][1]["index"] == 0 and got[-2][1]["usage"] == {"input_tokens": 400, "output_tokens": 30}
    untyped = [(name, {k: v for k, v in payload.items() if k != "type"}) for name, payload in first if isinstance(payload, dict)]
    relay = AnthropicRelay()
    sent = _read(relay.feed(_stream(untyped)))
    assert [name for name, _ in sent] == ["message_start", "ping"]  # the recall block dropped, the end held
    # its recall could not be answered: the client is told so, never sent an answer with no content
    assert [name for name, _ in _read(relay.end_round(final=True))] == ["content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    responses = _responses_round("resp_1", [_message_item("msg_1", "Done.")], {"input_tokens": 5})
    relay_r = ResponsesRelay()
    streamed = relay_r.feed(_stream(responses[:-1], named=False))
    assert relay_r.feed(_stream(responses[-1:], named=False)) == b""  # completed, held by its type
    assert _read(streamed + relay_r.end_round(final=True)) == [("message", payload) for _, payload in responses]


def test_a_client_call_before_text_in_the_last_round_still_asks_for_its_result() -> None:
    first = _anthropic_round("msg_1", {"input_tokens": 100}, [_RECALL_USE], "tool_use", 10)  # no output count at the start
    second = _anthropic_round("msg_2", {"input_tokens": 300, "output_tokens": 1}, [_BASH_USE, {"type": "text", "text": "Running it."}], "tool_use", 20)
    got = _read(_relayed(AnthropicRelay(), [_stream(first), _stream(second)]))
    assert got[-2] == ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"input_tokens": 400, "output_tokens": 30}})


def test_a_continued_anthropic_round_whose_start_has_no_usage_counts_its_delta() -> None:
    first = _anthropic_round("msg_1", {"input_tokens": 100, "output_tokens": 1}, [_RECALL_USE], "tool_use", 10)
    second = _anthropic_round("msg_2", {}, [{"type": "text", "text": "Done."}], "end_turn", 20)
    second[0] = ("message_start", {"type": "message_start", "message": {"id": "msg_2", "role": "assistant", "content": []}})
    got = _read(_relayed(AnthropicRelay(), [_stream(first), _stream(second)]))
    assert got[-2][1]["usage"] == {"input_tokens": 100, "output_tokens": 30}


def test_chat_choices_other_than_the_first_and_malformed_ones_are_left_as_they_are_in_order() -> None:
    """In a continued round the first choice (index 0, or no index) loses its role; a
    second choice keeps it, and keeps its place whatever comes before or after it; an
    error chunk goes on whole, its choices untouched; a call that is not an object is
    left out without losing the calls after it; the client's calls are numbered 0, 1, 2."""
    first = [_chunk({"role": "assistant", "tool_calls": [_call_start(0, "call_r", RECALL_TOOL)]}), _chunk({}, "tool_calls"), "[DONE]"]
    other = {"index": 1, "delta": {"role": "assistant", "content": "y"}, "finish_reason": None}
    error = {"error": {"message": "mid-stream"}, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    second = [
        {"id": "chatcmpl-1", "choices": [other, {"delta": {"role": "assistant", "content": "x"}}, "junk"]},
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}, other]},
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": ["junk", _call_start(0, "c0", "Bash"), _call_start(1, "cr", RECALL_TOOL)]}}, other]},
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [_call_piece(1, "{}")]}}, other]},
        _chunk({"tool_calls": [_call_start(2, "c1", "Read"), _call_start(3, "c2", "Grep")]}),
        error,
        "[DONE]",
    ]
    got = _read(_relayed(ChatRelay(), [_stream([("message", e) for e in first], named=False), _stream([("message", e) for e in second], named=False)]))
    assert got == [
        ("message", _chunk({"role": "assistant"})),
        ("message", {"id": "chatcmpl-1", "choices": [other, {"delta": {"content": "x"}}, "junk"]}),
        ("message", {"id": "chatcmpl-1", "choices": [other]}),
        ("message", {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [_call_start(0, "c0", "Bash")]}}, other]}),
        ("message", {"id": "chatcmpl-1", "choices": [other]}),
        ("message", _chunk({"tool_calls": [_call_start(1, "c1", "Read"), _call_start(2, "c2", "Grep")]})),
        ("message", error),
        ("message", {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ("message", "[DONE]"),
    ]


def test_a_responses_created_without_an_id_and_items_that_interleave() -> None:
    """The client's response keeps the id it was created with even when in_progress
    does not repeat it; items whose events interleave (the second added before the
    first is done) each keep their number; an event for an item never added goes on
    with the number it has."""
    recall = _function_item("fc_r", RECALL_TOOL)
    message = _message_item("msg_1", "Looking.")
    first = [
        ("response.created", {"type": "response.created", "response": {"id": "resp_1"}}),
        ("response.in_progress", {"type": "response.in_progress", "response": {}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": message}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 1, "item": recall}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0, "delta": "Looking."}),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{}"}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": message}),
        ("response.completed", {"type": "response.completed", "response": {"id": "resp_1", "output": [message, recall], "usage": {"input_tokens": 1}}}),
    ]
    second = [
        ("response.created", {"type": "response.created", "response": {"id": "resp_2"}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 7, "delta": "stray"}),
        ("response.completed", {"type": "response.completed", "response": {"id": "resp_2", "output": [], "usage": {"input_tokens": 2}}}),
    ]
    got = _read(_relayed(ResponsesRelay(), [_stream(first), _stream(second)]))
    assert got == [
        *first[:3],
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0, "delta": "Looking."}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": message}),
        second[1],
        ("response.completed", {"type": "response.completed", "response": {"id": "resp_1", "output": [message], "usage": {"input_tokens": 3}}}),
    ]


def test_whole_answers_with_malformed_blocks_and_no_usage() -> None:
    """A block or item that is not an object is no call (counted as none, not a crash);
    a Chat answer without usage is joined without a usage key."""
    from glyphpack._proxy.rounds import joined, recall_calls

    assert recall_calls("anthropic", {"content": ["junk", {"type": "tool_use", "name": RECALL_TOOL, "id": "t"}]}) == 1
    assert recall_calls("openai-responses", {"output": ["junk", {"type": "function_call", "name": RECALL_TOOL}]}) == 1
    chat = {"id": "c1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    assert joined("openai-chat", [chat]) == chat


def test_a_whole_chat_answer_that_ends_on_a_recall_alone_stops_without_calls() -> None:
    """The recall rounds ran out with the model still calling it: the client's Chat
    answer has no ``tool_calls`` key at all (not the recall's) and stops."""
    from glyphpack._proxy.rounds import joined

    recall = {"id": "call_r", "type": "function", "function": {"name": RECALL_TOOL, "arguments": "{}"}}
    rounds = [
        {"id": f"c{n}", "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": [recall]}, "finish_reason": "tool_calls"}]}
        for n, text in ((1, "Looking."), (2, None))
    ]
    assert joined("openai-chat", rounds) == {
        "id": "c1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Looking."}, "finish_reason": "stop"}],
    }


def test_an_answer_left_empty_by_its_recall_calls_says_so_in_every_api_whole_and_streamed() -> None:
    """When a recall cannot be answered (too many in one round, or the round cap reached
    by a model that ignores tool_choice none) the client got ``content: []`` and every
    later request was refused by Anthropic; Chat's message had neither content nor calls.
    The answer says what happened instead; an answer that had something is untouched."""
    from glyphpack._proxy.rounds import UNANSWERED, ChatRelay, joined
    from glyphpack.testing.fake import Turn, answer_body, sse_events

    recall_only = Turn(calls=((RECALL_TOOL, {"ref": "x"}),))
    for api in ("anthropic", "openai-chat", "openai-responses"):
        whole = joined(api, [answer_body(api, recall_only, 1, 10)])  # type: ignore[arg-type]
        assert UNANSWERED in json.dumps(whole), api
        said = joined(api, [answer_body(api, Turn(text="Done."), 1, 10)])  # type: ignore[arg-type]
        assert UNANSWERED not in json.dumps(said), api
        relay = {"anthropic": AnthropicRelay, "openai-chat": ChatRelay, "openai-responses": ResponsesRelay}[api]()
        streamed = relay.feed(b"".join(sse_events(api, answer_body(api, recall_only, 1, 10)))) + relay.end_round(final=True)
        assert UNANSWERED in streamed.decode(), api
        quiet = {"anthropic": AnthropicRelay, "openai-chat": ChatRelay, "openai-responses": ResponsesRelay}[api]()
        plain = quiet.feed(b"".join(sse_events(api, answer_body(api, Turn(text="Done."), 1, 10)))) + quiet.end_round(final=True)
        assert UNANSWERED not in plain.decode(), api
