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
from typing import Any, ClassVar

import pytest

import glyphpack
from glyphpack import Image, Message, Text, Thinking, ToolCall, ToolResult
from glyphpack._history.apis import REGISTRY, ProviderApi, api_of, merge_extra, provider_api
from glyphpack._history.importers.plain import kind_of
from glyphpack._history.messages import Block
from glyphpack._types import APIS

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
    package = Path(glyphpack.__file__).parent / "_history" / "apis"
    for name, api in REGISTRY.items():
        assert (package / f"{name.replace('-', '_')}.py").is_file()
        assert isinstance(api, ProviderApi) and api.name == name
        assert type(api).__module__ == f"glyphpack._history.apis.{name.replace('-', '_')}"
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
        with pytest.raises(glyphpack.HistoryError, match="Citation has no .* form"):
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
