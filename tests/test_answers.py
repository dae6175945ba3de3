"""Every stored answer is resendable (issue 21): a refusal keeps its words, an empty text
block or an empty answer never reaches a request, and a malformed or foreign response is
a ``HistoryError`` with nothing stored. The validators enforce the rules that bit."""

from __future__ import annotations

import pytest

import glyphpack
from glyphpack import HistoryError, Message, Text
from glyphpack._wire.anthropic import check_anthropic
from glyphpack._wire.gemini import check_gemini
from glyphpack._wire.openai_chat import check_openai_chat
from glyphpack._wire.openai_responses import check_openai_responses


def session(tmp_path):
    s = glyphpack.open_session(tmp_path / "ws", "task", "coder", model="claude-sonnet-4-5")
    s.add_user("help me with something")
    return s


def assert_every_api_takes(messages):
    check_anthropic(glyphpack.to_anthropic(messages)[1])
    check_openai_chat(glyphpack.to_openai_chat(messages))
    check_openai_responses(glyphpack.to_openai_responses(messages)[1])
    check_gemini(glyphpack.to_gemini(messages)[1])


def test_a_refusal_keeps_its_words_and_resends(tmp_path):
    with session(tmp_path) as s:
        s.request("openai-chat")
        refusal = {"choices": [{"message": {"role": "assistant", "content": None, "refusal": "I can't help with that."}, "finish_reason": "stop"}]}
        stored = s.add_response(refusal)
        assert stored.content == (Text("I can't help with that."),)
        s.add_user("then something else")
        request = s.request("openai-chat")
        assert {"role": "assistant", "content": "I can't help with that."} in request["messages"]
        assert_every_api_takes(s.messages)


@pytest.mark.parametrize("content", [[{"type": "text", "text": ""}], [{"type": "text", "text": " \n"}], []])
def test_an_empty_claude_answer_never_reaches_a_request(tmp_path, content):
    with session(tmp_path) as s:
        s.request("anthropic")
        s.add_response({"role": "assistant", "content": content, "stop_reason": "end_turn"})
        s.add_user("are you there?")
        for api in ("anthropic", "openai-chat", "openai-responses", "gemini"):
            s.request(api)
        assert_every_api_takes(s.messages)
        assert glyphpack.to_anthropic(s.messages)[1][0]["content"] == [
            {"type": "text", "text": "help me with something"}, {"type": "text", "text": "are you there?"}]


@pytest.mark.parametrize("api, response, message", [
    ("openai-chat", {"choices": [{"message": None, "finish_reason": "content_filter"}]}, "first choice has no message .finish_reason 'content_filter'"),
    ("openai-chat", {"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]}, "neither content, tool calls nor a refusal"),
    ("openai-chat", {}, "not a Chat Completions response: no choices"),
    ("openai-chat", {"id": "msg_1", "content": [], "stop_reason": "end_turn"}, "looks like a response of the anthropic API: pass api='anthropic'"),
    ("anthropic", {}, "not a Messages response"),
    ("anthropic", {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}, "looks like a response of the openai-chat API"),
    ("anthropic", {"role": "assistant", "content": None}, "not a Messages response"),
    ("openai-responses", {}, "not a Responses response: no output list"),
    ("gemini", {"candidates": [None]}, "first candidate has no content"),
    ("gemini", {"candidates": [{"finish_reason": "SAFETY"}]}, "finish_reason 'SAFETY'"),
    ("gemini", {"prompt_feedback": {"block_reason": "SAFETY"}}, "no candidates .{'block_reason': 'SAFETY'}"),
])
def test_a_malformed_or_foreign_response_is_refused_and_nothing_stored(tmp_path, api, response, message):
    with session(tmp_path) as s:
        s.request(api)
        before = s.workspace.load("task", "coder").messages
        with pytest.raises(HistoryError, match=message):
            s.add_response(response, api)
        assert s.messages == before == s.workspace.load("task", "coder").messages


def test_the_validators_refuse_what_the_apis_refuse():
    ok = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    check_anthropic(ok)
    for text in ("", " ", "\n\t"):
        with pytest.raises(HistoryError, match="non-whitespace"):
            check_anthropic([{"role": "user", "content": [{"type": "text", "text": text}]}])
    with pytest.raises(HistoryError, match="non-whitespace"):
        check_anthropic([*ok, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": ""}]}]}])
    check_openai_chat([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])
    with pytest.raises(HistoryError, match="needs content or tool_calls"):
        check_openai_chat([{"role": "user", "content": "x"}, {"role": "assistant", "content": None}])
    with pytest.raises(HistoryError, match="empty content"):
        check_openai_chat([{"role": "user", "content": []}])


def test_a_thinking_only_answer_and_an_empty_user_message_are_left_out():
    from glyphpack import Opaque, Thinking

    history = [Message("user", (Text("q"),)), Message("assistant", (Thinking("hmm"),)), Message("user", (Opaque("note", {"n": 1}),)),
               Message("user", (Text("again"),))]
    assert glyphpack.to_openai_chat(history) == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]}, {"role": "user", "content": [{"type": "text", "text": "again"}]}]
    assert_every_api_takes(history)
