"""The proxy answers ``glyphpack_recall`` itself: once a compaction is in force it offers
the tool, answers the model's calls from the stored transcript and asks the upstream
again, so the client never sees a recall call, streamed or not, on every API it
speaks; a recall called beside the client's own calls is answered with the client's
results; the client's next request continues the transcript that holds the recall."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")

from glyphpack import Workspace
from glyphpack._compaction.snapshot import serialize_message
from glyphpack._compaction.summarize import Summarizer
from glyphpack._history.messages import Text, ToolCall
from glyphpack._history.recall import RECALL_TOOL, recall
from glyphpack._proxy.conversations import RECALL_ROUNDS, ProxySettings, Recorder
from glyphpack._proxy.histories import RECALL_ID_PREFIX, client_view, digests, history_of
from glyphpack._proxy.rounds import RELAYS, joined, marked, recall_calls
from glyphpack._proxy.server import Proxy, Running
from glyphpack._proxy.streams import ACCUMULATORS, SseParser
from glyphpack._wire import provider_api, recall_tool
from glyphpack.testing.fake import (
    NEWEST_REF,
    FakeModel,
    FakeUpstream,
    Turn,
    answer_body,
    fake_summary,
    sse_events,
    summary_prompt,
)
from tests.test_proxy import SETTINGS, TASK, Harness, _script, _tool_output

Json = dict[str, Any]
RECALLED = Turn(text="Let me look at that again.", calls=((RECALL_TOOL, {"ref": NEWEST_REF}),))
FINAL = "auth failed first, at 10:00:03."


# ---------------------------------------------------------------------- rounds joined


_client_calls = st.lists(st.sampled_from(["Bash", "Read"]), max_size=2)


@st.composite
def _rounds(draw: st.DrawFn) -> list[Turn]:
    """Rounds of one client request: each before the last calls only the recall (with
    text or not); the last calls anything (the client's tools, a recall beside them,
    or nothing)."""
    texts = st.sampled_from(["", "Checking.", "Ünïcode ✓ text"])
    recall_call = (RECALL_TOOL, {"ref": "call_1"})
    rounds = [Turn(text=draw(texts), calls=(recall_call,) * draw(st.integers(1, 2))) for _ in range(draw(st.integers(0, 3)))]
    calls = tuple((name, {"command": "ls"}) for name in draw(_client_calls))
    last_recall = (recall_call,) if draw(st.booleans()) else ()
    order = draw(st.booleans())
    # An answer always shows the client something: text or a call of its own.
    text = draw(texts) or ("" if calls else "done")
    calls = (*last_recall, *calls) if order else (*calls, *last_recall)
    return [*rounds, Turn(text=text, calls=calls)]


def _strict_anthropic(payloads: list[str], whole: Json) -> None:
    """One message_start first; blocks started 0, 1, 2... in order, each delta and stop
    for a block started and not stopped; one message_delta, then message_stop, last."""
    events = [json.loads(p) for p in payloads]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds.count("message_start") == 1
    assert kinds[-2:] == ["message_delta", "message_stop"] and kinds.count("message_delta") == 1
    open_blocks: set[int] = set()
    started = 0
    for event in events:
        if event["type"] == "content_block_start":
            assert event["index"] == started
            open_blocks.add(started)
            started += 1
        elif event["type"] in ("content_block_delta", "content_block_stop"):
            assert event["index"] in open_blocks
            if event["type"] == "content_block_stop":
                open_blocks.remove(event["index"])
    assert not open_blocks and started == len(whole["content"])
    assert events[0]["message"]["id"] == whole["id"]


def _strict_chat(payloads: list[str], whole: Json) -> None:
    """The role said once, in the first chunk; tool calls numbered 0, 1, 2... as they
    first come; one finish, then the usage chunk, then [DONE]."""
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    deltas = [choice["delta"] for chunk in chunks for choice in chunk["choices"]]
    assert [i for i, d in enumerate(deltas) if "role" in d] == [0]
    numbers = list(dict.fromkeys(c["index"] for d in deltas for c in d.get("tool_calls", ())))
    assert numbers == list(range(len(whole["choices"][0]["message"].get("tool_calls") or ())))
    finishes = [choice["finish_reason"] for chunk in chunks for choice in chunk["choices"] if choice.get("finish_reason")]
    assert finishes == [whole["choices"][0]["finish_reason"]] and chunks[-1]["choices"] == [] and "usage" in chunks[-1]
    assert all(chunk["id"] for chunk in chunks)


def _strict_responses(payloads: list[str], whole: Json) -> None:
    """response.created and in_progress once, first; sequence numbers 0, 1, 2...; items
    added at output_index 0, 1, 2..., every other event for an item added; one
    response.completed, last, named as created, its output the items added."""
    events = [json.loads(p) for p in payloads]
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds.count("response.created") == 1 and kinds.count("response.in_progress") == 1
    assert kinds[-1] == "response.completed" and kinds.count("response.completed") == 1
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    added: list[Json] = []
    for event in events:
        if event["type"] == "response.output_item.added":
            assert event["output_index"] == len(added)
            added.append(event["item"])
        elif "output_index" in event:
            assert event["output_index"] < len(added)
            if event["type"] == "response.output_item.done":
                assert event["item"]["id"] == added[event["output_index"]]["id"]
    completed = events[-1]["response"]
    assert completed["id"] == events[0]["response"]["id"] == whole["id"]
    assert [i["id"] for i in completed["output"]] == [i["id"] for i in added] == [i["id"] for i in whole["output"]]


STRICT_CLIENTS = {"anthropic": _strict_anthropic, "openai-chat": _strict_chat, "openai-responses": _strict_responses}


@settings(max_examples=60, deadline=None)
@given(api=st.sampled_from(sorted(RELAYS)), turns=_rounds(), data=st.data())
def test_a_relayed_stream_is_the_joined_answer_without_a_recall_call(api: str, turns: list[Turn], data: st.DataObject) -> None:
    """Whatever the rounds and however their streams are cut, the client's stream reads
    (by the API's own accumulator) as ``joined``'s whole answer: every round's blocks in
    order, no recall call, usage summed, tool use named only when a call is left."""
    answers = [answer_body(api, turn, number, 1000 * number) for number, turn in enumerate(turns, 1)]
    relay = RELAYS[api]()
    client = ACCUMULATORS[api]()
    sent = b""
    for number, answer in enumerate(answers, 1):
        stream = b"".join(sse_events(api, answer, usage=True))
        cuts = sorted(set(data.draw(st.lists(st.integers(0, len(stream)), max_size=6))))
        for start, end in zip([0, *cuts], [*cuts, len(stream)]):
            sent += relay.feed(stream[start:end])
        sent += relay.end_round(final=number == len(answers))
    client.feed(sent)
    streamed, whole = client.result(), joined(api, answers)
    # The client's stream is one answer's, as a strict client reads it; each event named
    # as its payload's type (Chat's are unnamed).
    events = list(SseParser().feed(sent))
    STRICT_CLIENTS[api]([payload for _, payload in events], whole)
    names = [name for name, _ in events]
    if api == "openai-chat":
        assert set(names) == {"message"}
    else:
        assert names == [json.loads(payload)["type"] for _, payload in events]
    assert streamed is not None
    build = provider_api(api)
    assert build.parse(streamed).message.content == build.parse(whole).message.content
    assert RECALL_TOOL not in json.dumps(streamed) and RECALL_TOOL not in json.dumps(whole)
    kept = [name for turn in turns for name, _ in turn.calls if name != RECALL_TOOL]
    assert [c.name for c in build.parse(whole).message.tool_calls] == kept
    assert streamed["usage"] == whole["usage"]
    total = sum(1000 * n for n in range(1, len(answers) + 1))
    assert build.parse(whole).input_tokens == total  # every round's input, billed, is counted
    if api == "anthropic":
        assert streamed["stop_reason"] == whole["stop_reason"] == ("tool_use" if kept else "end_turn")
    elif api == "openai-chat":
        assert streamed["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"] == ("tool_calls" if kept else "stop")


@pytest.mark.parametrize("api", sorted(RELAYS))
def test_recall_calls_are_counted_and_marked_and_the_clients_are_not(api: str) -> None:
    """In a whole answer of each API: the recall calls counted, their ids (and only
    theirs) given the proxy's prefix, the answer itself unchanged; the joined answer
    named as the first round."""
    answer = answer_body(api, Turn(text="Let me see.", calls=(_call("call_1"), ("Bash", {"command": "ls"}), _call("call_2"))), 3, 100)
    assert recall_calls(api, answer) == 2
    assert recall_calls(api, answer_body(api, Turn(text="done"), 4, 100)) == 0
    original = json.dumps(answer)
    prefixed = marked(api, answer, RECALL_ID_PREFIX)
    assert json.dumps(answer) == original  # a copy: the answer as the client may get it is untouched
    key = "call_id" if api == "openai-responses" else "id"

    def calls_of(response: Json) -> list[tuple[object, str]]:
        if api == "anthropic":
            return [(b["name"], b[key]) for b in response["content"] if b["type"] == "tool_use"]
        if api == "openai-chat":
            return [(c["function"]["name"], c[key]) for c in response["choices"][0]["message"]["tool_calls"]]
        return [(i["name"], i[key]) for i in response["output"] if i["type"] == "function_call"]

    for (name, before), (_, after) in zip(calls_of(answer), calls_of(prefixed)):
        assert after == (RECALL_ID_PREFIX + before if name == RECALL_TOOL else before)
    second = answer_body(api, Turn(text="Found it."), 5, 200)
    assert joined(api, [answer, second])["id"] == answer["id"]


# ---------------------------------------------------------------------- the recorder


def _messages(calls: int) -> list[Json]:
    messages: list[Json] = [{"role": "user", "content": TASK}]
    for i in range(calls):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"cat {i}.log"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": _tool_output(str(i))}]},
        ]
    return messages


def _body(messages: list[Json], **extra: Any) -> Json:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": "You are terse.", "messages": messages, **extra}


def _call(ref: str) -> tuple[str, Json]:
    return (RECALL_TOOL, {"ref": ref})


def test_a_recall_beside_the_clients_call_is_answered_with_the_clients_result(tmp_path: Path) -> None:
    """The model calls the recall and the client's tool in one answer: the client gets
    its call alone; its next request (its result only) goes upstream with the recall's
    exact answer beside it, and continues the transcript (nothing forked)."""
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    messages = _messages(14)
    exchange = recorder.prepare("anthropic", _body(messages), Summarizer(fake_summary))
    assert exchange.compacted and exchange.recall
    assert exchange.forwarded["tools"] == [recall_tool("anthropic")]  # offered once a compaction is in force
    answer = answer_body("anthropic", Turn(calls=(_call("toolu_2"), ("Bash", {"command": "ls"}))), 2, 100)
    assert recorder.finish(exchange, answer) is None  # the client's call: the answer goes back to the client
    client_answer = joined("anthropic", [answer])
    ((bash),) = client_answer["content"]
    assert bash["name"] == "Bash" and client_answer["stop_reason"] == "tool_use"
    messages += [{"role": "assistant", "content": [bash]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": bash["id"], "content": "a.log"}]}]
    following = recorder.prepare("anthropic", _body(messages), Summarizer(fake_summary))
    last = following.forwarded["messages"][-1]["content"]
    recalled = next(b for b in last if b["tool_use_id"].startswith(RECALL_ID_PREFIX))
    assert recalled["content"] == [{"type": "text", "text": _tool_output("2")}]  # exact, from the transcript
    assert [b["tool_use_id"] for b in last] == [bash["id"], recalled["tool_use_id"]]
    ((conversation, agent),) = workspace.transcripts()
    stored = workspace.load(conversation, agent).messages
    assert [c.name for c in stored[-2].tool_calls] == [RECALL_TOOL, "Bash"]  # the transcript keeps the recall
    theirs = history_of("anthropic", _body(messages))
    assert digests(client_view(stored).messages) == digests(theirs)  # and the client's history is its view


def test_a_recall_called_round_after_round_stops_at_the_limit_and_the_next_request_answers_it(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    messages = _messages(14)
    exchange = recorder.prepare("anthropic", _body(messages), Summarizer(fake_summary))
    rounds = []
    following: Any = exchange
    while following is not None:
        exchange = following
        rounds.append(answer_body("anthropic", Turn(text=f"round {len(rounds)}", calls=(_call("toolu_3"),)), 2, 100))
        following = recorder.finish(exchange, rounds[-1])
    assert len(rounds) == RECALL_ROUNDS and exchange.rounds == RECALL_ROUNDS - 1
    # The last round asks for an answer; the rounds before let the model call tools.
    assert exchange.forwarded["tool_choice"] == {"type": "none"} and "tool_choice" not in exchange.body
    client_answer = joined("anthropic", rounds)
    assert client_answer["stop_reason"] == "end_turn" and [b["type"] for b in client_answer["content"]] == ["text"] * RECALL_ROUNDS
    # The client answers with a new message: the last recall is answered first, then it.
    messages += [{"role": "assistant", "content": client_answer["content"]}, {"role": "user", "content": "Go on."}]
    forwarded = recorder.prepare("anthropic", _body(messages), Summarizer(fake_summary)).forwarded["messages"]
    result, text = forwarded[-1]["content"]
    assert forwarded[-2]["content"][-1]["name"] == RECALL_TOOL and result["tool_use_id"] == forwarded[-2]["content"][-1]["id"]
    assert result["content"] == [{"type": "text", "text": _tool_output("3")}] and text["text"] == "Go on."
    assert len(workspace.transcripts()) == 1


@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "openai-responses"])
def test_a_model_that_only_recalls_to_the_round_cap_gives_the_client_a_note_it_can_send_back(tmp_path: Path, api: str) -> None:
    """A model that ignores ``tool_choice`` none and calls the recall in every round: the
    client got an answer with no content (Anthropic then refused every later request).
    It gets ``UNANSWERED``, and its next request, which carries that note, continues the
    same transcript."""
    from glyphpack._providers.resolve import resolve
    from glyphpack._proxy.rounds import UNANSWERED

    model = "claude-sonnet-4-5" if api == "anthropic" else "gpt-5.4"
    build = provider_api(api)
    history = build.build(model, history_of("anthropic", _body(_messages(16))), 0, resolve(model))[build.request_key]
    body = {"model": model, build.request_key: history}
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    exchange: Any = recorder.prepare(api, body, Summarizer(fake_summary))  # type: ignore[arg-type]
    assert exchange.recall
    rounds = []
    while exchange is not None:
        rounds.append(answer_body(api, Turn(calls=(_call("toolu_3"),)), len(rounds) + 1, 100))
        exchange = recorder.finish(exchange, rounds[-1])
    assert len(rounds) == RECALL_ROUNDS
    answer = joined(api, rounds)  # type: ignore[arg-type]
    assert UNANSWERED in json.dumps(answer)
    said = (answer["output"] if api == "openai-responses" else [answer["choices"][0]["message"]] if api == "openai-chat"
            else [{"role": "assistant", "content": answer["content"]}])
    following = [*history, *said, {"role": "user", "content": "Go on."}]
    recorder.flush(recorder.prepare(api, {**body, build.request_key: following}, Summarizer(fake_summary)))  # type: ignore[arg-type]
    ((conversation, agent),) = workspace.transcripts()  # the same conversation, not a new one
    stored = workspace.load(conversation, agent).messages
    # ... continued where it stood: every recall round kept, then the user's words
    assert sum(c.name == RECALL_TOOL for m in stored for c in m.tool_calls) == RECALL_ROUNDS and stored[-1].text.endswith("Go on.")
    # and what the client holds is exactly the stored history as the proxy shows it to it
    assert digests(client_view(stored).messages) == digests(history_of(api, {**body, build.request_key: following}))  # type: ignore[arg-type]


def test_a_client_with_its_own_recall_tool_gets_its_calls(tmp_path: Path) -> None:
    """A client that defines ``glyphpack_recall`` itself (a glyphpack session behind the
    proxy) is not offered a second one, and its calls are its own."""
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    own = recall_tool("anthropic")
    exchange = recorder.prepare("anthropic", _body(_messages(14), tools=[own]), Summarizer(fake_summary))
    assert exchange.compacted and not exchange.recall and exchange.forwarded["tools"] == [own]
    answer = answer_body("anthropic", Turn(calls=(_call("toolu_2"),)), 2, 100)
    assert recorder.finish(exchange, answer) is None
    session = exchange.session
    assert session is not None and [c.id for c in session.pending_calls] == [answer["content"][0]["id"]]  # not the proxy's


# ---------------------------------------------------------------------- through the proxy


def _serve(workspace: Workspace, upstream: FakeUpstream, settings: ProxySettings = SETTINGS) -> Running:
    return Running(Proxy(Recorder(workspace, settings), upstream.url))


@pytest.mark.parametrize(
    ("api", "stream"),
    [
        pytest.param("anthropic", True, marks=pytest.mark.slow),  # Claude Code's way (CI runs each: 1-3 s)
        pytest.param("anthropic", False, marks=pytest.mark.slow),
        pytest.param("openai-chat", True, marks=pytest.mark.slow),
        pytest.param("openai-chat", False, marks=pytest.mark.slow),
        pytest.param("openai-responses", True, marks=pytest.mark.slow),
        pytest.param("openai-responses", False, marks=pytest.mark.slow),
    ],
)
def test_an_sdk_loop_never_sees_the_recall_the_proxy_answers(tmp_path: Path, api: str, stream: bool) -> None:
    """After the compaction the model recalls what a stub stands for: the proxy answers
    it exactly from the transcript and streams the next round on; the SDK reads one
    answer without the call, and its next request continues the same transcript."""
    model = FakeModel([*_script(14)[:-1], RECALLED, Turn(text=f"Done reading. {FINAL}")])
    with Workspace(tmp_path / "ws") as workspace:
        with FakeUpstream(model) as upstream, _serve(workspace, upstream) as proxy:
            harness = Harness(api, proxy.url, stream=stream)
            # The text before the recall and the answer after it, as one answer.
            assert harness.run() == f"Let me look at that again.Done reading. {FINAL}"
        assert set(model.statuses) == {200}
        assert RECALL_TOOL not in json.dumps(harness.history)  # the client never saw the call
        agent = [body for body in model.requests if summary_prompt(body) is None]
        assert len(agent) == 16  # 15 rounds the client asked for, one more after the recall
        ((conversation, name),) = workspace.transcripts()
        stored = workspace.load(conversation, name).messages
        calls = [b for m in stored for b in m.content if isinstance(b, ToolCall) and b.name == RECALL_TOOL]
        assert len(calls) == 1 and calls[0].id.startswith(RECALL_ID_PREFIX)
        answer = recall(stored, calls[0].arguments["ref"], range_text=lambda messages: "".join(map(serialize_message, messages)))
        assert not answer.is_error and answer.content
        # The round after the recall carried its exact answer upstream, as the transcript holds it.
        (result,) = [b for m in stored for b in m.tool_results if b.call_id == calls[0].id]
        assert result.content == answer.content
        assert all(json.dumps(block.text)[1:-1] in json.dumps(agent[-1]) for block in result.content if isinstance(block, Text))
        key = provider_api(api).request_key
        theirs = history_of(api, {"model": "m", key: harness.history, **({"system": "You are terse."} if api == "anthropic" else {})})
        assert digests(client_view(stored).messages) == digests(theirs)
        assert stored[-1].role == "assistant" and stored[-1].text.endswith(FINAL)


def test_usages_of_the_rounds_add_field_by_field_exactly():
    """Whole numbers add; a field only one round has is kept; nested counts add; a
    value that is not a whole number (a bool, a string, a float) is the later round's."""
    from glyphpack._proxy.rounds import summed_usage

    first = {"input_tokens": 10, "only_first": 1, "details": {"cached": 2, "tier": "a"}, "flag": True, "ratio": 0.5, "nested": {"x": 1}}
    second = {"input_tokens": 5, "only_second": 3, "details": {"cached": 4, "tier": "b"}, "flag": False, "ratio": 0.25, "nested": 7}
    assert summed_usage(first, second) == {
        "input_tokens": 15, "only_first": 1, "only_second": 3, "details": {"cached": 6, "tier": "b"},
        "flag": False, "ratio": 0.25, "nested": 7}
    assert summed_usage(3, {"a": 1}) == {"a": 1} and summed_usage({"a": 1}, 3) == 3 and summed_usage(True, 1) == 1
    assert summed_usage({"a": None}, {}) == {"a": None} and summed_usage({}, {"a": 0}) == {"a": 0}
