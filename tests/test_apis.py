"""One contract for every registered provider API: a history goes out in a form the
API's checker accepts, at exactly its image limit and not one over, and comes back with
its words, calls, results and images; a block class it has no rule for fails loudly; a
response of another API is named; the session's extras cannot replace what it builds;
a file of the API's items imports as that API. A new API module is tested by being
registered."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

import glyphpack
from glyphpack import Image, Message, Text, Thinking, ToolCall, ToolResult
from glyphpack._history.messages import Block
from glyphpack._importers.plain import kind_of
from glyphpack._types import APIS
from glyphpack._wire import REGISTRY, ProviderApi, api_of, merge_extra, provider_api
from glyphpack._wire import base as apis_base

API_LIST = list(REGISTRY.values())
NAMES = list(REGISTRY)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))  # never decoded: bytes that must come back as they went

HISTORY = (
    Message("system", "be brief"),
    Message("user", (Text("what is in a.txt and b.txt?"), Image("image/png", PNG), Image("image/png", ref="https://example.com/c.png"))),
    Message("assistant", (Thinking("two reads", "sig"), Text("reading both"),
                          ToolCall("call-a", "read", {"path": "a.txt"}), ToolCall("call-b", "read", {"path": "b.txt"}))),
    Message("tool", (ToolResult("call-a", (Text("alpha"), Image("image/png", PNG))),
                     ToolResult("call-b", (Text("no such file"),), is_error=True))),
    Message("assistant", "a.txt says alpha; b.txt is missing"),
)


def projection(messages: list[Message] | tuple[Message, ...]) -> dict[str, Any]:
    """What must survive a round trip through any API: the words of each role, every
    call with its arguments, every result's text by call, every image's bytes."""
    results = {}
    for message in messages:
        for result in message.tool_results:
            results[result.call_id] = result.text.removeprefix("[error] ")
    return {
        "words": [(m.role, b.text) for m in messages for b in m.content if isinstance(b, Text) and m.role != "tool"],
        "calls": [(c.id, c.name, c.arguments) for m in messages for c in m.tool_calls],
        "results": results,
        "images": sorted((image.data or b"", image.ref or "") for m in messages for b in m.content for image in b.images()),
    }


def test_the_registry_is_the_api_list_one_module_each():
    assert tuple(REGISTRY) == APIS
    package = Path(glyphpack.__file__).parent / "_wire"
    for name, api in REGISTRY.items():
        assert (package / f"{name.replace('-', '_')}.py").is_file()
        assert isinstance(api, ProviderApi) and api.name == name
        assert type(api).__module__ == f"glyphpack._wire.{name.replace('-', '_')}"
    assert set(ProviderApi.classes) == set(APIS)
    assert provider_api("gemini") is REGISTRY["gemini"]
    with pytest.raises(glyphpack.UsageError, match="api must be one of anthropic, openai-chat, openai-responses, gemini, not 'bedrock'"):
        provider_api("bedrock")


@pytest.mark.parametrize("api", API_LIST, ids=NAMES)
def test_a_history_goes_out_accepted_at_its_image_limit_and_comes_back_whole(api):
    system, items = api.to_wire(HISTORY, None, "any-model")
    api.check(items, max_images=3)  # two of bytes (one in a result) and one by URL
    with pytest.raises(glyphpack.HistoryError, match="3 images, over the 2 a request may carry"):
        api.check(items, max_images=2)
    back = api.from_wire(items, system)
    assert projection(back) == projection(HISTORY)
    first = api.from_wire(items, "kept apart")[0]  # a file's own system prompt
    assert (first.role, first.text) == ("system", "kept apart")
    glyphpack.validate_history(back, allow_pending=False)


@pytest.mark.parametrize("api", API_LIST, ids=NAMES)
def test_a_block_class_no_api_module_knows_fails_loudly(api):
    @dataclasses.dataclass(frozen=True)
    class Citation(Block):
        tag: ClassVar[str] = "test-citation"
        source: str

        def to_json(self):
            return {"type": self.tag, "source": self.source}

        @classmethod
        def from_fields(cls, data):
            return cls(data["source"])

        def tokens(self, pricer):
            return 1

        def markdown(self):
            return self.source

        def outline(self):
            return self.source

    try:
        history = (Message("user", "cite it"), Message("assistant", (Text("see"), Citation("a paper"))))
        with pytest.raises(glyphpack.HistoryError, match=f"^Citation has no (Anthropic )?{api.title} form$"):
            api.to_wire(history, None, "any-model")
    finally:
        del Block.registry["test-citation"]


@pytest.mark.parametrize("api", API_LIST, ids=NAMES)
def test_a_response_of_another_api_is_refused_and_named(api):
    for other in API_LIST:
        if other is api:
            continue
        stray = {other.response_key: [] if other.response_key != "stop_reason" else "end_turn"}
        with pytest.raises(glyphpack.HistoryError, match=f"not a {api.title} response: .*api='{other.name}'"):
            api.parse(stray)
    with pytest.raises(glyphpack.HistoryError) as refused:  # its own key, but nothing to read: no hint to itself
        api.parse({api.response_key: None})
    assert "looks like" not in str(refused.value)


@pytest.mark.parametrize("api", API_LIST, ids=NAMES)
def test_the_session_builds_the_history_key_and_extras_cannot_replace_it(api):
    request = api.build("claude-sonnet-4-5", HISTORY, 0, glyphpack.resolve("claude-sonnet-4-5"))
    assert request["model"] == "claude-sonnet-4-5" and request[api.request_key]
    with pytest.raises(glyphpack.UsageError, match=f"'{api.request_key}' is what the session builds"):
        merge_extra(request, {api.request_key: []})
    capped = merge_extra(request, api.reply_limit(7))
    assert 7 in [*capped.values(), *capped.get("config", {}).values()]


@pytest.mark.parametrize("api", API_LIST, ids=NAMES)
def test_a_file_of_the_apis_items_imports_as_that_api(api):
    system, items = api.to_wire(HISTORY, None, "any-model")
    document = {api.request_key: items, **({"system": system} if system else {})}
    assert kind_of(document) == api.name


def test_plain_user_turns_import_as_the_api_whose_shape_they_have():
    assert kind_of([{"role": "user", "parts": [{"text": "hi"}]}]) == "gemini"
    assert kind_of([{"role": "user", "content": "hi"}]) == "openai-chat"
    assert kind_of({"system": "s", "messages": [{"role": "user", "content": "hi"}]}) == "anthropic"
    assert kind_of([{"role": "narrator", "content": "hi"}]) is None
    # A shape only one API has wins over plain turns any chat format could be.
    used = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "ls", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]}]
    assert kind_of(used) == "anthropic"
    assert kind_of([{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://e.com/a.png"}}]}]) == "anthropic"
    assert kind_of([{"role": "user", "content": [{"type": "image", "url": "https://e.com/a.png"}]}]) == "openai-chat"  # no source: not Anthropic's
    assert kind_of([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}]}]) == "openai-chat"
    assert kind_of({"system": "s", "messages": [{"role": "user", "content": "q"}, {"role": "developer", "content": "d"}]}) == "openai-chat"
    assert kind_of({"system": "s", "messages": [{"role": "user", "content": "q"},
                                                {"role": "assistant", "content": None, "tool_calls": [{"id": "a"}]}]}) == "openai-chat"
    assert kind_of({"system": "s", "messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "also"}]}) == "openai-chat"
    for responses in ([{"type": "reasoning", "id": "rs", "summary": []}], [{"type": "function_call_output", "call_id": "a", "output": "x"}],
                      [{"type": "function_call", "call_id": "a", "name": "ls", "arguments": "{}"}],
                      [{"role": "user", "content": [{"type": "input_text", "text": "q"}]}],
                      [{"role": "assistant", "content": [{"type": "output_text", "text": "a"}]}]):
        assert kind_of(responses) == "openai-responses", responses
    assert kind_of([{"role": "user", "content": ["input_text"]}]) == "openai-chat"  # a part must be an object to count
    for role in ("user", "model", "function", "tool"):
        assert kind_of([{"role": role, "parts": [{"text": "q"}]}]) == "gemini", role
    assert kind_of([{"role": "narrator", "parts": [{"text": "q"}]}]) is None


def test_an_sdk_client_names_its_api_by_module():
    def client_of(module: str) -> object:
        return type("Client", (), {"__module__": module})()

    assert api_of(client_of("anthropic._client")) == "anthropic"
    assert api_of(client_of("openai")) == "openai-chat"  # Responses is asked for by name
    assert api_of(client_of("google.genai.client")) == "gemini"
    with pytest.raises(glyphpack.UsageError, match=re.escape("is not an anthropic, openai or google-genai client")):
        api_of(client_of("anthropicish"))


def test_a_gemini_file_by_uri_is_an_image_only_when_it_is_one():
    image, pdf = glyphpack.from_gemini([{"role": "user", "parts": [
        {"file_data": {"mime_type": "image/jpeg", "file_uri": "gs://b/cat.jpg"}},
        {"file_data": {"mime_type": "application/pdf", "file_uri": "gs://b/paper.pdf"}},
    ]}])[0].content
    assert image == Image("image/jpeg", ref="gs://b/cat.jpg")
    assert pdf.kind == "gemini_part" and pdf.payload["file_data"]["file_uri"] == "gs://b/paper.pdf"  # kept, never sent


#: Per API: where the system prompt goes, the reply cap, a minimal answer with its usage
#: and the input tokens it counts (cached ones included), the SDK's client class.
EXPECTED = {
    "anthropic": {
        "system": lambda request: request["system"][0]["text"],
        "cap": {"max_tokens": 7},
        "answer": {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100}},
        "tokens": 115,
        "client": "Anthropic",
    },
    "openai-chat": {
        "system": lambda request: request["messages"][0]["content"],
        "cap": {"max_completion_tokens": 7},
        "answer": {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 42, "completion_tokens": 3}},
        "tokens": 42,
        "client": "OpenAI",
    },
    "openai-responses": {
        "system": lambda request: request["instructions"],
        "cap": {"max_output_tokens": 7},
        "answer": {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}],
                   "usage": {"input_tokens": 42, "output_tokens": 3}},
        "tokens": 42,
        "client": "OpenAI",
    },
    "gemini": {
        "system": lambda request: request["config"]["system_instruction"],
        "cap": {"config": {"max_output_tokens": 7}},
        "answer": {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finish_reason": "STOP"}],
                   "usage_metadata": {"prompt_token_count": 42, "candidates_token_count": 3}},
        "tokens": 42,
        "client": "Client",
    },
}


def test_every_api_has_its_expectations_written_here():
    assert set(EXPECTED) == set(REGISTRY)


@pytest.mark.parametrize("api", API_LIST, ids=NAMES)
def test_the_system_prompt_the_reply_cap_and_the_counted_input_land_where_the_api_wants(api):
    expected = EXPECTED[api.name]
    request = api.build("m", HISTORY, 0, glyphpack.resolve("claude-sonnet-4-5"))
    assert expected["system"](request) == "be brief"
    assert api.reply_limit(7) == expected["cap"]
    reply = api.parse(expected["answer"])
    assert reply.message.role == "assistant" and reply.message.text == "hi"
    assert reply.input_tokens == expected["tokens"]
    assert api.parse({**expected["answer"], "usage": {}, "usage_metadata": {}}).input_tokens is None


@pytest.mark.parametrize("api", API_LIST, ids=NAMES)
def test_the_client_is_the_sdks_own_with_the_base_url_when_given(api, monkeypatch):
    class Recorder:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    sdk = type("Sdk", (), {EXPECTED[api.name]["client"]: Recorder})
    monkeypatch.setattr(apis_base, "importlib", SimpleNamespace(import_module=lambda name: sdk if name == api.sdk_module else None))
    assert api.client().kwargs == {}
    given = api.client("http://localhost:9/v1").kwargs
    assert "http://localhost:9/v1" in (given.get("base_url"), given.get("http_options", {}).get("base_url"))

    def missing(name):
        raise ImportError(name)

    monkeypatch.setattr(apis_base, "importlib", SimpleNamespace(import_module=missing))
    with pytest.raises(glyphpack.UsageError, match=f"the {api.name} API needs the {api.sdk_package} package: pip install {api.sdk_package}"):
        api.client()


@pytest.mark.parametrize("model, detail", [("gpt-5.4", "original"), ("gpt-4o", "high")])
@pytest.mark.parametrize("name", ["openai-chat", "openai-responses"])
def test_openai_images_carry_the_readers_detail(name, model, detail):
    request = REGISTRY[name].build(model, HISTORY, 0, glyphpack.resolve(model))
    found = re.findall(r"'detail': '(\w+)'", repr(request))
    assert found and set(found) == {detail}


def test_gemini_3_gets_the_documented_signature_stand_in_and_its_media_resolution():
    from glyphpack._wire.gemini import SKIP_SIGNATURE

    gemini = REGISTRY["gemini"]
    three = gemini.build("gemini-3-pro", HISTORY, 0, glyphpack.resolve("gemini-3-pro"))
    calls = [p for c in three["contents"] for p in c["parts"] if "function_call" in p]
    assert [p.get("thought_signature") for p in calls] == [SKIP_SIGNATURE, None]  # parallel calls: the first only
    images = [p for c in three["contents"] for p in c["parts"] if "inline_data" in p or "file_data" in p]
    assert images and all(p["media_resolution"] == {"level": "MEDIA_RESOLUTION_HIGH"} for p in images)
    older = gemini.build("gemini-2.5-pro", HISTORY, 0, glyphpack.resolve("gemini-2.5-pro"))
    assert "thought_signature" not in repr(older) and "media_resolution" not in repr(older)


def test_a_reasoning_item_goes_back_only_whole():
    from glyphpack._wire.openai_responses import check_openai_responses

    check_openai_responses([{"role": "user", "content": "q"}, {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"}])
    for broken in ({"type": "reasoning", "summary": []}, {"type": "reasoning", "id": "rs_1"}):
        with pytest.raises(glyphpack.HistoryError, match="item 1: a reasoning item needs its id and a summary list"):
            check_openai_responses([{"role": "user", "content": "q"}, broken])


@pytest.mark.parametrize("api", API_LIST, ids=NAMES)
def test_a_history_that_starts_with_the_assistant_is_accepted(api):
    """After a trim or a compaction a history may begin with the assistant's turn;
    Anthropic and Gemini want the user first, so a placeholder user turn opens it."""
    from glyphpack._wire.common import CONTINUES

    history = (Message("assistant", (Text("as I said"), ToolCall("c", "ls", {}))), Message("tool", (ToolResult("c", (Text("a.py"),)),)),
               Message("assistant", "done"))
    system, items = api.to_wire(history, None, "any-model")
    api.check(items)
    first = repr(items[0])
    assert (CONTINUES in first) == (api.name in ("anthropic", "gemini"))
    assert [c.id for m in api.from_wire(items, system) for c in m.tool_calls] == ["c"]


def test_a_model_id_alone_speaks_its_providers_own_api():
    from glyphpack._wire import native_api

    assert [native_api(p).name for p in ("anthropic", "openai", "google")] == ["anthropic", "openai-chat", "gemini"]


def test_a_message_converted_again_gives_blocks_of_its_own_and_the_same_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages convert once (a session sends its view again each request); each request
    still gets block objects of its own: a cache breakpoint set on one request's block
    is not on the next request's."""
    from glyphpack._wire import anthropic

    call = Message("assistant", (Text("Reading."), ToolCall("c1", "read", {"path": "a.log"})))
    result = Message("tool", (ToolResult("c1", (Text("auth failed"),)),))
    words = Message("user", (Text("Which failed first?"),))
    history = [Message("user", (Text("Read the logs."),)), call, result, words]
    _, first = anthropic.to_anthropic(history)
    for message in first:
        for block in message["content"]:
            block["cache_control"] = {"type": "ephemeral"}
    _, again = anthropic.to_anthropic(history)
    _, fresh = anthropic.to_anthropic([dataclasses.replace(m) for m in history])  # equal messages, not the same objects
    assert again == fresh and not any("cache_control" in b for m in again for b in m["content"])
    # At the limit the memo starts again: it never holds more than it keeps.
    monkeypatch.setattr(anthropic, "_CONVERTED_KEPT", 3)
    anthropic._converted.clear()
    anthropic.to_anthropic(history[:3])
    assert len(anthropic._converted) == 3
    anthropic.to_anthropic(history)
    assert len(anthropic._converted) == 1 and anthropic.to_anthropic(history)[1] == fresh
