"""``glyphpack proxy``: streams read as they pass, conversations recognized and recorded,
requests compacted and forwarded, driven by the official SDKs over real HTTP against a
fake upstream on 127.0.0.1 (``glyphpack.testing.fake.FakeUpstream``)."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("starlette")
import httpx

from glyphpack import Workspace
from glyphpack._cli import main
from glyphpack._compaction.summarize import Summarizer
from glyphpack._history.recall import RECALL_TOOL
from glyphpack._history.view import read_view
from glyphpack._proxy.conversations import AGENT, ANTHROPIC_CACHE_MARKS, ProxySettings, Recorder, cap_cache_marks
from glyphpack._proxy.histories import digests, history_of
from glyphpack._proxy.identity import BadRequest
from glyphpack._proxy.server import Proxy, Running
from glyphpack._proxy.streams import ACCUMULATORS, SseParser
from glyphpack._wire import provider_api, recall_tool
from glyphpack.testing.fake import (
    NEWEST_REF,
    SUMMARY_REQUEST,
    FakeModel,
    FakeUpstream,
    Turn,
    answer_body,
    count_tokens,
    fake_summary,
    sse_events,
    summary_prompt,
)
from glyphpack.testing.fake import _check_anthropic as fake_check_anthropic
from glyphpack.testing.fake import http as fake_http
from tests.harness_clients import installed

Json = dict[str, Any]
API_KEY = "sk-test-d0n0tst0re"
TASK = "Read every log file and tell me which service failed first."


# ---------------------------------------------------------------------- streams


def _events(stream: bytes, cuts: list[int]) -> list[tuple[str, str]]:
    parser = SseParser()
    events: list[tuple[str, str]] = []
    start = 0
    for cut in [*sorted(set(cuts)), len(stream)]:
        events += parser.feed(stream[start:cut])
        start = cut
    return events


@given(ending=st.sampled_from(["\n", "\r\n", "\r"]), cuts=st.lists(st.integers(0, 120), max_size=12))
def test_sse_events_read_the_same_whatever_the_line_endings_and_chunks(ending: str, cuts: list[int]) -> None:
    text = ": comment\nevent: one\ndata: {\"a\":\ndata: 1}\n\ndata: [DONE]\nid: 7\n\nevent: empty\n\n"
    stream = text.replace("\n", ending).encode()
    assert _events(stream, [c for c in cuts if c < len(stream)]) == [("one", '{"a":\n1}'), ("message", "[DONE]")]


_turns = st.builds(
    Turn,
    text=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
    calls=st.lists(
        st.tuples(st.sampled_from(["Bash", "Read"]), st.fixed_dictionaries({"command": st.text(max_size=30)})), max_size=3
    ).map(tuple),
)


@given(api=st.sampled_from(sorted(ACCUMULATORS)), turn=_turns, data=st.data())
def test_a_stream_accumulates_to_the_response_it_streams(api: str, turn: Turn, data: st.DataObject) -> None:
    if not turn.text and not turn.calls:
        turn = Turn(text="ok")
    answer = answer_body(api, turn, 3, 1234)
    stream = b"".join(sse_events(api, answer, usage=True))
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=20))
    accumulator = ACCUMULATORS[api]()
    start = 0
    for cut in [*sorted(set(cuts)), len(stream)]:
        accumulator.feed(stream[start:cut])
        start = cut
    result = accumulator.result()
    assert result is not None
    build = provider_api(api)
    streamed, whole = build.parse(result), build.parse(answer)
    assert streamed.message.content == whole.message.content
    assert streamed.input_tokens == whole.input_tokens == 1234
    if api == "anthropic":
        assert result == answer  # the Messages stream rebuilds the very response
    elif api == "openai-responses":
        assert result == answer  # the completed event carries the very response
    elif api == "gemini":  # each event a response of its own: the parts joined, the end and usage of the last
        assert result["candidates"][0]["content"]["parts"] == answer["candidates"][0]["content"]["parts"]
        assert {k: result[k] for k in ("usageMetadata", "modelVersion")} == {k: answer[k] for k in ("usageMetadata", "modelVersion")}
        assert result["candidates"][0]["finishReason"] == answer["candidates"][0]["finishReason"]
    else:  # the Chat stream: the same head, finish and usage
        assert {k: result[k] for k in ("id", "created", "model", "usage", "object")} == {k: answer[k] for k in ("id", "created", "model", "usage", "object")}
        assert result["choices"][0]["finish_reason"] == answer["choices"][0]["finish_reason"]


def test_an_anthropic_stream_with_thinking_and_citations_rebuilds_them_whole() -> None:
    """Thinking streams as text and signature deltas, a citation as its own delta: the
    answer recorded has them whole, in their blocks, in order."""

    def event(kind: str, **fields: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()

    citation = {"type": "char_location", "cited_text": "auth failed", "document_index": 0, "start_char_index": 0, "end_char_index": 11}
    head = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-8", "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": 40, "output_tokens": 1}}
    events = [
        event("message_start", message=head),
        event("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
        event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "The logs say "}),
        event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "auth."}),
        event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "EqQBCkYI"}),
        event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "AhgCIkDp"}),
        event("content_block_stop", index=0),
        event("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        event("content_block_delta", index=1, delta={"type": "citations_delta", "citation": citation}),
        event("content_block_delta", index=1, delta={"type": "text_delta", "text": "Auth "}),
        event("content_block_delta", index=1, delta={"type": "text_delta", "text": "failed first."}),
        event("content_block_stop", index=1),
        event("message_delta", delta={"stop_reason": "end_turn", "stop_sequence": None}, usage={"output_tokens": 12}),
        event("message_stop"),
    ]
    accumulator = ACCUMULATORS["anthropic"]()
    for piece in events:
        accumulator.feed(piece)
    assert accumulator.result() == {
        **head,
        "content": [
            {"type": "thinking", "thinking": "The logs say auth.", "signature": "EqQBCkYIAhgCIkDp"},
            {"type": "text", "text": "Auth failed first.", "citations": [citation]},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 40, "output_tokens": 12},
    }
    stray = ACCUMULATORS["anthropic"]()  # a delta for a block that never started: nothing is recorded
    for piece in [events[0], events[2], *events[-2:]]:
        stray.feed(piece)
    assert stray.result() is None


@pytest.mark.parametrize("api", sorted(ACCUMULATORS))
def test_a_stream_that_ends_early_or_fails_records_nothing(api: str) -> None:
    events = sse_events(api, answer_body(api, Turn(text="half an answer"), 1, 10), usage=True)
    cut = ACCUMULATORS[api]()
    for event in events[:-2]:
        cut.feed(event)
    assert cut.result() is None
    failed = ACCUMULATORS[api]()
    for event in [*events[:-1], b'event: error\ndata: {"type": "error", "error": {"message": "overloaded"}}\n\n', events[-1]]:
        failed.feed(event)
    assert failed.result() is None
    whole = ACCUMULATORS[api]()
    for event in events:
        whole.feed(event)
    assert whole.result() is not None


# ---------------------------------------------------------------------- the recorder


def _anthropic_body(messages: list[Json], **extra: Any) -> Json:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": "You are terse.", "messages": messages, **extra}


def _answer(text: str) -> Json:
    return answer_body("anthropic", Turn(text=text), 1, 100)


def _stored(workspace: Workspace) -> dict[str, list[str]]:
    """Each stored conversation's messages as role: text."""
    return {
        conversation: [f"{m.role}: {m.text}" for m in workspace.load(conversation, agent).messages]
        for conversation, agent in workspace.transcripts()
    }


def test_a_request_that_continues_a_stored_history_is_appended_to_it(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace)
    first = [{"role": "user", "content": TASK}]
    recorder.finish(recorder.prepare("anthropic", _anthropic_body(first)), _answer("which logs?"))
    second = [*first, {"role": "assistant", "content": "which logs?"}, {"role": "user", "content": "those in /var/log"}]
    exchange = recorder.prepare("anthropic", _anthropic_body(second))
    recorder.finish(exchange, _answer("auth failed first"))
    assert exchange.session is not None
    conversation = exchange.session.conversation
    # Only a whole stored history is continued: another run of the same task, which
    # begins like this conversation's past and then goes elsewhere, is its own.
    for elsewhere in (
        [*first, {"role": "assistant", "content": "which logs?"}, {"role": "user", "content": "never mind"}],
        [{"role": "user", "content": TASK + " "}],
    ):
        exchange = recorder.prepare("anthropic", _anthropic_body(elsewhere))
        recorder.flush(exchange)  # no answer came: saved as the server saves it
        assert exchange.session is not None and exchange.session.conversation != conversation
    stored = _stored(workspace)
    assert stored[conversation] == ["system: You are terse.", f"user: {TASK}", "assistant: which logs?", "user: those in /var/log", "assistant: auth failed first"]
    assert sorted(len(m) for m in stored.values()) == [2, 4, 5]
    # Another process on the same workspace (a restart) finds it from what is stored.
    restarted = Recorder(Workspace(tmp_path))
    assert restarted.index_workspace() == 3
    third = [*second, {"role": "assistant", "content": "auth failed first"}, {"role": "user", "content": "why?"}]
    exchange = restarted.prepare("anthropic", _anthropic_body(third))
    restarted.flush(exchange)
    assert exchange.session is not None and exchange.session.conversation == conversation
    assert len(Workspace(tmp_path).load(conversation, AGENT).messages) == 6


def test_a_subagent_is_recorded_as_an_agent_of_the_conversation_that_called_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Claude Code's Agent tool: the subagent's requests begin with the call's prompt
    (after its own system prompt); they go into the caller's conversation as an agent
    named for the call, and the caller's own history goes on beside it."""
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace)
    prompt = "Look at the svc logs and report the first failure."
    call = {"description": "find the failure", "prompt": prompt, "subagent_type": "Explore"}
    parent = [{"role": "user", "content": TASK}]
    exchange = recorder.prepare("anthropic", _anthropic_body(parent))
    answer = answer_body("anthropic", Turn(calls=(("Agent", call),)), 1, 100)
    recorder.finish(exchange, answer)
    assert exchange.session is not None
    conversation, (use,) = exchange.session.conversation, answer["content"]
    sub = recorder.prepare("anthropic", {**_anthropic_body([{"role": "user", "content": [{"type": "text", "text": "<system-reminder>cwd</system-reminder>"}, {"type": "text", "text": prompt}]}]), "system": "You are an Explore agent."})
    recorder.finish(sub, _answer("auth failed first"))
    assert sub.session is not None and (sub.session.conversation, sub.session.agent) == (conversation, f"Explore-{use['id'][-8:]}")
    back = [*parent, {"role": "assistant", "content": [use]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "auth failed first"}]}]
    resumed = recorder.prepare("anthropic", _anthropic_body(back))
    assert resumed.session is not None and (resumed.session.conversation, resumed.session.agent) == (conversation, AGENT)
    assert workspace.transcripts() == sorted([(conversation, AGENT), (conversation, f"Explore-{use['id'][-8:]}")])
    # A history that merely mentions the prompt, with no call waiting on it, is its own.
    other = recorder.prepare("anthropic", _anthropic_body([{"role": "user", "content": prompt}]))
    assert other.session is not None and other.session.conversation != conversation
    # Nor does a prompt argument of another tool's waiting call make one.
    elsewhere = recorder.prepare("anthropic", _anthropic_body([{"role": "user", "content": "run the checker"}]))
    recorder.finish(elsewhere, answer_body("anthropic", Turn(calls=(("Bash", {"command": "check", "prompt": "say yes"}),)), 1, 100))
    asked = recorder.prepare("anthropic", _anthropic_body([{"role": "user", "content": "say yes"}]))
    assert asked.session is not None and asked.session.agent == AGENT and asked.session.conversation != elsewhere.session.conversation  # type: ignore[union-attr]
    assert main(["tree", str(tmp_path), conversation]) == 0
    assert f"(Explore-{use['id'][-8:]})" in capsys.readouterr().out


def test_a_retried_request_moves_the_transcript_back_and_the_tree_keeps_the_first_answer(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace)
    body = _anthropic_body([{"role": "user", "content": TASK}])
    recorder.finish(recorder.prepare("anthropic", body), _answer("first try"))
    exchange = recorder.prepare("anthropic", body)  # the client retries: it never got the answer
    recorder.finish(exchange, _answer("second try"))
    assert exchange.session is not None
    conversation = exchange.session.conversation
    assert [m.text for m in workspace.load(conversation, AGENT).messages][-1] == "second try"
    texts = {m.text for node in workspace.tree.nodes(conversation) for m in [node.message]}
    assert {"first try", "second try"} <= texts
    # After a restart too: the stored history before its last answer is known.
    restarted = Recorder(Workspace(tmp_path))
    restarted.index_workspace()
    assert restarted.prepare("anthropic", body).session.conversation == conversation  # type: ignore[union-attr]
    assert len(workspace.transcripts()) == 1


def test_below_the_threshold_the_clients_own_body_goes_upstream(tmp_path: Path) -> None:
    recorder = Recorder(Workspace(tmp_path))
    body = _anthropic_body([{"role": "user", "content": [{"type": "text", "text": TASK, "cache_control": {"type": "ephemeral"}}]}])
    exchange = recorder.prepare("anthropic", body)
    assert exchange.forwarded is body and exchange.session is not None and not exchange.compacted


def test_below_the_threshold_no_request_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cheap when idle: the client's bytes go upstream as they came, so nothing is
    converted to the provider's shape; once a compaction is in force, it is."""
    built: list[int] = []
    api = provider_api("anthropic")
    original = type(api).build
    monkeypatch.setattr(type(api), "build", lambda self, *args, **kwargs: built.append(1) or original(self, *args, **kwargs))
    recorder = Recorder(Workspace(tmp_path), ProxySettings(context_window=24_000, threshold=9_000))
    history = [{"role": "user", "content": TASK}]
    for turn in range(3):
        exchange = recorder.prepare("anthropic", _anthropic_body(list(history)), Summarizer(fake_summary))
        assert exchange.forwarded is exchange.body and not exchange.compacted
        recorder.finish(exchange, answer_body("anthropic", Turn(text=f"answer {turn}"), turn, count_tokens(exchange.forwarded)))
        history += [{"role": "assistant", "content": f"answer {turn}"}, {"role": "user", "content": "go on"}]
    assert built == []
    for turn in range(3, 10):  # over the threshold: compacted, so built
        history[-1] = {"role": "user", "content": f"log {turn}: " + "auth ok; " * 800}
        exchange = recorder.prepare("anthropic", _anthropic_body(list(history)), Summarizer(fake_summary))
        recorder.finish(exchange, answer_body("anthropic", Turn(text=f"answer {turn}"), turn, count_tokens(exchange.forwarded)))
        history += [{"role": "assistant", "content": f"answer {turn}"}, {"role": "user", "content": "go on"}]
    exchange = recorder.prepare("anthropic", _anthropic_body(list(history)), Summarizer(fake_summary))
    assert exchange.session is not None and exchange.session.view is not None  # a compaction is in force
    assert exchange.forwarded is not exchange.body and built


@pytest.mark.parametrize("instructions", [None, "Answer in English."])
def test_a_compacted_responses_request_keeps_the_clients_developer_items(tmp_path: Path, instructions: str | None) -> None:
    """Codex sends its system prompt as developer items in ``input`` (found running Codex
    CLI through the proxy: after a compaction the prompt was gone, 7,030 tokens to 1,504).
    Whatever the client's ``instructions`` do not carry goes first in ``input``."""
    recorder = Recorder(Workspace(tmp_path), ProxySettings(context_window=24_000, threshold=9_000))
    developer = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex. Run commands with exec_command."}]}
    history: list[Json] = [developer, {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]}]
    extra = {"instructions": instructions} if instructions else {}
    for turn in range(12):
        body = {"model": "gpt-5.4", "input": list(history), **extra}
        exchange = recorder.prepare("openai-responses", body, Summarizer(fake_summary))
        recorder.finish(exchange, answer_body("openai-responses", Turn(text=f"noted {turn}"), turn, count_tokens(exchange.forwarded)))
        history += [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"noted {turn}"}]},
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"log {turn}: " + "auth ok; db slow; " * 200}]}]
    assert exchange.forwarded is not exchange.body  # compacted
    first = exchange.forwarded["input"][0]
    assert first == developer  # a whole developer item, as the client sent it
    assert exchange.forwarded.get("instructions") == instructions  # the client's own, as it sent them
    assert json.dumps(exchange.forwarded).count("You are Codex.") == 1


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ([1, 2], "the request body must be a JSON object, not list"),
        ({"messages": [{"role": "user", "content": "x"}]}, "model: a model id is required"),
        ({"model": "claude-sonnet-4-5", "messages": "hello"}, "messages: expected a list of objects, got str"),
        ({"model": "claude-sonnet-4-5", "messages": ["hello"]}, "messages: expected a list of objects, got list"),
    ],
)
def test_a_body_the_proxy_cannot_read_is_refused_and_nothing_is_stored(tmp_path: Path, body: object, problem: str) -> None:
    workspace = Workspace(tmp_path)
    with pytest.raises(BadRequest, match=problem):
        Recorder(workspace).prepare("anthropic", body)
    assert workspace.transcripts() == []


def test_a_history_glyphpack_cannot_read_goes_to_the_provider_as_it_came(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = Workspace(tmp_path)
    body = _anthropic_body([{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "@@"}}]}])
    exchange = Recorder(workspace).prepare("anthropic", body)
    assert exchange.forwarded is body and exchange.session is None
    assert "not recorded: message 0: an image's data is not valid base64" in capsys.readouterr().err
    assert workspace.transcripts() == []


def test_a_compacted_request_keeps_the_clients_cache_marks_and_stays_within_anthropics_limit(tmp_path: Path) -> None:
    """Claude Code marks its system prompt and tools; the session marks the compaction's
    end and the newest message: together over Anthropic's four, which it refuses. The
    oldest of the session's give way; the client's stay."""
    system = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}}]
    tools = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}]
    messages: list[Json] = [{"role": "user", "content": TASK}]
    for i in range(14):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"cat {i}.log"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": _tool_output(str(i))}]},
        ]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": system, "tools": tools, "messages": messages}
    summarizer = Summarizer(fake_summary)
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    exchange = recorder.prepare("anthropic", body, summarizer)
    assert exchange.compacted
    # The request after the compaction marks its end and the newest message.
    answer = answer_body("anthropic", Turn(calls=(("Bash", {"command": "ls"}),)), 2, 100)
    recorder.finish(exchange, answer)
    (call,) = answer["content"]
    body["messages"] = [*messages, {"role": "assistant", "content": [call]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "a.log"}]}]
    exchange = recorder.prepare("anthropic", body, summarizer)
    assert exchange.compacted and exchange.session is not None and 0 < exchange.session.last_request.prefix < exchange.session.last_request.messages  # type: ignore[union-attr]
    forwarded = exchange.forwarded
    # The client's system and tools, marks and all; then the recall tool the proxy answers.
    assert forwarded["system"] == system and forwarded["tools"] == [*tools, recall_tool("anthropic")]
    assert json.dumps(forwarded).count("cache_control") == ANTHROPIC_CACHE_MARKS
    assert "cache_control" in json.dumps(forwarded["messages"][-1])  # the newest message keeps its mark
    assert fake_check_anthropic(forwarded) is None


@pytest.mark.slow  # two compactions, one with pages (about 3 s)
def test_glyphpack_tree_marks_where_each_compaction_in_force_ends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from glyphpack import open_session

    with Workspace(tmp_path) as workspace:
        recorder = Recorder(workspace, SETTINGS)
        messages: list[Json] = [{"role": "user", "content": TASK}]
        for i in range(14):
            messages += [
                {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"cat {i}.log"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": _tool_output(str(i))}]},
            ]
        exchange = recorder.prepare("anthropic", {"model": "claude-sonnet-4-5", "messages": messages}, Summarizer(fake_summary))
        assert exchange.compacted and exchange.session is not None
        conversation = exchange.session.conversation
        recorder.close()
    with open_session(tmp_path, conversation, AGENT, model="claude-sonnet-4-5", summarizer=Summarizer(fake_summary), context_window=24_000) as session:
        session.compact(2_000)
        view = session.view
    assert view is not None
    assert main(["tree", str(tmp_path), conversation]) == 0
    drawn = [line for line in capsys.readouterr().out.splitlines() if "compacted" in line]
    (line,) = [line for line in drawn if f"[{view.covers[:8]}]  <- tip" in line]  # the whole transcript: its end is the tip
    assert line.endswith(f"main: {len(view.messages)} messages stand for 29 (/compact, in force))")
    # the proxy's own compaction before it is marked too, on its own message (or on the
    # same one, when both stand for the same messages)
    assert sum("(proactive, earlier)" in line for line in drawn) == 1


def _marked(count: int) -> list[Json]:
    return [{"type": "text", "text": f"t{i}", "cache_control": {"type": "ephemeral"}} for i in range(count)]


@pytest.mark.parametrize(("system", "tools", "in_messages", "kept"), [(1, 1, 2, 2), (1, 1, 3, 2), (2, 1, 3, 1), (0, 0, 4, 4), (0, 0, 5, 4), (3, 2, 2, 0)])
def test_cache_marks_are_cut_to_anthropics_limit_from_the_oldest_message(system: int, tools: int, in_messages: int, kept: int) -> None:
    body = {"system": _marked(system), "tools": _marked(tools), "messages": [{"role": "user", "content": _marked(in_messages)}]}
    cap_cache_marks(body)
    blocks = body["messages"][0]["content"]
    assert ["cache_control" in b for b in blocks] == [False] * (in_messages - kept) + [True] * kept
    assert sum("cache_control" in b for b in [*body["system"], *body["tools"]]) == system + tools
    assert system + tools > ANTHROPIC_CACHE_MARKS or json.dumps(body).count("cache_control") <= ANTHROPIC_CACHE_MARKS


def test_digests_ignore_ids_and_thinking_and_see_every_other_change() -> None:
    wire = [{"role": "user", "content": TASK}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "ok"}]}]
    once, again = history_of("anthropic", {"messages": wire}), history_of("anthropic", {"messages": wire})
    assert [m.id for m in once] != [m.id for m in again] and digests(once) == digests(again)
    without_thinking = history_of("anthropic", {"messages": [wire[0], {"role": "assistant", "content": "ok"}]})
    assert digests(without_thinking) == digests(once)
    changed = history_of("anthropic", {"messages": [wire[0], {"role": "assistant", "content": "ok!"}]})
    assert digests(changed)[0] == digests(once)[0] and digests(changed)[1] != digests(once)[1]
    as_system = history_of("anthropic", {"messages": [wire[0]], "system": TASK})
    assert digests(as_system)[0] != digests(once)[0]


# ---------------------------------------------------------------------- over HTTP, with the SDKs

#: Small enough that a dozen tool results cross it; large enough that the ladder fits.
SETTINGS = ProxySettings(context_window=24_000, threshold=9_000)
TOOL = {"name": "Bash", "description": "Run a shell command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}


def _tool_output(command: str) -> str:
    """About 2,400 characters a command printed (seeded by the command: the same each run)."""
    rng = random.Random(command)
    words = ["service", "started", "failed", "retry", "timeout", "auth", "db", "cache", "ok", "warn", "GET", "POST", "/api/v1"]
    return "\n".join(f"{10 + i:02d}:00:{rng.randrange(60):02d} {' '.join(rng.choices(words, k=8))}" for i in range(48))


def _script(calls: int) -> list[Turn]:
    return [Turn(text=f"Looking at log {i}.", calls=(("Bash", {"command": f"cat /var/log/svc{i}.log"}),)) for i in range(calls)] + [
        Turn(text="auth failed first, at 10:00:03.")
    ]


class Harness:
    """A minimal agent loop over one official SDK, as a harness author writes it: the
    whole history sent every time, tool results answered from ``_tool_output``."""

    def __init__(self, api: str, base_url: str, *, stream: bool):
        self.api, self.stream = api, stream
        if api == "anthropic":
            import anthropic

            self.client: Any = anthropic.Anthropic(base_url=base_url, api_key=API_KEY, max_retries=0)
        elif api == "gemini":
            from google import genai

            self.client = genai.Client(api_key=API_KEY, http_options={"base_url": base_url, "retry_options": {"attempts": 1}})
        else:
            import openai

            self.client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=API_KEY, max_retries=0)
        self.history: list[Any] = [{"role": "user", "parts": [{"text": TASK}]}] if api == "gemini" else [{"role": "user", "content": TASK}]

    def run(self, limit: int = 40) -> str:
        for _ in range(limit):
            done = getattr(self, f"_turn_{self.api.replace('-', '_')}")()
            if done is not None:
                return done
        raise AssertionError("the loop did not finish")

    def _turn_anthropic(self) -> str | None:
        tools = [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["parameters"]}]
        request = {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": "You are terse.", "messages": self.history, "tools": tools}
        if self.stream:
            with self.client.messages.stream(**request) as events:
                response = events.get_final_message()
        else:
            response = self.client.messages.create(**request)
        self.history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]})
        calls = [b for b in response.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in response.content if b.type == "text")
        self.history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.id, "content": _tool_output(c.input["command"])} for c in calls]})
        return None

    def _turn_gemini(self) -> str | None:
        config = {"system_instruction": "You are terse.", "tools": [{"function_declarations": [TOOL]}]}
        request = {"model": "gemini-2.5-flash", "contents": self.history, "config": config}
        if self.stream:
            chunks = list(self.client.models.generate_content_stream(**request))
            parts = [p for c in chunks for p in (c.candidates[0].content.parts or ())]
        else:
            parts = list(self.client.models.generate_content(**request).candidates[0].content.parts)
        self.history.append({"role": "model", "parts": [p.model_dump(exclude_none=True) for p in parts]})
        calls = [p.function_call for p in parts if p.function_call]
        if not calls:
            return "".join(p.text for p in parts if p.text)
        self.history.append({"role": "user", "parts": [
            {"function_response": {"id": c.id, "name": c.name, "response": {"output": _tool_output(c.args["command"])}}} for c in calls]})
        return None

    def _turn_openai_chat(self) -> str | None:
        request = {"model": "gpt-5.4", "messages": self.history, "tools": [{"type": "function", "function": TOOL}]}
        if self.stream:
            with self.client.chat.completions.stream(**request, stream_options={"include_usage": True}) as events:
                message = events.get_final_completion().choices[0].message
        else:
            message = self.client.chat.completions.create(**request).choices[0].message
        self.history.append(message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            self.history.append({"role": "tool", "tool_call_id": call.id, "content": _tool_output(json.loads(call.function.arguments)["command"])})
        return None

    def _turn_openai_responses(self) -> str | None:
        request = {"model": "gpt-5.4", "input": self.history, "tools": [{"type": "function", **TOOL}], "store": False, "include": ["reasoning.encrypted_content"]}
        if self.stream:
            with self.client.responses.stream(**request) as events:
                response = events.get_final_response()
        else:
            response = self.client.responses.create(**request)
        self.history += [item.model_dump(exclude_none=True) for item in response.output]
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return response.output_text
        self.history += [{"type": "function_call_output", "call_id": c.call_id, "output": _tool_output(json.loads(c.arguments)["command"])} for c in calls]
        return None


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    with Workspace(tmp_path / "ws") as ws:
        yield ws


def _serve(workspace: Workspace, upstream: FakeUpstream, settings: ProxySettings = SETTINGS) -> Running:
    return Running(Proxy(Recorder(workspace, settings), upstream.url))


def _credentials_of(headers: dict[str, str]) -> dict[str, str]:
    """The credential headers a client sent (as the upstream saw them): the SDK sends its
    key as x-api-key or as a bearer token, by version. A status request with them gets
    that client's totals."""
    from glyphpack._proxy.identity import CREDENTIAL_HEADERS

    return {name: value for name, value in headers.items() if name in CREDENTIAL_HEADERS}


def _task_of(api: str, body: Json) -> str:
    first = [m for m in body[provider_api(api).request_key] if m.get("role") == "user"][0]
    content = first["parts"] if api == "gemini" else first["content"]
    return content if isinstance(content, str) else content[0]["text"]


@pytest.mark.parametrize(
    ("api", "stream"),
    [
        # One runs by default; the rest in CI (each loop takes 1-3 s).
        ("anthropic", True),
        pytest.param("openai-chat", True, marks=pytest.mark.slow),
        pytest.param("anthropic", False, marks=pytest.mark.slow),
        pytest.param("openai-chat", False, marks=pytest.mark.slow),
        pytest.param("openai-responses", False, marks=pytest.mark.slow),
        pytest.param("openai-responses", True, marks=pytest.mark.slow),
        pytest.param("gemini", True, marks=pytest.mark.slow),
        pytest.param("gemini", False, marks=pytest.mark.slow),
    ],
)
def test_an_sdk_loop_through_the_proxy_is_compacted_at_the_threshold_and_every_request_is_accepted(
    workspace: Workspace, api: str, stream: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    model = FakeModel(_script(14))
    with FakeUpstream(model) as upstream, _serve(workspace, upstream) as proxy:
        harness = Harness(api, proxy.url, stream=stream)
        assert harness.run() == "auth failed first, at 10:00:03."
    assert set(model.statuses) == {200}  # the upstream accepted every request, and the client saw no error
    key = provider_api(api).request_key
    agent = [body for body in model.requests if summary_prompt(body) is None]
    summaries = [body for body in model.requests if summary_prompt(body) is not None]
    assert len(agent) == 15 and all(_task_of(api, body) == TASK for body in agent)  # the task stays verbatim
    tokens = [count_tokens(body) for body in agent]
    compacted = [i for i in range(1, len(agent)) if tokens[i] < tokens[i - 1]]
    # Compacted once, at the threshold, to the target: the summary (through the upstream,
    # with the caller's key) made room for the rest of the run. Gemini bills a page at
    # 258 tokens a 768-pixel tile: there the pages alone make the room.
    assert len(compacted) == 1 and len(summaries) >= (0 if api == "gemini" else 1), tokens
    first = compacted[0]
    # Compacted to the session's target (by the provider's count, within the 5% the
    # calibration may be off): about half of what the threshold allowed.
    from glyphpack._session.compactor import Thresholds

    target = Thresholds.for_window(SETTINGS.context_window, SETTINGS.threshold).target_for(0)  # type: ignore[arg-type]
    assert tokens[first] <= target * 1.05 < tokens[first - 1] and max(tokens) < SETTINGS.threshold  # type: ignore[operator]
    assert all(a < b for a, b in zip(tokens[:first], tokens[1:first]))  # before it, the client's whole history
    # After it the forwarded prefix stays byte-stable (a prompt cache reads it).
    for before, after in zip(agent[first:], agent[first + 1 :]):
        assert after[key][: len(before[key]) - 1] == before[key][:-1]
    # Every request, the summarizer's included, carried the caller's key (the SDK sends
    # it as x-api-key or as a bearer token, by version); the workspace holds it nowhere.
    assert len(upstream.headers) == len(model.requests)
    assert all(API_KEY in (h.get("x-api-key"), h.get("x-goog-api-key"), h.get("authorization", "").removeprefix("Bearer ")) for h in upstream.headers)
    # A summary request carries the caller's credentials once: one header, its key.
    for body, raw in zip(model.requests, upstream.raw_headers):
        if summary_prompt(body) is not None:
            credentials = [(k, v) for k, v in raw if k in ("x-api-key", "x-goog-api-key", "authorization")]
            assert len(credentials) == 1 and API_KEY in credentials[0][1], credentials
    files = [p for p in Path(workspace.path).rglob("*") if p.is_file()]
    assert files and not [p for p in files if API_KEY.encode() in p.read_bytes()]
    # Nothing the client sent is lost: the transcript holds its whole history and the answer.
    ((conversation, agent_name),) = workspace.transcripts()
    # What the proxy ran with is remembered: `glyphpack context WS CONVERSATION` uses it.
    model_name = "gemini-2.5-flash" if api == "gemini" else agent[0]["model"]  # Gemini names it in the path
    assert workspace.settings(conversation, agent_name) == {"model": model_name, "context_window": 24_000, "threshold": 9_000}
    stored = workspace.load(conversation, agent_name).messages
    system = {"system": "You are terse."} if api == "anthropic" else {"systemInstruction": {"parts": [{"text": "You are terse."}]}} if api == "gemini" else {}
    theirs = history_of(api, {"model": "m", key: harness.history, **system})
    assert digests(stored) == digests(theirs)
    assert stored[-1].role == "assistant" and stored[-1].text.endswith("auth failed first, at 10:00:03.")
    # glyphpack tree shows where the compaction in force ends and what it stands for.
    view = read_view(workspace, conversation, agent_name)
    assert view is not None and view.trigger == "proactive"
    covered = [m.id for m in stored].index(view.covers) + 1
    assert main(["tree", str(workspace.path)]) == 0
    drawn = [line for line in capsys.readouterr().out.splitlines() if "compacted" in line]
    assert drawn == [line for line in drawn if line.endswith(f"[{view.covers[:8]}]  <- compacted up to here (main: {len(view.messages)} messages stand for {covered}{f', {view.pages} page(s)' if view.pages else ''} (proactive, in force))")]
    assert len(drawn) == 1


@pytest.mark.parametrize(
    ("api", "fault"),
    [
        ("anthropic", "429"),
        pytest.param("anthropic", "529", marks=pytest.mark.slow),
        pytest.param("openai-chat", "401", marks=pytest.mark.slow),
        pytest.param("openai-responses", "garbage", marks=pytest.mark.slow),
        pytest.param("gemini", "429", marks=pytest.mark.slow),
    ],
)
def test_a_refused_summary_request_never_fails_the_clients_request(
    workspace: Workspace, api: str, fault: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The upstream refuses every summary the proxy asks for itself (429, 529, 401, or an
    answer that is not JSON): each client request still goes, as the free rungs and the
    pages leave it, and is answered; no 500, no traceback. Gemini's client sends its key
    in the query, where the summary request carries it too."""
    model = FakeModel(_script(14), summary_faults={0: fault})
    with FakeUpstream(model) as upstream, _serve(workspace, upstream) as proxy:
        harness = Harness(api, proxy.url, stream=False)
        if api == "gemini":  # the key in the query, as Gemini CLI's API-key mode may send it
            from google import genai

            harness.client = genai.Client(api_key=API_KEY, http_options={"base_url": proxy.url, "retry_options": {"attempts": 1}})
        assert harness.run() == "auth failed first, at 10:00:03."
    summaries = [status for status, body in zip(model.statuses, model.requests) if summary_prompt(body) is not None]
    agent = [status for status, body in zip(model.statuses, model.requests) if summary_prompt(body) is None]
    assert agent == [200] * 15 and model.summaries == len(summaries)
    if api != "gemini":  # Gemini's pages are cheap enough that no summary is asked for
        assert summaries and set(summaries) == ({200} if fault == "garbage" else {int(fault)})
    # Recorded and compacted all the same: every forwarded request under the threshold, the
    # client's whole history in the transcript.
    assert max(count_tokens(body) for body in model.requests if summary_prompt(body) is None) < SETTINGS.threshold  # type: ignore[operator]
    ((conversation, agent_name),) = workspace.transcripts()
    system = {"system": "You are terse."} if api == "anthropic" else {"systemInstruction": {"parts": [{"text": "You are terse."}]}} if api == "gemini" else {}
    theirs = history_of(api, {"model": "m", provider_api(api).request_key: harness.history, **system})
    assert digests(workspace.load(conversation, agent_name).messages) == digests(theirs)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "not recorded" not in err and API_KEY not in err


class BalancedHarness(Harness):
    """The same loop behind a load balancer: each request goes to the next of several proxies."""

    def __init__(self, urls: list[str]):
        super().__init__("anthropic", urls[0], stream=False)
        self.clients = [self.client.with_options(base_url=url) for url in urls]
        self.sent = 0

    def _turn_anthropic(self) -> str | None:
        self.client = self.clients[self.sent % len(self.clients)]
        self.sent += 1
        return super()._turn_anthropic()


@pytest.mark.slow  # two SDK loops of 15 requests (about 3 s each)
def test_two_proxies_on_one_workspace_continue_one_conversation_between_them(workspace_location: str) -> None:
    """A fleet: two proxies (two processes' worth: each its own workspace connection and
    index) behind one client that alternates between them. Each finds what the other
    recorded through the store's index, so the run is one conversation, compacted once,
    every request accepted, and the transcript holds the client's whole history."""
    model = FakeModel(_script(14))
    with Workspace(workspace_location) as first_ws, Workspace(workspace_location) as second_ws, FakeUpstream(model) as upstream:
        with _serve(first_ws, upstream) as first, _serve(second_ws, upstream) as second:
            harness = BalancedHarness([first.url, second.url])
            assert harness.run() == "auth failed first, at 10:00:03."
        assert set(model.statuses) == {200}
        ((conversation, agent),) = first_ws.transcripts()
        stored = first_ws.load(conversation, agent).messages
        system = {"system": "You are terse."}
        assert digests(stored) == digests(history_of("anthropic", {"model": "m", "messages": harness.history, **system}))
        agent_requests = [body for body in model.requests if summary_prompt(body) is None]
        tokens = [count_tokens(body) for body in agent_requests]
        assert len(agent_requests) == 15 and sum(b < a for a, b in zip(tokens, tokens[1:])) == 1  # compacted once
        assert read_view(second_ws, conversation, agent) is not None
        # The store's index holds this history's ends, no more (bounded: two per history).
        assert first_ws.tree.ending_with(list(Recorder(first_ws).histories.chain((conversation, agent), stored).digests)) == [(conversation, agent)]


@pytest.mark.slow  # waits for a stream paced at 0.25 s per event (about 2 s)
def test_a_stream_reaches_the_client_as_it_comes_and_is_recorded_when_it_ends(workspace: Workspace) -> None:
    import anthropic

    delay = 0.25
    model = FakeModel([Turn(text="The auth service failed first, at 10:00:03; the others followed.")])
    with FakeUpstream(model, event_delay=delay) as upstream, _serve(workspace, upstream) as proxy:
        client = anthropic.Anthropic(base_url=proxy.url, api_key=API_KEY)
        started = time.perf_counter()
        arrivals = []
        with client.messages.stream(model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": TASK}]) as stream:
            for _ in stream:
                arrivals.append(time.perf_counter() - started)
            text = stream.get_final_message().content[0].text
    events = len(sse_events("anthropic", answer_body("anthropic", model.script[0], 1, 1)))
    assert len(arrivals) >= events - 1
    # The first event long before the last (halfway through the stream, whatever the load).
    assert arrivals[0] < (events - 1) * delay / 2 < arrivals[-1]
    ((conversation, agent),) = workspace.transcripts()
    assert workspace.load(conversation, agent).messages[-1].text == text == model.script[0].text


def test_too_long_is_recovered_by_compacting_and_retrying_once_unseen_by_the_client(workspace: Workspace) -> None:
    # The provider's window turns out smaller than the proxy was told: request 6 is
    # rejected as too long, whatever its size.
    model = FakeModel(_script(8), faults={6: "overflow"})
    with FakeUpstream(model) as upstream, _serve(workspace, upstream, ProxySettings(context_window=200_000)) as proxy:
        assert Harness("anthropic", proxy.url, stream=False).run() == "auth failed first, at 10:00:03."
    agent = [(status, body) for status, body in zip(model.statuses, model.requests) if summary_prompt(body) is None]
    assert [status for status, _ in agent] == [200] * 5 + [400] + [200] * 4
    rejected, retried = agent[5][1], agent[6][1]
    assert count_tokens(retried) < count_tokens(rejected)  # compacted to fit what the provider said
    assert _task_of("anthropic", retried) == TASK
    ((conversation, agent_name),) = workspace.transcripts()
    assert len(workspace.load(conversation, agent_name).messages) == 1 + 1 + 2 * 8 + 1  # system, task, 8 rounds, answer


@pytest.mark.slow  # a 10-request streamed Responses loop through the proxy (about 1.4 s)
def test_too_long_inside_a_responses_stream_is_recovered_like_a_refusal_by_status(workspace: Workspace) -> None:
    """Responses may report the overflow inside a 200 stream (``response.failed`` with
    ``context_length_exceeded``, as Codex's own tests model it): the proxy passed it
    through and Codex exited "ran out of room". The stream's first events are held until
    they show a refusal or an answer, and a refusal is recovered as one by status is."""
    model = FakeModel(_script(8), faults={6: "overflow"})
    with FakeUpstream(model, refusals_in_stream=True) as upstream, _serve(workspace, upstream, ProxySettings(context_window=200_000)) as proxy:
        assert Harness("openai-responses", proxy.url, stream=True).run() == "auth failed first, at 10:00:03."
    agent = [body for body in model.requests if summary_prompt(body) is None]
    refused, retried = agent[5], agent[6]
    assert len(agent) == 10 and count_tokens(retried) < count_tokens(refused)  # retried once, smaller, unseen by the client
    ((conversation, agent_name),) = workspace.transcripts()
    assert workspace.settings(conversation, agent_name)["learned_window"] < 200_000  # and its window is kept


@pytest.mark.slow  # a stream refused at once (about 0.9 s)
def test_a_refusal_inside_a_stream_that_cannot_be_recovered_reaches_the_client_as_sent(workspace: Workspace) -> None:
    model = FakeModel(_script(3), faults={1: "overflow"})  # the first request: nothing to compact yet
    with FakeUpstream(model, refusals_in_stream=True) as upstream, _serve(workspace, upstream) as proxy:
        harness = Harness("openai-responses", proxy.url, stream=True)
        with pytest.raises(RuntimeError, match="Didn't receive a `response.completed` event"):  # the SDK's word for response.failed
            harness.run()
    assert len(model.requests) == 1


def test_another_error_reaches_the_client_as_the_provider_sent_it(workspace: Workspace) -> None:
    import anthropic

    model = FakeModel(_script(3), faults={2: "429"})
    with FakeUpstream(model) as upstream, _serve(workspace, upstream) as proxy:
        harness = Harness("anthropic", proxy.url, stream=False)
        with pytest.raises(anthropic.RateLimitError, match="Rate limit reached"):
            harness.run()
    assert model.statuses == [200, 429]


def test_an_error_that_is_not_json_reaches_the_client_byte_for_byte(workspace: Workspace) -> None:
    """A load balancer's HTML 413 in front of the provider: nothing to recover from, and
    the client gets the page it sent, not an empty body."""
    page = b"<html><body><h1>413 Request Entity Too Large</h1></body></html>"
    model = FakeModel(_script(1))
    with FakeUpstream(model) as upstream, _serve(workspace, upstream) as proxy:
        upstream.model._respond = lambda *args: fake_http().Response(413, content=page, headers={"content-type": "text/html"})  # type: ignore[method-assign]
        response = httpx.post(proxy.url + "/v1/messages", json=_anthropic_body([{"role": "user", "content": TASK}]))
    assert response.status_code == 413 and response.content == page and response.headers["content-type"].startswith("text/html")


MALFORMED = [
    ("/v1/messages", b"{not json", {"type": "error", "error": {"type": "invalid_request_error"}}),
    ("/v1/messages", b'{"model": "claude-sonnet-4-5", "messages": {"role": "user"}}', {"type": "error", "error": {"type": "invalid_request_error"}}),
    ("/v1/chat/completions", b'{"messages": []}', {"error": {"type": "invalid_request_error", "param": None, "code": None}}),
    ("/v1/responses", b"[]", {"error": {"type": "invalid_request_error", "param": None, "code": None}}),
]


@pytest.mark.slow  # a proxy and a short loop first (about 1.3 s)
def test_a_malformed_request_gets_the_apis_error_shape_and_nothing_goes_upstream_or_is_stored(workspace: Workspace) -> None:
    model = FakeModel(_script(1))
    with FakeUpstream(model) as upstream, _serve(workspace, upstream) as proxy:
        Harness("anthropic", proxy.url, stream=True).run()
        before = {p: p.read_bytes() for p in Path(workspace.path).rglob("*") if p.is_file()}
        for path, content, shape in MALFORMED:
            response = httpx.post(proxy.url + path, content=content, headers={"x-api-key": API_KEY, "content-type": "application/json"})
            assert response.status_code == 400, path
            body = response.json()
            error = body["error"]
            assert error["message"].startswith("glyphpack proxy: ")
            assert {k: v for k, v in body.items() if k != "error"} == {k: v for k, v in shape.items() if k != "error"}
            assert {k: error[k] for k in shape["error"]} == shape["error"]
        after = {p: p.read_bytes() for p in Path(workspace.path).rglob("*") if p.is_file()}
        # Nothing in a request can send it elsewhere: a Host header, an absolute URL in
        # the request line, go to the one upstream named when the proxy started.
        with httpx.Client() as client:
            stray = client.get(proxy.url + "/v1/models", headers={"host": "api.evil.example"})
            absolute = client.send(client.build_request("GET", proxy.url + "/v1/models?x=1", headers={"host": "api.evil.example:443"}))
    assert stray.status_code == absolute.status_code == 404  # the fake upstream's answer
    assert upstream.paths[-2:] == ["/v1/models", "/v1/models?x=1"]
    assert [h["host"] for h in upstream.headers[-2:]] == [upstream.url.removeprefix("http://")] * 2
    assert len(model.requests) == 2 and before == after


@pytest.mark.slow  # a 15-call loop first (1-2 s)
def test_count_tokens_answers_for_the_request_as_it_would_be_forwarded(workspace: Workspace) -> None:
    import anthropic

    model = FakeModel(_script(14))
    tools = [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["parameters"]}]
    with FakeUpstream(model) as upstream, _serve(workspace, upstream) as proxy:
        harness = Harness("anthropic", proxy.url, stream=True)
        harness.run()
        request = {"model": "claude-sonnet-4-5", "system": "You are terse.", "tools": tools}
        question = [*harness.history, {"role": "user", "content": "And the second?"}]
        client = anthropic.Anthropic(base_url=proxy.url, api_key=API_KEY)
        through = client.messages.count_tokens(**request, messages=question).input_tokens
        whole = anthropic.Anthropic(base_url=upstream.url, api_key=API_KEY).messages.count_tokens(**request, messages=question).input_tokens
        client.messages.create(**request, messages=question, max_tokens=100)
    # What went upstream next, with the compaction in force (a summary, then pages).
    assert through == count_tokens(model.requests[-1]) < whole * 0.7
    assert "[glyphpack summary of messages" in json.dumps(model.requests[-1])


@pytest.fixture
def any_workspace(workspace_location: str) -> Iterator[Workspace]:
    """A folder, then a PostgreSQL workspace."""
    with Workspace(workspace_location) as ws:
        yield ws


@pytest.mark.slow  # eight loops at once (1-2 s)
def test_conversations_run_side_by_side(any_workspace: Workspace) -> None:
    """Eight clients, each its own conversation, at once: every one finishes, each
    transcript holds its own history only (on PostgreSQL, eight threads share four
    pooled connections)."""
    workspace = any_workspace
    models = {f"task {n}": FakeModel(_script(4)) for n in range(8)}

    def route(body: Json) -> FakeModel:
        text = json.dumps(body["messages"][0])
        return next(m for task, m in models.items() if task in text)

    results: dict[str, str] = {}
    with FakeUpstream(FakeModel([]), route=route) as upstream, _serve(workspace, upstream) as proxy:

        def run(task: str) -> None:
            harness = Harness("anthropic", proxy.url, stream=True)
            harness.history = [{"role": "user", "content": task}]
            results[task] = harness.run()

        threads = [threading.Thread(target=run, args=(task,)) for task in models]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert results == dict.fromkeys(models, "auth failed first, at 10:00:03.")
    stored = _stored(workspace)
    assert len(stored) == 8
    assert sorted(messages[1] for messages in stored.values()) == sorted(f"user: {task}" for task in models)
    assert all(len(messages) == 1 + 1 + 2 * 4 + 1 for messages in stored.values())


def test_a_cookie_the_upstreams_edge_sets_goes_back_with_its_own_clients_requests_only(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK keeps the cookies each answer sets (``FakeUpstream`` sets two, in two
    headers, as OpenAI's edge does) and sends them back, each as it was set (the proxy
    passes repeated headers on as they came); the proxy's pool keeps none: a second
    client's first request, on the same pool, carries no cookie of the first's."""
    import anthropic

    from glyphpack._proxy import server

    monkeypatch.setattr(server, "UPSTREAM_POOLS", 1)
    with FakeUpstream(FakeModel([Turn(text=f"answer {n}") for n in range(3)])) as upstream, _serve(workspace, upstream) as proxy:
        first, second = (anthropic.Anthropic(base_url=proxy.url, api_key=key, max_retries=0) for key in ("sk-first-client", "sk-second-client"))
        asked = [{"role": "user", "content": "Which service failed first?"}]
        first.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=asked)
        second.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "Which disk is full?"}])
        first.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=[*asked, {"role": "assistant", "content": "answer 0"}, {"role": "user", "content": "Why?"}])
    (set_first, _), (_, carried_second), (_, carried_first) = upstream.cookies
    assert carried_second == "" and sorted(carried_first.split("; ")) == sorted(set_first)


# ---------------------------------------------------------------------- the command


def _glyphpack(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "glyphpack", *args], stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.slow  # starts glyphpack in a subprocess (about 2 s)
def test_glyphpack_proxy_serves_until_sigterm_and_the_conversation_is_in_the_tree(tmp_path: Path) -> None:
    model = FakeModel(_script(2))
    with FakeUpstream(model) as upstream:
        log = tmp_path / "requests.jsonl"
        proxy = _glyphpack("proxy", "--upstream", upstream.url, "--workspace", str(tmp_path / "ws"), "--port", "0", "--log-json", str(log))
        try:
            assert proxy.stderr is not None
            line = proxy.stderr.readline()
            assert line.startswith("glyphpack proxy on http://127.0.0.1:") and f"-> {upstream.url}" in line, line
            url = line.split()[3]
            assert f"ANTHROPIC_BASE_URL={url} claude" in proxy.stderr.readline()
            assert Harness("anthropic", url, stream=True).run() == "auth failed first, at 10:00:03."
            status = httpx.get(f"{url}/glyphpack/status", headers=_credentials_of(upstream.headers[-1])).json()  # its own totals
            assert status["requests"] == 3 and status["failed"] == 0
        finally:
            proxy.send_signal(signal.SIGTERM)
            _, err = proxy.communicate(timeout=30)
    assert proxy.returncode == 0 and "Traceback" not in err
    # A line per request, the totals at exit, the JSON lines beside them; no key anywhere.
    lines = [line for line in err.splitlines() if " anthropic -> 200 in " in line]
    assert len(lines) == 3 and all("tokens from the client" in line and "provider:" in line for line in lines), err
    assert "glyphpack proxy: 3 requests (0 failed" in err.splitlines()[-1]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["status"] for r in records] == [200] * 3 and all(r["input"] == count for r, count in zip(records, map(count_tokens, model.requests)))
    assert API_KEY not in log.read_text() + err
    tree = subprocess.run([sys.executable, "-m", "glyphpack", "tree", str(tmp_path / "ws")], capture_output=True, text=True, check=True)
    assert TASK[:40] in tree.stdout and "Bash" in tree.stdout


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--upstream", "ftp://example.com"], "--upstream must be anthropic, openai, gemini or an http(s) URL, not 'ftp://example.com'"),
        (["--upstream", "anthropic", "--context-window", "1000", "--threshold", "2000"], "need 0 < target < threshold <= window"),
        (["--upstream", "anthropic", "--host", "203.0.113.7"], "cannot listen on 203.0.113.7:8787"),
        (["--upstream", "anthropic", "--workers", "0"], "--workers must be 1 to 64 processes, not 0"),
        (["--upstream", "anthropic", "--workers", "65"], "--workers must be 1 to 64 processes, not 65"),
        (["--upstream", "anthropic", "--log-json", "/nonexistent-dir/log.jsonl"], "--log-json /nonexistent-dir/log.jsonl: cannot write it (No such file or directory)"),
    ],
)
def test_glyphpack_proxy_refuses_what_it_cannot_do_in_one_line(tmp_path: Path, args: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["proxy", "--workspace", str(tmp_path / "ws"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("glyphpack: error: ") and error in err and err.count("\n") == 1


@pytest.mark.parametrize("api", sorted(ACCUMULATORS))
def test_the_log_reads_each_apis_input_cached_and_output_counts(api: str) -> None:
    from glyphpack._proxy.log import provider_usage

    answer = answer_body(api, Turn(text="ok"), 1, 1_234)
    key = "usageMetadata" if api == "gemini" else "usage"
    usage = answer[key]
    if api == "gemini":
        usage["cachedContentTokenCount"] = 100
        expected = (1_234, 100, 50)
    elif api == "anthropic":
        usage.update(cache_creation_input_tokens=50, cache_read_input_tokens=100)
        expected = (1_234 + 50 + 100, 100, 50)  # Anthropic's input counts its cache apart
    elif api == "openai-chat":
        usage["prompt_tokens_details"] = {"cached_tokens": 100}
        expected = (1_234, 100, 50)
    else:
        usage["input_tokens_details"] = {"cached_tokens": 100}
        expected = (1_234, 100, 50)
    assert provider_usage(api, answer) == expected  # type: ignore[arg-type]
    assert provider_usage(api, {**answer, key: "n/a"}) == (None, None, None)  # type: ignore[arg-type]


@pytest.mark.slow  # a second or more: CI runs it
def test_the_log_has_a_line_per_request_and_the_totals_say_what_was_saved(workspace: Workspace, tmp_path: Path) -> None:
    """Through a loop the proxy compacts: a record per request (the client's tokens and
    what was sent, the provider's counts, compacted or not), the same as JSON lines, the
    totals on the status endpoint; an upstream that is down is a 502 that says why."""
    import io

    from glyphpack._proxy.log import ProxyLog

    lines, path = io.StringIO(), tmp_path / "log.jsonl"
    log = ProxyLog(lines, path)
    model = FakeModel(_script(14))
    with FakeUpstream(model) as upstream, Running(Proxy(Recorder(workspace, SETTINGS), upstream.url, log=log)) as proxy:
        assert Harness("anthropic", proxy.url, stream=True).run() == "auth failed first, at 10:00:03."
        status = httpx.get(f"{proxy.url}/glyphpack/status", headers=_credentials_of(upstream.headers[-1])).json()  # its own totals
    records = [json.loads(line) for line in path.read_text().splitlines()]
    agent = [body for body in model.requests if summary_prompt(body) is None]
    assert len(records) == len(agent) == 15 and lines.getvalue().count("\n") == 15
    assert [r["input"] for r in records] == [count_tokens(body) for body in agent]  # the provider's count, as it said
    compacted = [r for r in records if r["compacted"]]
    assert compacted and all(r["sent"] < r["client"] for r in compacted)
    assert all(r["sent"] == r["client"] for r in records if not r["compacted"])
    assert status["requests"] == 15 and status["compacted"] == len(compacted) and 0 < status["saved_share"] < 1
    assert status["client_tokens"] == sum(r["client"] for r in records) and status["provider_input_tokens"] == sum(r["input"] for r in records)
    assert API_KEY not in path.read_text() + lines.getvalue()
    with Running(Proxy(Recorder(workspace, SETTINGS), "http://127.0.0.1:9", log=log)) as proxy:
        response = httpx.post(f"{proxy.url}/v1/messages", json=_anthropic_body([{"role": "user", "content": "hi"}]), headers={"x-api-key": API_KEY})
        refused = httpx.post(f"{proxy.url}/v1/messages", content=b"not json", headers={"x-api-key": API_KEY})
    assert response.status_code == 502 and refused.status_code == 400
    failed, bad = (json.loads(line) for line in path.read_text().splitlines()[-2:])
    assert failed["status"] == 502 and failed["note"] == "the upstream failed: ConnectError"
    assert bad["status"] == 400 and bad["note"] == "refused by the proxy" and bad["conversation"] is None
    assert log.totals()["failed"] == 2 and log.totals()["requests"] == 17


# ---------------------------------------------------------------------- Claude Code itself


#: The model asks for something a compaction put away (the newest ref it shows).
RECALL_AGAIN = Turn(text="Checking an earlier log again.", calls=((RECALL_TOOL, {"ref": NEWEST_REF}),))


def _claude() -> str:
    return installed("claude", "GLYPHPACK_CLAUDE", "@anthropic-ai/claude-code")


def _run_claude(tmp_path: Path, proxy: Running, prompt: str, turns: int) -> Json:
    """``claude -p prompt`` through ``proxy``, in ``tmp_path / "project"``; its JSON result."""
    env = {
        "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home"),
        "ANTHROPIC_BASE_URL": proxy.url, "ANTHROPIC_API_KEY": API_KEY,
        "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
    }
    command = [_claude(), "-p", prompt, "--allowedTools", "Bash,Read,Agent,Task", "--output-format", "json", "--max-turns", str(turns)]
    run = subprocess.run(command, cwd=tmp_path / "project", env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    result: Json = json.loads(run.stdout)
    assert not result["is_error"], result
    return result


def _claude_code_route(agent: FakeModel, side: FakeModel, sub: FakeModel | None = None, sub_prompt: str = "") -> Any:
    """Claude Code's requests by kind: a subagent's (its first message carries the
    prompt), the agent's (with the Bash tool) and the summaries, and its own side
    requests (titles, checks), which must not take the script's turns."""

    def route(body: Json) -> FakeModel:
        if sub is not None and sub_prompt in json.dumps(body["messages"][0]):
            return sub
        if summary_prompt(body) is not None or any(t.get("name") == "Bash" for t in body.get("tools") or ()):
            return agent
        return side

    return route


@pytest.mark.slow  # Claude Code (Node.js) for a 25-call session: about 10 s
def test_claude_code_through_the_proxy_is_compacted_and_never_sees_an_error(tmp_path: Path) -> None:
    _claude()
    work = tmp_path / "project"
    work.mkdir()
    calls = 24
    for i in range(calls):
        (work / f"svc{i}.log").write_text(_tool_output(f"svc{i}") + "\n")
    script = [
        Turn(text=f"Checking log {i}.", calls=((("Bash", {"command": f"cat svc{i}.log", "description": f"show log {i}"}),) if i % 2 else (("Read", {"file_path": str(work / f"svc{i}.log")}),)))
        for i in range(calls)
    ] + [RECALL_AGAIN, Turn(text="DONE: auth failed first.")]
    agent, side = FakeModel(script), FakeModel([Turn(text="ok")])
    prompt = "Find which service failed first: read every svc*.log here."
    settings = ProxySettings(context_window=60_000, threshold=20_000)
    with FakeUpstream(agent, route=_claude_code_route(agent, side)) as upstream, Workspace(tmp_path / "ws") as workspace, _serve(workspace, upstream, settings) as proxy:
        result = _run_claude(tmp_path, proxy, prompt, calls + 5)
        stored = {key: workspace.load(*key).messages for key in workspace.transcripts()}
    assert result["result"].endswith("DONE: auth failed first.")
    assert set(agent.statuses) == {200}  # every request Claude Code made (and the summaries) was accepted
    requests = [body for body in agent.requests if summary_prompt(body) is None]
    assert len(requests) == calls + 2  # and one the proxy made after answering the recall
    # Claude Code never saw the recall: not in its answer, not in its own session files.
    assert RECALL_TOOL not in json.dumps(result)
    written = [p.read_text() for p in (tmp_path / "home").rglob("*.jsonl")]
    assert written and not [text for text in written if RECALL_TOOL in text]
    assert all(prompt in json.dumps(body["messages"][0]) for body in requests)  # the task, verbatim, first
    tokens = [count_tokens(body) for body in requests]
    compacted = [i for i in range(1, len(tokens)) if tokens[i] < tokens[i - 1]]
    assert compacted and max(tokens) < settings.threshold, tokens  # type: ignore[operator]
    # One conversation holds all of it: the task, every call and result, the answer.
    (messages,) = [m for m in stored.values() if any(prompt in message.text for message in m)]
    assert sum(len(m.tool_calls) for m in messages) == calls + 1 and messages[-1].text == "DONE: auth failed first."
    (recalled,) = [c for m in messages for c in m.tool_calls if c.name == RECALL_TOOL]
    (answer,) = [r for m in messages for r in m.tool_results if r.call_id == recalled.id]
    assert not answer.is_error and answer.text


@pytest.mark.slow  # Claude Code (Node.js) with a subagent: about 5 s
def test_claude_codes_subagent_is_recorded_beside_the_call_that_started_it(tmp_path: Path) -> None:
    _claude()
    work = tmp_path / "project"
    work.mkdir()
    (work / "svc0.log").write_text("10:00:03 auth failed\n" * 20)
    sub_prompt = "Read svc0.log and report the first failure."
    agent = FakeModel([Turn(calls=(("Agent", {"description": "check the log", "prompt": sub_prompt, "subagent_type": "general-purpose"}),)), Turn(text="DONE: auth")])
    sub = FakeModel([Turn(calls=(("Read", {"file_path": str(work / "svc0.log")}),)), Turn(text="svc0: auth failed at 10:00:03")])
    side = FakeModel([Turn(text="ok")])
    with FakeUpstream(agent, route=_claude_code_route(agent, side, sub, sub_prompt)) as upstream, Workspace(tmp_path / "ws") as workspace, _serve(workspace, upstream) as proxy:
        result = _run_claude(tmp_path, proxy, "Find the failure with a subagent.", 10)
        transcripts = workspace.transcripts()
        subagent = [key for key in transcripts if key[1] != AGENT]
        (call,) = [c for m in workspace.load(transcripts[0][0], AGENT).messages for c in m.tool_calls]
    assert result["result"] == "DONE: auth" and set(agent.statuses) == set(sub.statuses) == {200}
    assert len(transcripts) == 2 and subagent == [(transcripts[0][0], f"general-purpose-{call.id[-8:]}")]


@pytest.mark.slow  # an 8-call loop with a summary through the proxy (about 3 s)
def test_a_json_413_is_recovered_by_bytes_and_retried_once_unseen_by_the_client(workspace: Workspace) -> None:
    """Anthropic's 413 (``request_too_large``, a JSON body): the proxy frees bytes (old
    results elided, no pages: they add bytes) and sends the request once more."""
    model = FakeModel(_script(8), faults={7: "413"})
    with FakeUpstream(model) as upstream, _serve(workspace, upstream, ProxySettings(context_window=200_000)) as proxy:
        assert Harness("anthropic", proxy.url, stream=False).run() == "auth failed first, at 10:00:03."
    agent = [(status, body) for status, body in zip(model.statuses, model.requests) if summary_prompt(body) is None]
    summaries = [status for status, body in zip(model.statuses, model.requests) if summary_prompt(body) is not None]
    assert [status for status, _ in agent] == [200] * 6 + [413] + [200] * 3
    # The free rungs free nothing here (the six rounds so far are all among the newest
    # rounds elision protects), so the summarizer is asked at once, through the
    # upstream, rather than the refused request sent again.
    assert summaries and set(summaries) == {200}
    rejected, retried = agent[6][1], agent[7][1]
    assert len(json.dumps(retried)) < len(json.dumps(rejected)) and '"image"' not in json.dumps(retried)
    assert _task_of("anthropic", retried) == TASK


def _unmarked(value: Any) -> Any:
    """``value`` without Anthropic's cache marks."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    return [_unmarked(v) for v in value] if isinstance(value, list) else value


@pytest.mark.slow  # a 30-call loop through the proxy per API (1-3 s each)
@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "openai-responses"])
def test_the_proxys_summary_continues_the_conversation_the_upstream_last_received(workspace: Workspace, api: str) -> None:
    """The request's own model summarizes by continuing the request the upstream last
    got: its history unchanged (what the prompt cache holds), then the instruction, the
    client's tools, no stream, never over the window the proxy was told."""
    model = FakeModel(_script(30))
    with FakeUpstream(model) as upstream, _serve(workspace, upstream) as proxy:
        assert Harness(api, proxy.url, stream=False).run() == "auth failed first, at 10:00:03."
    key = provider_api(api).request_key
    summaries = [n for n, body in enumerate(model.requests) if summary_prompt(body) is not None]
    # The first from the client's own history, the later ones from the compaction in force.
    assert len(summaries) >= 2 and set(model.statuses) == {200}, len(summaries)
    for n in summaries:
        body, previous = model.requests[n], model.requests[n - 1]
        assert summary_prompt(previous) is None
        # Unchanged but for the cache mark, which moves to the newest message (a prompt
        # cache keys on the content).
        assert _unmarked(body[key][: len(previous[key])]) == _unmarked(previous[key])
        last = body[key][-1]
        said = last["content"] if isinstance(last["content"], str) else last["content"][-1]["text"]
        assert said.startswith(SUMMARY_REQUEST) and last["role"] == "user"
        assert body.get("tools") == previous.get("tools") and not body.get("stream")
        assert count_tokens(body) + 4_000 <= SETTINGS.context_window  # type: ignore[operator]


@pytest.mark.slow  # starts glyphpack in a subprocess (about 3 s)
def test_glyphpack_proxy_workers_share_the_port_and_every_conversation(tmp_path: Path) -> None:
    """``--workers 3``: three processes on one port and one workspace. Clients whose
    every request opens a new connection (so turns of one conversation land on any
    worker) each end with their whole conversation in one transcript; every worker
    served; SIGTERM stops them all."""
    model = FakeModel([Turn(text="noted")])
    with FakeUpstream(model) as upstream:
        proxy = _glyphpack("proxy", "--upstream", upstream.url, "--workspace", str(tmp_path / "ws"), "--port", "0", "--workers", "3", "--quiet")
        try:
            assert proxy.stderr is not None
            line = proxy.stderr.readline()
            assert line.startswith("glyphpack proxy on http://127.0.0.1:") and "; 3 worker processes" in line, line
            url = line.split()[3]
            proxy.stderr.readline()
            conversations = {n: [{"role": "user", "content": f"conversation {n}: read the logs"}] for n in range(4)}
            for turn in range(6):
                for history in conversations.values():
                    with httpx.Client(base_url=url, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as client:
                        body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": history}
                        answer = client.post("/v1/messages", json=body, headers={"x-api-key": API_KEY})
                        assert answer.status_code == 200, answer.text
                    history += [{"role": "assistant", "content": answer.json()["content"][0]["text"]}, {"role": "user", "content": f"turn {turn}"}]
        finally:
            proxy.send_signal(signal.SIGTERM)
            _, err = proxy.communicate(timeout=60)
    assert proxy.returncode == 0 and "Traceback" not in err and "stopped:" not in err, err
    served = [int(m.group(1)) for m in re.finditer(r"glyphpack proxy: (\d+) requests", err)]
    assert len(served) == 3 and sum(served) == 24 and sum(n > 0 for n in served) >= 2, err  # spread by the kernel: at least two served
    with Workspace(tmp_path / "ws") as workspace:
        stored = [workspace.load(*key).messages for key in workspace.transcripts()]
    assert sorted(len(messages) for messages in stored) == [12] * 4  # each: six turns, whole, in one transcript
    assert all(messages[0].text.startswith("conversation ") and messages[-1].text == "noted" for messages in stored)
