"""The proxy under bad input: a 400 or the upstream's own answer, never a 500, and no
credential of the upstream's URL in what a client or a log sees."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
import httpx

from glyphpack import Workspace
from glyphpack._proxy.conversations import Recorder
from glyphpack._proxy.histories import MAX_NESTING, nesting
from glyphpack._proxy.server import Proxy, Running
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn, answer_body, http, sse_events

OPENING = "Read every log file and tell me which service failed first."


def _body(**extra: object) -> dict[str, object]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": OPENING}], **extra}


def _nested(depth: int) -> str:
    return '{"x":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("where", ["upstream", "query"])
def test_an_upstreams_credentials_never_reach_a_502(tmp_path: Path, where: str) -> None:
    """An upstream that is down: the client is told which one, never its password or key."""
    closed = "http://proxyuser:hunter2-secret@127.0.0.1:9" if where == "upstream" else "http://127.0.0.1:9/?key=hunter2-secret"
    with Workspace(tmp_path) as workspace, Running(Proxy(Recorder(workspace), closed)) as proxy:
        for path in ("/v1/messages", "/v1/messages/count_tokens", "/v1/models"):
            response = httpx.post(proxy.url + path, json=_body(), headers={"x-api-key": "sk-client"}, timeout=30)
            assert response.status_code == 502, path
            message = response.json()["error"]["message"]
            assert "hunter2" not in response.text and "127.0.0.1:9" in message and "***" in message


@pytest.mark.slow  # starts glyphpack in a subprocess
def test_the_proxys_banner_hides_the_upstreams_credentials(tmp_path: Path) -> None:
    proxy = subprocess.Popen([sys.executable, "-m", "glyphpack", "proxy", "--upstream", "http://u:hunter2-secret@127.0.0.1:9/?key=k3y-secret",
                              "--workspace", str(tmp_path / "ws"), "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        assert proxy.stderr is not None
        banner = proxy.stderr.readline()
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)
    assert "-> http://u:***@127.0.0.1:9/?key=***;" in banner and "secret" not in banner


def test_nesting_is_counted_without_recursion() -> None:
    assert nesting(1) == 0 and nesting([]) == 1 and nesting({"a": [{"b": 2}]}) == 3
    deep: object = 1
    for _ in range(100_000):
        deep = [deep]
    assert nesting(deep) == MAX_NESTING + 1  # stops just past the limit, whatever the depth
    assert nesting(deep, limit=10**6) == 100_000


def test_bodies_nested_past_reading_are_400_and_deep_ones_go_upstream_unrecorded(tmp_path: Path) -> None:
    model = FakeModel([Turn(text="fine"), Turn(text="fine again")])
    with Workspace(tmp_path / "ws") as workspace, FakeUpstream(model) as upstream, Running(Proxy(Recorder(workspace), upstream.url)) as proxy:
        headers = {"x-api-key": "sk-client", "content-type": "application/json"}
        whole = httpx.post(proxy.url + "/v1/messages", content=_nested(100_000), headers=headers)
        block = json.dumps(_body(messages=[{"role": "user", "content": [{"type": "text", "text": "hi", "x": "DEEP"}]}])).replace('"DEEP"', _nested(3_000))
        in_block = httpx.post(proxy.url + "/v1/messages", content=block, headers=headers)
        for response in (whole, in_block):
            assert response.status_code == 400 and response.json()["error"]["message"] == "glyphpack proxy: the request body is nested too deep to read"
        # Deep, but readable: the provider's to judge; glyphpack records it not.
        deep_schema = json.loads(_nested(MAX_NESTING + 5))
        passed = httpx.post(proxy.url + "/v1/messages", json=_body(metadata={"schema": deep_schema}), headers=headers)
        assert passed.status_code == 200 and passed.json()["content"][0]["text"] == "fine"
        assert workspace.transcripts() == []
        shallow = httpx.post(proxy.url + "/v1/messages", json=_body(metadata={"schema": json.loads(_nested(MAX_NESTING - 5))}), headers=headers)
        assert shallow.status_code == 200 and len(workspace.transcripts()) == 1
    assert len(model.requests) == 2


ODD_USAGES = ["lots", 7, None, ["input_tokens"], {"input_tokens": "many"}]


@pytest.mark.parametrize("stream", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_an_answer_with_an_odd_usage_reaches_the_client_and_is_recorded(tmp_path: Path, stream: bool) -> None:
    """An upstream (a gateway) whose 200 has a ``usage`` that is no count: the client gets
    its answer whole, and the answer is recorded all the same."""
    model = FakeModel([])

    def odd(api: str, body: dict[str, object], number: int, path: str = "") -> httpx.Response:
        usage = ODD_USAGES[number - 1]
        answer = answer_body(api, Turn(text=f"answer {number}"), number, 100)
        if not stream:
            return http().Response(200, json={**answer, "usage": usage})
        # The same answer as events, its usage (in message_start and message_delta) odd.
        events = []
        for event in sse_events(api, answer, usage=True):
            name, _, data = event.decode().partition("data: ")
            payload = json.loads(data)
            for holder in (payload, payload.get("message")):
                if isinstance(holder, dict) and "usage" in holder:
                    holder["usage"] = usage
            events.append(f"{name}data: {json.dumps(payload)}\n\n".encode())
        return http().Response(200, content=b"".join(events), headers={"content-type": "text/event-stream"})

    model._respond = odd  # type: ignore[method-assign]
    with Workspace(tmp_path / "ws") as workspace, FakeUpstream(model) as upstream, Running(Proxy(Recorder(workspace), upstream.url)) as proxy:
        for number, usage in enumerate(ODD_USAGES, start=1):
            body = {**_body(), "messages": [{"role": "user", "content": f"task {number}"}]}
            response = httpx.post(proxy.url + "/v1/messages", json=body, headers={"x-api-key": "sk-client"}, timeout=30)
            assert response.status_code == 200 and ("message_stop" if stream else "answer") in response.text
            assert json.dumps(usage, separators=(",", ":")) in response.text.replace(": ", ":")
        deadline = time.monotonic() + 10
        answers: set[str] = set()
        while time.monotonic() < deadline and len(answers) < len(ODD_USAGES):
            answers = {workspace.load(*key).messages[-1].text for key in workspace.transcripts()}
            time.sleep(0.02)
    assert answers == {f"answer {n}" for n in range(1, len(ODD_USAGES) + 1)}


@pytest.mark.slow  # a proxy of its own (0.6 s)
def test_a_stream_event_the_proxy_cannot_read_never_cuts_the_clients_stream(tmp_path: Path) -> None:
    """Events whose fields are shaped oddly (a gateway's): the client gets every byte."""
    events = (
        b'event: message_start\ndata: {"type":"message_start","message":"not an object"}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":"0","delta":["x"]}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    model = FakeModel([Turn(text="x")])
    model._respond = lambda *args: http().Response(200, content=events, headers={"content-type": "text/event-stream"})  # type: ignore[method-assign]
    with Workspace(tmp_path / "ws") as workspace, FakeUpstream(model) as upstream, Running(Proxy(Recorder(workspace), upstream.url)) as proxy:
        response = httpx.post(proxy.url + "/v1/messages", json=_body(), headers={"x-api-key": "sk-client"}, timeout=30)
    assert response.status_code == 200 and response.content == events


def test_summaries_are_asked_within_the_window_the_proxy_was_told(tmp_path: Path) -> None:
    """A 60k upstream got summary requests of 62,925 and 67,710 tokens: the proxy sized
    them by the model's catalog window (200k). They are sized by the window it knows."""
    from types import SimpleNamespace

    from glyphpack._proxy.conversations import ProxySettings

    with Workspace(tmp_path) as workspace:
        for told, expected in ((60_000, 60_000), (None, 200_000)):
            proxy = Proxy(Recorder(workspace, ProxySettings(context_window=told)), "http://127.0.0.1:9")
            summarizer = proxy._summarizer("anthropic", {"model": "claude-sonnet-4-5"}, SimpleNamespace(headers={}, query_params={}, url=SimpleNamespace(path="/v1/messages")))  # type: ignore[arg-type]
            assert summarizer is not None and summarizer.window == expected


@pytest.mark.slow  # makes the SDK's client (about 2 s of imports)
def test_a_session_summarizing_with_its_own_model_stays_in_its_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import glyphpack

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    with glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5", summarizer="claude-sonnet-4-5", context_window=60_000) as s:
        assert s.summarizer is not None and s.summarizer.window == 60_000
    with glyphpack.open_session(tmp_path / "ws", "c", "b", model="claude-sonnet-4-5", summarizer="claude-haiku-4-5", context_window=60_000) as s:
        assert s.summarizer is not None and s.summarizer.window == 200_000  # another model: its own window
