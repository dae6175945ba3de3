"""Each API's wire format read back block for block, from the shapes the SDKs and
harnesses write (a mutmut pass over ``glyphpack/_wire`` found these readers
guarded by counts only): Gemini parts with thought signatures as bytes, errors, ids and
media types; data URLs; Chat Completions' developer messages, tool messages, unknown
parts and content that is neither text nor parts; the system prompt's cache mark."""

from __future__ import annotations

import base64
import json

import pytest

import glyphpack
from glyphpack import HistoryError, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from glyphpack._wire import REGISTRY, provider_api
from glyphpack._wire.anthropic import check_anthropic
from glyphpack._wire.common import image_from_url

PNG = b"\x89PNG\r\n\x1a\nfake"
B64 = base64.b64encode(PNG).decode("ascii")


def test_gemini_parts_read_back_block_for_block():
    model = {"role": "model", "parts": [
        {"text": "weighing it", "thought": True, "thought_signature": b"\x01\x02"},
        {"text": "I will read it"},
        {"function_call": {"id": "c1", "name": "read", "args": {"path": "a.py"}}, "thought_signature": b"sig"},
        {"function_call": {"name": "ls", "args": {}}},
    ]}
    user = {"role": "user", "parts": [
        {"function_response": {"id": "c1", "name": "read", "response": {"error": "no such file"}}},
        {"function_response": {"name": "ls", "response": {"output": "a.py"}}},
        {"inline_data": {"mime_type": "image/jpeg", "data": PNG}},
        {"inline_data": {"data": B64}},
        {"file_data": {"file_uri": "gs://b/x.png"}},
        {"executable_code": {"code": "print(1)"}},
    ]}
    turn, results, rest = glyphpack.from_gemini([model, user])
    thought, said, read, ls = turn.content
    assert thought == Thinking("weighing it", base64.b64encode(b"\x01\x02").decode("ascii"))
    assert said == Text("I will read it")
    assert read == ToolCall("c1", "read", {"path": "a.py"}, base64.b64encode(b"sig").decode("ascii"))
    assert ls.name == "ls" and ls.id == "gemini-local-0-3" and ls.signature is None  # named by where it is: read again, the same
    assert glyphpack.from_gemini([model, user])[0].content[3].id == ls.id
    wrapped = {"role": "user", "parts": [{"function_response": {"name": "ls", "response": {"result": "a.py\nb.py"}}}]}
    assert glyphpack.from_gemini([model, wrapped])[1].content[0].text == "a.py\nb.py"  # ADK's wrapping, the tool's own text
    both = {"role": "user", "parts": [{"function_response": {"name": "ls", "response": {"result": "a.py", "code": 0}}}]}
    assert json.loads(glyphpack.from_gemini([model, both])[1].content[0].text) == {"result": "a.py", "code": 0}  # more: no key lost
    failed, listed = results.content
    assert failed == ToolResult("c1", (Text("no such file"),), is_error=True)
    assert listed == ToolResult(ls.id, (Text("a.py"),), is_error=False)  # no id: the open call of that name
    jpeg, png, linked, code = rest.content
    assert jpeg == Image("image/jpeg", PNG) and png == Image("image/png", PNG)  # bytes, or base64 as the REST API sends
    assert linked == Image("image/png", ref="gs://b/x.png")
    assert code == Opaque("gemini_part", {"executable_code": {"code": "print(1)"}})


def test_data_urls_give_their_media_type_and_bytes():
    assert image_from_url(f"data:image/webp;base64,{B64}") == Image("image/webp", PNG)
    assert image_from_url(f"data:;base64,{B64}") == Image("image/png", PNG)  # no media type: PNG
    assert image_from_url("https://example.com/a.png") == Image(ref="https://example.com/a.png")
    with pytest.raises(HistoryError, match="an image URL must be a string, not int"):
        image_from_url(7)
    with pytest.raises(HistoryError, match="a data URL is not valid base64"):
        image_from_url("data:image/png;base64,@@@")


def test_chat_messages_read_back_with_their_roles_and_parts():
    messages = glyphpack.from_openai_chat([
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": f"data:image/png;base64,{B64}"},
                                     {"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"x\"}"}},
            {"id": "b", "type": "function", "function": {"name": "ls", "arguments": "\"free text\""}}]},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "x says hi"}]},
        {"role": "tool", "tool_call_id": "b", "content": "a.py"},
    ][:3] + [{"role": "assistant", "content": "done"}])
    system, user, assistant, done = messages
    assert (system.role, system.text) == ("system", "be brief")  # developer is the system's role
    see, image, audio = user.content
    assert see == Text("see") and image == Image("image/png", PNG)
    assert audio == Opaque("input_audio", {"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}})
    assert assistant.content == (ToolCall("a", "read", {"path": "x"}), ToolCall("b", "ls", {"input": '"free text"'}))  # a custom tool's input, kept
    assert done.text == "done"
    tools = glyphpack.from_openai_chat([
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "r", "arguments": "{}"}},
                                                              {"id": "b", "type": "function", "function": {"name": "r", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "é"}]},
        {"role": "tool", "tool_call_id": "b", "content": "plain"},
    ])[1]
    assert tools.role == "tool" and [r.call_id for r in tools.tool_results] == ["a", "b"]  # consecutive: one message
    assert tools.tool_results[0].text == '[{"type": "text", "text": "é"}]'  # parts kept as JSON, not escaped
    with pytest.raises(HistoryError, match="message 0: content must be a string or a list of parts, not int"):
        glyphpack.from_openai_chat([{"role": "user", "content": 5}])
    with pytest.raises(HistoryError, match="tool call 'a' has arguments that are not JSON"):
        glyphpack.from_openai_chat([{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "r", "arguments": "{bad"}}]}])


def test_responses_content_reads_back_with_unknown_parts_kept():
    (message,) = glyphpack.from_openai_responses([{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": f"data:image/gif;base64,{B64}"},
        {"type": "input_file", "file_id": "file-1"}]}])
    assert message.content == (Text("look"), Image("image/gif", PNG), Opaque("input_file", {"type": "input_file", "file_id": "file-1"}))
    (developer,) = glyphpack.from_openai_responses([{"role": "developer", "content": "rules"}])
    assert (developer.role, developer.text) == ("system", "rules")


def test_a_chat_response_without_a_usable_choice_is_refused_by_name():
    chat = REGISTRY["openai-chat"]
    with pytest.raises(HistoryError, match="not a Chat Completions response: no choices"):
        chat.parse({"choices": []})
    with pytest.raises(HistoryError, match="not a Chat Completions response: no choices"):
        chat.parse({"choices": ["text"]})
    with pytest.raises(HistoryError, match="whose first choice has no message \\(finish_reason 'length'\\)"):
        chat.parse({"choices": [{"finish_reason": "length"}]})
    with pytest.raises(HistoryError, match="neither content, tool calls nor a refusal \\(finish_reason 'stop'\\)"):
        chat.parse({"choices": [{"message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]})
    refused = chat.parse({"choices": [{"message": {"role": "assistant", "content": None, "refusal": "I can't help"}}]})
    assert refused.message.role == "assistant" and refused.message.text == "I can't help"
    called = chat.parse({"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "t", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}}]})
    assert called.message.role == "assistant" and called.message.tool_calls[0].name == "ls"


def test_a_gemini_response_without_content_is_refused_by_name():
    gemini = REGISTRY["gemini"]
    with pytest.raises(HistoryError, match="not a Gemini response: no candidates \\(\\{'block_reason': 'SAFETY'\\}\\)"):
        gemini.parse({"candidates": [], "prompt_feedback": {"block_reason": "SAFETY"}})
    with pytest.raises(HistoryError, match="first candidate has no content \\(finish_reason 'SAFETY'\\)"):
        gemini.parse({"candidates": [{"finish_reason": "SAFETY"}]})
    with pytest.raises(HistoryError, match="first candidate has no content \\(finish_reason None\\)"):
        gemini.parse({"candidates": ["odd"]})


def test_the_anthropic_system_prompt_is_one_cached_text_block():
    request = REGISTRY["anthropic"].build("claude-sonnet-4-5", (Message("system", "be brief"), Message("user", "hi")), 0,
                                          glyphpack.resolve("claude-sonnet-4-5"))
    assert request["system"] == [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
    gemini = REGISTRY["gemini"].build("gemini-2.5-pro", (Message("user", "hi"),), 0, glyphpack.resolve("gemini-2.5-pro"))
    assert gemini["config"] == {}  # there for the caller's tools to merge into


CALL = {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "a.py"}
USER = {"role": "user", "content": "q"}


@pytest.mark.parametrize("items, message", [
    ([], "^input is empty$"),
    ([USER, OUTPUT], "^item 1: output for call 'c1', which no earlier function_call made$"),
    ([USER, CALL, {"role": "user", "content": "meanwhile"}, OUTPUT], r"^item 2: a user message while calls \['c1'\] are unanswered$"),
    ([USER, CALL, {"type": "message", "role": "user", "content": "meanwhile"}], r"^item 2: a user message while calls \['c1'\]"),
    ([USER, CALL], r"^calls \['c1'\] have no function_call_output$"),
])
def test_the_responses_check_names_each_rule(items, message):
    from glyphpack._wire.openai_responses import check_openai_responses

    with pytest.raises(HistoryError, match=message):
        check_openai_responses(items)


def test_the_responses_check_lets_the_assistant_speak_between_a_call_and_its_output():
    from glyphpack._wire.openai_responses import check_openai_responses

    check_openai_responses([USER, CALL, {"role": "assistant", "content": "reading"}, OUTPUT, USER])


def gemini_call(name):
    return {"function_call": {"name": name, "args": {}}}


def gemini_answer(name):
    return {"function_response": {"name": name, "response": {"output": "ok"}}}


@pytest.mark.parametrize("contents, message", [
    ([], "^contents is empty$"),
    ([{"role": "model", "parts": [{"text": "hi"}]}], "^content 0: role 'model' where 'user' must come$"),
    ([{"role": "user", "parts": []}], "^content 0: no parts$"),
    ([{"role": "user", "parts": [{"text": "q"}]}, {"role": "model", "parts": [gemini_call("ls"), gemini_call("cat")]},
      {"role": "user", "parts": [gemini_answer("ls")]}], r"^content 1: calls \['ls', 'cat'\] answered by \['ls'\] in the next turn$"),
    ([{"role": "user", "parts": [{"text": "q"}]}, {"role": "model", "parts": [gemini_call("ls")]}],
     r"^content 1: calls \['ls'\] answered by \[\] in the next turn$"),
])
def test_the_gemini_check_names_each_rule(contents, message):
    from glyphpack._wire.gemini import check_gemini

    with pytest.raises(HistoryError, match=message):
        check_gemini(contents)


def test_the_gemini_check_takes_answered_calls_in_any_order():
    from glyphpack._wire.gemini import check_gemini

    check_gemini([{"role": "user", "parts": [{"text": "q"}]}, {"role": "model", "parts": [{"text": "a"}, gemini_call("ls"), gemini_call("cat")]},
                  {"role": "user", "parts": [gemini_answer("cat"), gemini_answer("ls")]}, {"role": "model", "parts": [{"text": "done"}]}])


@pytest.mark.parametrize("body, text", [
    ({"output": "plain"}, "plain"),
    ({"error": "failed"}, "failed"),
    ("bare", "bare"),
    ({"output": "x", "exit_code": 1}, '{"output": "x", "exit_code": 1}'),
    ({"rows": ["é", 2]}, '{"rows": ["é", 2]}'),
    ({"when": b"raw"}, "{\"when\": \"b'raw'\"}"),
])
def test_a_gemini_function_response_keeps_every_key(body, text):
    from glyphpack._wire.gemini import response_text

    assert response_text(body) == text


def test_a_reasoning_item_goes_back_with_its_summary():
    from glyphpack._wire.openai_responses import reasoning_item

    summary = [{"type": "summary_text", "text": "checked the parser"}]
    block = Opaque("reasoning", {"type": "reasoning", "id": "rs_1", "summary": summary, "encrypted_content": "gAAA", "status": "done"})
    assert reasoning_item(block) == {"type": "reasoning", "id": "rs_1", "summary": summary, "encrypted_content": "gAAA"}
    assert reasoning_item(Opaque("reasoning", {"id": "rs_2", "encrypted_content": "gB"}))["summary"] == []


def test_gemini_responses_pair_with_their_calls_by_id_before_name():
    turn = {"role": "model", "parts": [{"function_call": {"id": "a", "name": "read", "args": {"path": "1"}}},
                                       {"function_call": {"id": "b", "name": "read", "args": {"path": "2"}}}]}
    answers = {"role": "user", "parts": [{"function_response": {"id": "b", "name": "read", "response": {"output": "two"}}},
                                         {"function_response": {"id": "a", "name": "read", "response": {"output": "one"}}}]}
    results = glyphpack.from_gemini([turn, answers])[1]
    assert [(r.call_id, r.text) for r in results.tool_results] == [("b", "two"), ("a", "one")]
    _, contents = glyphpack.to_gemini([Message("user", "q"), Message("user", (Image("image/png", ref="gs://b/p.png"),))])
    assert contents[0]["parts"][1] == {"file_data": {"mime_type": "image/png", "file_uri": "gs://b/p.png"}}


def test_small_format_edges_read_exactly():
    assert glyphpack.from_openai_chat([{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "ls", "arguments": ""}}]}])[0] \
        .tool_calls[0].arguments == {}  # an empty arguments string is no arguments
    with pytest.raises(HistoryError, match="no refusal|neither content, tool calls nor a refusal"):
        REGISTRY["openai-chat"].parse({"choices": [{"message": {"content": "", "refusal": ""}, "finish_reason": "stop"}]})
    with pytest.raises(HistoryError, match="an image's data must be a base64 string, not int"):
        glyphpack.from_anthropic([{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": 5}}]}])
    (said,) = glyphpack.from_openai_responses([{"role": "assistant", "content": [{"type": "text", "text": "plain"}]}])
    assert said.content == (Text("plain"),)
    with pytest.raises(HistoryError, match="^not a Gemini response: no candidates$"):
        REGISTRY["gemini"].parse({"candidates": []})


def test_the_end_of_a_stored_compaction_is_marked_even_where_the_next_message_merges_into_it():
    view = (Message("user", "[summary of the first hour]"), Message("user", "next question"), Message("assistant", "an answer"),
            Message("user", "the newest question"))
    request = REGISTRY["anthropic"].build("claude-sonnet-4-5", view, 1, glyphpack.resolve("claude-sonnet-4-5"))
    first = request["messages"][0]["content"]  # the summary and the next question, merged into one user message
    assert [("cache_control" in block) for block in first] == [True, False]
    assert "cache_control" in request["messages"][-1]["content"][-1]  # and the newest, as every turn


def tool_use(call_id):
    return {"type": "tool_use", "id": call_id, "name": "t", "input": {}}


def tool_result(call_id, content="r"):
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


@pytest.mark.parametrize("messages, message", [
    ([{"role": "assistant", "content": "hi"}], "^message 0: role 'assistant' where 'user' must come \\(roles alternate from user\\)$"),
    ([{"role": "user", "content": []}], "^message 0: empty content$"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [tool_use("a"), tool_use("b")]},
      {"role": "user", "content": [tool_result("a"), tool_result("c")]}],
     r"^message 2: tool results \['c'\] without calls, calls \['b'\] without results$"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [tool_use("a")]},
      {"role": "user", "content": [{"type": "text", "text": "x"}, tool_result("a")]}], "^message 2: tool results must come before the other blocks$"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [tool_result("a")]}], "^message 1: an assistant message holds tool results$"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]}],
     "^message 1: thinking without a signature$"),
    ([{"role": "user", "content": "  "}], "^message 0: text content blocks must contain non-whitespace text$"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [tool_use("a")]},
      {"role": "user", "content": [tool_result("a", [{"type": "text", "text": "\n"}])]}], "^message 2: text content blocks must contain non-whitespace text$"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [tool_use("a"), tool_use("b")]}],
     r"^tool calls \['a', 'b'\] at the end have no results$"),
])
def test_the_anthropic_check_names_each_rule_exactly(messages, message):
    from glyphpack._wire.anthropic import check_anthropic

    with pytest.raises(HistoryError, match=message):
        check_anthropic(messages)


def test_anthropic_blocks_read_back_with_their_defaults():
    (user,) = glyphpack.from_anthropic([{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://e.com/a.png"}},
        {"type": "image", "source": {"type": "file", "file_id": "file_1", "media_type": "image/jpeg"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/webp", "data": B64}},
    ]}])
    assert user.content == (Image("image/png", ref="https://e.com/a.png"), Image("image/jpeg", ref="file_1"), Image("image/webp", PNG))
    assistant, tool = glyphpack.from_anthropic([
        {"role": "assistant", "content": [{"type": "thinking", "signature": ""}, {"type": "thinking", "thinking": "t", "signature": "s"},
                                          {"type": "redacted_thinking", "data": "xyz"}, {"type": "tool_use", "id": "a", "name": "ls"},
                                          {"type": "server_tool_use", "id": "w", "name": "web_search", "input": {"q": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": True, "content": [
            {"type": "text", "text": "partial"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}},
            {"type": "search_result", "title": "é", "source": "s"}]}]},
    ])
    blank, signed, redacted, call, server = assistant.content
    assert blank == Thinking("", None) and signed == Thinking("t", "s")  # an empty signature is none
    assert redacted == glyphpack.RedactedThinking("xyz") and call == ToolCall("a", "ls", {})
    assert server == Opaque("server_tool_use", {"type": "server_tool_use", "id": "w", "name": "web_search", "input": {"q": "x"}})
    (result,) = tool.content
    assert result.is_error and result.call_id == "a"
    text, image, other = result.content
    assert text == Text("partial") and image == Image("image/png", PNG)
    assert other == Text('{"type": "opaque", "kind": "search_result", "payload": {"type": "search_result", "title": "é", "source": "s"}}')
    with pytest.raises(HistoryError, match="message 0: a content block must be an object, not str"):
        glyphpack.from_anthropic([{"role": "user", "content": ["bare"]}])
    with pytest.raises(HistoryError, match="message 0: role must be user, assistant or system, not 'developer'"):
        glyphpack.from_anthropic([{"role": "developer", "content": "x"}])


def test_mid_conversation_system_messages_stay_in_place_for_the_models_that_take_them() -> None:
    """Claude Opus 4.8 on Anthropic's own API takes ``{"role": "system"}`` messages after
    the first turn (Claude Code 2.1 sends one after the user's first message); they read
    back where they were, go out where they were for that model, and into the system
    prompt for any other (or through Bedrock), which would reject them."""
    wire = [
        {"role": "user", "content": "task"},
        {"role": "system", "content": [{"type": "text", "text": "agents: Explore"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": "next"},
    ]
    history = glyphpack.from_anthropic(wire, system="be terse")
    assert [m.role for m in history] == ["system", "user", "system", "assistant", "user"]
    system, inline = glyphpack.to_anthropic(history, system_messages=True)
    assert system == "be terse"
    assert inline == [{"role": m["role"], "content": m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]} for m in wire]
    check_anthropic(inline)
    system, hoisted = glyphpack.to_anthropic(history)
    assert system == "be terse\n\nagents: Explore" and [m["role"] for m in hoisted] == ["user", "assistant", "user"]
    api = provider_api("anthropic")
    assert api.to_wire(history, model="claude-opus-4-8")[1] == inline
    assert api.to_wire(history, model="bedrock/anthropic.claude-opus-4-8")[1] == hoisted
    assert api.to_wire(history, model="claude-sonnet-4-5")[1] == hoisted
    for bad, why in (
        ([wire[1], *wire], "message 0: role 'system' where 'user' must come"),
        ([wire[0], {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "t", "input": {}}]}, wire[1]], "message 2: a system message between tool calls and their results"),
        ([wire[0], {"role": "system", "content": [{"type": "image", "source": {}}]}], "message 1: a system message holds text blocks only"),
    ):
        with pytest.raises(HistoryError, match=why):
            check_anthropic(bad)


def _shape(messages: list[Message]) -> list[tuple[str, str, tuple[object, ...]]]:
    from glyphpack._wire.common import results_first

    return [(m.role, m.id, m.content) for m in results_first(messages)]


CALL_A, CALL_B = ToolCall("a", "t", {}), ToolCall("b", "t", {})
RESULT_A, RESULT_B = ToolResult("a", (Text("ra"),)), ToolResult("b", (Text("rb"),))
NOTE = Text("a note")


def test_results_first_splits_a_user_message_with_results_and_other_blocks():
    """Results in a user message beside other blocks: a ``tool`` message of the results
    (id ``<id>-results``), then the user message (its own id) of the rest."""
    calls = Message("assistant", (CALL_A,), id="a1")
    mixed = Message("user", (RESULT_A, NOTE), id="u1")
    assert _shape([calls, mixed]) == [
        ("assistant", "a1", (CALL_A,)), ("tool", "u1-results", (RESULT_A,)), ("user", "u1", (NOTE,))]


def test_results_first_keeps_a_results_only_message_as_it_is():
    """Right after its calls, a message holding only results is passed through unchanged,
    whatever its role (Anthropic and Gemini write results in user turns)."""
    calls = Message("assistant", (CALL_A, CALL_B), id="a1")
    first = Message("user", (RESULT_A,), id="u1")
    second = Message("tool", (RESULT_B,), id="t1")  # a tool message after a results message
    assert _shape([calls, first, second]) == [
        ("assistant", "a1", (CALL_A, CALL_B)), ("user", "u1", (RESULT_A,)), ("tool", "t1", (RESULT_B,))]


def test_results_first_moves_a_note_after_the_results_it_came_before():
    calls = Message("assistant", (CALL_A,), id="a1")
    note = Message("user", (NOTE,), id="u1")
    result = Message("user", (RESULT_A,), id="u2")  # results-only, after a note: made a tool message
    assert _shape([calls, note, result]) == [
        ("assistant", "a1", (CALL_A,)), ("tool", "u2-results", (RESULT_A,)), ("user", "u1", (NOTE,))]


def test_results_first_holds_what_comes_between_until_every_call_is_answered():
    """A mixed message answering one of two calls: its other blocks wait for the second
    result; a tool message after a note keeps its id."""
    calls = Message("assistant", (CALL_A, CALL_B), id="a1")
    mixed = Message("user", (RESULT_A, NOTE), id="u1")
    note = Message("user", "and pwd", id="u2")
    last = Message("tool", (RESULT_B,), id="t1")
    answer = Message("assistant", "done", id="a2")
    assert _shape([calls, mixed, note, last, answer]) == [
        ("assistant", "a1", (CALL_A, CALL_B)),
        ("tool", "u1-results", (RESULT_A,)),
        ("tool", "t1", (RESULT_B,)),
        ("user", "u1", (NOTE,)),
        ("user", "u2", (Text("and pwd"),)),
        ("assistant", "a2", (Text("done"),)),
    ]


def test_results_first_leaves_results_without_a_call_and_unanswered_calls_in_place():
    """Results with no assistant before them (a history that starts mid-run) become a
    ``tool`` message; what follows calls never answered comes at the end, in order."""
    orphan = Message("user", (RESULT_A, NOTE), id="u0")
    calls = Message("assistant", (CALL_B,), id="a1")
    note = Message("user", (NOTE,), id="u1")
    assert _shape([orphan, calls, note]) == [
        ("tool", "u0-results", (RESULT_A,)), ("user", "u0", (NOTE,)),
        ("assistant", "a1", (CALL_B,)), ("user", "u1", (NOTE,))]
    assert _shape([Message("tool", (RESULT_A,), id="t0")]) == [("tool", "t0", (RESULT_A,))]
    # Results with no call open keep their place around a note; a results-only user
    # message right after a tool message is kept as it is.
    orphans = [Message("tool", (RESULT_A,), id="t0"), note, Message("user", (RESULT_B,), id="u2")]
    assert _shape(orphans) == [("tool", "t0", (RESULT_A,)), ("user", "u1", (NOTE,)), ("tool", "u2-results", (RESULT_B,))]
    assert _shape([orphans[0], orphans[2]]) == [("tool", "t0", (RESULT_A,)), ("user", "u2", (RESULT_B,))]


def test_results_first_answers_a_later_call_after_its_own_assistant_message():
    """Calls never answered, a note, then a new assistant message and its result: the
    result follows the assistant message that made the call, not the old one."""
    unanswered = Message("assistant", (CALL_A,), id="a1")
    note = Message("user", (NOTE,), id="u1")
    later = Message("assistant", (CALL_B,), id="a2")
    result = Message("tool", (RESULT_B,), id="t2")
    assert _shape([unanswered, note, later, result]) == [
        ("assistant", "a1", (CALL_A,)), ("user", "u1", (NOTE,)), ("assistant", "a2", (CALL_B,)), ("tool", "t2", (RESULT_B,))]


def test_tool_arguments_keep_what_is_not_a_json_object_as_input():
    from glyphpack._wire.common import tool_arguments

    assert tool_arguments({"a": 1}, "c") == {"a": 1}
    assert tool_arguments('{"a": 1}', "c") == {"a": 1}
    assert tool_arguments('"free text"', "c") == {"input": '"free text"'}
    assert tool_arguments([1, 2], "c") == {"input": [1, 2]}  # neither a string nor an object
    assert tool_arguments(None, "c") == tool_arguments("", "c") == {}
    with pytest.raises(HistoryError, match="tool call 'c' has arguments that are not JSON"):
        tool_arguments("{oops", "c")


def test_a_failed_tool_result_is_marked_as_an_error_in_chat_completions_and_read_back_as_one():
    """Chat Completions has no error flag on a tool message: a failed result goes as its
    text after ``[error] ``, a good one as its text alone (even one that begins so), and
    a request read back and sent again is the same bytes (the marker is in the text)."""
    history = [Message("user", (Text("go"),), id="u"), Message("assistant", (ToolCall("c1", "ls", {}), ToolCall("c2", "cat", {})), id="a"),
               Message("tool", (ToolResult("c1", (Text("boom"),), True), ToolResult("c2", (Text("[error] is in the file"),), False)), id="t")]
    sent = glyphpack.to_openai_chat(history)
    assert [m["content"] for m in sent if m["role"] == "tool"] == ["[error] boom", "[error] is in the file"]
    back = glyphpack.from_openai_chat(sent)
    assert [(r.call_id, r.text) for m in back for r in m.tool_results] == [("c1", "[error] boom"), ("c2", "[error] is in the file")]
    assert glyphpack.to_openai_chat(back) == sent
