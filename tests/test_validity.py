"""Every request glyphpack builds is one the provider accepts: histories with parallel
calls, split tool messages, images in results, thinking, and user-role results, as they
are, as every ladder view, and as every trimmed load, pass each API's own rules
(each ``glyphpack._wire`` module's ``check_*``) and the SDKs' request types."""

from __future__ import annotations

import functools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

import glyphpack
from glyphpack import Image, Message, RedactedThinking, Text, Thinking, ToolCall, ToolResult
from glyphpack._wire.anthropic import check_anthropic
from glyphpack._wire.gemini import check_gemini
from glyphpack._wire.openai_chat import check_openai_chat
from glyphpack._wire.openai_responses import check_openai_responses

PNG = glyphpack.render("a page").pop().png


@st.composite
def histories(draw) -> list[Message]:
    messages = [Message("system", "be careful")] if draw(st.booleans()) else []
    for turn in range(draw(st.integers(1, 5))):
        user = [Text(f"question {turn}")] + ([Image("image/png", PNG)] if draw(st.booleans()) else [])
        messages.append(Message("user", tuple(user)))
        for step in range(draw(st.integers(0, 3))):
            calls = [ToolCall(f"c{turn}-{step}-{k}", "tool", {"k": k}) for k in range(draw(st.integers(1, 3)))]
            thinking = draw(st.sampled_from([[], [Thinking("hm", "sig")], [Thinking("unsigned")], [RedactedThinking("xx")]]))
            messages.append(Message("assistant", (*thinking, Text(f"step {step}"), *calls)))
            results = [
                ToolResult(c.id, (Text("out " * draw(st.integers(1, 400))),) + ((Image("image/png", PNG),) if draw(st.booleans()) else ()),
                           draw(st.booleans()))
                for c in calls
            ]
            shape = draw(st.sampled_from(["one", "split", "user-role", "user-role-with-text", "user-between"]))
            if shape == "user-between":  # the user's own message lands before the results
                messages.append(Message("user", "meanwhile"))
                messages.extend(Message("tool", (r,)) for r in results)
            elif shape == "one":
                messages.append(Message("tool", tuple(results)))
            elif shape == "split":
                messages.extend(Message("tool", (r,)) for r in results)
            elif shape == "user-role":
                messages.append(Message("user", tuple(results)))
            else:
                messages.append(Message("user", (Text("also this"), *results)))
        messages.append(Message("assistant", f"answer {turn}"))
    return messages


@functools.cache
def type_adapter(name: str) -> TypeAdapter:
    """The SDK's request type ``name`` as a validator (slow to build: once each)."""
    from anthropic.types import MessageParam
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import ResponseInputItemParam

    kinds = {"anthropic": MessageParam, "openai-chat": ChatCompletionMessageParam, "openai-responses": ResponseInputItemParam}
    return TypeAdapter(kinds[name])


def assert_accepted(messages, profile=None):
    glyphpack.validate_history(messages, allow_pending=False)
    max_images = profile.max_images if profile is not None else None
    system, anthropic = glyphpack.to_anthropic(messages)
    check_anthropic(anthropic, max_images=max_images)
    adapter = type_adapter("anthropic")
    for entry in anthropic:
        adapter.validate_python(entry)
    chat = glyphpack.to_openai_chat(messages)
    check_openai_chat(chat, max_images=max_images)
    chat_adapter = type_adapter("openai-chat")
    for entry in chat:
        chat_adapter.validate_python(entry)
    assert_accepted_by_responses_and_gemini(messages)


def assert_accepted_by_responses_and_gemini(messages):
    from google.genai import types

    instructions, items = glyphpack.to_openai_responses(messages)
    check_openai_responses(items)
    item_adapter = type_adapter("openai-responses")
    for item in items:
        item_adapter.validate_python(item)
    system, contents = glyphpack.to_gemini(messages)
    check_gemini(contents)
    for content in contents:
        types.Content.model_validate(content)
    # back again: every call and result survives, paired
    for back in (glyphpack.from_openai_responses(items, instructions), glyphpack.from_gemini(contents, system)):
        assert sorted(c.name for m in back for c in m.tool_calls) == sorted(c.name for m in messages for c in m.tool_calls)
        glyphpack.validate_history(back, allow_pending=False)


@settings(max_examples=200 if os.environ.get("CI") else 25, deadline=None)
@given(history=histories())
def test_every_history_converts_to_accepted_requests(history):
    assert_accepted(history)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories(), fraction=st.floats(0.05, 1.0), keep=st.integers(1, 12),
       model=st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-7", "gpt-5.4", "gemini-3-pro"]))
def test_every_view_and_trimmed_load_is_accepted(tmp_path_factory, history, fraction, keep, model):
    profile = glyphpack.resolve(model)
    from glyphpack._compaction.cost import CostModel

    budget = max(1, int(CostModel(profile).history(history) * fraction))
    result = glyphpack.compact(history, profile, budget)
    assert_accepted(list(result.view), profile)
    with glyphpack.Workspace(tmp_path_factory.mktemp("ws")) as ws:
        ws.save("c", "a", history, revision=0)
        assert_accepted(list(ws.load("c", "a", keep=keep).messages))


@pytest.mark.parametrize("bad, rule", [
    ([{"role": "assistant", "content": "hi"}], "roles alternate"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
      {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "tool_result", "tool_use_id": "a", "content": "r"}]}], "before the other blocks"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": ""}]}], "signature"),
])
def test_the_anthropic_check_catches(bad, rule):
    with pytest.raises(glyphpack.HistoryError, match=rule):
        check_anthropic(bad)


def test_the_openai_check_catches_a_result_after_a_user_message():
    bad = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "t", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "r"}, {"role": "user", "content": [{"type": "text", "text": "img"}]},
        {"role": "tool", "tool_call_id": "b", "content": "r"}]
    with pytest.raises(glyphpack.HistoryError, match="before the results of calls"):
        check_openai_chat(bad)


def test_a_message_between_calls_and_their_results_moves_after_the_results():
    """A real pi session has the user's shell command between an assistant's calls and
    their results: both APIs reject that order. Nothing is dropped, order is otherwise kept."""
    from glyphpack._wire.common import results_first

    history = [
        Message("user", "go", id="u1"),
        Message("assistant", (ToolCall("a", "t", {}), ToolCall("b", "t", {})), id="a1"),
        Message("user", "I ran ls myself", id="u2"),
        Message("tool", (ToolResult("a", (Text("ra"),)),), id="t1"),
        Message("user", "and pwd", id="u3"),
        Message("tool", (ToolResult("b", (Text("rb"),)),), id="t2"),
        Message("user", "then this", id="u4"),
        Message("assistant", "done", id="a2"),
    ]
    assert [m.id for m in results_first(history)] == ["u1", "a1", "t1", "t2", "u2", "u3", "u4", "a2"]
    assert_accepted(history)


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "t", "arguments": "{}"}}


@pytest.mark.parametrize("bad, rule", [
    ([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "a", "content": "r"}],
     "message 1: a tool message for 'a', which no open call made"),
    ([{"role": "tool", "tool_call_id": "a", "content": "r"}], "message 0: a tool message for 'a', which no open call made"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [_call("a")]},
      {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "r"}]}], "message 2: a tool message must carry text"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [_call("b"), _call("a")]}],
     r"tool calls \['a', 'b'\] at the end have no results"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [_call("a")]},
      {"role": "tool", "tool_call_id": "a", "content": "r"}, {"role": "tool", "tool_call_id": "a", "content": "again"}],
     "message 3: a tool message for 'a', which no open call made"),
])
def test_the_openai_check_catches(bad, rule):
    with pytest.raises(glyphpack.HistoryError, match=rule):
        check_openai_chat(bad)


def _images(count: int, api: str) -> list[dict]:
    """A request of ``count`` images over two user messages, text parts between them."""
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}} if api == "openai-chat" else {
        "type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
    text = {"type": "text", "text": "see"}
    first, second = count // 2, count - count // 2
    return [{"role": "user", "content": [text, *[part] * first]}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [*[part] * second, text]}]


@pytest.mark.parametrize("api, check", [("openai-chat", check_openai_chat), ("anthropic", check_anthropic)])
def test_the_image_limit_holds_at_exactly_the_limit_and_refuses_one_more(api, check):
    check(_images(5, api), max_images=5)
    check(_images(5, api))  # no limit given
    with pytest.raises(glyphpack.HistoryError, match="6 images, over the 5 a request may carry"):
        check(_images(6, api), max_images=5)
    results = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [_images(2, "anthropic")[0]["content"][1]] * 2}]}]
    if api == "anthropic":  # images inside tool results count too
        check_anthropic(results, max_images=2)
        with pytest.raises(glyphpack.HistoryError, match="2 images, over the 1"):
            check_anthropic(results, max_images=1)


def test_tool_ids_the_messages_api_refuses_are_mapped_alike_in_the_call_and_its_result():
    """Anthropic answers 400 for a ``tool_use`` id outside ``^[a-zA-Z0-9_-]+$``. An import
    makes a reused id unique as ``id#2``, and other harnesses write ids with ``.``, ``:`` or
    ``|``: each is mapped the same way in its call and its result, distinct ids stay
    distinct, and a valid id is sent as it is."""
    from glyphpack._wire.anthropic import anthropic_tool_id

    ids = ["toolu_01A-b", "a#2", "a_2", "fc.1", "fc:1", "mcp|srv|x", "", "é"]
    history = [Message("user", "go"), Message("assistant", tuple(ToolCall(i, "f", {}) for i in ids)),
               Message("tool", tuple(ToolResult(i, (Text("ok"),)) for i in ids))]
    _, sent = glyphpack.to_anthropic(history)
    check_anthropic(sent)
    calls = [b["id"] for b in sent[1]["content"]]
    assert calls == [b["tool_use_id"] for b in sent[2]["content"]]
    assert len(set(calls)) == len(ids) and calls[0] == "toolu_01A-b" and calls[2] == "a_2"
    assert calls[1].startswith("a_2_") and calls[1] == anthropic_tool_id("a#2")
    raw = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a#2", "name": "f", "input": {}}]},
           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a#2", "content": "ok"}]}]
    with pytest.raises(glyphpack.HistoryError, match=r"message 1: tool_use ids \['a#2'\] do not match"):
        check_anthropic(raw)


def _image_bytes(form: str, mode: str = "RGB") -> bytes:
    import io

    from PIL import Image as PILImage

    out = io.BytesIO()
    PILImage.new(mode, (3, 2), (10, 20, 30) if mode == "RGB" else 7).save(out, form)
    return out.getvalue()


def test_an_image_is_sent_as_a_type_the_api_takes():
    """The Anthropic and OpenAI APIs take PNG, JPEG, GIF and WebP, labelled as what the
    bytes are: a PNG labelled JPEG goes as PNG, a BMP or TIFF is re-encoded as PNG
    (the same bytes each time, so the cache holds), and what is no image (a PDF from a
    Gemini file) goes as a note; the history keeps every block as it was."""
    import io

    from PIL import Image as PILImage

    from glyphpack._wire.common import web_image

    png, jpeg, gif, webp = (_image_bytes(form) for form in ("PNG", "JPEG", "GIF", "WEBP"))
    for data, kind in ((png, "image/png"), (jpeg, "image/jpeg"), (gif, "image/gif"), (webp, "image/webp")):
        assert web_image(Image(kind, data)) == Image(kind, data)
        assert web_image(Image("image/heic" if kind != "image/png" else "image/jpeg", data)) == Image(kind, data)
    for form, mode in (("BMP", "RGB"), ("TIFF", "RGB"), ("TIFF", "CMYK"), ("TIFF", "I;16")):
        sent = web_image(Image("image/bmp", _image_bytes(form, mode)))
        assert isinstance(sent, Image) and sent.media_type == "image/png" and sent.data is not None
        assert sent.data.startswith(b"\x89PNG") and sent == web_image(Image("image/bmp", _image_bytes(form, mode)))
        with PILImage.open(io.BytesIO(sent.data)) as decoded:
            assert decoded.size == (3, 2)
    from glyphpack._wire.common import image_type_of

    assert image_type_of(b"RIFF\0\0\0\0WAVEfmt ") is None and image_type_of(b"RIFX\0\0\0\0WEBP") is None  # a RIFF file is WebP only when it says so
    pdf = b"%PDF-1.4\n" + b"x" * 1200
    assert web_image(Image("application/pdf", pdf)) == Text(
        "[attachment application/pdf, 1,209 bytes: kept in the history; this API takes no attachment of this type]")
    assert web_image(Image("image/png", ref="https://example.com/a.png")) == Image("image/png", ref="https://example.com/a.png")
    history = [Message("user", (Text("see"), Image("application/pdf", pdf), Image("image/bmp", _image_bytes("BMP"))), id="u"),
               Message("assistant", (ToolCall("c", "shot", {}),), id="a"),
               Message("tool", (ToolResult("c", (Image("image/jpeg", png),)),), id="t")]
    _, anthropic = glyphpack.to_anthropic(history)
    check_anthropic(anthropic)
    assert anthropic[0]["content"][1] == {"type": "text", "text": web_image(Image("application/pdf", pdf)).text}
    assert anthropic[0]["content"][2]["source"]["media_type"] == "image/png"
    assert anthropic[2]["content"][0]["content"][0]["source"]["media_type"] == "image/png"
    chat = glyphpack.to_openai_chat(history)
    check_openai_chat(chat)
    assert chat[0]["content"][1] == {"type": "text", "text": web_image(Image("application/pdf", pdf)).text}
    assert chat[0]["content"][2]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    _, responses = glyphpack.to_openai_responses(history)
    check_openai_responses(responses)
    assert responses[0]["content"][2]["image_url"].startswith("data:image/png;base64,iVBOR")
    assert history[0].content[1] == Image("application/pdf", pdf)  # the history itself is unchanged


def test_the_checks_refuse_an_image_type_the_api_refuses():
    bad = {"type": "image", "source": {"type": "base64", "media_type": "application/pdf", "data": "aGk="}}
    with pytest.raises(glyphpack.HistoryError) as refused:
        check_anthropic([{"role": "user", "content": [bad]}])
    assert str(refused.value) == "message 0: image type 'application/pdf' is not one of image/gif, image/jpeg, image/png, image/webp"
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "n", "input": {}}]}
    with pytest.raises(glyphpack.HistoryError, match="message 2: image type 'image/bmp'"):
        check_anthropic([{"role": "user", "content": "go"}, call, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c", "content": [{**bad, "source": {**bad["source"], "media_type": "image/bmp"}}]}]}])
    check_anthropic([{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://x/a.bmp"}}]}])
    with pytest.raises(glyphpack.HistoryError, match=r"message 0: image type 'image/tiff' is not one of"):
        check_openai_chat([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/tiff;base64,aGk="}}]}])
    check_openai_chat([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.tiff"}}]}])
    with pytest.raises(glyphpack.HistoryError, match=r"item 0: image type 'application/pdf' is not one of"):
        check_openai_responses([{"role": "user", "content": [{"type": "input_image", "image_url": "data:application/pdf;base64,aGk="}]}])
    check_openai_responses([{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/webp;base64,aGk="}]}])


def test_the_fake_providers_refuse_an_image_whose_bytes_are_not_its_label():
    """As the providers do ("Image does not match the provided media type"): so a
    converter that sent a PNG as JPEG fails every test that drives the fake."""
    import base64

    from glyphpack.testing import fake

    png = base64.b64encode(_image_bytes("PNG")).decode()
    anthropic = {"max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": png}}]}]}
    assert fake._check_anthropic(anthropic) == "invalid request: Image does not match the provided media type image/jpeg"
    anthropic["messages"][0]["content"][0]["source"]["media_type"] = "image/png"
    assert fake._check_anthropic(anthropic) is None
    anthropic["messages"][0]["content"][0]["source"]["data"] = "not base64!"
    assert fake._check_anthropic(anthropic) == "invalid request: an image's data is not valid base64"
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "n", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": png}}]}]}
    assert fake._check_anthropic({"max_tokens": 1, "tools": [{}], "messages": [{"role": "user", "content": "go"}, call, result]}) == (
        "invalid request: Image does not match the provided media type image/gif")
    chat = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": f"data:image/webp;base64,{png}"}}]}]}
    assert fake._check_chat(chat) == "invalid request: Image does not match the provided media type image/webp"
    responses = {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": f"data:image/jpeg;base64,{png}"}]}]}
    assert fake._check_responses(responses) == "invalid request: Image does not match the provided media type image/jpeg"
    responses["input"][0]["content"][0]["image_url"] = f"data:image/png;base64,{png}"
    assert fake._check_responses(responses) is None


@pytest.mark.parametrize(("read", "given", "error"), [
    (glyphpack.from_anthropic, [{"content": "x"}], "message 0: no 'role' key where one is needed"),
    (glyphpack.from_anthropic, [{"role": "user", "content": "hi"}, {"role": "user", "content": [{"type": "image", "source": 5}]}],
     "message 1: malformed (AttributeError: 'int' object has no attribute 'get')"),
    (glyphpack.from_openai_chat, [{"role": "assistant", "tool_calls": [{"id": "c"}]}], "message 0: no 'function' key where one is needed"),
])
def test_a_malformed_provider_message_is_named_by_index_and_what_is_wrong(read, given, error):
    with pytest.raises(glyphpack.HistoryError) as refused:
        read(given)
    assert str(refused.value) == error
