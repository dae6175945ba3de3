"""The proxy server's pure parts, exact: the summary request that continues a client's
conversation, the instruction added to each API's history, the upstream's URL, the
errors in each API's shape (whole and as a stream event), a body that is not JSON, and
the summary's own client: only the caller's credentials and API version go with it."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("starlette")

from glyphpack import Message, Sent, Text, UsageError, recall_tool
from glyphpack._compaction.sdk_summary import SUMMARY_OUTPUT_TOKENS
from glyphpack._proxy.conversations import BadRequest
from glyphpack._proxy.server import (
    UPSTREAMS,
    UpstreamSummary,
    _error_message,
    _parsed,
    continued_request,
    error_body,
    error_event,
    upstream_url,
    with_instruction,
)
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn

Json = dict[str, Any]
SAY = {"type": "text", "text": "Summarize now."}


def test_the_instruction_joins_the_last_user_message_in_anthropic_and_follows_it_elsewhere() -> None:
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    assert with_instruction("anthropic", [{"role": "user", "content": "hi"}], "Summarize now.") == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, SAY]}]
    assert with_instruction("anthropic", [{"role": "user", "content": [result]}], "Summarize now.") == [
        {"role": "user", "content": [result, SAY]}]  # the results stay first
    assert with_instruction("anthropic", [{"role": "user", "content": None}], "Summarize now.") == [{"role": "user", "content": [SAY]}]
    answer = {"role": "assistant", "content": "done"}
    assert with_instruction("anthropic", [answer], "Summarize now.") == [answer, {"role": "user", "content": [SAY]}]
    assert with_instruction("anthropic", [], "Summarize now.") == [{"role": "user", "content": [SAY]}]
    assert with_instruction("anthropic", ["odd"], "Summarize now.") == ["odd", {"role": "user", "content": [SAY]}]
    assert with_instruction("openai-chat", [{"role": "user", "content": "hi"}], "Summarize now.") == [
        {"role": "user", "content": "hi"}, {"role": "user", "content": "Summarize now."}]
    assert with_instruction("openai-responses", "hi", "Summarize now.") == [
        {"role": "user", "content": "hi"}, {"role": "user", "content": "Summarize now."}]
    assert with_instruction("openai-chat", {"not": "a list"}, "Summarize now.") == [{"role": "user", "content": "Summarize now."}]


def test_a_continued_request_before_a_compaction_is_the_clients_with_the_instruction_not_streamed_and_capped() -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64_000, "stream": True, "system": "Be terse.",
            "thinking": {"type": "enabled", "budget_tokens": 2_000}, "messages": [{"role": "user", "content": "hi"}]}
    request = continued_request("anthropic", body, Sent((), prefix=0), "Summarize now.", "claude-sonnet-4-5")
    assert request == {"model": "claude-sonnet-4-5", "system": "Be terse.", "thinking": body["thinking"],
                       "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, SAY]}],
                       "max_tokens": SUMMARY_OUTPUT_TOKENS + 2_000}
    chat = {"model": "gpt-4o", "max_completion_tokens": 10, "max_tokens": 10, "stream": True, "stream_options": {"include_usage": True},
            "thinking": {"budget_tokens": 2_000}, "messages": [{"role": "user", "content": "hi"}]}
    assert continued_request("openai-chat", chat, Sent((), prefix=0), "Summarize now.", "gpt-4o") == {
        "model": "gpt-4o", "thinking": {"budget_tokens": 2_000},
        "messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "Summarize now."}],
        "max_completion_tokens": SUMMARY_OUTPUT_TOKENS}  # only Anthropic's thinking budget adds to the cap
    responses = {"model": "gpt-5", "max_output_tokens": 10, "input": "hi", "stream": True}
    assert continued_request("openai-responses", responses, Sent((), prefix=0), "Summarize now.", "gpt-5") == {
        "model": "gpt-5", "input": [{"role": "user", "content": "hi"}, {"role": "user", "content": "Summarize now."}],
        "max_output_tokens": SUMMARY_OUTPUT_TOKENS}
    odd = {**body, "thinking": {"budget_tokens": "lots"}}
    assert continued_request("anthropic", odd, Sent((), prefix=0), "Summarize now.", "claude-sonnet-4-5")["max_tokens"] == SUMMARY_OUTPUT_TOKENS


def test_a_continued_request_after_a_compaction_is_the_sessions_with_the_recall_tool_and_its_cache_marks_capped() -> None:
    from glyphpack._history.apis import provider_api
    from glyphpack._providers.resolve import resolve

    sent = Sent(tuple(Message(role, (Text(f"{role} {n}"),)) for n in range(3) for role in ("user", "assistant")), prefix=2)
    tool = {"name": "Bash", "description": "run", "input_schema": {"type": "object"}}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": [tool], "messages": [{"role": "user", "content": "long ago"}]}
    request = continued_request("anthropic", body, sent, "Summarize now.", "claude-sonnet-4-5")
    built = provider_api("anthropic").build("claude-sonnet-4-5", (*sent.messages, Message("user", (Text("Summarize now."),))), 2, resolve("claude-sonnet-4-5"))
    assert request["messages"] == built["messages"] and request["tools"] == [tool, recall_tool("anthropic")]
    assert request["max_tokens"] == SUMMARY_OUTPUT_TOKENS
    marked = {"type": "ephemeral"}
    cached = {**body, "system": [{"type": "text", "text": "a", "cache_control": marked}, {"type": "text", "text": "b", "cache_control": marked}],
              "tools": [{**tool, "cache_control": marked}]}
    capped = continued_request("anthropic", cached, sent, "Summarize now.", "claude-sonnet-4-5")
    assert json.dumps(capped).count('"cache_control"') == 4  # Anthropic refuses a fifth; the client's own stay
    assert capped["system"] == cached["system"] and capped["tools"][0] == cached["tools"][0]
    own = {**body, "tools": [{**tool, "name": "glyphpack_recall"}]}
    assert continued_request("anthropic", own, sent, "Summarize now.", "claude-sonnet-4-5")["tools"] == own["tools"]  # the client's own: no second


def test_the_upstream_is_a_known_provider_or_an_http_url() -> None:
    assert [upstream_url(name) for name in ("anthropic", "openai", "gemini")] == [UPSTREAMS["anthropic"], UPSTREAMS["openai"], UPSTREAMS["gemini"]]
    assert upstream_url("http://127.0.0.1:9000/") == "http://127.0.0.1:9000"
    assert upstream_url("https://gateway.example/v2//") == "https://gateway.example/v2"
    for bad in ("ftp://example.com", "api.anthropic.com", "Anthropic"):
        with pytest.raises(UsageError) as raised:
            upstream_url(bad)
        assert str(raised.value) == f"--upstream must be anthropic, openai, gemini or an http(s) URL, not {bad!r}"


def test_errors_are_in_the_shape_each_apis_clients_parse() -> None:
    assert [error_body("gemini", status, "m")["error"]["status"] for status in (400, 403, 404, 502, 500)] == [
        "INVALID_ARGUMENT", "PERMISSION_DENIED", "NOT_FOUND", "UNAVAILABLE", "INTERNAL"]
    assert error_body("gemini", 403, "m") == {"error": {"code": 403, "message": "m", "status": "PERMISSION_DENIED"}}
    assert [error_body("anthropic", status, "m")["error"]["type"] for status in (400, 403, 502, 413)] == [
        "invalid_request_error", "permission_error", "api_error", "api_error"]
    assert error_body("anthropic", 400, "m") == {"type": "error", "error": {"type": "invalid_request_error", "message": "m"}}
    for api in ("openai-chat", "openai-responses"):
        assert [error_body(api, status, "m")["error"]["type"] for status in (400, 403, 502)] == ["invalid_request_error", "permission_error", "server_error"]
        assert error_body(api, 400, "m") == {"error": {"message": "m", "type": "invalid_request_error", "param": None, "code": None}}
    assert error_event("anthropic", "m") == b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"m"}}\n\n'
    assert error_event("openai-responses", "m") == b'event: error\ndata: {"type":"error","code":"server_error","message":"m","param":null}\n\n'
    assert error_event("openai-chat", "m") == b'data: {"error":{"message":"m","type":"server_error","param":null,"code":null}}\n\n'


def test_an_upstream_errors_message_is_read_only_where_it_is_one() -> None:
    assert _error_message({"error": {"message": "too long"}}) == "too long"
    assert _error_message({"error": {"message": 5}}) is None
    assert _error_message({"error": "too long"}) is None
    assert _error_message({}) is None and _error_message(None) is None


def test_a_body_that_is_not_json_or_too_deep_is_a_bad_request() -> None:
    assert _parsed(b'{"a": 1}') == {"a": 1}
    with pytest.raises(BadRequest) as raised:
        _parsed(b"{not json")
    assert str(raised.value) == "the request body is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    with pytest.raises(BadRequest) as raised:
        _parsed(b"[" * 100_000 + b"]" * 100_000)
    assert str(raised.value) == "the request body is nested too deep to read"


HEADERS = {"X-Api-Key": "sk-ant-caller", "Authorization": "Bearer sk-caller", "Anthropic-Version": "2023-06-01", "anthropic-beta": "b1",
           "OpenAI-Organization": "org", "openai-project": "p", "api-key": "azure", "x-goog-api-key": "g", "cookie": "session=1",
           "x-glyphpack-conversation": "c", "user-agent": "harness/1.0", "content-type": "application/json"}


def test_the_summary_carries_only_the_callers_credentials_and_api_version() -> None:
    summary = UpstreamSummary("http://127.0.0.1:9", "anthropic", "claude-haiku-4-5", HEADERS)
    assert summary.headers == {"X-Api-Key": "sk-ant-caller", "Authorization": "Bearer sk-caller", "Anthropic-Version": "2023-06-01",
                               "anthropic-beta": "b1", "OpenAI-Organization": "org", "openai-project": "p", "api-key": "azure", "x-goog-api-key": "g"}
    assert summary.continued(Sent(()), "Summarize now.") == ""  # no client body: nothing to continue


def test_each_apis_summary_client_goes_to_the_proxys_upstream_with_the_callers_key() -> None:
    pytest.importorskip("anthropic")
    pytest.importorskip("openai")
    anthropic_client = UpstreamSummary("http://127.0.0.1:9", "anthropic", "m", {"x-api-key": "sk-ant"})._client()
    assert (anthropic_client.api_key, anthropic_client.auth_token, str(anthropic_client.base_url)) == ("sk-ant", None, "http://127.0.0.1:9")
    bearer = UpstreamSummary("http://127.0.0.1:9", "anthropic", "m", {"authorization": "Bearer tok"})._client()
    assert (bearer.api_key, bearer.auth_token) == (None, "tok")
    both = UpstreamSummary("http://127.0.0.1:9", "anthropic", "m", {"authorization": "Bearer tok", "x-api-key": "sk-ant"})._client()
    assert (both.api_key, both.auth_token) == ("sk-ant", None)  # one credential: the key
    openai_client = UpstreamSummary("http://127.0.0.1:9", "openai-chat", "m", {"authorization": "Bearer sk-oa"})._client()
    assert (openai_client.api_key, str(openai_client.base_url)) == ("sk-oa", "http://127.0.0.1:9/v1/")
    assert UpstreamSummary("http://127.0.0.1:9", "openai-responses", "m", {})._client().api_key == "unused"
    assert openai_client.max_retries == anthropic_client.max_retries == 2


def test_a_continued_summary_is_the_upstreams_answer_and_empty_when_it_refuses_or_is_down(capsys: pytest.CaptureFixture[str]) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    with FakeUpstream(FakeModel([Turn(text="The summary.")])) as upstream:
        summary = UpstreamSummary(upstream.url, "anthropic", "claude-sonnet-4-5", {"x-api-key": "sk-ant", "cookie": "c"}, body, "/v1/messages")
        assert summary.continued(Sent((), prefix=0), "Summarize now.") == "The summary."
        assert upstream.headers[-1]["x-api-key"] == "sk-ant" and "cookie" not in upstream.headers[-1]
        assert upstream.headers[-1]["accept-encoding"] == "identity"
        wrong = UpstreamSummary(upstream.url, "anthropic", "claude-sonnet-4-5", {}, body, "/v1/nowhere")
        assert wrong.continued(Sent((), prefix=0), "Summarize now.") == ""  # a 404: the text prompt is used instead
    assert capsys.readouterr().err == ""
    down = UpstreamSummary("http://127.0.0.1:9", "anthropic", "claude-sonnet-4-5", {}, body, "/v1/messages")
    assert down.continued(Sent((), prefix=0), "Summarize now.") == ""
    assert capsys.readouterr().err == ("glyphpack proxy: the summary that continues the conversation failed (ConnectError); "
                                       "summarizing the text instead\n")


def test_the_summary_clients_carry_the_callers_headers_and_gemini_its_key() -> None:
    pytest.importorskip("anthropic")
    pytest.importorskip("openai")
    pytest.importorskip("google.genai")
    anthropic_client = UpstreamSummary("http://127.0.0.1:9", "anthropic", "m", {"x-api-key": "k", "anthropic-version": "v"})._client()
    assert anthropic_client._custom_headers == {"x-api-key": "k", "anthropic-version": "v"}
    openai_client = UpstreamSummary("http://127.0.0.1:9", "openai-chat", "m", {"authorization": "Bearer k", "openai-project": "p"})._client()
    assert openai_client._custom_headers == {"authorization": "Bearer k", "openai-project": "p"}
    for headers, key in (({"x-goog-api-key": "g", "authorization": "Bearer t"}, "g"), ({"authorization": "Bearer t"}, "t"), ({}, "unused")):
        gemini = UpstreamSummary("http://127.0.0.1:9", "gemini", "m", headers)._client()._api_client
        assert gemini.api_key == key and gemini._http_options.base_url == "http://127.0.0.1:9"
        assert {k: v for k, v in gemini._http_options.headers.items() if k in headers} == headers


def test_a_gemini_stream_error_is_googles_shape() -> None:
    assert error_event("gemini", "m") == b'data: {"error":{"code":502,"message":"m","status":"UNAVAILABLE"}}\n\n'


def _request(path: str = "/v1/messages", headers: dict[str, str] | None = None) -> Any:
    from starlette.requests import Request

    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request({"type": "http", "method": "POST", "path": path, "query_string": b"", "headers": raw, "scheme": "http", "server": ("proxy", 80)})


def test_the_summarizer_is_the_requests_model_or_the_one_named_and_continues_only_its_own_conversation(tmp_path: Any) -> None:
    from glyphpack import Workspace
    from glyphpack._providers.catalog import CONTEXT_WINDOWS
    from glyphpack._proxy.conversations import ProxySettings, Recorder
    from glyphpack._proxy.server import SAME_MODEL, Proxy

    body = {"model": "claude-sonnet-4-5", "messages": []}
    same = Proxy(Recorder(Workspace(tmp_path / "a")), "anthropic", summarizer=SAME_MODEL)._summarizer("anthropic", body, _request(headers={"x-api-key": "k"}))
    assert same is not None and same.fn.model == "claude-sonnet-4-5" and same.fn.body is body and same.fn.path == "/v1/messages"
    assert same.continues == same.fn.continued and same.window == CONTEXT_WINDOWS["anthropic"] and same.fn.headers == {"x-api-key": "k"}
    named = Proxy(Recorder(Workspace(tmp_path / "b")), "anthropic", summarizer="claude-haiku-4-5")._summarizer("anthropic", body, _request())
    assert named is not None and named.fn.model == "claude-haiku-4-5" and named.continues is None  # another model gets the text
    told = Proxy(Recorder(Workspace(tmp_path / "c"), ProxySettings(context_window=24_000, threshold=9_000)), "anthropic")
    assert told._summarizer("anthropic", body, _request()).window == 24_000  # type: ignore[union-attr]
    gemini = Proxy(Recorder(Workspace(tmp_path / "d")), "gemini")._summarizer("gemini", {"model": "gemini-2.5-flash", "contents": []}, _request())
    assert gemini is not None and gemini.continues is None  # Gemini's summary is of the text
    off = Proxy(Recorder(Workspace(tmp_path / "e")), "anthropic", summarizer=None)
    assert off._summarizer("anthropic", body, _request()) is None
    assert Proxy(Recorder(Workspace(tmp_path / "f")), "anthropic")._summarizer("anthropic", ["not", "a", "body"], _request()) is None
    assert Proxy(Recorder(Workspace(tmp_path / "g")), "anthropic")._summarizer("anthropic", {"model": 5}, _request()) is None
