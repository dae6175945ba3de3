"""A Responses client that lets the provider hold the conversation: each request sends
only what is new, with ``previous_response_id`` naming the answer it continues (the
OpenAI SDK's documented way to keep state). The proxy records the whole conversation
(the history that answer ended, as it recorded it, then the new input), passes the
client's own body on below the threshold, and once a compaction is in force sends its
view instead, without ``previous_response_id``. ``FakeUpstream`` holds stored responses
as the API does (and refuses an id it never issued)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
import openai

from glyphpack import Workspace
from glyphpack._proxy.conversations import ProxySettings, Recorder
from glyphpack._proxy.server import Proxy, Running
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn, count_tokens
from tests.test_proxy import _tool_output

MODEL = "gpt-5.4"


def _client(url: str, key: str = "sk-stateful") -> Any:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def _turns(client: Any, calls: int, first: str = "Which service failed first? Read every log.") -> list[Any]:
    """A loop that sends only what is new: the task, then each call's output, each
    request naming the response before it."""
    responses = [client.responses.create(model=MODEL, input=first)]
    for _ in range(calls):
        (call,) = [item for item in responses[-1].output if item.type == "function_call"]
        output = {"type": "function_call_output", "call_id": call.call_id, "output": _tool_output(call.arguments)}
        responses.append(client.responses.create(model=MODEL, previous_response_id=responses[-1].id, input=[output]))
    return responses


def _script(calls: int) -> list[Turn]:
    return [Turn(text=f"Reading log {i}.", calls=(("read", {"path": f"svc{i}.log"}),)) for i in range(calls)] + [Turn(text="auth failed first.")]


def test_a_conversation_the_provider_holds_is_recorded_whole_and_forwarded_as_the_client_sent_it(tmp_path: Path) -> None:
    model = FakeModel(_script(3))
    with FakeUpstream(model) as upstream, Workspace(tmp_path) as workspace:
        recorder = Recorder(workspace, ProxySettings(context_window=200_000))
        with Running(Proxy(recorder, upstream.url, summarizer=None)) as proxy:
            responses = _turns(_client(proxy.url), 3)
            follow = _client(proxy.url).responses.create(model=MODEL, previous_response_id=responses[-1].id, input="And which one after it?")
        assert recorder._responses_due == {}  # each answer sent first, then recorded, is forgotten there
        ((conversation, agent),) = workspace.transcripts()
        stored = workspace.load(conversation, agent).messages
    assert responses[-1].output_text == "auth failed first." and follow.output_text == "auth failed first."
    assert set(model.statuses) == {200}
    # Upstream, each request as the client sent it: only what is new, after the response it names.
    assert [len(body["input"]) if isinstance(body["input"], list) else 1 for body in model.requests] == [1, 1, 1, 1, 1]
    assert [body.get("previous_response_id") for body in model.requests] == [None, *(r.id for r in responses)]
    # Recorded: one conversation, every message in order, each call with its real output.
    assert [m.role for m in stored] == ["user", *["assistant", "tool"] * 3, "assistant", "user", "assistant"]
    assert [r.text for m in stored for r in m.tool_results] == [_tool_output(f'{{"path": "svc{i}.log"}}') for i in range(3)]
    assert stored[-2].text == "And which one after it?"


def test_with_a_compaction_in_force_the_view_goes_instead_of_the_providers_conversation(tmp_path: Path) -> None:
    calls = 14
    model = FakeModel(_script(calls))
    settings = ProxySettings(context_window=40_000, threshold=12_000)
    with FakeUpstream(model) as upstream, Workspace(tmp_path) as workspace:
        with Running(Proxy(Recorder(workspace, settings), upstream.url, summarizer=None)) as proxy:
            responses = _turns(_client(proxy.url), calls)
        ((conversation, agent),) = workspace.transcripts()
        stored = workspace.load(conversation, agent).messages
    assert responses[-1].output_text == "auth failed first." and set(model.statuses) == {200}
    built = [n for n, body in enumerate(model.requests) if "previous_response_id" not in body][1:]  # the first has none to name
    assert built and built == list(range(built[0], calls + 1))  # from the first compaction on, every request
    # What went then is the view with the new output: its calls answered, less than the whole.
    whole = count_tokens({"model": MODEL, "input": model.stored[responses[built[0] - 1].id]})
    assert all(count_tokens(model.requests[n]) < whole for n in built)
    assert sum(len(m.tool_calls) for m in stored) == calls and len([m for m in stored if m.role == "tool"]) == calls


def test_a_response_this_proxy_did_not_record_or_another_clients_is_not_joined(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its new input is recorded on its own (every word kept, as before ids were read),
    the request goes as the client sent it, and no later request joins its answer: the
    proxy never holds that conversation, so it must never send a view of it."""
    model = FakeModel([Turn(text="first."), Turn(text="second."), Turn(text="third.")])
    with FakeUpstream(model) as upstream, Workspace(tmp_path) as workspace:
        with Running(Proxy(Recorder(workspace, ProxySettings(context_window=200_000)), upstream.url, summarizer=None)) as proxy:
            mine = _client(proxy.url).responses.create(model=MODEL, input="A task of mine.")
            with pytest.raises(openai.BadRequestError, match="not found"):  # the provider's answer, as it sent it
                _client(proxy.url).responses.create(model=MODEL, previous_response_id="resp_unknown", input="Go on.")
            other = _client(proxy.url, "sk-someone-else")
            theirs = other.responses.create(model=MODEL, previous_response_id=mine.id, input="Injected words.")
            other.responses.create(model=MODEL, previous_response_id=theirs.id, input="More of them.")
        stored = sorted([m.text for m in workspace.load(*key).messages] for key in workspace.transcripts())
    assert theirs.output_text == "second."  # the provider's to allow; the proxy keeps it out of the first client's conversation
    assert stored == [["A task of mine.", "first."], ["Go on."], ["Injected words.", "second."], ["More of them.", "third."]]
    assert [body.get("previous_response_id") for body in model.requests] == [None, "resp_unknown", mine.id, theirs.id]
    assert capsys.readouterr().err.count("continues a response this proxy did not record") == 3


def test_a_restarted_proxy_joins_a_response_the_one_before_it_recorded(tmp_path: Path) -> None:
    """The answer is stored under its response's id, so a proxy started anew on the
    workspace (or another proxy on it) finds it in the tree."""
    model = FakeModel([Turn(text="first."), Turn(text="second."), Turn(text="third.")])
    settings = ProxySettings(context_window=200_000)
    with FakeUpstream(model) as upstream:
        with Workspace(tmp_path) as workspace, Running(Proxy(Recorder(workspace, settings), upstream.url, summarizer=None)) as proxy:
            first = _client(proxy.url).responses.create(model=MODEL, input="A task.")
            second = _client(proxy.url).responses.create(model=MODEL, previous_response_id=first.id, input="More.")
        with Workspace(tmp_path) as workspace, Running(Proxy(Recorder(workspace, settings), upstream.url, summarizer=None)) as proxy:
            _client(proxy.url).responses.create(model=MODEL, previous_response_id=second.id, input="Last.")
    with Workspace(tmp_path) as workspace:  # once the proxy has stopped (an answer is recorded after the client has it)
        stored = [[m.text for m in workspace.load(*key).messages] for key in workspace.transcripts()]
    assert stored == [["A task.", "first.", "More.", "second.", "Last.", "third."]]
    assert [body.get("previous_response_id") for body in model.requests] == [None, first.id, second.id]  # as the client sent them


def test_a_response_id_the_workspace_holds_already_is_not_taken_again(tmp_path: Path) -> None:
    """A server that numbers its responses anew (a restarted local one, another
    deployment) reuses an id: the second answer is stored under an id of its own."""
    settings = ProxySettings(context_window=200_000)
    for task, answer in (("A task.", "first."), ("Another task.", "second.")):
        with FakeUpstream(FakeModel([Turn(text=answer)])) as upstream, Workspace(tmp_path) as workspace:
            with Running(Proxy(Recorder(workspace, settings), upstream.url, summarizer=None)) as proxy:
                assert _client(proxy.url).responses.create(model=MODEL, input=task).id == "resp_1"
    with Workspace(tmp_path) as workspace:
        stored = sorted([m.text for m in workspace.load(*key).messages] for key in workspace.transcripts())
    assert stored == [["A task.", "first."], ["Another task.", "second."]]


def test_continuing_an_earlier_response_goes_back_to_it_and_the_tree_keeps_the_path_left(tmp_path: Path) -> None:
    model = FakeModel([Turn(text="first."), Turn(text="second."), Turn(text="another second.")])
    with FakeUpstream(model) as upstream, Workspace(tmp_path) as workspace:
        with Running(Proxy(Recorder(workspace, ProxySettings(context_window=200_000)), upstream.url, summarizer=None)) as proxy:
            first = _client(proxy.url).responses.create(model=MODEL, input="A task.")
            _client(proxy.url).responses.create(model=MODEL, previous_response_id=first.id, input="One way on.")
            _client(proxy.url).responses.create(model=MODEL, previous_response_id=first.id, input="Another way on.")
        ((conversation, agent),) = workspace.transcripts()
        stored = [m.text for m in workspace.load(conversation, agent).messages]
        kept = {m.text for node in workspace.tree.nodes(conversation) for m in [node.message]}
    assert stored == ["A task.", "first.", "Another way on.", "another second."]
    assert {"One way on.", "second."} <= kept  # the path left stays in the tree


def test_an_answer_whose_id_is_not_text_is_recorded_under_an_id_of_its_own(tmp_path: Path) -> None:
    """An upstream that sends an id of another type (a compatible server's bug) never
    breaks the record."""
    from glyphpack._proxy.conversations import Recorder as RecorderType

    with Workspace(tmp_path) as workspace:
        recorder: RecorderType = Recorder(workspace, ProxySettings(context_window=200_000))
        body = {"model": MODEL, "input": "A task."}
        recorder.finish(recorder.prepare("openai-responses", body), {"id": "resp_a", "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "first."}]}]})  # fmt: skip
        other = {"model": MODEL, "input": "Another task."}  # another conversation's answer, due meanwhile
        recorder.finish(recorder.prepare("openai-responses", other), {"id": "resp_b", "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "other."}]}]})  # fmt: skip
        assert recorder.answer_due(recorder.prepare("openai-responses", {**other, "previous_response_id": "resp_b", "input": "Go on."}), {"id": "resp_c"})
        following = recorder.prepare("openai-responses", {**body, "previous_response_id": "resp_a", "input": "More."})
        assert recorder.answer_due(following, {"id": {"odd": 1}})
        recorder.finish(following, {"id": {"odd": 1}, "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "second."}]}]})
        stored = sorted([m.text for m in workspace.load(*key).messages] for key in workspace.transcripts())
        assert stored == [["A task.", "first.", "More.", "second."], ["Another task.", "other."]]
