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
from glyphpack._proxy.identity import Client
from glyphpack._proxy.server import Proxy, Running
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn

Json = dict[str, Any]
SETTINGS = ProxySettings(context_window=200_000)
KEY = {"x-api-key": "sk-forward-first"}
CLIENT = Client.of(KEY)


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
            # A new conversation's first answer and a stream are stored before the client has all of
            # the answer (its next request, at any proxy, finds them), never before it went upstream.
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


# ------------------------------------------------- whole answers recorded after the client has them

ANSWER = {"type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "end_turn", "usage": {"input_tokens": 9, "output_tokens": 1}}


def _answer(text: str) -> Json:
    return {**ANSWER, "id": f"msg_{text}", "content": [{"type": "text", "text": text}]}


def _turns(count: int) -> list[Json]:
    """A client's history after ``count`` answered turns and one more question."""
    history: list[Json] = [{"role": "user", "content": "question 0"}]
    for turn in range(count):
        history += [{"role": "assistant", "content": f"answer {turn}"}, {"role": "user", "content": f"question {turn + 1}"}]
    return history


def test_an_answer_goes_out_before_its_record_only_where_the_conversation_is_stored(tmp_path: Path) -> None:
    with Workspace(tmp_path) as workspace:
        recorder = Recorder(workspace, SETTINGS)
        first = recorder.prepare("anthropic", _body(_turns(0)))
        assert not recorder.answer_due(first)  # a new conversation: another proxy could not find it yet
        recorder.finish(first, _answer("answer 0"))
        second = recorder.prepare("anthropic", _body(_turns(1)))
        assert recorder.answer_due(second)
        recorder.finish(second, _answer("answer 1"))
        assert _stored(workspace) == ["question 0", "answer 0", "question 1", "answer 1"]


def test_a_request_waits_until_the_answer_before_it_is_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import threading

    with Workspace(tmp_path) as workspace:
        recorder = Recorder(workspace, SETTINGS)
        recorder.finish(recorder.prepare("anthropic", _body(_turns(0))), _answer("answer 0"))
        second = recorder.prepare("anthropic", _body(_turns(1)))
        assert recorder.answer_due(second)
        following: list[Any] = []
        waiting = threading.Thread(target=lambda: following.append(recorder.prepare("anthropic", _body(_turns(2)))))
        waiting.start()
        waiting.join(0.3)
        assert waiting.is_alive()  # the client's next request (carrying the answer) waits for its record
        assert recorder.finish(second, _answer("answer 1")) is None
        waiting.join(5)  # at once: ANSWER_WAIT is 10 s
        assert not waiting.is_alive()
        recorder.flush(following[0])
        assert _stored(workspace) == [m["content"] for m in _turns(2)]
        assert "recorded with the next request" not in capsys.readouterr().err  # the upstream's answer, not the client's copy


def test_a_request_waits_for_an_answer_record_no_longer_than_answer_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from glyphpack._proxy import conversations

    monkeypatch.setattr(conversations, "ANSWER_WAIT", 0.2)
    with Workspace(tmp_path) as workspace:
        recorder = Recorder(workspace, SETTINGS)
        recorder.finish(recorder.prepare("anthropic", _body(_turns(0))), _answer("answer 0"))
        second = recorder.prepare("anthropic", _body(_turns(1)))
        assert recorder.answer_due(second)
        started = time.monotonic()
        third = recorder.prepare("anthropic", _body(_turns(2)))  # the record never comes: it goes on
        assert 0.2 <= time.monotonic() - started < 5
        started = time.monotonic()
        again = recorder.prepare("anthropic", _body(_turns(2)))  # sent again (a retry): not waited for again
        assert time.monotonic() - started < 0.2 and not third.still_current()
        recorder.flush(again)
        assert recorder.finish(second, _answer("answer 1")) is None  # too late: the client's copy is stored
        assert _stored(workspace) == [m["content"] for m in _turns(2)]
        assert "answer recorded with the next request" in capsys.readouterr().err


def test_an_answer_another_proxy_stored_from_the_next_request_first_is_not_stored_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two proxies on one workspace: the client got its answer from one and sent its next
    request to the other before the first recorded it."""
    with Workspace(tmp_path) as first_workspace, Workspace(tmp_path) as second_workspace:
        first, second = Recorder(first_workspace, SETTINGS), Recorder(second_workspace, SETTINGS)
        first.finish(first.prepare("anthropic", _body(_turns(0)), client=CLIENT), _answer("answer 0"))
        answered = first.prepare("anthropic", _body(_turns(1)), client=CLIENT)
        assert first.answer_due(answered)
        second.flush(second.prepare("anthropic", _body(_turns(2)), client=CLIENT))
        assert first.finish(answered, _answer("answer 1")) is None
        err = capsys.readouterr().err
        assert "another proxy saved this conversation first" in err and "not recorded" not in err
        assert _stored(first_workspace) == [m["content"] for m in _turns(2)]  # one conversation, each message once
        third = first.prepare("anthropic", _body(_turns(3)), client=CLIENT)  # the first proxy goes on from the store
        first.finish(third, _answer("answer 3"))
        assert _stored(first_workspace) == [m["content"] for m in _turns(3)] + ["answer 3"]


def test_a_whole_answer_reaches_the_client_while_its_record_is_still_being_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    workspace = Workspace(tmp_path)
    model = FakeModel([Turn(text=f"answer {turn}") for turn in range(3)])
    release = threading.Event()
    real_save = workspace.save

    def save(*args: Any, **kwargs: Any) -> Any:
        if len(args[2]) == 4:  # the second turn's record is held up
            release.wait(10)
        return real_save(*args, **kwargs)

    monkeypatch.setattr(workspace, "save", save)
    with FakeUpstream(model) as upstream, Running(Proxy(Recorder(workspace, SETTINGS), upstream.url, summarizer=None)) as proxy:
        with httpx.Client(base_url=proxy.url, headers=KEY, timeout=5) as client:
            assert client.post("/v1/messages", json=_body(_turns(0))).status_code == 200
            answered = client.post("/v1/messages", json=_body(_turns(1)))
            assert answered.json()["content"][0]["text"] == "answer 1"
            assert _stored(workspace) == ["question 0", "answer 0"]  # the record is still held up
            release.set()
            assert client.post("/v1/messages", json=_body(_turns(2))).status_code == 200  # after the record
    assert _stored(workspace) == [m["content"] for m in _turns(2)] + ["answer 2"]
