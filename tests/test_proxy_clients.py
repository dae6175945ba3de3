"""Clients that share one proxy and one workspace keep their words apart: no request,
transcript, view or summary of one client holds a word only another client sent, as
hostile and unlucky clients would try it (same openings, retries, "too long" answers,
a subagent's prompt, histories that differ in thinking alone)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")
import httpx

from glyphpack import Workspace
from glyphpack._compaction.summarize import Summarizer
from glyphpack._history.codec import history_to_json
from glyphpack._history.view import read_view
from glyphpack._proxy.conversations import AGENT, ProxySettings, Recorder
from glyphpack._proxy.identity import ANONYMOUS, CONVERSATION_HEADER, BadRequest, Client
from glyphpack._proxy.server import Proxy, Running
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn, answer_body, count_tokens, error_response, fake_summary

Json = dict[str, Any]
OPENING = "Read every log file and tell me which service failed first."
SETTINGS = ProxySettings(context_window=24_000, threshold=9_000)
ALPHA = Client.of({"x-api-key": "sk-alpha-key"})
BRAVO = Client.of({"x-api-key": "sk-bravo-key"})


def _body(messages: list[Json]) -> Json:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": "You are terse.", "messages": messages}


def _answer(text: str, calls: tuple[tuple[str, Json], ...] = (), to: Json | None = None) -> Json:
    """The provider's answer, counting the request ``to`` as the fake provider does."""
    return answer_body("anthropic", Turn(text=text, calls=calls), 1, count_tokens(to) if to is not None else 100)


def _too_long(body: Json) -> Json:
    """The provider's "too long" for ``body``: its window just under the request."""
    tokens = count_tokens(body)
    return dict(error_response("anthropic", 400, "too_long", tokens=tokens, limit=tokens - 1).json())


def _words(tag: str, turn: int, count: int = 400) -> str:
    """About ``count`` words only client ``tag`` ever sends (``alpha-3-17``)."""
    return " ".join(f"{tag}-{turn}-{n}" for n in range(count))


def _everything_of(workspace: Workspace, conversation: str) -> str:
    """Every transcript, every view and every message in the tree of ``conversation``,
    as text."""
    parts = [json.dumps(history_to_json([node.message for node in workspace.tree.nodes(conversation)]))]
    for conv, agent in workspace.transcripts():
        if conv != conversation:
            continue
        parts.append(json.dumps(history_to_json(workspace.load(conv, agent).messages)))
        parts += [data.decode("utf-8", "replace") for _, data in workspace._store.views(conv, agent)]
    return "\n".join(parts)


def test_a_retry_after_too_long_carries_only_its_own_clients_words(tmp_path: Path) -> None:
    """The finding: B sends an opening and waits; A sends the same opening, then its tool
    result, and gets its answer; B's request then comes back "too long". The retry went
    upstream under B's key with A's tool call, result and answer in it."""
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    opening = [{"role": "user", "content": OPENING}]
    waiting = recorder.prepare("anthropic", _body(opening), client=BRAVO)
    first = recorder.prepare("anthropic", _body(opening), client=ALPHA)
    answer = _answer("alpha looks", (("Bash", {"command": "cat alpha.log"}),))
    recorder.finish(first, answer)
    (use,) = [b for b in answer["content"] if b["type"] == "tool_use"]
    grown = [*opening, {"role": "assistant", "content": answer["content"]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": _words("alpha", 1)}]}]
    second = recorder.prepare("anthropic", _body(grown), client=ALPHA)
    recorder.finish(second, _answer("alpha-final-answer"))
    retry = recorder.recover(waiting, 400, _too_long(waiting.forwarded))
    recorder.flush(waiting)  # no retry: the client gets the provider's error, its request recorded
    for sent in (waiting.forwarded, retry.forwarded if retry else {}):
        assert "alpha" not in json.dumps(sent)
    assert waiting.session is not None and first.session is not None
    assert waiting.session.conversation != first.session.conversation
    assert "alpha" not in _everything_of(workspace, waiting.session.conversation)
    # The provider's count of B's request never calibrates A's session.
    assert first.session.calibration is not waiting.session.calibration


def test_a_retry_of_a_request_whose_session_moved_is_not_built_from_the_new_history(tmp_path: Path) -> None:
    """One client, two requests in flight on one conversation (a client that timed out
    and went on): the first comes back too long after the second moved the session. Its
    retry must not carry the second's messages: it is left to the client (the provider's
    error), the moved session's calibration is untouched, and its late answer is not
    appended after the second's messages."""
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    opening = [{"role": "user", "content": OPENING}]
    early = recorder.prepare("anthropic", _body(opening), client=ALPHA)
    went_on = [*opening, {"role": "assistant", "content": "which logs?"}, {"role": "user", "content": _words("late", 1)}]
    late = recorder.prepare("anthropic", _body(went_on), client=ALPHA)
    assert early.session is late.session and late.session is not None
    overhead = late.session.estimator.overhead
    assert recorder.recover(early, 400, _too_long(early.forwarded)) is None
    assert late.session.estimator.overhead == overhead
    recorder.finish(early, _answer("early answer"))
    assert late.session.messages[-1].text.startswith("late-1-0")
    recorder.finish(late, _answer("late answer"))
    assert [m.text for m in workspace.load(late.session.conversation, AGENT).messages][-3:] == ["which logs?", _words("late", 1), "late answer"]
    # Unmoved, the same recovery goes through.
    again = [*went_on, {"role": "assistant", "content": "late answer"}, {"role": "user", "content": _words("late", 2)}]
    current = recorder.prepare("anthropic", _body(again), client=ALPHA)
    assert current.still_current()


def test_the_same_opening_after_anothers_answer_starts_a_conversation_of_its_own(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace)
    opening = [{"role": "user", "content": OPENING}]
    a = recorder.prepare("anthropic", _body(opening), client=ALPHA)
    recorder.finish(a, _answer("alpha-answer"))
    continued = [*opening, {"role": "assistant", "content": "alpha-answer"}, {"role": "user", "content": "bravo asks on"}]
    b = recorder.prepare("anthropic", _body(continued), client=BRAVO)
    recorder.finish(b, _answer("bravo-answer"))
    assert a.session is not None and b.session is not None and a.session.conversation != b.session.conversation
    assert workspace.load(a.session.conversation, AGENT).messages[-1].text == "alpha-answer"
    assert "bravo" not in _everything_of(workspace, a.session.conversation)
    # After a restart, each is still its own client's: the owner is kept in the
    # workspace as a salted digest, never the key.
    restarted = Recorder(Workspace(tmp_path))
    restarted.index_workspace()
    again = restarted.prepare("anthropic", _body([*opening, {"role": "assistant", "content": "alpha-answer"}, {"role": "user", "content": "more"}]), client=ALPHA)
    assert again.session is not None and again.session.conversation == a.session.conversation
    stolen = restarted.prepare("anthropic", _body([*opening, {"role": "assistant", "content": "alpha-answer"}, {"role": "user", "content": "more"}]), client=BRAVO)
    assert stolen.session is not None and stolen.session.conversation not in (a.session.conversation, b.session.conversation)
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"sk-alpha-key" not in stored and b"sk-bravo-key" not in stored


def test_histories_that_differ_only_in_thinking_are_not_one(tmp_path: Path) -> None:
    """Digests leave thinking out (clients drop it); where both carry it, it must match.
    A history whose answer carries other thinking does not continue the stored answer:
    it goes back to before it (the tree keeps both answers), as any changed answer does."""
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace)
    opening = [{"role": "user", "content": OPENING}]
    thought = {"type": "thinking", "thinking": "alpha thinks", "signature": "sig-a"}
    a = recorder.prepare("anthropic", _body(opening), client=ALPHA)
    recorder.finish(a, {**_answer("same words"), "content": [thought, {"type": "text", "text": "same words"}]})
    assert a.session is not None
    conversation = a.session.conversation
    other = {"type": "thinking", "thinking": "someone else thinks", "signature": "sig-b"}
    follow = {"role": "user", "content": "go on"}
    recorder.flush(recorder.prepare("anthropic", _body([*opening, {"role": "assistant", "content": [other, {"type": "text", "text": "same words"}]}, follow]), client=ALPHA))
    stored = json.dumps(history_to_json(workspace.load(conversation, AGENT).messages))
    assert "someone else thinks" in stored and "alpha thinks" not in stored
    in_tree = json.dumps([history_to_json([node.message]) for node in workspace.tree.nodes(conversation)])
    assert "alpha thinks" in in_tree and "someone else thinks" in in_tree
    # A client that drops thinking still continues its conversation.
    dropped = recorder.prepare("anthropic", _body([*opening, {"role": "assistant", "content": "same words"}, follow, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]), client=ALPHA)
    recorder.flush(dropped)
    assert dropped.session is not None and dropped.session.conversation == conversation
    assert len(workspace.load(conversation, AGENT).messages) == 6


def test_a_subagent_prompt_from_another_client_is_not_taken_as_that_subagent(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace)
    prompt = "Look at the svc logs and report the first failure."
    parent = recorder.prepare("anthropic", _body([{"role": "user", "content": OPENING}]), client=ALPHA)
    recorder.finish(parent, _answer("", (("Agent", {"prompt": prompt, "subagent_type": "Explore"}),)))
    intruder = recorder.prepare("anthropic", _body([{"role": "user", "content": f"{prompt} bravo-secret"}]), client=BRAVO)
    assert parent.session is not None and intruder.session is not None
    assert intruder.session.conversation != parent.session.conversation and intruder.session.agent == AGENT
    owner = recorder.prepare("anthropic", _body([{"role": "user", "content": prompt}]), client=ALPHA)
    assert owner.session is not None and owner.session.conversation == parent.session.conversation and owner.session.agent.startswith("Explore-")
    assert "bravo" not in _everything_of(workspace, parent.session.conversation)


def test_a_named_conversation_is_its_clients_own_and_another_client_of_the_same_name_never_meets_it(tmp_path: Path) -> None:
    """Names are taken within the caller's identity: two clients naming ``build-42`` each
    get their own conversation (before, the second got a 403 that told it the name was in
    use, and two racing first claims could both win)."""
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace)
    named_alpha = Client.of({"x-api-key": "sk-alpha-key", CONVERSATION_HEADER: "build-42"})
    named_bravo = Client.of({"x-api-key": "sk-bravo-key", CONVERSATION_HEADER: "build-42"})
    first = recorder.prepare("anthropic", _body([{"role": "user", "content": OPENING}]), client=named_alpha)
    recorder.finish(first, _answer("which logs?"))
    alpha = named_alpha.scoped().conversation
    assert first.session is not None and first.session.conversation == alpha and alpha.startswith("build-42.")
    other = recorder.prepare("anthropic", _body([{"role": "user", "content": OPENING}]), client=named_bravo)
    assert other.session is not None and other.session.conversation == named_bravo.scoped().conversation != alpha
    # With the header, a different task goes beside the main agent, not over it.
    aside = recorder.prepare("anthropic", _body([{"role": "user", "content": "Summarize the README."}]), client=named_alpha)
    assert aside.session is not None and (aside.session.conversation, aside.session.agent) == (alpha, "agent")
    assert workspace.load(alpha, AGENT).messages[-1].text == "which logs?"
    with pytest.raises(BadRequest, match="is not allowed"):
        Client.of({CONVERSATION_HEADER: "../other"})
    with pytest.raises(BadRequest, match="longer than 115 characters"):
        Client.of({CONVERSATION_HEADER: "n" * 116})
    assert Client.of({CONVERSATION_HEADER: "n" * 115}).scoped().conversation is not None


def test_a_name_a_client_held_before_names_were_scoped_goes_on_as_it_was(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    named = Client.of({"x-api-key": "sk-alpha-key", CONVERSATION_HEADER: "build-42"})
    workspace.set_owner("build-42", named.owner_record())
    workspace.tree.create("build-42")
    exchange = Recorder(workspace).prepare("anthropic", _body([{"role": "user", "content": OPENING}]), client=named)
    assert exchange.session is not None and exchange.session.conversation == "build-42"
    stranger = Client.of({"x-api-key": "sk-bravo-key", CONVERSATION_HEADER: "build-42"})
    theirs = Recorder(workspace).prepare("anthropic", _body([{"role": "user", "content": OPENING}]), client=stranger)
    assert theirs.session is not None and theirs.session.conversation == stranger.scoped().conversation


def test_a_client_is_known_by_a_digest_of_its_credentials_never_the_credentials() -> None:
    bearer = Client.of({"Authorization": "Bearer sk-alpha-key"})
    assert bearer != Client.of({"authorization": "Bearer sk-bravo-key"})
    assert bearer == Client.of({"authorization": "Bearer sk-alpha-key"})
    assert Client.of({}, {"key": "g-1"}) != Client.of({}, {"key": "g-2"}) != ANONYMOUS
    assert "sk-alpha" not in repr(bearer) and "sk-alpha" not in json.dumps(bearer.owner_record())
    record = bearer.owner_record()
    assert bearer.owns(record) and not ALPHA.owns(record) and not bearer.owns(None)
    assert not bearer.owns({"salt": "zz", "digest": record["digest"]})
    assert bearer.owner_record()["salt"] != record["salt"]  # salted afresh per conversation


# ---------------------------------------------------------------------- all at once

_ACTIONS = st.lists(
    st.tuples(st.sampled_from(["alpha", "bravo", "carol"]), st.sampled_from(["send", "answer", "too long", "retry", "call"])),
    min_size=4,
    max_size=24,
)


@settings(max_examples=25 if os.environ.get("CI") else 8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(actions=_ACTIONS)
@example(actions=[("alpha", "send"), ("alpha", "answer"), ("bravo", "send"), ("bravo", "answer"), ("bravo", "send")])
@example(actions=[("bravo", "send"), ("alpha", "send"), ("alpha", "call"), ("alpha", "send"), ("alpha", "answer"), ("bravo", "too long")])
def test_clients_with_overlapping_openings_never_see_each_others_words(tmp_path_factory: pytest.TempPathFactory, actions: list[tuple[str, str]]) -> None:
    """Three clients with three keys, all starting with the same opening, sending,
    answering, retrying and getting "too long" in any order, with a summarizer: no
    upstream request (first try or retry), no summary prompt, no transcript or view of
    one client's conversations holds a word only another client sent."""
    workspace = Workspace(tmp_path_factory.mktemp("ws"))
    prompts: list[str] = []

    def summarize(prompt: str) -> str:
        prompts.append(prompt)
        return fake_summary(prompt)

    recorder = Recorder(workspace, SETTINGS)
    clients = {name: Client.of({"x-api-key": f"sk-{name}"}) for name in ("alpha", "bravo", "carol")}
    histories: dict[str, list[Json]] = {name: [{"role": "user", "content": OPENING}] for name in clients}
    in_flight: dict[str, Any] = {}
    sent: dict[str, list[str]] = {name: [] for name in clients}
    turn = 0
    for name, action in actions:
        turn += 1
        history = histories[name]
        if action in ("send", "retry") or name not in in_flight:
            if action == "send" and name in in_flight and history[-1]["role"] == "user":
                history.append({"role": "assistant", "content": f"{name} lost answer {turn}"})
                history.append({"role": "user", "content": _words(name, turn, 300)})
            prompts.clear()
            exchange = recorder.prepare("anthropic", _body(list(history)), Summarizer(summarize, window=100_000), clients[name])
            in_flight[name] = exchange
            sent[name] += [json.dumps(exchange.forwarded), *prompts]
        elif action == "too long":
            prompts.clear()
            retry = recorder.recover(in_flight[name], 400, _too_long(in_flight[name].forwarded))
            sent[name] += [json.dumps(retry.forwarded) if retry else "", *prompts]
            if retry is not None:
                in_flight[name] = retry
        else:
            exchange = in_flight.pop(name)
            calls = (("Bash", {"command": f"cat {name}.log"}),) if action == "call" else ()
            answer = _answer(f"{name} answer {turn}", calls, exchange.forwarded)
            recorder.finish(exchange, answer)
            history.append({"role": "assistant", "content": answer["content"]})
            if calls:
                (use,) = [b for b in answer["content"] if b["type"] == "tool_use"]
                history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": _words(name, turn)}]})
            else:
                history.append({"role": "user", "content": _words(name, turn, 800)})
    owners = {name: {e.session.conversation for e in [in_flight.get(name)] if e is not None and e.session is not None} for name in clients}
    for conversation in {c for c, _ in workspace.transcripts()}:
        text = _everything_of(workspace, conversation)
        present = {name for name in clients if f"{name}-" in text or f"{name} answer" in text}
        assert len(present) <= 1, (conversation, present)
    for name, texts in sent.items():
        for other in clients:
            if other != name:
                assert not any(f"{other}-" in t or f"{other} answer" in t or f"{other} lost" in t for t in texts), (name, other)
    assert all(len(found) <= 1 for found in owners.values())
    recorder.close()


# ---------------------------------------------------------------------- over HTTP


@pytest.mark.slow  # a proxy and the SDK (about 2 s)
def test_two_sdk_clients_with_their_own_keys_on_one_proxy_keep_their_conversations(tmp_path: Path) -> None:
    """The official SDK, two keys, the same opening: two conversations, each request
    upstream with its own client's key and words only."""
    import anthropic

    model = FakeModel([Turn(text="alpha-answer"), Turn(text="bravo-answer"), Turn(text="alpha-second"), Turn(text="bravo-second")])
    with Workspace(tmp_path / "ws") as workspace, FakeUpstream(model) as upstream:
        # A whole answer in a stored conversation is recorded after the client has it:
        # the workspace is read once the proxy has stopped, every record written.
        with Running(Proxy(Recorder(workspace), upstream.url)) as proxy:
            alpha = anthropic.Anthropic(base_url=proxy.url, api_key="sk-alpha-key", max_retries=0)
            bravo = anthropic.Anthropic(base_url=proxy.url, api_key="sk-bravo-key", max_retries=0)
            opening = [{"role": "user", "content": OPENING}]
            first = alpha.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=opening).content[0].text
            bravo.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=opening)
            # Bravo sends alpha's answer as if its own: that goes on in bravo's conversation
            # (from before bravo's answer, which the tree keeps), never in alpha's.
            theirs = [*opening, {"role": "assistant", "content": first}, {"role": "user", "content": "bravo-question"}]
            bravo.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=theirs)
            named = httpx.post(proxy.url + "/v1/messages", json={"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": opening},
                               headers={"x-api-key": "sk-bravo-key", CONVERSATION_HEADER: "a b"})
            assert named.status_code == 400 and named.json()["error"]["type"] == "invalid_request_error"
        conversations = {c for c, _ in workspace.transcripts()}
        texts = {c: _everything_of(workspace, c) for c in conversations}
    assert len(conversations) == 2
    assert sum("bravo-question" in t for t in texts.values()) == 1
    (alphas,) = [c for c, t in texts.items() if "alpha-answer" in t and "bravo-question" not in t]
    assert "bravo" not in texts[alphas]
    keys = [h.get("x-api-key") or h["authorization"].removeprefix("Bearer ") for h in upstream.headers]
    assert keys == ["sk-alpha-key", "sk-bravo-key", "sk-bravo-key"]


def test_views_are_read_by_the_view_reader(tmp_path: Path) -> None:
    """The test helper reads every view a workspace keeps (a view that could not be read
    would make the word checks above vacuous)."""
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    history: list[Json] = [{"role": "user", "content": OPENING}]
    for turn in range(8):
        exchange = recorder.prepare("anthropic", _body(list(history)), Summarizer(fake_summary), ALPHA)
        recorder.finish(exchange, _answer(f"alpha answer {turn}", to=exchange.forwarded))
        history += [{"role": "assistant", "content": f"alpha answer {turn}"}, {"role": "user", "content": _words("alpha", turn)}]
    ((conversation, agent),) = workspace.transcripts()
    assert workspace._store.views(conversation, agent) and read_view(workspace, conversation, agent) is not None
    assert "alpha-0-1 " in _everything_of(workspace, conversation)
