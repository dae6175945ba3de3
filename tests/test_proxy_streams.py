"""The proxy's stream accumulators, event by event: each API's stream folded into the
exact response the same request would have had without ``stream``, including the odd
events a gateway or an older server sends (missing fields, unknown events, a usage that
is no object), and None for every stream that did not end whole. The accumulators are
pure, so these run in-process (the SDK loops in ``test_proxy.py`` drive them in the
proxy's server threads, where a mutation run cannot see them)."""

from __future__ import annotations

import json

from glyphpack._proxy.streams import (
    ACCUMULATORS,
    AnthropicAccumulator,
    ChatAccumulator,
    GeminiAccumulator,
    ResponsesAccumulator,
    SseParser,
)


def sse(*events: object, names: tuple[str, ...] = ()) -> bytes:
    """Events as a server sends them: ``event:`` lines where a name is given, each
    payload on a ``data:`` line (a string as it is: ``[DONE]``, or broken JSON)."""
    out = []
    for n, payload in enumerate(events):
        name = names[n] if n < len(names) else ""
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out.append((f"event: {name}\n" if name else "") + f"data: {data}\n\n")
    return "".join(out).encode()


def fed(accumulator, body: bytes):
    accumulator.feed(body)
    return accumulator.result()


def test_the_parser_reads_fields_as_the_event_stream_format_says():
    parser = SseParser()
    body = b": a comment\nevent: one\ndata:first\ndata: second\nid: 7\nretry: 10\n\n\n\ndata: plain\r\n\r\nevent: only-a-name\n\n"
    assert list(parser.feed(body)) == [("one", "first\nsecond"), ("message", "plain")]
    # a blank line without data drops the name it had; a CR at the end waits for its LF
    assert list(parser.feed(b"data: x\r")) == [] and list(parser.feed(b"\n\r\n")) == [("message", "x")]
    assert list(parser.feed(b"data: \xff\n\n")) == [("message", "\ufffd")]
    assert list(SseParser().feed(b"data: unnamed\n\n")) == [("message", "unnamed")]
    split = SseParser()  # a CRLF cut between two chunks is one line end, not a line and a blank line
    assert list(split.feed(b"data: x\r")) == [] and list(split.feed(b"\ndata: y\n\n")) == [("message", "x\ny")]


def test_an_anthropic_stream_with_every_block_kind_is_its_message():
    stream = sse(
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m",
                                              "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}},
        {"type": "ping"},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Look"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": " first."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "ln"}},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"pa'}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": 'th": "/"}'}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Here"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "citations_delta", "citation": {"cited_text": "a"}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": " it is."}},
        {"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "t2", "name": "pwd", "input": {}}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ""}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "unknown_delta", "text": "ignored"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None, "container": None}, "usage": {"output_tokens": 30}},
        {"type": "message_stop"},
    )
    assert fed(AnthropicAccumulator(), stream) == {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 30},
        "content": [
            {"type": "thinking", "thinking": "Look first.", "signature": "c2ln"},
            {"type": "text", "text": "Here it is.", "citations": [{"cited_text": "a"}]},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "/"}},
            {"type": "tool_use", "id": "t2", "name": "pwd", "input": {}},
        ],
    }


def test_anthropic_events_named_only_by_the_event_line_and_deltas_missing_their_field_add_nothing():
    """A gateway that leaves ``type`` out of the data (the event line names it), blocks
    without an index (the next one), and deltas without their text: nothing is lost or
    made up, and a usage that is no object counts nothing."""
    stream = sse(
        {"message": {"id": "m", "role": "assistant", "content": [], "usage": "none"}},
        {"index": 0, "content_block": {"type": "text", "text": "a"}},
        {"index": 0, "delta": {"type": "text_delta"}},
        {"content_block": {"type": "thinking", "thinking": "t", "signature": "s"}},
        {"index": 1, "delta": {"type": "thinking_delta"}},
        {"index": 1, "delta": {"type": "signature_delta"}},
        {"index": 2, "content_block": {"type": "tool_use", "id": "t", "name": "n", "input": {}}},
        {"index": 2, "delta": {"type": "input_json_delta"}},
        {"index": 2, "delta": None},
        {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        {},
        names=("message_start", "content_block_start", "content_block_delta", "content_block_start", "content_block_delta",
               "content_block_delta", "content_block_start", "content_block_delta", "content_block_delta", "message_delta", "message_stop"),
    )
    assert fed(AnthropicAccumulator(), stream) == {"id": "m", "role": "assistant", "stop_reason": "end_turn", "usage": {"output_tokens": 2}, "content": [
        {"type": "text", "text": "a"}, {"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "tool_use", "id": "t", "name": "n", "input": {}}]}
    blank = sse({"type": "message_start", "message": {"id": "m"}}, {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
                {"type": "content_block_start", "index": 1, "content_block": {"type": "thinking"}},
                {"type": "content_block_delta", "index": 1, "delta": {"type": "signature_delta", "signature": "z"}},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}}, {"type": "message_stop"})
    assert fed(AnthropicAccumulator(), blank) == {"id": "m", "stop_reason": "end_turn", "stop_sequence": None, "usage": {}, "content": [
        {"type": "text", "text": "x"}, {"type": "thinking", "signature": "z"}]}


def test_an_anthropic_stream_that_did_not_end_whole_is_none():
    start = {"type": "message_start", "message": {"id": "m", "content": []}}
    stop = {"type": "message_stop"}
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "n", "input": {}}}
    assert fed(AnthropicAccumulator(), sse(start, stop)) == {"id": "m", "content": []}
    assert fed(AnthropicAccumulator(), sse(start)) is None  # no message_stop
    assert fed(AnthropicAccumulator(), sse(stop)) is None  # no message
    assert fed(AnthropicAccumulator(), sse(start, {"type": "error", "error": {"type": "overloaded_error"}}, stop)) is None
    assert fed(AnthropicAccumulator(), sse(start, {"type": "content_block_delta", "index": 4, "delta": {"type": "text_delta", "text": "x"}}, stop)) is None
    blocks = [{"type": "content_block_start", "index": n, "content_block": {"type": "text", "text": ""}} for n in range(3)]
    assert fed(AnthropicAccumulator(), sse(start, *blocks, {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}}, stop)) is None
    assert fed(AnthropicAccumulator(), sse({"type": "message_start", "message": None}, stop)) is None
    broken = {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a": '}}
    assert fed(AnthropicAccumulator(), sse(start, block, broken, stop)) is None
    assert fed(AnthropicAccumulator(), sse(start, "{not json", stop)) is None
    assert fed(AnthropicAccumulator(), sse(start, "[1, 2]", '"text"', stop)) == {"id": "m", "content": []}  # not objects: passed over
    # a message_delta before any message_start changes nothing; a content_block_start without a block adds none
    assert fed(AnthropicAccumulator(), sse({"type": "message_delta", "delta": {"stop_reason": "x"}}, start, {"type": "content_block_start", "index": 0}, stop)) == {
        "id": "m", "content": []}


def test_a_chat_stream_is_the_completion_with_its_calls_in_order_and_its_usage():
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "gpt", "system_fingerprint": "fp"}
    stream = sse(
        head | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        head | {"id": "c2", "model": "other", "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        head | {"choices": [{"index": 1, "delta": {"content": "second choice"}, "finish_reason": "length"}, {"delta": {"content": "lo", "refusal": None}}]},
        head | {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_b", "function": {"name": "rea", "arguments": ""}}]}}]},
        head | {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "ls"}}]}}]},
        head | {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"name": "d", "arguments": '{"p":'}}]}}]},
        head | {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": None, "function": {"arguments": ' 1}'}}]}}]},
        head | {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        head | {"choices": [{"index": 0, "delta": {}, "finish_reason": None}]},
        head | {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}},
        "[DONE]",
    )
    assert fed(ChatAccumulator(), stream) == {
        "id": "c1", "created": 5, "model": "gpt", "system_fingerprint": "fp", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Hello", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": ""}},
                {"id": "call_b", "type": "function", "function": {"name": "read", "arguments": '{"p": 1}'}}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    }


def test_a_chat_refusal_and_calls_without_an_index_and_what_is_not_whole():
    head = {"id": "c", "model": "gpt"}
    refusal = sse(head | {"choices": [{"delta": {"content": "", "refusal": "I can"}}]}, head | {"choices": [{"delta": {"refusal": "not."}, "finish_reason": "stop"}]}, "[DONE]")
    assert fed(ChatAccumulator(), refusal) == {
        "id": "c", "created": None, "model": "gpt", "system_fingerprint": None, "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "refusal": "I cannot."}, "finish_reason": "stop"}]}
    calls = sse(head | {"choices": [{"delta": {"refusal": "", "tool_calls": [{"id": "a", "function": {"name": "x", "arguments": "{}"}},
                                                                             {"function": {"name": "y", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]}, "[DONE]")
    message = fed(ChatAccumulator(), calls)["choices"][0]["message"]
    assert [c["id"] for c in message["tool_calls"]] == ["a", ""] and message["refusal"] is None
    finished = head | {"choices": [{"delta": {"content": "x"}, "finish_reason": "stop"}]}
    assert fed(ChatAccumulator(), sse(finished)) is None  # no [DONE]
    assert fed(ChatAccumulator(), sse(head | {"choices": [{"delta": {"content": "x"}}]}, "[DONE]")) is None  # no finish
    assert fed(ChatAccumulator(), sse(finished, {"error": {"message": "overloaded"}}, "[DONE]")) is None
    assert fed(ChatAccumulator(), sse("[DONE]")) is None  # no chunk at all


def test_a_responses_stream_is_its_completed_response_and_a_failed_one_is_none():
    done = {"id": "resp_1", "status": "completed", "output": []}
    assert fed(ResponsesAccumulator(), sse({"type": "response.created", "response": {"id": "resp_1"}}, {"type": "response.completed", "response": done})) == done
    assert fed(ResponsesAccumulator(), sse({"response": done}, names=("response.completed",))) == done
    assert fed(ResponsesAccumulator(), sse({"type": "response.completed", "response": "not an object"})) is None
    for ending in ("error", "response.failed", "response.incomplete"):
        assert fed(ResponsesAccumulator(), sse({"type": ending}, {"type": "response.completed", "response": done})) is None


def test_a_gemini_stream_joins_the_pieces_of_one_text_and_keeps_each_call_whole():
    stream = sse(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Think", "thought": True}]}}], "responseId": "r1", "modelVersion": "g"},
        {"candidates": []},
        {"candidates": [{"content": {"parts": ["not a part", {"text": "ing.", "thought": True, "thoughtSignature": "sig1"}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "Answer"}, {"text": " one"}]}}], "usageMetadata": {"promptTokenCount": 3}},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "ls", "args": {}}}, {"functionCall": {"name": "pwd", "args": {}}}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "after", "thoughtSignature": "sig2"}, {"text": " the calls", "extra": 1}]}, "finishReason": 7}]},
        {"candidates": "none"},
        {"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 9}},
    )
    assert fed(GeminiAccumulator(), stream) == {
        "candidates": [{"index": 0, "finishReason": "STOP", "content": {"role": "model", "parts": [
            {"text": "Thinking.", "thought": True, "thoughtSignature": "sig1"},
            {"text": "Answer one"},
            {"functionCall": {"name": "ls", "args": {}}}, {"functionCall": {"name": "pwd", "args": {}}},
            {"text": "after", "thoughtSignature": "sig2"}, {"text": " the calls", "extra": 1}]}}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 9}, "modelVersion": "g", "responseId": "r1",
    }
    assert fed(GeminiAccumulator(), sse({"candidates": [{"content": {"parts": [{"text": "a"}]}}]})) is None  # no finishReason
    assert fed(GeminiAccumulator(), sse({"candidates": [{"finishReason": "STOP"}]}, {"error": {"code": 500}})) is None


def test_every_api_has_its_accumulator():
    assert {api: cls.__name__ for api, cls in ACCUMULATORS.items()} == {
        "anthropic": "AnthropicAccumulator", "openai-chat": "ChatAccumulator",
        "openai-responses": "ResponsesAccumulator", "gemini": "GeminiAccumulator"}
    accumulator = ChatAccumulator()
    assert (accumulator.failed, accumulator.done) == (False, False)


def test_a_stream_shows_whether_the_request_was_taken_at_its_first_event_past_the_preamble() -> None:
    from glyphpack._proxy.streams import Opening, stream_failure
    from glyphpack.testing.fake import failed_events

    too_long = {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}
    opening = Opening("openai-responses")
    events = failed_events(too_long)
    for event in events[:2]:  # response.created, response.in_progress: nothing shown yet
        opening.feed(event)
        assert not opening.decided and opening.failure is None
    opening.feed(events[2][:10])  # half an event: still nothing
    assert not opening.decided
    opening.feed(events[2][10:])
    assert opening.decided and opening.failure == {"error": too_long}
    answered = Opening("openai-responses")
    answered.feed(b'event: response.created\ndata: {"type":"response.created"}\n\nevent: response.output_item.added\ndata: {"type":"response.output_item.added"}\n\n')
    assert answered.decided and answered.failure is None
    for api, first in (("anthropic", b'event: message_start\ndata: {"type":"message_start"}\n\n'), ("openai-chat", b"data: [DONE]\n\n")):
        opened = Opening(api)
        opened.feed(first)
        assert opened.decided == (api == "openai-chat") and opened.failure is None
    # each API's failure as an error body
    assert stream_failure("error", {"type": "error", "code": "server_error", "message": "m"}) == {"error": {"code": "server_error", "message": "m"}}
    assert stream_failure("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}) == {
        "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert stream_failure("message", {"error": {"code": 400, "message": "too many tokens"}}) == {"error": {"code": 400, "message": "too many tokens"}}
    assert stream_failure("response.failed", {"type": "response.failed", "response": {"status": "failed"}}) == {"error": {"message": "response.failed"}}
    assert stream_failure("message", {"choices": []}) is None
    # an event without a type is known by its event: line, a payload's type wins over the line
    assert stream_failure("response.failed", {"response": "gone"}) == {"error": {"message": "response.failed"}}
    assert stream_failure("error", {"code": "server_error", "message": "m"}) == {"error": {"code": "server_error", "message": "m"}}
    assert stream_failure("error", {"type": "response.output_text.delta", "delta": "x"}) is None
    untyped = Opening("openai-responses")
    untyped.feed(b'event: response.created\ndata: {"response": {}}\n\n')
    assert not untyped.decided  # still the preamble, by its event: line
    untyped.feed(b'event: response.failed\ndata: {"response": {"error": {"code": "context_length_exceeded"}}}\n\n')
    assert untyped.decided and untyped.failure == {"error": {"code": "context_length_exceeded"}}
    unnamed = Opening("openai-responses")
    unnamed.feed(b'data: {"type": "response.created"}\n\n')
    assert not unnamed.decided  # by its payload's type, with no event: line
    chat = Opening("openai-chat")  # no preamble: its first event decides
    chat.feed(b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n')
    assert chat.decided and chat.failure is None
