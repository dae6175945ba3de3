import pytest
from histories import histories, history, turn
from hypothesis import given
from pydantic import TypeAdapter

import glyphpack
from glyphpack import HistoryError, Image, Message, Text
from glyphpack._history.codec import history_from_json, history_to_json
from glyphpack._history.messages import pending_calls


@given(histories())
def test_json_round_trip_is_lossless(messages):
    import json

    data = json.loads(json.dumps(history_to_json(messages)))
    assert history_from_json(data) == messages


@given(histories())
def test_generated_histories_are_at_turn_boundaries(messages):
    assert glyphpack.is_turn_boundary(messages)
    glyphpack.validate_history(messages, allow_pending=False)
    assert glyphpack.turn_boundaries(messages)[-1] == len(messages)


def test_mid_turn_and_orphans_are_rejected():
    messages = history(2)
    mid = messages[:3]  # system, user, assistant with a pending call
    assert not glyphpack.is_turn_boundary(mid)
    assert pending_calls(mid) == ["call-0-0"]
    glyphpack.validate_history(mid)  # pending calls at the very end are allowed mid-turn
    with pytest.raises(HistoryError, match="mid-turn: tool calls call-0-0"):
        glyphpack.validate_history(mid, allow_pending=False)
    orphan = [messages[0], messages[1], messages[3]]  # a result whose call is missing
    with pytest.raises(HistoryError, match="has no earlier tool call"):
        glyphpack.validate_history(orphan)
    unanswered = messages[:3] + [Message("assistant", "moving on")]
    with pytest.raises(HistoryError, match="no results before the next assistant turn"):
        glyphpack.validate_history(unanswered)
    assert glyphpack.turn_boundaries(messages[:6]) == [0, 1, 2, 4, 6]


def test_bad_messages():
    with pytest.raises(HistoryError, match="role must be one of"):
        Message("robot", "hi")
    with pytest.raises(HistoryError, match="exactly one of data"):
        Image("image/png")
    with pytest.raises(HistoryError, match="unknown content block type"):
        glyphpack._history.codec.message_from_json({"role": "user", "content": [{"type": "video"}]})


def test_anthropic_round_trip_and_sdk_shape():
    from anthropic.types import MessageParam

    messages = history(2, system=True) + turn(5, 1, error=True, image=True)
    system, converted = glyphpack.to_anthropic(messages)
    assert system == "you are a careful agent"
    roles = [m["role"] for m in converted]
    assert all(a != b for a, b in zip(roles, roles[1:]))  # strictly alternating
    adapter = TypeAdapter(MessageParam)
    for entry in converted:
        adapter.validate_python(entry)
    back = glyphpack.from_anthropic(converted, system)
    strip = lambda ms: [(m.role, m.content) for m in ms]  # ids are not carried by the API
    assert strip(back) == strip(messages)


def test_openai_chat_round_trip_and_sdk_shape():
    from openai.types.chat import ChatCompletionMessageParam

    messages = history(2)
    converted = glyphpack.to_openai_chat(messages)
    adapter = TypeAdapter(ChatCompletionMessageParam)
    for entry in converted:
        adapter.validate_python(entry)
    assert converted[2]["tool_calls"][0]["function"] == {"name": "read_file", "arguments": '{"path": "f0-0.py"}'}
    assert converted[3] == {"role": "tool", "tool_call_id": "call-0-0", "content": "contents 0.0 contents 0.0 contents 0.0 "}
    back = glyphpack.from_openai_chat(converted)
    # thinking is not sent back through Chat Completions; everything else survives
    from glyphpack import Thinking

    expected = [(m.role, tuple(b for b in m.content if not isinstance(b, Thinking))) for m in messages]
    assert [(m.role, m.content) for m in back] == expected


def test_openai_images_in_tool_results_follow_as_user_content():
    messages = turn(0, 1, image=True)
    converted = glyphpack.to_openai_chat(messages)
    assert converted[2]["role"] == "tool" and converted[3]["role"] == "user"
    assert converted[3]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")


def test_the_json_codec_exactly():
    """Compact UTF-8 JSON (a lone surrogate escaped, and read back the same), each
    message's fields, and errors that say what is wrong and where."""
    import json
    import re

    from glyphpack._history.codec import json_bytes, json_text, message_from_json

    assert json_text({"a": ["é", 1]}) == '{"a":["é",1]}'
    assert json_bytes({"a": "é"}) == '{"a":"é"}'.encode()
    lone = "x\ud800y"
    assert json_text({"a": lone}) == '{"a":"x\\ud800y"}' and json.loads(json_text({"a": lone}))["a"] == lone
    timed = Message("user", (Text("hi"),), id="m1", time=12.5)
    assert history_to_json([timed, Message("user", (Text("x"),), id="m2")]) == [
        {"id": "m1", "role": "user", "content": [{"type": "text", "text": "hi"}], "time": 12.5},
        {"id": "m2", "role": "user", "content": [{"type": "text", "text": "x"}]}]
    assert history_from_json(history_to_json([timed])) == [timed]
    fresh = message_from_json({"role": "user"})
    assert fresh.content == () and re.fullmatch(r"[0-9a-f]{32}", fresh.id) and fresh.time is None
    for data, error in (
        ("words", "a message must be an object with a role, not 'words'"),
        ({"content": []}, "a message must be an object with a role, not \"{'content': []}\""),
        ({"role": "user", "content": "hi"}, "a message's content must be a list of blocks, not str"),
    ):
        with pytest.raises(HistoryError) as refused:
            message_from_json(data)
        assert str(refused.value) == error
    with pytest.raises(HistoryError) as refused:
        history_from_json([history_to_json([timed])[0], {"role": "user", "content": 5}])
    assert str(refused.value) == "message 1: a message's content must be a list of blocks, not int"
    with pytest.raises(HistoryError) as refused:
        history_from_json({"messages": []})
    assert str(refused.value) == "a history must be a list of messages, not dict"
    long = {"role_missing": "x" * 200}
    with pytest.raises(HistoryError) as refused:
        message_from_json(long)
    assert str(refused.value) == f"a message must be an object with a role, not {str(long)[:80]!r}"


def test_ids_are_checked_at_both_ends_of_their_rule():
    """A conversation or agent id: 1-128 of letters, digits, '.', '_' and '-', starting
    with a letter or digit, nothing after (a trailing newline is refused too); a name
    taken gets the next free number."""
    import re

    from glyphpack import StoreError
    from glyphpack._history.ids import check_id, new_id, unique_name

    for good in ("a", "Z", "7", "a" * 128, "a.b_c-d", "0-x"):
        assert check_id(good, "conversation") == good
    for bad in ("", "a" * 129, ".a", "_a", "-a", "a/b", "a\n", "a b", "é", None, 5):
        with pytest.raises(StoreError) as refused:
            check_id(bad, "agent")
        assert str(refused.value) == (f"agent id {bad!r} is not allowed: use 1-128 letters, digits, '.', '_' or '-', "
                                      "starting with a letter or digit")
    assert re.fullmatch(r"[0-9a-f]{32}", new_id()) and new_id() != new_id()
    assert unique_name("main", set()) == "main"
    assert unique_name("main", {"main"}) == "main-2"
    assert unique_name("main", {"main", "main-2", "main-3"}) == "main-4"
    assert unique_name("main", {"main-2"}) == "main"


class _LengthPricer:
    """Text priced at one token a character, every image at 100."""

    def text(self, text: str) -> int:
        return len(text)

    def image(self, block: Image) -> int:
        return 100


@pytest.mark.parametrize(("block", "markdown", "outline", "tokens", "category"), [
    (Text("a\nb"), "a\nb", "a\nb", 3, None),
    (Image("image/png", b"\x89PNG12345"), "*[image image/png, 9 bytes]*", "[image]", 100, "images"),
    (Image("image/jpeg", ref="https://x/y.jpg"), "*[image image/jpeg, https://x/y.jpg]*", "[image]", 100, "images"),
    (glyphpack.ToolCall("call_1", "bash", {"command": "ls   -la\n x", "x": 1}),
     '**tool call** `bash` (`call_1`)\n\n```json\n{\n  "command": "ls   -la\\n x",\n  "x": 1\n}\n```', "bash(ls -la x)", 4 + 35 + 4 + 3, "tool calls"),
    (glyphpack.ToolCall("c2", "edit", {"x": 2, "other": "o", "path": "a.py"}),
     '**tool call** `edit` (`c2`)\n\n```json\n{\n  "x": 2,\n  "other": "o",\n  "path": "a.py"\n}\n```', "edit(a.py)", 4 + 38 + 4 + 1, "tool calls"),
    (glyphpack.ToolCall("c3", "noargs", {"n": 1}), '**tool call** `noargs` (`c3`)\n\n```json\n{\n  "n": 1\n}\n```', "noargs()", 6 + 8 + 4 + 1, "tool calls"),
    (glyphpack.ToolCall("c4", "long", {"q": "é" * 41}), None, f"long({'é' * 40}...)", None, "tool calls"),
    (glyphpack.ToolCall("c5", "long", {"q": "é" * 40}), None, f"long({'é' * 40})", None, "tool calls"),
    (glyphpack.ToolResult("call_1", (Text("out"), Image("image/png", b"abc")), True),
     "**tool error** for `call_1`\n\n```\nout\n\n*[image image/png, 3 bytes]*\n```", "[error]", 3 + 100 + 4 + 3, "tool results"),
    (glyphpack.ToolResult("c2", (Text("ok"), Text("more"))), "**tool result** for `c2`\n\n```\nok\n\nmore\n```", "[result]", 2 + 4 + 4 + 1, "tool results"),
    (glyphpack.Thinking("hmm\nyes", "sig"), "> hmm\n> yes", "", 7, "thinking"),
    (glyphpack.RedactedThinking("xyz"), "*[redacted thinking, 3 characters]*", "", 3, "thinking"),
    (glyphpack.Opaque("web_search", {"q": 1}), "*[web_search block, not sent to providers]*", "[web_search]", 0, None),
    (glyphpack.Opaque("reasoning", {"encrypted_content": "e" * 23}), "*[reasoning block, sent back to the Responses API alone]*", "[reasoning]", 10, None),
    (glyphpack.Opaque("reasoning", {"encrypted_content": "e" * 24}), None, "[reasoning]", 11, None),
    (glyphpack.Opaque("reasoning", {"encrypted_content": ""}), "*[reasoning block, not sent to providers]*", "[reasoning]", 0, None),
])
def test_each_block_shows_and_prices_exactly(block, markdown, outline, tokens, category):
    """What the navigator, the tree and the cost model read of each block: its markdown,
    its outline (a call by its key argument, cut at 40 characters), its tokens (a call
    or result adds 4 and its id's half-token a character; encrypted reasoning is priced
    at its text over 2.3) and its category (text and opaque blocks: the role's)."""
    if markdown is not None:
        assert block.markdown() == markdown
    assert block.outline() == outline
    if tokens is not None:
        assert block.tokens(_LengthPricer()) == tokens
    for role in ("user", "assistant"):
        assert block.category(role) == (category or role)


def test_a_calls_key_argument_and_a_results_parts():
    call = glyphpack.ToolCall("c", "t", {"n": 1, "first": "f", "url": "u", "pattern": 5})
    assert call.key_argument() == ("url", "u") and call.arguments_json == '{"n": 1, "first": "f", "url": "u", "pattern": 5}'
    assert glyphpack.ToolCall("c", "t", {"n": 1, "first": "f"}).key_argument() == ("first", "f")
    assert glyphpack.ToolCall("c", "t", {"n": 1}).key_argument() == ("", "")
    result = glyphpack.ToolResult("c", (Text("a"), Image("image/png", b"x"), Text("b")))
    assert (result.text, result.texts(), result.images()) == ("a\nb", ("a", "b"), (Image("image/png", b"x"),))
    assert (Text("t").texts(), Text("t").images(), Image("image/png", b"x").texts()) == (("t",), (), ())


_EVERY_BLOCK = [
    (Text("t"), {"type": "text", "text": "t"}),
    (Image("image/png", b"hi"), {"type": "image", "media_type": "image/png", "data": "aGk="}),
    (Image("image/jpeg", ref="gs://a"), {"type": "image", "media_type": "image/jpeg", "ref": "gs://a"}),
    (glyphpack.ToolCall("c", "n", {"a": 1}, "sig"), {"type": "tool_call", "id": "c", "name": "n", "arguments": {"a": 1}, "signature": "sig"}),
    (glyphpack.ToolCall("c", "n", {}), {"type": "tool_call", "id": "c", "name": "n", "arguments": {}}),
    (glyphpack.ToolResult("c", (Text("r"), Image("image/png", b"x")), True), {"type": "tool_result", "call_id": "c", "content": [
        {"type": "text", "text": "r"}, {"type": "image", "media_type": "image/png", "data": "eA=="}], "is_error": True}),
    (glyphpack.Thinking("th", "s"), {"type": "thinking", "text": "th", "signature": "s"}),
    (glyphpack.Thinking("th"), {"type": "thinking", "text": "th", "signature": None}),
    (glyphpack.RedactedThinking("d"), {"type": "redacted_thinking", "data": "d"}),
    (glyphpack.Opaque("k", {"p": 1}), {"type": "opaque", "kind": "k", "payload": {"p": 1}}),
]


@pytest.mark.parametrize(("block", "form"), _EVERY_BLOCK)
def test_every_block_has_one_json_form_and_reads_back_from_it(block, form):
    """A signature (Gemini needs its calls' back), an image's reference, an error flag:
    each is written and read back, never dropped."""
    from glyphpack._history.messages import Block

    assert block.to_json() == form
    back = Block.from_json(form)
    assert back == block and back.to_json() == form
    if isinstance(block, glyphpack.ToolCall):
        assert back.signature == block.signature


def test_a_tool_results_and_a_calls_fields_default_when_absent():
    from glyphpack._history.messages import Block

    assert Block.from_json({"type": "tool_result", "call_id": "c"}) == glyphpack.ToolResult("c")
    assert Block.from_json({"type": "tool_call", "id": "c", "name": "n"}) == glyphpack.ToolCall("c", "n", {})
    assert Block.from_json({"type": "opaque", "kind": "k"}) == glyphpack.Opaque("k", {})
    assert Block.from_json({"type": "thinking", "text": "t"}) == glyphpack.Thinking("t")
    assert hash(glyphpack.Opaque("k", {"a": 1, "b": 2})) == hash(glyphpack.Opaque("k", {"b": 2, "a": 1}))
    assert hash(glyphpack.Opaque("k", {"a": 1})) != hash(glyphpack.Opaque("j", {"a": 1}))
    assert hash(glyphpack.ToolCall("c", "n", {"a": 1})) == hash(glyphpack.ToolCall("c", "n", {"a": 2}))


@pytest.mark.parametrize(("build", "error"), [
    (lambda: Text(5), "Text.text must be str, not int '5'"),
    (lambda: Image(5, b"x"), "Image.media_type must be str, not int '5'"),
    (lambda: Image("image/png", "str"), "Image.data must be bytes or NoneType, not str 'str'"),
    (lambda: Image("image/png", None, 5), "Image.ref must be str or NoneType, not int '5'"),
    (lambda: Image("image/png"), "an Image needs exactly one of data (bytes) or ref (a URL or id)"),
    (lambda: Image("image/png", b"x", "r"), "an Image needs exactly one of data (bytes) or ref (a URL or id)"),
    (lambda: glyphpack.ToolCall(5, "n", {}), "ToolCall.id must be str, not int '5'"),
    (lambda: glyphpack.ToolCall("c", 5, {}), "ToolCall.name must be str, not int '5'"),
    (lambda: glyphpack.ToolCall("c", "n", []), "ToolCall.arguments must be dict, not list '[]'"),
    (lambda: glyphpack.ToolCall("c", "n", {}, 5), "ToolCall.signature must be str or NoneType, not int '5'"),
    (lambda: glyphpack.ToolResult(5), "ToolResult.call_id must be str, not int '5'"),
    (lambda: glyphpack.ToolResult("c", "text"), "ToolResult.content must be list or tuple, not str 'text'"),
    (lambda: glyphpack.ToolResult("c", (glyphpack.Thinking("x"),)),
     "a block in a tool result must be Text or Image, not Thinking \"Thinking(text='x', signature=None)\""),
    (lambda: glyphpack.ToolResult("c", (), 1), "ToolResult.is_error must be bool, not int '1'"),
    (lambda: glyphpack.Thinking(5), "Thinking.text must be str, not int '5'"),
    (lambda: glyphpack.Thinking("t", 5), "Thinking.signature must be str or NoneType, not int '5'"),
    (lambda: glyphpack.RedactedThinking(5), "RedactedThinking.data must be str, not int '5'"),
    (lambda: glyphpack.Opaque(5), "Opaque.kind must be str, not int '5'"),
    (lambda: glyphpack.Opaque("k", []), "Opaque.payload must be dict, not list '[]'"),
    (lambda: Message("robot"), "a message's role must be one of system, user, assistant, tool, not 'robot'"),
    (lambda: Message("user", 5), "a message's content must be list or tuple, not int '5'"),
    (lambda: Message("user", (5,)), "a message's content block must be Block, not int '5'"),
    (lambda: Message("user", (), 5), "a message's id must be str, not int '5'"),
    (lambda: Message("user", (), ""), "a message's id must not be empty"),
    (lambda: Message("user", (), "i", "t"), "a message's time must be int or float, not str 't'"),
    (lambda: Text(7 * 10**70), f"Text.text must be str, not int {str(7 * 10**70)[:60]!r}"),
])
def test_each_malformed_field_is_named_exactly(build, error):
    with pytest.raises(HistoryError) as refused:
        build()
    assert str(refused.value) == error


@pytest.mark.parametrize(("data", "error"), [
    (5, "a content block must be dict, not int '5'"),
    ({"type": "nope"}, "unknown content block type 'nope'; known: text, image, tool_call, tool_result, thinking, redacted_thinking, opaque"),
    ({"type": 3}, "unknown content block type 3; known: text, image, tool_call, tool_result, thinking, redacted_thinking, opaque"),
    ({"type": "tool_call", "id": "c"}, "a 'tool_call' block has no 'name' field"),
    ({"type": "image", "ref": "r"}, "a 'image' block has no 'media_type' field"),
    ({"type": "image", "media_type": "image/png", "data": 5}, "an image's data must be str, not int '5'"),
    ({"type": "image", "media_type": "image/png", "data": "@@"},
     "an image's data is not valid base64 (Only base64 data is allowed)"),
    ({"type": "tool_result", "call_id": "c", "content": "x"}, "a tool result's content must be list, not str 'x'"),
])
def test_each_malformed_block_form_is_named_exactly(data, error):
    from glyphpack._history.messages import Block

    with pytest.raises(HistoryError) as refused:
        Block.from_json(data)
    assert str(refused.value) == error


def test_a_title_is_one_line_of_at_most_its_limit():
    from glyphpack._history.messages import title_from

    assert title_from("  a\n\tb  c ") == "a b c"
    assert title_from("x" * 120) == "x" * 120
    assert title_from("x" * 121) == "x" * 119 + "…"
    assert title_from("abcdef", limit=5) == "abcd…" and title_from("abcde", limit=5) == "abcde"


def test_the_estimate_pricer_prices_text_by_its_estimator_and_each_image_as_a_page():
    from glyphpack._history.pricing import IMAGE_TOKENS_ESTIMATE, MESSAGE_OVERHEAD, EstimatePricer, message_tokens
    from glyphpack._providers.text_tokens import DEFAULT_ESTIMATOR

    pricer = EstimatePricer()
    assert pricer.text("hello, world") == DEFAULT_ESTIMATOR.estimate("hello, world") > 0
    assert pricer.image(Image("image/png", b"x")) == IMAGE_TOKENS_ESTIMATE == 1568
    message = Message("user", (Text("hello, world"), Image("image/png", b"x")))
    assert message_tokens(message, pricer) == MESSAGE_OVERHEAD + pricer.text("hello, world") + 1568 and MESSAGE_OVERHEAD == 4


def test_contents_given_as_lists_or_a_string_are_kept_as_tuples():
    assert Message("user", [Text("a")]).content == (Text("a"),) and isinstance(Message("user", [Text("a")]).content, tuple)
    assert Message("user", "words").content == (Text("words"),)
    result = glyphpack.ToolResult("c", [Text("r")])
    assert result.content == (Text("r"),) and isinstance(result.content, tuple)
    assert Text("t").category("tool") == "tool results" and Text("t").category("system") == "system"
    call = glyphpack.ToolCall("c", "n", {"path": "é"})
    assert call.markdown() == '**tool call** `n` (`c`)\n\n```json\n{\n  "path": "é"\n}\n```'
    assert glyphpack.ToolCall("c", "n", {"path": 5, "q": "x"}).key_argument() == ("q", "x")
