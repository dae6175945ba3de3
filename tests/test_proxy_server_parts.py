"""The proxy server's pure parts, exact: the summary request that continues a client's
conversation, the instruction added to each API's history, the upstream's URL, the
errors in each API's shape (whole and as a stream event), a body that is not JSON, and
the summary's own client: only the caller's credentials and API version go with it."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("starlette")

from glyphpack import CompactionError, Message, Sent, Text, UsageError, recall_tool
from glyphpack._compaction.sdk_summary import SUMMARY_OUTPUT_TOKENS
from glyphpack._proxy.identity import BadRequest
from glyphpack._proxy.server import UPSTREAMS, _parsed, error_body, error_event, upstream_url
from glyphpack._proxy.summaries import UpstreamSummary, continued_request, error_message, with_instruction
from glyphpack.testing.fake import SUMMARY_REQUEST, FakeModel, FakeUpstream, Turn

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
    from glyphpack._providers.resolve import resolve
    from glyphpack._wire import provider_api

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
    assert error_message({"error": {"message": "too long"}}) == "too long"
    assert error_message({"error": {"message": 5}}) is None
    assert error_message({"error": "too long"}) is None
    assert error_message({}) is None and error_message(None) is None


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


#: Each API's client request as the proxy received it: (path, query, credential headers).
CALLERS: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    "anthropic": ("/v1/messages", {}, {"x-api-key": "sk-ant-caller", "anthropic-version": "2023-06-01"}),
    "openai-chat": ("/v1/chat/completions", {}, {"authorization": "Bearer sk-oa-caller", "openai-project": "p"}),
    "openai-responses": ("/v1/responses", {}, {"authorization": "Bearer sk-oa-caller"}),
    "gemini": ("/v1beta/models/gemini-2.5-flash:streamGenerateContent", {"key": "AIza-caller", "alt": "sse"}, {}),
}
MODELS = {"anthropic": "claude-sonnet-4-5", "openai-chat": "gpt-5.4", "openai-responses": "gpt-5.4", "gemini": "gemini-2.5-flash"}


@pytest.mark.parametrize("api", list(CALLERS))
def test_a_summary_goes_by_the_proxys_own_client_with_the_callers_credentials_in_the_form_it_used(api: str) -> None:
    """No provider SDK: the ``proxy`` extra alone serves every API's summaries (Gemini CLI
    through the proxy died at its first summary on ``import google.genai``). A Gemini
    caller's ``?key=`` goes in the query, as it came (its summaries were sent with the key
    ``unused`` and always refused)."""
    import builtins

    path, query, headers = CALLERS[api]
    real_import = builtins.__import__

    def no_sdk(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] in ("anthropic", "openai", "google"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    with FakeUpstream(FakeModel([Turn(text="unused")])) as upstream:
        summary = UpstreamSummary(upstream.url, api, MODELS[api], {**headers, "cookie": "c"}, None, path, query)  # type: ignore[arg-type]
        builtins.__import__ = no_sdk
        try:
            text = summary(SUMMARY_REQUEST + " please.\n\n[user] fix the test")
        finally:
            builtins.__import__ = real_import
        assert text == "Summary: fix the test."
        expected_path = "/v1beta/models/gemini-2.5-flash:generateContent" if api == "gemini" else path
        assert upstream.paths == [expected_path]
        assert upstream.queries == (["key=AIza-caller"] if api == "gemini" else [""])
        sent = upstream.headers[-1]
        assert {k: sent[k] for k in headers} == headers and "cookie" not in sent and sent["accept-encoding"] == "identity"
        body = upstream.model.requests[-1]
        cap = body.get("max_tokens") or body.get("max_completion_tokens") or body.get("max_output_tokens") or body["generationConfig"]["maxOutputTokens"]
        assert cap == SUMMARY_OUTPUT_TOKENS and "stream" not in body
    assert (summary.calls, summary.billed_output) == (1, 50)  # counted as the SDK summarizer counts


@pytest.mark.parametrize("fault", ["429", "529", "401", "garbage", "empty"])
@pytest.mark.parametrize("api", list(CALLERS))
def test_a_refused_summary_is_an_error_naming_the_status_and_never_the_key(api: str, fault: str) -> None:
    path, query, headers = CALLERS[api]
    with FakeUpstream(FakeModel([Turn(text="unused")], summary_faults={0: fault})) as upstream:
        summary = UpstreamSummary(upstream.url, api, MODELS[api], headers, None, path, query)  # type: ignore[arg-type]
        with pytest.raises(CompactionError) as refused:
            summary(SUMMARY_REQUEST + ".\n\n[user] hi")
    empty = ("the upstream's answer could not be read: a Chat Completions response with neither content" if api == "openai-chat"
             else f"{MODELS[api]} answered a summary request with no text")
    expected = {"garbage": "the upstream answered 200: no JSON error", "empty": empty}
    assert str(refused.value).startswith(expected.get(fault, f"the upstream answered {fault}: "))
    assert not any(secret in str(refused.value) for secret in ("sk-ant-caller", "sk-oa-caller", "AIza-caller"))
    down = UpstreamSummary("http://127.0.0.1:9", api, MODELS[api], headers, None, path, query)  # type: ignore[arg-type]
    with pytest.raises(CompactionError, match="^the upstream failed: ConnectError$"):
        down(SUMMARY_REQUEST + ".\n\n[user] hi")


def test_a_continued_summary_is_the_upstreams_answer_empty_when_malformed_and_an_error_when_refused() -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    with FakeUpstream(FakeModel([Turn(text="The summary.")])) as upstream:
        summary = UpstreamSummary(upstream.url, "anthropic", "claude-sonnet-4-5", {"x-api-key": "sk-ant", "cookie": "c"}, body, "/v1/messages")
        assert summary.continued(Sent((), prefix=0), "Summarize now.") == "The summary."
        assert upstream.headers[-1]["x-api-key"] == "sk-ant" and "cookie" not in upstream.headers[-1]
        assert upstream.headers[-1]["accept-encoding"] == "identity"
        malformed = {**body, "messages": [{"role": "assistant", "content": "first"}]}  # the fake refuses it with a 400
        assert UpstreamSummary(upstream.url, "anthropic", "claude-sonnet-4-5", {}, malformed, "/v1/messages").continued(Sent(()), "Summarize now.") == ""
        wrong = UpstreamSummary(upstream.url, "anthropic", "claude-sonnet-4-5", {}, body, "/v1/nowhere")
        with pytest.raises(CompactionError, match="^the upstream answered 404: no such path$"):
            wrong.continued(Sent((), prefix=0), "Summarize now.")
    down = UpstreamSummary("http://127.0.0.1:9", "anthropic", "claude-sonnet-4-5", {}, body, "/v1/messages")
    with pytest.raises(CompactionError, match="^the upstream failed: ConnectError$"):
        down.continued(Sent((), prefix=0), "Summarize now.")


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


def test_every_upstream_pool_and_summary_request_shares_one_tls_context(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TLS context reads its CA bundle when it is built (20-40 ms): built for each of
    the proxy's sixteen pools, it made every start 0.7 s, and each summary request paid
    it again. The proxy reads it once, as it starts."""
    import ssl

    from starlette.requests import Request

    from glyphpack import Workspace
    from glyphpack._proxy.conversations import Recorder
    from glyphpack._proxy.server import UPSTREAM_POOLS, Proxy, Running

    loads: list[ssl.SSLContext] = []
    read = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(context)
        read(context, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    proxy = Proxy(Recorder(Workspace(tmp_path)), "http://127.0.0.1:9")
    assert UPSTREAM_POOLS > 1
    with FakeUpstream(FakeModel([Turn(text="unused")])) as upstream, Running(proxy):
        assert len(loads) == 1
        scope = {"type": "http", "method": "POST", "path": "/v1/messages", "headers": [(b"x-api-key", b"sk-ant-caller")], "query_string": b""}
        summarizer = proxy._summarizer("anthropic", {"model": MODELS["anthropic"]}, Request(scope))
        assert summarizer is not None and isinstance(summarizer.fn, UpstreamSummary)
        summarizer.fn.upstream = upstream.url
        assert summarizer.fn(SUMMARY_REQUEST + " please.\n\n[user] fix the test") == "Summary: fix the test."
        assert len(loads) == 1


def test_a_running_proxy_stops_without_waiting_for_its_next_tick(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn looks for an exit between ticks 0.1 s apart: every stop waited it out (10 s
    of the default test run). With ticks 60 s apart, a stop that waits for the next one
    leaves the server's thread running past ``stop``'s 30 s."""
    from glyphpack import Workspace
    from glyphpack._proxy import server
    from glyphpack._proxy.conversations import Recorder

    monkeypatch.setattr(server, "TICK", 60.0)
    running = server.Running(server.Proxy(Recorder(Workspace(tmp_path)), "http://127.0.0.1:9"))
    assert running.thread.is_alive()
    running.stop()
    assert not running.thread.is_alive()


def test_a_running_proxys_ticks_are_counted_as_uvicorn_counts_them(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Running`` waits between uvicorn's ticks itself (so that ``stop`` can cut the wait
    short): uvicorn renews the date header and does its other periodic work from the
    tick's count, which must go 0, 1, 2, ... as in uvicorn's own loop."""
    import threading

    import uvicorn

    from glyphpack import Workspace
    from glyphpack._proxy import server
    from glyphpack._proxy.conversations import Recorder

    counted: list[int] = []
    enough = threading.Event()
    tick = uvicorn.Server.on_tick

    async def on_tick(self: uvicorn.Server, counter: int) -> bool:
        counted.append(counter)
        if len(counted) >= 12:
            enough.set()
        return await tick(self, counter)

    monkeypatch.setattr(uvicorn.Server, "on_tick", on_tick)
    monkeypatch.setattr(server, "TICK", 0.002)
    with server.Running(server.Proxy(Recorder(Workspace(tmp_path)), "http://127.0.0.1:9")):
        assert enough.wait(30)
    assert counted[:12] == list(range(12))


def test_a_summary_without_the_proxys_tls_context_checks_certificates_as_httpx_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given no context (outside a running proxy), a summary request's client verifies
    the upstream's certificate: never ``verify=False``."""
    import ssl

    import httpx

    seen: list[object] = []
    client = httpx.Client

    def spied(*args: Any, **kwargs: Any) -> httpx.Client:
        seen.append(kwargs.get("verify", True))
        return client(*args, **kwargs)

    monkeypatch.setattr(httpx, "Client", spied)
    context = ssl.create_default_context()
    with FakeUpstream(FakeModel([Turn(text="unused")] * 2)) as upstream:
        for tls in (None, context):
            summary = UpstreamSummary(upstream.url, "anthropic", MODELS["anthropic"], {"x-api-key": "sk-ant-caller"}, tls=tls)
            assert summary(SUMMARY_REQUEST + " please.\n\n[user] fix the test") == "Summary: fix the test."
    assert seen == [True, context]


def test_the_upstream_connections_stay_open_for_more_clients_than_httpx_keeps(tmp_path: Any) -> None:
    """24 clients at once, each asking twice in its conversation on its own connection (as
    an SDK's client keeps one): the second time every request goes on a connection the
    first opened (httpx keeps 20 open by default: 4 more handshakes, with a provider TLS
    ones). The second requests go before they are read (the forecast clears them), in
    their client connection's pool."""
    import threading

    import httpx

    from glyphpack import Workspace
    from glyphpack._proxy.conversations import Recorder
    from glyphpack._proxy.server import Proxy, Running

    clients = 24
    model = FakeModel([Turn(text="a long answer " * 5)] * (2 * clients))
    opened = 0
    with FakeUpstream(model, event_delay=0.05) as upstream, Workspace(tmp_path) as workspace, Running(Proxy(Recorder(workspace), upstream.url, summarizer=None)) as proxy:
        statuses: list[int] = []
        connections = [httpx.Client(base_url=proxy.url, headers={"x-api-key": "sk-many"}, timeout=30) for _ in range(clients)]

        def ask(number: int, round_: int) -> None:
            history = [{"role": "user", "content": f"client {number}"}]
            if round_:
                history += [{"role": "assistant", "content": "a long answer " * 5}, {"role": "user", "content": "and then?"}]
            body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "stream": True, "messages": history}
            statuses.append(connections[number].post("/v1/messages", json=body).status_code)

        for round_ in range(2):
            threads = [threading.Thread(target=ask, args=(n, round_)) for n in range(clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert statuses == [200] * clients * (round_ + 1)
            opened = opened if round_ else len(upstream.connections)
        for connection in connections:
            connection.close()
        assert opened > 20  # more at once than httpx keeps open (one each, when all overlap)
        assert len(upstream.connections) == opened  # none opened the second time
