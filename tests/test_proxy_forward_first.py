"""The proxy forwards first: a request goes upstream before anything of it is written,
and is recorded after, with its answer in one save; or, when no answer comes (a
refusal, an upstream that cannot be reached, a client that leaves mid-stream), on its
own, before the client reads the error. What a crash in between loses is what the
client sends again (the kill tests: ``test_proxy_kill.py``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
import httpx

from glyphpack import Workspace
from glyphpack._proxy.conversations import ProxySettings, Recorder
from glyphpack._proxy.server import Proxy, Running
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn

Json = dict[str, Any]
SETTINGS = ProxySettings(context_window=200_000)
KEY = {"x-api-key": "sk-forward-first"}


def _stored(workspace: Workspace) -> list[str]:
    """Every stored message's text, conversation by conversation."""
    return [m.text for key in sorted(workspace.transcripts()) for m in workspace.load(*key).messages]


def _body(history: list[Json], stream: bool = False) -> Json:
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": stream, "messages": history}


def test_a_request_is_upstream_before_it_is_stored_and_stored_with_its_answer_in_one_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = Workspace(tmp_path)
    seen_stored: list[list[str]] = []  # what the workspace held as each request reached the upstream
    model = FakeModel([Turn(text="which logs?"), Turn(text="auth failed first")])
    model.on_request = lambda number: seen_stored.append(_stored(workspace))
    saves: list[int] = []
    real_save = workspace.save
    monkeypatch.setattr(workspace, "save", lambda *a, **k: saves.append(len(a[2])) or real_save(*a, **k))
    history: list[Json] = [{"role": "user", "content": "Read the logs."}]
    with FakeUpstream(model) as upstream, Running(Proxy(Recorder(workspace, SETTINGS), upstream.url, summarizer=None)) as proxy:
        for stream in (False, True):
            with httpx.Client(base_url=proxy.url, headers=KEY) as client:
                response = client.post("/v1/messages", json=_body(history, stream))
            assert response.status_code == 200
            answer = "which logs?" if not stream else "auth failed first"
            # Stored once the client has the answer (its next request finds it), never before it went upstream.
            assert _stored(workspace) == [m["content"] for m in history] + [answer]
            history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And then?"}]
    assert seen_stored == [[], ["Read the logs.", "which logs?"]]
    assert saves == [2, 4]  # one save a turn: the request's message with its answer


@pytest.mark.parametrize("fault", ["429", "529", "401"])
def test_a_refused_request_is_stored_before_the_client_reads_the_refusal(tmp_path: Path, fault: str) -> None:
    workspace = Workspace(tmp_path)
    model = FakeModel([Turn(text="unused")], faults={1: fault})
    with FakeUpstream(model) as upstream, Running(Proxy(Recorder(workspace, SETTINGS), upstream.url, summarizer=None)) as proxy:
        response = httpx.post(proxy.url + "/v1/messages", json=_body([{"role": "user", "content": "Read the logs."}]), headers=KEY)
        assert response.status_code == int(fault)
        assert _stored(workspace) == ["Read the logs."]  # at once: no wait for a background save


def test_a_request_whose_upstream_cannot_be_reached_is_stored(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    with Running(Proxy(Recorder(workspace, SETTINGS), "http://127.0.0.1:9", summarizer=None)) as proxy:
        response = httpx.post(proxy.url + "/v1/messages", json=_body([{"role": "user", "content": "Read the logs."}]), headers=KEY)
        assert response.status_code == 502
        assert _stored(workspace) == ["Read the logs."]


def test_a_request_whose_client_leaves_mid_stream_is_stored(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    model = FakeModel([Turn(text="a long answer " * 40)])
    with FakeUpstream(model, event_delay=0.05) as upstream, Running(Proxy(Recorder(workspace, SETTINGS), upstream.url, summarizer=None)) as proxy:
        with httpx.Client(base_url=proxy.url, headers=KEY) as client, client.stream("POST", "/v1/messages", json=_body([{"role": "user", "content": "Read the logs."}], True)) as response:
            assert response.status_code == 200
            next(response.iter_bytes())  # the first event, then the client goes
        deadline = time.monotonic() + 10
        while _stored(workspace) != ["Read the logs."] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _stored(workspace) == ["Read the logs."]
