"""The proxy's HTTP app in-process (Starlette's test client; the upstream an httpx mock
transport that records what reached it): each route, what goes upstream byte for byte
and which headers, the answers the client gets (the provider's own, a 502 that says
why, a refusal in the API's shape), the one retry after "too long", a stream passed on
as it came and recorded, and the log's record of each request."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
import httpx
from starlette.testclient import TestClient
from test_proxy_clients import OPENING, SETTINGS, _answer, _body, _too_long, _words

from glyphpack import Workspace
from glyphpack import _errors as glyphpack_errors
from glyphpack._proxy.conversations import Recorder
from glyphpack._proxy.log import ProxyLog
from glyphpack._proxy.server import STATUS_PATH, Proxy
from glyphpack.testing.fake import count_tokens, sse_events

Json = dict[str, Any]
KEY = {"x-api-key": "sk-ant-app-test"}


class Upstream:
    """A mock provider: ``answer(request) -> httpx.Response`` for each request, which it
    keeps (``requests``, each read whole)."""

    def __init__(self, answer: Callable[[httpx.Request], httpx.Response]):
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        return self.answer(request)

    def bodies(self) -> list[Json]:
        return [json.loads(r.content) for r in self.requests]


def _app(tmp_path: Path, upstream: Upstream, **options: Any) -> tuple[TestClient, Proxy, io.StringIO]:
    lines = io.StringIO()
    proxy = Proxy(Recorder(Workspace(tmp_path / "ws"), SETTINGS), "https://provider.example", transport=httpx.MockTransport(upstream),
                  log=ProxyLog(lines), **options)
    return TestClient(proxy.app), proxy, lines


def _json_answer(text: str = "The auth service.") -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(200, json=_answer(text, to=json.loads(request.content)))


def test_a_request_goes_upstream_as_it_came_with_the_callers_headers_and_its_answer_comes_back_whole(tmp_path: Path) -> None:
    upstream = Upstream(_json_answer())
    client, proxy, lines = _app(tmp_path, upstream)
    body = _body([{"role": "user", "content": OPENING}])
    raw = json.dumps(body, indent=1).encode()  # the client's own bytes, spacing and all
    with client:
        response = client.post("/v1/messages?beta=true", content=raw, headers={**KEY, "anthropic-version": "2023-06-01", "keep-alive": "timeout=5",
                                                                              "content-type": "application/json", "accept-encoding": "gzip"})
    assert response.status_code == 200 and response.json()["content"][0]["text"] == "The auth service."
    (sent,) = upstream.requests
    assert str(sent.url) == "https://provider.example/v1/messages?beta=true" and sent.method == "POST"
    assert sent.content == raw  # not re-encoded: below the threshold the client's body is forwarded untouched
    assert sent.headers["x-api-key"] == "sk-ant-app-test" and sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["accept-encoding"] == "identity" and "keep-alive" not in sent.headers
    conversation = proxy.recorder.workspace.tree.conversations()[0].id
    record = lines.getvalue()
    assert record.startswith(f"glyphpack proxy: {conversation}/main anthropic -> 200 in ") and record.count("\n") == 1
    assert f"provider: {count_tokens(body):,} in, 50 out" in record and "sk-ant" not in record
    stored = proxy.recorder.workspace.load(conversation, "main").messages
    assert [m.text for m in stored] == ["You are terse.", OPENING, "The auth service."]


def test_gemini_is_routed_by_the_model_in_its_path_and_other_methods_pass(tmp_path: Path) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith(":countTokens"):
            return httpx.Response(200, json={"totalTokens": 12})
        return httpx.Response(200, json={"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi."}]}, "finishReason": "STOP"}],
                                         "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 2}})

    upstream = Upstream(answer)
    client, proxy, lines = _app(tmp_path, upstream)
    body = {"contents": [{"role": "user", "parts": [{"text": OPENING}]}]}
    with client:
        said = client.post("/v1beta/models/gemini-2.5-flash:generateContent", json=body, headers={"x-goog-api-key": "g"})
        counted = client.post("/v1beta/models/gemini-2.5-flash:countTokens", json=body)
        bare = client.post("/v1beta/models/:generateContent", json=body)
    assert said.json()["candidates"][0]["content"]["parts"] == [{"text": "Hi."}] and counted.json() == {"totalTokens": 12}
    assert [r.url.path for r in upstream.requests] == ["/v1beta/models/gemini-2.5-flash:generateContent", "/v1beta/models/gemini-2.5-flash:countTokens",
                                                       "/v1beta/models/:generateContent"]
    assert [json.loads(r.content) for r in upstream.requests] == [body, body, body]  # no model put in the body
    assert bare.status_code == 200
    (conversation,) = proxy.recorder.workspace.tree.conversations()
    assert [m.text for m in proxy.recorder.workspace.load(conversation.id, "main").messages] == [OPENING, "Hi."]
    assert lines.getvalue().count("\n") == 1 and " gemini -> 200 in " in lines.getvalue() and "provider: 12 in, 2 out" in lines.getvalue()


def test_the_status_and_other_paths(tmp_path: Path) -> None:
    upstream = Upstream(lambda request: httpx.Response(200, json={"data": [{"id": "claude-sonnet-4-5"}]}, headers={"x-request-id": "r1"}))
    client, proxy, _ = _app(tmp_path, upstream)
    with client:
        models = client.get("/v1/models?limit=5", headers=KEY)
        status = client.get(STATUS_PATH)
    assert models.json() == {"data": [{"id": "claude-sonnet-4-5"}]} and models.headers["x-request-id"] == "r1"
    assert str(upstream.requests[0].url) == "https://provider.example/v1/models?limit=5" and upstream.requests[0].method == "GET"
    assert status.json() == {**proxy.log.totals(b""), "requests": 0} and len(upstream.requests) == 1  # the status is the proxy's own


def test_an_upstream_that_cannot_be_reached_is_a_502_in_the_apis_shape_that_says_why(tmp_path: Path) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    client, _, lines = _app(tmp_path, Upstream(down))
    with client:
        messages = client.post("/v1/messages", json=_body([{"role": "user", "content": OPENING}]), headers=KEY)
        chat = client.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": OPENING}]})
        counted = client.post("/v1/messages/count_tokens", json=_body([{"role": "user", "content": OPENING}]))
        other = client.get("/v1/models")
    why = "glyphpack proxy: the upstream https://provider.example failed: connection refused"
    assert (messages.status_code, messages.json()) == (502, {"type": "error", "error": {"type": "api_error", "message": why}})
    assert (chat.status_code, chat.json()) == (502, {"error": {"message": why, "type": "server_error", "param": None, "code": None}})
    assert (counted.status_code, counted.json()) == (502, {"type": "error", "error": {"type": "api_error", "message": why}})
    assert (other.status_code, other.json()) == (502, {"error": {"message": why}})
    logged = lines.getvalue().splitlines()
    assert len(logged) == 2 and all(" -> 502 in " in line and line.endswith(" sent; the upstream failed: ConnectError") for line in logged)


def test_a_body_the_proxy_cannot_read_is_refused_in_the_apis_shape_and_logged(tmp_path: Path) -> None:
    upstream = Upstream(_json_answer())
    client, _, lines = _app(tmp_path, upstream)
    with client:
        refused = client.post("/v1/responses", content=b"{not json", headers={"content-type": "application/json"})
        counted = client.post("/v1/messages/count_tokens", content=b"[[")
    assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("glyphpack proxy: the request body is not JSON: ")
    assert counted.status_code == 400 and counted.json()["type"] == "error"
    assert upstream.requests == [] and lines.getvalue().startswith("glyphpack proxy: (not recorded) openai-responses -> 400 in ")
    assert lines.getvalue().rstrip().endswith("refused by the proxy")


def test_too_long_is_compacted_and_retried_once_and_another_error_comes_back_as_the_provider_sent_it(tmp_path: Path) -> None:
    history: list[Json] = [{"role": "user", "content": OPENING}]
    for n in range(12):
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": f"cat {n}.log"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": _words("alpha", n, 150)}]}]

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if len(upstream.requests) == 1:
            return httpx.Response(400, json=_too_long(body))
        return httpx.Response(200, json=_answer("Found it.", to=body))

    upstream = Upstream(answer)
    client, _, lines = _app(tmp_path, upstream, summarizer=None)
    with client:
        response = client.post("/v1/messages", json=_body(history), headers=KEY)
    assert response.status_code == 200 and response.json()["content"][0]["text"] == "Found it."
    first, retry = upstream.bodies()
    assert count_tokens(retry) < count_tokens(first) and retry["model"] == first["model"]
    assert " -> 200 in " in lines.getvalue() and "(compacted)" in lines.getvalue()
    refusing = Upstream(lambda request: httpx.Response(400, content=b"plain words", headers={"x-why": "bad"}))
    client, _, _ = _app(tmp_path / "other", refusing)
    with client:
        refused = client.post("/v1/messages", json=_body(history), headers=KEY)
    assert (refused.status_code, refused.content, refused.headers["x-why"]) == (400, b"plain words", "bad") and len(refusing.requests) == 1


def test_a_stream_reaches_the_client_byte_for_byte_and_is_recorded(tmp_path: Path) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        stream = b"".join(sse_events("anthropic", _answer("Streamed.", to=json.loads(request.content)), usage=True))
        return httpx.Response(200, content=stream, headers={"content-type": "text/event-stream"})

    upstream = Upstream(answer)
    client, proxy, lines = _app(tmp_path, upstream)
    body = {**_body([{"role": "user", "content": OPENING}]), "stream": True}
    with client:
        response = client.post("/v1/messages", json=body, headers=KEY)
    assert response.content == b"".join(sse_events("anthropic", _answer("Streamed.", to=body), usage=True))
    (conversation,) = proxy.recorder.workspace.tree.conversations()
    assert [m.text for m in proxy.recorder.workspace.load(conversation.id, "main").messages][-1] == "Streamed."
    assert f"provider: {count_tokens(body):,} in" in lines.getvalue() and " anthropic -> 200 in " in lines.getvalue()


def _accumulated(stream: bytes) -> Json:
    from glyphpack._proxy.streams import ACCUMULATORS

    accumulator = ACCUMULATORS["anthropic"]()
    accumulator.feed(stream)
    result = accumulator.result()
    assert result is not None
    return result


def _long_history() -> list[Json]:
    """Past the proxy's threshold: the first request is compacted, so the recall is offered."""
    history: list[Json] = [{"role": "user", "content": OPENING}]
    for n in range(16):
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": f"cat {n}.log"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": _words("alpha", n, 250)}]}]
    return history


def _recall_then(last: Callable[[Json], httpx.Response], stream: bool) -> Upstream:
    """A provider that answers the first request with a recall call (streamed or not)
    and every later one with ``last(body)``."""
    from glyphpack import RECALL_TOOL
    from glyphpack.testing.fake import Turn, answer_body

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if len(upstream.requests) > 1:
            return last(body)
        recalled = answer_body("anthropic", Turn(text="Let me look again.", calls=((RECALL_TOOL, {"ref": "t3"}),)), 1, count_tokens(body))
        if stream:
            return httpx.Response(200, content=b"".join(sse_events("anthropic", recalled, usage=True)), headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=recalled)

    upstream = Upstream(answer)
    return upstream


@pytest.mark.parametrize("stream", [False, True])
def test_a_recall_is_answered_by_the_proxy_and_the_client_gets_one_answer_without_it(tmp_path: Path, stream: bool) -> None:
    from glyphpack import RECALL_TOOL

    def found(body: Json) -> httpx.Response:
        answer = _answer("Found it.", to=body)
        if stream:
            return httpx.Response(200, content=b"".join(sse_events("anthropic", answer, usage=True)), headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=answer)

    upstream = _recall_then(found, stream)
    client, _, lines = _app(tmp_path, upstream, summarizer=None)
    with client:
        response = client.post("/v1/messages", json={**_body(_long_history()), "stream": stream}, headers=KEY)
    whole = response.json() if not stream else _accumulated(response.content)
    assert response.status_code == 200 and RECALL_TOOL not in response.text
    assert [b["text"] for b in whole["content"]] == ["Let me look again.", "Found it."] and whole["stop_reason"] == "end_turn"
    first, second = upstream.bodies()
    assert first["tools"][-1]["name"] == RECALL_TOOL
    answered = [b for m in second["messages"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert "alpha-3-0" in json.dumps(answered[-1])  # the recall's answer: result t3, from the transcript
    assert "; 1 recall round(s) answered" in lines.getvalue() and " anthropic -> 200 in " in lines.getvalue()
    assert "provider: " in lines.getvalue()  # both rounds' counts, summed
    if stream:
        assert response.text.count("event: message_stop") == 1 and response.text.count("event: message_start") == 1


def test_a_round_after_a_recall_that_fails_ends_the_clients_stream_with_the_apis_error_event(tmp_path: Path) -> None:
    upstream = _recall_then(lambda body: httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}), stream=True)
    client, _, lines = _app(tmp_path, upstream, summarizer=None)
    with client:
        response = client.post("/v1/messages", json={**_body(_long_history()), "stream": True}, headers=KEY)
    assert response.text.endswith(
        'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"glyphpack proxy: the upstream refused the request after a recall (529): Overloaded"}}\n\n')
    assert " -> 529 in " in lines.getvalue()

    def down(body: Json) -> httpx.Response:
        raise httpx.ConnectError("gone")

    upstream = _recall_then(down, stream=True)
    client, _, lines = _app(tmp_path / "down", upstream, summarizer=None)
    with client:
        response = client.post("/v1/messages", json={**_body(_long_history()), "stream": True}, headers=KEY)
    assert response.text.endswith('"message":"glyphpack proxy: the upstream https://provider.example failed: gone"}}\n\n')
    assert lines.getvalue().rstrip().endswith("; the upstream failed after a recall: ConnectError") and " -> 502 in " in lines.getvalue()
    upstream = _recall_then(lambda body: httpx.Response(503, content=b"unavailable"), stream=False)
    client, _, lines = _app(tmp_path / "whole", upstream, summarizer=None)
    with client:
        response = client.post("/v1/messages", json=_body(_long_history()), headers=KEY)
    assert (response.status_code, response.content) == (503, b"unavailable")  # the provider's answer, as it sent it
    assert " -> 503 in " in lines.getvalue()


def test_a_compacted_gemini_request_goes_without_a_model_in_its_body(tmp_path: Path) -> None:
    """The REST API names the model in the path and refuses it in the body: the proxy
    puts the path's model in the body it records, and takes it out of what it builds."""
    contents: list[Json] = [{"role": "user", "parts": [{"text": OPENING}]}]
    for n in range(16):
        contents += [{"role": "model", "parts": [{"functionCall": {"name": "Bash", "args": {"command": f"cat {n}.log"}}}]},
                     {"role": "user", "parts": [{"functionResponse": {"name": "Bash", "response": {"output": _words("alpha", n, 250)}}}]}]
    upstream = Upstream(lambda request: httpx.Response(200, json={"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi."}]}}]}))
    client, _, lines = _app(tmp_path, upstream, summarizer=None)
    with client:
        client.post("/v1beta/models/gemini-2.5-flash:generateContent", json={"contents": contents})
    (sent,) = upstream.bodies()
    assert "model" not in sent and sent["contents"] != contents and "functionCall" in json.dumps(sent)
    assert "(compacted)" in lines.getvalue()


def test_a_token_count_goes_upstream_as_the_request_would_be_forwarded_and_only_for_its_client(tmp_path: Path) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path.endswith("/count_tokens"):
            return httpx.Response(200, json={"input_tokens": count_tokens(body)}, headers={"x-counted": "yes"})
        return httpx.Response(200, json=_answer("Found it.", to=body))

    upstream = Upstream(answer)
    client, _, _ = _app(tmp_path, upstream, summarizer=None)
    history = _long_history()
    with client:
        answer = client.post("/v1/messages", json=_body(history), headers=KEY).json()
        history += [{"role": "assistant", "content": answer["content"]}, {"role": "user", "content": "and then?"}]
        mine = client.post("/v1/messages/count_tokens?beta=true", json=_body(history), headers=KEY)
        theirs = client.post("/v1/messages/count_tokens", json=_body(history), headers={"x-api-key": "sk-ant-someone-else"})
        refused = client.post("/v1/messages/count_tokens", content=b"{", headers=KEY)
    forwarded, counted, as_sent = upstream.bodies()
    assert count_tokens(counted) < count_tokens(_body(history)) and as_sent == _body(history)  # the compaction in force, for its client only
    assert len(counted["messages"]) == len(forwarded["messages"]) + 2 and counted["messages"][-1]["content"][-1]["text"] == "and then?"
    assert str(upstream.requests[1].url) == "https://provider.example/v1/messages/count_tokens?beta=true"
    assert mine.json() == {"input_tokens": count_tokens(counted)} and mine.headers["x-counted"] == "yes"
    assert theirs.json() == {"input_tokens": count_tokens(_body(history))}
    assert refused.status_code == 400 and refused.json() == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "glyphpack proxy: the request body is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"}}
    assert len(upstream.requests) == 3


def test_a_stream_event_the_proxy_cannot_read_is_said_once_and_the_client_gets_every_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","content":[]}}\n\n'
              b'event: content_block_delta\ndata: {"type":"content_block_delta","index":[0],"delta":{"type":"text_delta","text":"x"}}\n\n'
              b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    upstream = Upstream(lambda request: httpx.Response(200, content=events, headers={"content-type": "text/event-stream"}))
    client, proxy, _ = _app(tmp_path, upstream)
    with client:
        response = client.post("/v1/messages", json={**_body([{"role": "user", "content": OPENING}]), "stream": True}, headers=KEY)
    assert response.content == events
    assert capsys.readouterr().err == "glyphpack proxy: answer not recorded: a stream event could not be read (TypeError)\n"
    (conversation,) = proxy.recorder.workspace.tree.conversations()
    assert [m.role for m in proxy.recorder.workspace.load(conversation.id, "main").messages] == ["system", "user"]


def test_an_upstream_error_without_words_is_named_by_its_kind(tmp_path: Path) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("")

    client, _, _ = _app(tmp_path, Upstream(down))
    with client:
        response = client.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": OPENING}]})
    assert response.json()["error"]["message"] == "glyphpack proxy: the upstream https://provider.example failed: ReadTimeout"


def test_a_round_after_a_recall_refused_without_json_is_said_in_its_own_words(tmp_path: Path) -> None:
    upstream = _recall_then(lambda body: httpx.Response(500, content="büsy".encode("latin-1")), stream=True)
    client, _, lines = _app(tmp_path, upstream, summarizer=None)
    with client:
        response = client.post("/v1/messages", json={**_body(_long_history()), "stream": True}, headers=KEY)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert response.text.endswith('"message":"glyphpack proxy: the upstream refused the request after a recall (500): b\ufffdsy"}}\n\n')
    assert " -> 500 in " in lines.getvalue()
    first, second = upstream.bodies()
    assert second["messages"] != first["messages"] and second["model"] == first["model"]


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_serve_answers_until_a_signal_then_returns_with_the_handlers_it_found(tmp_path: Path, signal_name: str) -> None:
    """``glyphpack proxy`` in-process: it announces its URL once bound, answers, and on
    SIGINT or SIGTERM finishes, closes its socket and puts back the signal handlers it
    replaced (the signal uvicorn raises again once down is not a crash)."""
    import os
    import signal
    import socket
    import threading

    from glyphpack._proxy.server import serve

    number = getattr(signal, signal_name)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    client, proxy, _ = _app(tmp_path, Upstream(_json_answer()))
    announced: list[str] = []
    answers: list[int] = []

    def ask_then_stop() -> None:
        try:
            answers.append(httpx.get(announced[0] + STATUS_PATH, timeout=10).status_code)
        finally:  # stopped whatever happened: a failure here fails the test, never hangs it
            os.kill(os.getpid(), number)

    def announce(url: str) -> None:
        announced.append(url)
        threading.Thread(target=ask_then_stop, daemon=True).start()

    serve(proxy.app, "127.0.0.1", 0, announce=announce)
    assert len(announced) == 1 and announced[0].startswith("http://127.0.0.1:") and answers == [200]
    assert {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} == before
    port = int(announced[0].rsplit(":", 1)[1])
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # closed


def test_every_other_method_and_path_passes_and_the_status_answers_get_only(tmp_path: Path) -> None:
    upstream = Upstream(lambda request: httpx.Response(200, json={"method": request.method}))
    client, _, _ = _app(tmp_path, upstream)
    with client:
        for method in ("PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "POST"):
            assert client.request(method, "/v1/files/f1", headers=KEY).status_code == 200
        posted = client.post(STATUS_PATH)
    assert [r.method for r in upstream.requests] == ["PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "POST", "POST"]
    assert str(upstream.requests[0].url) == "https://provider.example/v1/files/f1"  # no query: no "?"
    assert posted.json() == {"method": "POST"}  # a POST to the status path is the upstream's


@pytest.mark.parametrize(("path", "api", "body"), [
    ("/chat/completions", "openai-chat", {"model": "gpt-4o", "messages": [{"role": "user", "content": OPENING}]}),
    ("/responses", "openai-responses", {"model": "gpt-5", "input": OPENING}),
])
def test_the_openai_paths_without_a_version_are_recorded_too(tmp_path: Path, path: str, api: str, body: Json) -> None:
    from glyphpack.testing.fake import Turn, answer_body

    upstream = Upstream(lambda request: httpx.Response(200, json=answer_body(api, Turn(text="Hi."), 1, 10)))
    client, proxy, lines = _app(tmp_path, upstream)
    with client:
        client.post(path, json=body, headers={"authorization": "Bearer sk-x"})
    assert upstream.requests[0].url.path == path and f" {api} -> 200 in " in lines.getvalue()
    (conversation,) = proxy.recorder.workspace.tree.conversations()
    assert proxy.recorder.workspace.load(conversation.id, "main").messages[-1].text == "Hi."


def test_a_clients_key_in_the_query_is_its_identity(tmp_path: Path) -> None:
    """Gemini's clients may send their key as ``?key=``: two keys, two clients, so the
    same opening from each is two conversations, each continued by its own client."""
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi."}]}}]})

    client, proxy, _ = _app(tmp_path, Upstream(answer))
    body = {"contents": [{"role": "user", "parts": [{"text": OPENING}]}]}
    with client:
        client.post("/v1beta/models/gemini-2.5-flash:generateContent?key=one", json=body)
        client.post("/v1beta/models/gemini-2.5-flash:generateContent?key=two", json=body)
        went_on = {"contents": [*body["contents"], {"role": "model", "parts": [{"text": "Hi."}]}, {"role": "user", "parts": [{"text": "more"}]}]}
        client.post("/v1beta/models/gemini-2.5-flash:generateContent?key=one", json=went_on)
    conversations = proxy.recorder.workspace.tree.conversations()
    assert len(conversations) == 2
    assert sorted(len(proxy.recorder.workspace.load(c.id, "main").messages) for c in conversations) == [2, 4]


def test_refusals_and_502s_are_in_the_shape_of_the_api_asked(tmp_path: Path) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    client, _, lines = _app(tmp_path, Upstream(down))
    with client:
        refused = client.post("/v1/messages", content=b"[", headers=KEY)
        gemini = client.post("/v1beta/models/gemini-2.5-flash:generateContent", json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    assert refused.json()["type"] == "error" and refused.json()["error"]["type"] == "invalid_request_error"
    assert gemini.status_code == 502 and gemini.json()["error"]["status"] == "UNAVAILABLE" and gemini.json()["error"]["code"] == 502
    refused_line = next(line for line in lines.getvalue().splitlines() if line.endswith("refused by the proxy"))
    assert 0 <= int(refused_line.split(" in ")[1].split(" ms")[0].replace(",", "")) < 60_000  # its own time, in ms


def test_a_413_is_recovered_by_bytes_by_its_status_alone(tmp_path: Path) -> None:
    history = _long_history()
    history[-1] = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t15", "content": [
        {"type": "text", "text": "the screen"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                          "data": __import__("base64").b64encode(_png()).decode()}}]}]}

    def answer(request: httpx.Request) -> httpx.Response:
        if len(upstream.requests) == 1:
            return httpx.Response(413, json={"error": {"message": "rejected"}})  # no words to go by: the status says it
        return httpx.Response(200, json=_answer("Smaller now.", to=json.loads(request.content)))

    upstream = Upstream(answer)
    client, _, _ = _app(tmp_path, upstream, summarizer=None)
    with client:
        response = client.post("/v1/messages", json=_body(history), headers=KEY)
    assert response.status_code == 200 and len(upstream.requests) == 2
    assert len(upstream.requests[1].content) < len(upstream.requests[0].content)


def _png() -> bytes:
    from glyphpack import render

    return render("a screenshot " * 400, model="claude-sonnet-4-5")[0].png


def test_an_upstream_error_with_a_json_body_comes_back_as_sent_and_records_no_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    upstream = Upstream(lambda request: httpx.Response(500, json={"error": {"message": "boom"}}, headers={"x-why": "inside"}))
    client, proxy, lines = _app(tmp_path, upstream)
    with client:
        response = client.post("/v1/messages", json=_body([{"role": "user", "content": OPENING}]), headers=KEY)
    assert (response.status_code, response.json(), response.headers["x-why"]) == (500, {"error": {"message": "boom"}}, "inside")
    assert capsys.readouterr().err == "" and " anthropic -> 500 in " in lines.getvalue()
    (conversation,) = proxy.recorder.workspace.tree.conversations()
    assert [m.role for m in proxy.recorder.workspace.load(conversation.id, "main").messages] == ["system", "user"]


def test_a_compacted_request_whose_answer_is_not_json_or_has_no_recall_comes_back_byte_for_byte(tmp_path: Path) -> None:
    plain = json.dumps(_answer("Plain answer."), indent=2).encode()
    for content, kind in ((b"not json at all", "text/plain"), (plain, "application/json")):
        upstream = Upstream(lambda request, c=content, k=kind: httpx.Response(200, content=c, headers={"content-type": k, "x-request-id": "r9"}))
        client, _, _ = _app(tmp_path / kind.replace("/", "-"), upstream, summarizer=None)
        with client:
            response = client.post("/v1/messages", json=_body(_long_history()), headers=KEY)
        assert (response.status_code, response.content, response.headers["x-request-id"]) == (200, content, "r9")
        assert upstream.bodies()[0]["tools"][-1]["name"] == "glyphpack_recall"  # compacted: the recall was offered


def test_a_recall_beside_the_clients_call_reaches_the_client_without_the_recall(tmp_path: Path) -> None:
    from glyphpack import RECALL_TOOL
    from glyphpack.testing.fake import Turn, answer_body

    def answer(request: httpx.Request) -> httpx.Response:
        turn = Turn(text="Both.", calls=((RECALL_TOOL, {"ref": "t3"}), ("Bash", {"command": "ls"})))
        return httpx.Response(200, json=answer_body("anthropic", turn, 1, count_tokens(json.loads(request.content))))

    upstream = Upstream(answer)
    client, _, _ = _app(tmp_path, upstream, summarizer=None)
    with client:
        response = client.post("/v1/messages", json=_body(_long_history()), headers=KEY)
    calls = [b["name"] for b in response.json()["content"] if b["type"] == "tool_use"]
    assert calls == ["Bash"] and response.json()["stop_reason"] == "tool_use" and len(upstream.requests) == 1


def test_after_a_recall_an_upstream_down_or_refusing_is_the_clients_answer(tmp_path: Path) -> None:
    def down(body: Json) -> httpx.Response:
        raise httpx.ConnectError("gone")

    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    for last, status, expected in (
        (down, 502, {"type": "error", "error": {"type": "api_error", "message": "glyphpack proxy: the upstream https://provider.example failed: gone"}}),
        (lambda body: httpx.Response(529, json=overloaded, headers={"x-why": "busy"}), 529, overloaded),
    ):
        upstream = _recall_then(last, stream=False)
        client, _, lines = _app(tmp_path / str(status), upstream, summarizer=None)
        with client:
            response = client.post("/v1/messages", json=_body(_long_history()), headers=KEY)
        assert (response.status_code, response.json()) == (status, expected)
        line = lines.getvalue()
        assert f" -> {status} in " in line
        if status == 502:
            assert line.rstrip().endswith("; the upstream failed after a recall: ConnectError")
        else:
            assert response.headers["x-why"] == "busy"


def test_a_stream_event_that_breaks_the_reading_stops_it_for_good(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Chunk by chunk: once an event could not be read, the rest of the stream is passed
    on and not read (half an answer is never recorded), and that is said once."""
    chunks = [b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","content":[]}}\n\n',
              b'event: content_block_delta\ndata: {"type":"content_block_delta","index":[0],"delta":{"type":"text_delta","text":"x"}}\n\n',
              b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
              b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"half"}}\n\n'
              b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
              b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}\n\n'
              b'event: message_stop\ndata: {"type":"message_stop"}\n\n']

    async def pieces():  # type: ignore[no-untyped-def]
        for chunk in chunks:
            yield chunk

    upstream = Upstream(lambda request: httpx.Response(200, content=pieces(), headers={"content-type": "text/event-stream"}))
    client, proxy, _ = _app(tmp_path, upstream)
    with client:
        response = client.post("/v1/messages", json={**_body([{"role": "user", "content": OPENING}]), "stream": True}, headers=KEY)
    assert response.content == b"".join(chunks)
    assert capsys.readouterr().err == "glyphpack proxy: answer not recorded: a stream event could not be read (TypeError)\n"
    (conversation,) = proxy.recorder.workspace.tree.conversations()
    assert [m.role for m in proxy.recorder.workspace.load(conversation.id, "main").messages] == ["system", "user"]


def test_an_answer_without_a_content_type_and_cached_counts_are_logged(tmp_path: Path) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        body = _answer("Cached.", to=json.loads(request.content))
        body["usage"]["cache_read_input_tokens"] = 100
        return httpx.Response(200, content=json.dumps(body).encode())

    upstream = Upstream(answer)
    client, _, lines = _app(tmp_path, upstream)
    with client:
        response = client.post("/v1/messages", json=_body([{"role": "user", "content": OPENING}]), headers=KEY)
    assert response.json()["content"][0]["text"] == "Cached."  # no content type: read as a whole answer
    assert "(100 cached)" in lines.getvalue()


#: A word only a hostile client sends, in every field an error could quote.
CANARY = "CANARY-7f3e"
HOSTILE: list[tuple[str, str, Json]] = [
    ("anthropic", "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "text", "text": {"secret": CANARY}}]}]}),
    ("anthropic", "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": CANARY, "content": "hi"}]}),
    ("anthropic", "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "tool_use", "id": CANARY, "name": CANARY, "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": CANARY + "-other", "content": CANARY}]}]}),
    ("anthropic", "/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": f"image/{CANARY}", "data": "aGk="}}]}]}),
    ("openai-chat", "/v1/chat/completions", {"model": "gpt-5.4", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": CANARY, "type": "function", "function": {"name": CANARY, "arguments": "{" + CANARY}}]},
        {"role": "tool", "tool_call_id": CANARY, "content": CANARY}]}),
    ("openai-chat", "/v1/chat/completions", {"model": "gpt-5.4", "messages": [{"role": "user", "content": [{"type": CANARY, "text": CANARY}]}]}),
    ("openai-responses", "/v1/responses", {"model": "gpt-5.4", "input": [{"type": "function_call_output", "call_id": CANARY, "output": CANARY}]}),
]


def test_no_log_line_stderr_line_or_json_log_holds_a_word_a_client_sent(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``not recorded: message 0: Text.text must be str, not dict "{'secret': ...}"``
    printed the client's content on stderr and in ``--log-json``, in every mode; role
    values, tool names and call ids too. Errors now name the field and the type."""
    upstream = Upstream(lambda request: httpx.Response(400, json={"error": {"message": "bad request"}}))
    lines, json_log = io.StringIO(), tmp_path / "log.jsonl"
    proxy = Proxy(Recorder(Workspace(tmp_path / "ws"), SETTINGS), "https://provider.example", transport=httpx.MockTransport(upstream),
                  log=ProxyLog(lines, json_log))
    with TestClient(proxy.app) as client:
        for _, path, body in HOSTILE:
            client.post(path, json=body, headers=KEY)
    err = capfd.readouterr().err
    assert len(upstream.requests) == len(HOSTILE) and "not recorded" in err  # each went on, unrecorded, and was said so
    for output in (err, lines.getvalue(), json_log.read_text(encoding="utf-8")):
        assert CANARY not in output


#: Every form of credential the proxy reads, each as two clients that differ only there.
CREDENTIAL_FORMS: list[tuple[str, dict[str, str], dict[str, str], str]] = [
    *((name, {name: "user-a"}, {name: "user-b"}, "") for name in (
        "x-api-key", "authorization", "api-key", "x-goog-api-key",
        "x-litellm-api-key", "x-portkey-api-key", "cf-aig-authorization", "ocp-apim-subscription-key")),
    ("?key=", {}, {}, "key"),
    ("--identity-header x-team-user", {"x-team-user": "ann"}, {"x-team-user": "bob"}, ""),
]


@pytest.mark.parametrize(("form", "first", "second", "query"), CREDENTIAL_FORMS, ids=[f[0] for f in CREDENTIAL_FORMS])
def test_two_clients_that_differ_only_in_one_credential_never_share_a_conversation(
    tmp_path: Path, form: str, first: dict[str, str], second: dict[str, str], query: str
) -> None:
    """The same upstream key for both (a team behind one key), the same opening and the
    same conversation name: told apart by this one form alone (dropping any from the
    identity fails its case), each in its own conversation, and neither can continue
    the other's by name."""
    from glyphpack._proxy.conversations import ProxySettings
    from glyphpack._proxy.identity import CONVERSATION_HEADER

    upstream = Upstream(_json_answer())
    shared = {"x-api-key": "sk-team-key"} if form != "x-api-key" else {}
    settings = ProxySettings(context_window=SETTINGS.context_window, threshold=SETTINGS.threshold, identity_headers=("x-team-user",))
    proxy = Proxy(Recorder(Workspace(tmp_path / "ws"), settings), "https://provider.example", transport=httpx.MockTransport(upstream))
    body = _body([{"role": "user", "content": OPENING}])
    with TestClient(proxy.app) as client:
        for n, headers in enumerate((first, second)):
            path = "/v1/messages" + (f"?{query}=user-{'ab'[n]}" if query else "")
            sent = {**shared, **headers}
            assert client.post(path, json=body, headers=sent).status_code == 200
            named = client.post(path, json=body, headers={**sent, CONVERSATION_HEADER: "shared-name"})
            assert named.status_code == 200, named.text
    transcripts = proxy.recorder.workspace.transcripts()
    assert len(transcripts) == 4 and len({conversation for conversation, _ in transcripts}) == 4, transcripts


def test_a_cookie_the_upstream_sets_reaches_its_client_and_no_other_clients_request(tmp_path: Path) -> None:
    """A provider's edge sets cookies (Cloudflare's ``__cf_bm`` on its answers): the
    client that got the answer gets the ``set-cookie`` and sends the cookie back itself;
    the proxy's shared connection pool keeps none, so another client's request never
    carries it (httpx's client would add what it kept to every later request)."""
    upstream = Upstream(lambda request: httpx.Response(
        200, json=_answer("ok", to=json.loads(request.content)),
        headers={"set-cookie": f"__cf_bm=edge-{len(upstream.requests)}; Path=/; Domain=provider.example; Secure"},
    ))  # fmt: skip
    client, _, _ = _app(tmp_path, upstream)
    with client:
        first = client.post("/v1/messages", json=_body([{"role": "user", "content": "alpha"}]), headers={"x-api-key": "sk-a"})
        assert first.headers["set-cookie"].startswith("__cf_bm=edge-1;")
        client.cookies.clear()  # the test client is both clients: it keeps nothing between them
        assert client.post("/v1/messages", json=_body([{"role": "user", "content": "beta"}]), headers={"x-api-key": "sk-b"}).status_code == 200
        again = [{"role": "user", "content": "alpha"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "and?"}]
        assert client.post("/v1/messages", json=_body(again), headers={"x-api-key": "sk-a", "cookie": "__cf_bm=edge-1"}).status_code == 200
    assert [r.headers.get("cookie") for r in upstream.requests] == [None, None, "__cf_bm=edge-1"]


@pytest.mark.parametrize("stream", [False, True])
def test_headers_the_upstream_repeats_reach_the_client_each_as_sent(tmp_path: Path, stream: bool) -> None:
    """OpenAI's edge sets two cookies (``__cf_bm`` and ``_cfuvid``), two ``set-cookie``
    headers: joined into one (as a mapping of headers joins them), a client's cookie
    jar reads one garbled cookie."""
    cookies = ["__cf_bm=edge; path=/; expires=Mon, 07-Dec-26 02:30:00 GMT; HttpOnly", "_cfuvid=visitor; path=/; HttpOnly"]

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        headers = [("set-cookie", cookie) for cookie in cookies] + [("x-request-id", "req_1")]
        if body.get("stream"):
            return httpx.Response(200, content=b"".join(sse_events("anthropic", _answer("ok", to=body))), headers=[*headers, ("content-type", "text/event-stream")])
        return httpx.Response(200, json=_answer("ok", to=body), headers=headers)

    client, _, _ = _app(tmp_path, Upstream(answer))
    with client:
        body = {**_body([{"role": "user", "content": "alpha"}]), "stream": stream}
        response = client.post("/v1/messages", json=body, headers={"x-api-key": "sk-a"})
    assert response.status_code == 200
    assert response.headers.get_list("set-cookie") == cookies
    assert response.headers["x-request-id"] == "req_1" and response.headers["content-type"].startswith("text/event-stream" if stream else "application/json")


@pytest.mark.parametrize("path", ["/../x", "/v1/../../x", "/%2e%2e/x", "/v1/%2E%2E/%2e%2E/admin", "/./x", "/v1beta/models/..%2F..%2Fx"])
def test_a_path_that_would_climb_out_of_the_upstreams_base_is_refused_before_anything_is_sent(tmp_path: Path, path: str) -> None:
    """``--upstream https://gateway/team-a`` joined with ``/../x`` is the gateway's
    ``/x`` once normalized: a path with dot segments, as written or percent-encoded,
    gets a 400 and goes nowhere (sent as raw bytes: an HTTP client would normalize it)."""
    import socket

    from glyphpack._proxy.server import Running

    upstream = Upstream(_json_answer())
    proxy = Proxy(Recorder(Workspace(tmp_path / "ws"), SETTINGS), "https://provider.example/team-a", transport=httpx.MockTransport(upstream))
    with Running(proxy) as running:
        host, port = running.url.removeprefix("http://").split(":")
        for method in ("GET", "POST"):
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}".encode())
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert upstream.requests == []


def test_the_status_shows_a_caller_its_own_totals_only(tmp_path: Path) -> None:
    """Any local caller read every client's totals; now each sees what its own requests
    made (and a caller with no requests, zeros), while the exit summary stays whole."""
    client, proxy, _ = _app(tmp_path, Upstream(_json_answer()))
    alpha, bravo = {"x-api-key": "sk-alpha"}, {"x-api-key": "sk-bravo"}
    with client:
        for _ in range(2):
            client.post("/v1/messages", json=_body([{"role": "user", "content": OPENING}]), headers=alpha)
        client.post("/v1/messages", json=_body([{"role": "user", "content": "Another task."}]), headers=bravo)
        mine, theirs, nobody = (client.get(STATUS_PATH, headers=h).json() for h in (alpha, bravo, {"x-api-key": "sk-carol"}))
    assert (mine["requests"], theirs["requests"], nobody["requests"], proxy.log.totals()["requests"]) == (2, 1, 0, 3)
    assert mine["client_tokens"] > theirs["client_tokens"] > 0 == nobody["client_tokens"]


def _two_turns(client: TestClient, first: dict[str, str], second: dict[str, str]) -> list[int]:
    """A conversation's first turn sent with ``first``'s headers and its second with
    ``second``'s; the statuses."""
    opening = [{"role": "user", "content": OPENING}]
    said = client.post("/v1/messages", json=_body(opening), headers=first)
    following = [*opening, {"role": "assistant", "content": [{"type": "text", "text": "The auth service."}]},
                 {"role": "user", "content": "And the second module?"}]
    again = client.post("/v1/messages", json=_body(following), headers=second)
    return [said.status_code, again.status_code]


def test_a_person_with_a_client_key_stays_one_client_when_the_upstream_token_rotates(tmp_path: Path) -> None:
    """A subscription's OAuth token is refreshed mid-session: the digest changed and the
    session went on as a new conversation. With a key the operator issued, the person is
    the client: one conversation; two people's keys with one upstream token stay apart;
    the key never goes upstream and the keys file holds only digests."""
    from glyphpack._proxy.conversations import ProxySettings
    from glyphpack._proxy.identity import CLIENT_KEY_HEADER, ClientKeys

    keys_file = tmp_path / "keys"
    ada, ada_laptop, bob = ClientKeys.issue(keys_file, "ada"), ClientKeys.issue(keys_file, "ada"), ClientKeys.issue(keys_file, "bob")
    assert not any(key in keys_file.read_text() for key in (ada, ada_laptop, bob))
    upstream = Upstream(_json_answer())
    settings = ProxySettings(context_window=SETTINGS.context_window, threshold=SETTINGS.threshold, client_keys=ClientKeys(keys_file))
    proxy = Proxy(Recorder(Workspace(tmp_path / "ws"), settings), "https://provider.example", transport=httpx.MockTransport(upstream))
    token = lambda n: {"authorization": f"Bearer sk-ant-oat01-rotated-{n}"}
    with TestClient(proxy.app) as client:
        assert _two_turns(client, {**token(1), CLIENT_KEY_HEADER: ada}, {**token(2), CLIENT_KEY_HEADER: ada_laptop}) == [200, 200]
        conversations = {c for c, _ in proxy.recorder.workspace.transcripts()}
        assert len(conversations) == 1  # continued across the rotation, and from the person's other key
        assert _two_turns(client, {**token(3), CLIENT_KEY_HEADER: bob}, {**token(3), CLIENT_KEY_HEADER: bob}) == [200, 200]
        assert len({c for c, _ in proxy.recorder.workspace.transcripts()}) == 2  # the same opening, another person
        assert _two_turns(client, token(4), token(5)) == [200, 200]  # no key: the token is the identity, as before
        assert len({c for c, _ in proxy.recorder.workspace.transcripts()}) == 4
        refused = client.post("/v1/messages", json=_body([{"role": "user", "content": OPENING}]), headers={CLIENT_KEY_HEADER: "gpk_forged"})
        assert refused.status_code == 401 and "is not one this proxy issued" in refused.text
        keys_file.write_text("\n".join(line for line in keys_file.read_text().splitlines() if not line.startswith("bob ")) + "\n")
        revoked = client.post("/v1/messages", json=_body([{"role": "user", "content": OPENING}]), headers={CLIENT_KEY_HEADER: bob})
        assert revoked.status_code == 401
    forwarded = [dict(r.headers) for r in upstream.requests]
    assert forwarded and not any(CLIENT_KEY_HEADER in headers for headers in forwarded)
    assert all(key not in str(forwarded) for key in (ada, ada_laptop, bob))


def test_a_proxy_that_requires_client_keys_refuses_every_request_without_one(tmp_path: Path) -> None:
    from glyphpack._proxy.conversations import ProxySettings
    from glyphpack._proxy.identity import CLIENT_KEY_HEADER, ClientKeys

    keys_file = tmp_path / "keys"
    key = ClientKeys.issue(keys_file, "ada")
    upstream = Upstream(_json_answer())
    settings = ProxySettings(client_keys=ClientKeys(keys_file, required=True))
    proxy = Proxy(Recorder(Workspace(tmp_path / "ws"), settings), "https://provider.example", transport=httpx.MockTransport(upstream))
    body = _body([{"role": "user", "content": OPENING}])
    with TestClient(proxy.app) as client:
        for path, method in (("/v1/messages", "post"), ("/v1/messages/count_tokens", "post"), ("/v1/models", "get"), (STATUS_PATH, "get")):
            answer = client.request(method, path, json=body if method == "post" else None, headers=KEY)
            assert answer.status_code == 401 and "is required by this proxy" in answer.text, path
        assert upstream.requests == []
        assert client.post("/v1/messages", json=body, headers={**KEY, CLIENT_KEY_HEADER: key}).status_code == 200


def test_a_keys_file_that_is_not_digests_is_refused_by_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from glyphpack._cli import main
    from glyphpack._proxy.identity import ClientKeys

    keys_file = tmp_path / "keys"
    assert main(["proxy-key", "ada", "--keys", str(keys_file)]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("gpk_") and ClientKeys(keys_file).person(key) == "ada" and ClientKeys(keys_file).person(key + "x") is None
    keys_file.write_text(keys_file.read_text() + f"bob {key}\n")  # a key pasted in, not its digest
    with pytest.raises(glyphpack_errors.StoreError, match=r"keys, line 2: not 'PERSON sha256:<64 hex>'"):
        ClientKeys(keys_file)
    assert main(["proxy", "--upstream", "anthropic", "--workspace", str(tmp_path / "ws"), "--client-keys", str(keys_file)]) == 2
    err = capsys.readouterr().err
    assert "line 2: not 'PERSON sha256:<64 hex>'" in err and key not in err
    assert main(["proxy-key", "no/slash", "--keys", str(keys_file)]) == 2


def test_a_request_body_is_parsed_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long history's JSON takes milliseconds to parse: on the event loop every other
    client would wait it out, so the proxy parses it on a worker thread, where no loop runs."""
    import asyncio

    import glyphpack._proxy.server as server_module

    real, threads = server_module._parsed, []

    def parsed(raw: bytes, *args: object) -> object:
        try:
            asyncio.get_running_loop()
            threads.append("the event loop")
        except RuntimeError:
            threads.append("a worker")
        return real(raw, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(server_module, "_parsed", parsed)
    client, _, _ = _app(tmp_path, Upstream(_json_answer()))
    with client:
        assert client.post("/v1/messages", json=_body([{"role": "user", "content": OPENING}]), headers=KEY).status_code == 200
        assert client.post("/v1/messages", content=b"{not json", headers=KEY).status_code == 400  # refused the same way
    assert threads == ["a worker", "a worker"]


def test_a_long_upstream_answer_is_parsed_off_the_event_loop_and_a_short_one_on_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer of ``PARSED_ON_THE_LOOP`` bytes or more goes to a worker thread to be
    parsed (the hop costs more than a short answer's parse); a byte less stays."""
    import asyncio
    import json as real_json
    import types

    import glyphpack._proxy.server as server_module

    where: list[tuple[int, str]] = []

    def loads(raw: bytes | str) -> Any:
        try:
            asyncio.get_running_loop()
            where.append((len(raw), "the event loop"))
        except RuntimeError:
            where.append((len(raw), "a worker"))
        return real_json.loads(raw)

    monkeypatch.setattr(server_module, "json", types.SimpleNamespace(loads=loads, dumps=real_json.dumps))
    sizes = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = _answer("", to=json.loads(request.content))
        short = len(json.dumps({**body, "content": [{"type": "text", "text": ""}]}, separators=(",", ":")).encode())
        # The answer's text padded so its bytes are one short of the limit, then exactly at it.
        size = server_module.PARSED_ON_THE_LOOP - 1 + len(sizes)
        sizes.append(size)
        content = json.dumps({**body, "content": [{"type": "text", "text": "x" * (size - short)}]}, separators=(",", ":")).encode()
        assert len(content) == size
        return httpx.Response(200, content=content, headers={"content-type": "application/json"})

    client, _, _ = _app(tmp_path, Upstream(answer))
    with client:
        for opening in (OPENING, "Another task."):  # two conversations: a long answer sent back would compact the next
            response = client.post("/v1/messages", json=_body([{"role": "user", "content": opening}]), headers=KEY)
            assert response.status_code == 200 and len(response.content) == sizes[-1]
    answers = [(size, place) for size, place in where if size in sizes]
    assert answers == [(sizes[0], "the event loop"), (sizes[1], "a worker")]


def test_a_websocket_is_refused_with_426_so_codex_goes_on_over_http_at_once(tmp_path: Path) -> None:
    """Codex signed in with ChatGPT tries the Responses API over a WebSocket first; only a
    426 has it go on over HTTP at once (another refusal, retries with backoff). Refused
    both as a WebSocket and as the plain request a server without a WebSocket library
    passes on; nothing goes upstream."""
    from starlette.testclient import WebSocketDenialResponse

    upstream = Upstream(lambda request: httpx.Response(200, json={}))
    client, _, _ = _app(tmp_path, upstream)
    with client:
        with pytest.raises(WebSocketDenialResponse) as refused:
            with client.websocket_connect("/v1/responses", headers=KEY):
                pass
        plain = client.get("/v1/responses", headers={**KEY, "upgrade": "websocket", "connection": "Upgrade"})
    assert refused.value.status_code == 426 and "use HTTP" in refused.value.json()["error"]["message"]
    assert plain.status_code == 426 and "use HTTP" in plain.json()["error"]["message"]
    assert upstream.requests == []
