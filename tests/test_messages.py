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
