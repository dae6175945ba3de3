"""Requests that go upstream before the proxy reads them (``Forecast``): below the
threshold the client's own bytes go as they came, so once the client's last requests
show this one surely below, it is sent at once and read while the upstream answers.
The forecast never clears one client's requests from another's, never a compressed body
or a Responses request that continues a stored response, and what it gets wrong is
caught once the request is read."""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
import httpx
from test_proxy_forward_first import _body, _turns

from glyphpack import Workspace
from glyphpack._compaction.summarize import Summarizer
from glyphpack._proxy import forecast
from glyphpack._proxy.conversations import ProxySettings, Recorder
from glyphpack._proxy.forecast import SHARE, Forecast
from glyphpack._proxy.identity import Client
from glyphpack._proxy.server import Proxy, Running
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn, answer_body, count_tokens, fake_summary

Json = dict[str, Any]
KEY = {"x-api-key": "sk-forecast"}
CLIENT = Client.of(KEY)


def _raw(body: Json) -> bytes:
    return json.dumps(body).encode()


def _learned(recorder: Recorder, clear: Forecast, body: Json, client: Client = CLIENT, answer: str = "answer") -> Any:
    """``body`` read and answered, and what the forecast learned from it."""
    exchange = recorder.prepare("anthropic", body, Summarizer(fake_summary), client=client)
    clear.learn(client, len(_raw(body)), exchange)
    recorder.finish(exchange, answer_body("anthropic", Turn(text=answer), 0, count_tokens(body)))
    return exchange


# ------------------------------------------------------------------ the forecast


def test_a_request_is_cleared_just_below_the_size_its_history_allows_and_not_at_it(tmp_path: Path) -> None:
    with Workspace(tmp_path) as workspace:
        recorder, clear = Recorder(workspace, ProxySettings(context_window=200_000)), Forecast()
        assert not clear.as_sent(CLIENT, 10)  # a client not seen yet is read first
        body = _body(_turns(0))
        exchange = _learned(recorder, clear, body)
        assert exchange.whole_below > exchange.client_tokens > 0  # the session's, as the request left it
        limit = int(len(_raw(body)) * SHARE * exchange.whole_below / exchange.client_tokens)
        assert clear.as_sent(CLIENT, limit - 1) and not clear.as_sent(CLIENT, limit)
        # Another key, or the same key naming a conversation, is another client: not cleared.
        assert not clear.as_sent(Client.of({"x-api-key": "sk-other"}), 10)
        assert not clear.as_sent(Client.of({**KEY, "x-glyphpack-conversation": "mine"}), 10)


def test_the_history_with_the_least_room_counts_and_a_compaction_in_force_clears_nothing(tmp_path: Path) -> None:
    with Workspace(tmp_path) as workspace:
        recorder = Recorder(workspace, ProxySettings(context_window=24_000, threshold=9_000))
        clear = Forecast()
        short = _learned(recorder, clear, _body([{"role": "user", "content": "a short task"}]))
        roomy = int(len(_raw(_body([{"role": "user", "content": "a short task"}]))) * SHARE * short.whole_below / short.client_tokens)
        history = _turns(0)
        for turn in range(12):  # another conversation of the client's, over the threshold: compacted
            exchange = _learned(recorder, clear, _body(list(history)), answer=f"answer {turn}")
            history += [{"role": "assistant", "content": f"answer {turn}"}, {"role": "user", "content": f"log {turn}: " + "auth ok; " * 300}]
            if exchange.compacted:
                break
        assert exchange.compacted and exchange.session.whole_below() == 0
        assert roomy > 100 and not clear.as_sent(CLIENT, 100)  # the short conversation alone would clear it
        assert not clear.as_sent(CLIENT, 1)
        # The short conversation goes on, and a third starts: the compacted one still counts.
        _learned(recorder, clear, _body([{"role": "user", "content": "a short task"}, {"role": "assistant", "content": "answer"}, {"role": "user", "content": "more"}]))
        _learned(recorder, clear, _body([{"role": "user", "content": "a third task"}]))
        assert not clear.as_sent(CLIENT, 1)


def test_a_request_not_recorded_teaches_nothing(tmp_path: Path) -> None:
    with Workspace(tmp_path) as workspace:
        recorder, clear = Recorder(workspace, ProxySettings(context_window=200_000)), Forecast()
        _learned(recorder, clear, _body(_turns(0)))
        before = clear.as_sent(CLIENT, 100)
        unrecordable = _body([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "no call"}]}])
        exchange = recorder.prepare("anthropic", unrecordable, client=CLIENT)
        assert exchange.session is None  # passed through, not recorded
        clear.learn(CLIENT, 10**9, exchange)
        assert clear.as_sent(CLIENT, 100) == before is True


def test_the_forecast_forgets_the_least_recent_client_and_a_client_with_too_many_histories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forecast, "CLIENTS_KEPT", 1)
    monkeypatch.setattr(forecast, "HISTORIES_KEPT", 2)
    with Workspace(tmp_path) as workspace:
        recorder, clear = Recorder(workspace, ProxySettings(context_window=200_000)), Forecast()
        other = Client.of({"x-api-key": "sk-other"})
        _learned(recorder, clear, _body(_turns(0)))
        assert clear.as_sent(CLIENT, 10)
        _learned(recorder, clear, _body(_turns(0)), client=other)
        assert clear.as_sent(other, 10) and not clear.as_sent(CLIENT, 10)  # one client kept: the most recent
        for task in ("first", "second"):
            _learned(recorder, clear, _body([{"role": "user", "content": f"the {task} task"}]), client=other)
        assert len(clear._limits[other.secret, None]) == 1  # the third history: the two before forgotten


# ------------------------------------------------------------------ through the proxy


class _Reading:
    """``Recorder.prepare`` observed: for each request, whether the upstream had it when
    the proxy finished reading it (``hold``: seconds the reading of the next one takes).
    ``next(hold)`` before each request."""

    def __init__(self, recorder: Recorder, model: FakeModel, monkeypatch: pytest.MonkeyPatch):
        self.upstream_had: list[bool] = []
        self.hold = 0.0
        self.arrived = threading.Event()
        model.on_request = lambda number: self.arrived.set()
        real = recorder.prepare

        def prepare(*args: Any, **kwargs: Any) -> Any:
            exchange = real(*args, **kwargs)
            # A request sent before it is read reaches the upstream meanwhile.
            self.upstream_had.append(self.arrived.wait(self.hold) if self.hold else self.arrived.is_set())
            return exchange

        monkeypatch.setattr(recorder, "prepare", prepare)

    def next(self, hold: float) -> None:
        self.arrived.clear()
        self.hold = hold


def test_a_request_the_forecast_clears_is_upstream_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = Workspace(tmp_path)
    model = FakeModel([Turn(text=f"answer {turn}") for turn in range(3)])
    recorder = Recorder(workspace, ProxySettings(context_window=200_000))
    reading = _Reading(recorder, model, monkeypatch)
    with FakeUpstream(model) as upstream, Running(Proxy(recorder, upstream.url, summarizer=None)) as proxy, httpx.Client(base_url=proxy.url, headers=KEY) as client:
        for turn, stream in ((0, False), (1, False), (2, True)):
            reading.next(0.0 if turn == 0 else 5.0)  # waits for the upstream only where it should have it already
            response = client.post("/v1/messages", json=_body(_turns(turn), stream))
            assert response.status_code == 200
    assert reading.upstream_had == [False, True, True]  # the first request of a client is read first
    assert model.requests == [_body(_turns(turn), turn == 2) for turn in range(3)]  # the client's own bytes
    stored = [m.text for m in workspace.load(*workspace.transcripts()[0]).messages]
    assert stored == [m["content"] for m in _turns(2)] + ["answer 2"]


@pytest.mark.parametrize("kind", ["gzip", "previous_response_id"])
def test_a_compressed_body_or_a_stateful_responses_request_is_read_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    workspace = Workspace(tmp_path)
    model = FakeModel([Turn(text=f"answer {turn}") for turn in range(2)])
    recorder = Recorder(workspace, ProxySettings(context_window=200_000))
    reading = _Reading(recorder, model, monkeypatch)
    api = "/v1/messages" if kind == "gzip" else "/v1/responses"
    with FakeUpstream(model) as upstream, Running(Proxy(recorder, upstream.url, summarizer=None)) as proxy, httpx.Client(base_url=proxy.url, headers=KEY) as client:
        reading.next(0.0)
        if kind == "gzip":
            first, second = _body(_turns(0)), _body(_turns(1))
        else:
            first = {"model": "gpt-5", "input": "question 0"}
        response = client.post(api, json=first)
        assert response.status_code == 200
        if kind != "gzip":
            second = {"model": "gpt-5", "previous_response_id": response.json()["id"], "input": "question 1"}
        reading.next(0.3)  # long enough for a request sent before it is read to reach the upstream
        sent = client.post(api, content=gzip.compress(_raw(second)), headers={"content-encoding": "gzip"}) if kind == "gzip" else client.post(api, json=second)
        assert sent.status_code == 200
        if kind != "gzip":  # a Responses request that sends its whole input is cleared as any other
            reading.next(5.0)
            whole = {"model": "gpt-5", "input": [{"role": "user", "content": "question 0"}, {"role": "user", "content": "question 1"}]}
            assert client.post(api, json=whole).status_code == 200
            assert reading.upstream_had[-1]
    assert reading.upstream_had[:2] == [False, False]
    assert model.requests[1] == second


def test_a_request_cleared_wrongly_goes_as_it_came_and_the_compaction_stays_in_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another process compacted the conversation, unknown to this one's forecast: the
    client's bytes went before the request was read. Its answer is recorded, the log says
    nothing was compacted, and the next request goes as the compaction in force builds it."""
    workspace = Workspace(tmp_path)
    model = FakeModel([Turn(text=f"answer {turn}") for turn in range(20)])
    recorder = Recorder(workspace, ProxySettings(context_window=24_000, threshold=9_000))
    history = _turns(0)
    with FakeUpstream(model) as upstream, Running(Proxy(recorder, upstream.url)) as proxy, httpx.Client(base_url=proxy.url, headers=KEY) as client:
        for turn in range(12):
            response = client.post("/v1/messages", json=_body(list(history)))
            assert response.status_code == 200
            history += [{"role": "assistant", "content": response.json()["content"][0]["text"]}, {"role": "user", "content": f"log {turn}: " + "auth ok; " * 300}]
            if len(model.requests[-1]["messages"]) < len(history) - 2:
                break
        assert len(model.requests[-1]["messages"]) < len(history) - 2  # a compaction is in force
        monkeypatch.setattr(Forecast, "as_sent", lambda self, client, size: True)
        capsys.readouterr()
        before = client.get("/glyphpack/status").json()
        response = client.post("/v1/messages", json=_body(list(history)))
        assert response.status_code == 200 and model.requests[-1] == _body(history)  # as the client sent it
        assert "went upstream as it came, before its session built it" in capsys.readouterr().err
        after = client.get("/glyphpack/status").json()
        # The log tells what went: the whole history, nothing compacted.
        assert after["compacted"] == before["compacted"] and after["requests"] == before["requests"] + 1
        assert after["sent_tokens"] - before["sent_tokens"] == after["client_tokens"] - before["client_tokens"] > 0
        history += [{"role": "assistant", "content": response.json()["content"][0]["text"]}, {"role": "user", "content": "go on"}]
        monkeypatch.undo()
        assert client.post("/v1/messages", json=_body(list(history))).status_code == 200
        assert len(model.requests[-1]["messages"]) < len(history)  # compacted again: the view in force
    stored = [m.text for m in workspace.load(*workspace.transcripts()[0]).messages]
    assert stored[: len(history)] == [m["content"] for m in history]  # every word, the wrongly cleared answer too


def test_a_request_refused_once_read_is_refused_though_it_went_upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A body the proxy cannot read as a history (here: ``messages`` not a list): the
    client gets the proxy's refusal, whatever the upstream answered, and nothing of it is
    stored."""
    workspace = Workspace(tmp_path)
    model = FakeModel([Turn(text="mine"), Turn(text="unused")])
    recorder = Recorder(workspace, ProxySettings(context_window=200_000))
    with FakeUpstream(model) as upstream, Running(Proxy(recorder, upstream.url, summarizer=None)) as proxy:
        assert httpx.post(proxy.url + "/v1/messages", json=_body(_turns(0)), headers=KEY).status_code == 200
        monkeypatch.setattr(Forecast, "as_sent", lambda self, client, size: True)
        bad = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": "my secret plan"}
        refused = httpx.post(proxy.url + "/v1/messages", json=bad, headers=KEY)
        assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("glyphpack proxy: messages: expected a list")
        deadline = time.monotonic() + 5
        while len(model.requests) + len(model.statuses) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(model.statuses) == 2  # it did go (the forecast cleared it), and the upstream's answer went nowhere
    assert "my secret plan" not in json.dumps([[m.text for m in workspace.load(*key).messages] for key in workspace.transcripts()])


def test_an_upstream_answer_nobody_reads_is_closed_once_it_comes() -> None:
    import asyncio

    from glyphpack._proxy.server import _closed_when_done

    class Answer:
        closed = False

        async def aclose(self) -> None:
            Answer.closed = True

    problems: list[Any] = []

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: problems.append(context))

        async def answered() -> Any:
            return Answer()

        async def failed() -> Any:
            raise httpx.ConnectError("the upstream is down")

        async def never() -> Any:
            await asyncio.sleep(10)

        tasks = [asyncio.ensure_future(coroutine()) for coroutine in (answered, failed, never)]
        for task in tasks:
            _closed_when_done(task)
        tasks[2].cancel()
        await asyncio.sleep(0.05)

    asyncio.run(run())
    import gc

    gc.collect()  # a failed task whose exception nobody retrieved is reported when collected
    assert Answer.closed and problems == []
