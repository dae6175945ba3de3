"""The proxy's ``Recorder`` driven directly, in-process (the SDK loops in
``test_proxy.py`` drive it in the server's threads): the count-tokens body, a retry's
flags and the one-retry rule, the lines it writes when it cannot retry or record, who
a client is, and a Chat Completions answer recorded as one."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from test_proxy_clients import ALPHA, BRAVO, OPENING, SETTINGS, _answer, _body, _too_long, _words

from glyphpack import Workspace
from glyphpack._compaction.summarize import Summarizer
from glyphpack._proxy.conversations import Recorder
from glyphpack._proxy.identity import CONVERSATION_HEADER, BadRequest, Client
from glyphpack.testing.fake import Turn, answer_body, count_tokens, fake_summary

Json = dict[str, Any]


def _until_compacted(recorder: Recorder, client: Client = ALPHA, summarizer: Summarizer | None = None) -> tuple[list[Json], Any]:
    """A client's loop of tool turns with long results, up to the first request the
    proxy compacted: (that request's messages, its exchange)."""
    history: list[Json] = [{"role": "user", "content": OPENING}]
    for turn in range(1, 40):
        exchange = recorder.prepare("anthropic", _body(history), summarizer, client)
        if exchange.compacted:
            return history, exchange
        answer = _answer(f"step {turn}", (("Bash", {"command": f"cat {turn}.log"}),), to=exchange.forwarded)
        assert recorder.finish(exchange, answer) is None
        (use,) = [b for b in answer["content"] if b["type"] == "tool_use"]
        history += [{"role": "assistant", "content": answer["content"]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": _words("alpha", turn)}]}]
    raise AssertionError("the proxy never compacted")


def test_a_token_count_is_of_the_request_as_it_would_be_forwarded_and_only_for_its_own_client(tmp_path: Path) -> None:
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    early = [{"role": "user", "content": OPENING}]
    assert recorder.counted_body("anthropic", _body(early), ALPHA) == _body(early)  # no conversation yet
    history, exchange = _until_compacted(recorder)
    counted = recorder.counted_body("anthropic", _body(history), ALPHA)
    assert counted == exchange.forwarded and counted["messages"] != _body(history)["messages"]
    # another client, a history that left the stored one, a body that is no history: as sent
    assert recorder.counted_body("anthropic", _body(history), BRAVO) == _body(history)
    changed = [{"role": "user", "content": OPENING + " Also the database."}, *history[1:]]
    assert recorder.counted_body("anthropic", _body(changed), ALPHA) == _body(changed)
    unreadable = _body(history) | {"messages": [{"role": "robot", "content": "?"}]}
    assert recorder.counted_body("anthropic", unreadable, ALPHA) == unreadable
    # a conversation not yet compacted is counted as sent
    fresh = Recorder(Workspace(tmp_path / "other"), SETTINGS)
    opening = fresh.prepare("anthropic", _body(early), client=ALPHA)
    fresh.finish(opening, _answer("which logs?", to=opening.forwarded))
    continued = [*early, {"role": "assistant", "content": "which logs?"}, {"role": "user", "content": "all of them"}]
    assert fresh.counted_body("anthropic", _body(continued), ALPHA) == _body(continued)


def test_a_too_long_request_is_retried_once_smaller_and_keeps_its_rounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    summarizer = Summarizer(fake_summary, window=100_000)
    history, exchange = _until_compacted(recorder, summarizer=summarizer)
    assert recorder.recover(exchange, 400, {"error": {"type": "invalid_request_error", "message": "bad tool"}}) is None
    retry = recorder.recover(exchange, 400, _too_long(exchange.forwarded))
    assert retry is not None and retry.retried and not exchange.retried and retry.rounds == exchange.rounds
    assert count_tokens(retry.forwarded) < count_tokens(exchange.forwarded)
    assert recorder.recover(retry, 400, _too_long(retry.forwarded)) is None  # once
    assert capsys.readouterr().err == ""
    # a 413 is known by its status alone: tried by bytes (here nothing of them can go)
    again = recorder.prepare("anthropic", _body(history), summarizer, ALPHA)
    assert recorder.recover(again, 413, {}) is None
    assert capsys.readouterr().err == ("glyphpack proxy: could not recover from 'too long': the request is too large in bytes and "
                                       "neither dropping images nor eliding old tool results made it smaller\n")


def test_without_a_summarizer_too_long_is_retried_with_the_newest_results_cut_behind_their_refs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without a summarizer the proactive compaction of these long results does not fit,
    and "too long" left the ladder nothing more to take: the proxy sent the very request
    the provider had just refused, then gave up. The tail cut takes the newest results
    to their ends, each naming the ref that brings it back, and the retry fits."""
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    _, exchange = _until_compacted(recorder)
    rejection = _too_long(exchange.forwarded)
    retry = recorder.recover(exchange, 400, rejection)
    assert retry is not None and count_tokens(retry.forwarded) < count_tokens(exchange.forwarded) - 1  # the provider's limit
    assert exchange.session is not None and exchange.session.last_compaction is not None
    cut = exchange.session.last_compaction.report.rung("tail cut")
    assert cut is not None and cut.skipped is None and cut.changed > 0, exchange.session.last_compaction.report.lines()
    results = [b for m in retry.forwarded["messages"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_result"]
    texts = [b["content"] if isinstance(b["content"], str) else b["content"][0]["text"] for b in results]
    cut = ["chars cut by glyphpack; ref " in text for text in texts]
    assert cut[0] and not cut[-1] and cut == sorted(cut, reverse=True)  # the oldest first; the newest whole
    assert all(text.startswith("alpha-") for text in texts) and capsys.readouterr().err == ""


def test_a_task_the_window_cannot_hold_is_not_retried_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    history = [{"role": "user", "content": OPENING + " " + _words("alpha", 0, 12_000)}]
    exchange = recorder.prepare("anthropic", _body(history), None, ALPHA)
    assert recorder.recover(exchange, 400, _too_long(exchange.forwarded)) is None
    assert capsys.readouterr().err.startswith(
        "glyphpack proxy: not compacted: the system prompt, the tools and the task alone take ~46,6")


def test_what_the_recorder_cannot_retry_or_record_it_says_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    opening = [{"role": "user", "content": OPENING}]
    early = recorder.prepare("anthropic", _body(opening), client=ALPHA)
    went_on = [*opening, {"role": "assistant", "content": "which logs?"}, {"role": "user", "content": _words("late", 1)}]
    recorder.prepare("anthropic", _body(went_on), client=ALPHA)
    assert recorder.recover(early, 400, _too_long(early.forwarded)) is None
    assert capsys.readouterr().err == "glyphpack proxy: not retried: another request moved this conversation since\n"
    assert recorder.finish(early, _answer("early answer")) is None
    assert capsys.readouterr().err == (
        "glyphpack proxy: answer recorded with the next request: another request moved this conversation since\n")


def test_a_chat_completions_answer_is_recorded_as_one(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    body = {"model": "gpt-4o", "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": OPENING}]}
    exchange = recorder.prepare("openai-chat", body, client=ALPHA)
    recorder.finish(exchange, answer_body("openai-chat", Turn(text="The auth service."), 1, 50))
    assert exchange.session is not None
    assert [m.text for m in workspace.load(exchange.session.conversation, "main").messages][-2:] == [OPENING, "The auth service."]


def test_a_client_is_the_digest_of_its_credentials_under_a_fixed_label_and_names_its_conversation() -> None:
    """Owners are kept in workspaces as salted digests of this secret: a change to how
    it is derived would leave every stored conversation owned by no one after an upgrade."""
    client = Client.of({"X-Api-Key": "sk-\udc80", "Authorization": "Bearer t"}, {"key": "q"})
    material = "x-api-key\0sk-\udc80\nauthorization\0Bearer t\n?key\0q"  # in CREDENTIAL_HEADERS' order
    assert client.secret == hashlib.sha256(b"glyphpack proxy client\0" + material.encode("utf-8", "surrogatepass")).digest()
    assert Client.of({CONVERSATION_HEADER: "from-header"}).conversation == "from-header"
    assert Client.of({CONVERSATION_HEADER: "from-header"}, conversation="given").conversation == "given"
    assert Client.of({}, conversation="given").conversation == "given" and Client.of({}).conversation is None
    with pytest.raises(BadRequest) as refused:
        Client.of({CONVERSATION_HEADER: "../other"})
    assert str(refused.value) == (f"{CONVERSATION_HEADER}: conversation id '../other' is not allowed: "
                                  "use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")


def _loop(recorder: Recorder, turns: list[str], client: Client = ALPHA) -> tuple[list[Json], Any]:
    """A client's conversation through ``recorder``: per turn, a tool call answered
    (``call``), a plain answer and the user's next words (``say``), or an answer with
    thinking (``think``); returns (the client's history, the last exchange)."""
    history: list[Json] = [{"role": "user", "content": OPENING}]
    exchange = None
    for n, kind in enumerate(turns):
        exchange = recorder.prepare("anthropic", _body(history), client=client)
        calls = (("Bash", {"command": f"cat {n}.log"}),) if kind == "call" else ()
        answer = _answer(f"answer {n}", calls, to=exchange.forwarded)
        if kind == "think":
            answer["content"].insert(0, {"type": "thinking", "thinking": f"thought {n}", "signature": f"sig{n}"})
        recorder.finish(exchange, answer)
        history.append({"role": "assistant", "content": answer["content"]})
        if calls:
            (use,) = [b for b in answer["content"] if b["type"] == "tool_use"]
            history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": f"output {n}"}]})
        else:
            history.append({"role": "user", "content": f"next {n}"})
    return history, exchange


@pytest.mark.parametrize("turns", [["call", "say", "think", "call", "call", "say"], ["say"], ["think", "think", "call"]])
def test_the_chain_kept_from_the_last_turn_is_the_chain_read_anew(tmp_path: Path, turns: list[str]) -> None:
    """Each answer re-digests only what follows the last message no later answer can
    join; what it keeps must be exactly what reading the whole history again gives."""
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    history, exchange = _loop(recorder, turns)
    assert exchange is not None and exchange.session is not None
    key = (exchange.session.conversation, "main")
    messages = workspace.load(*key).messages
    kept = recorder.histories.chain(key, messages)
    anew = Recorder(workspace, SETTINGS).histories.chain(key, messages)
    assert kept == anew and kept.stored == len(messages) and kept.last_id == messages[-1].id
    assert len(kept.digests) == len(kept.marks) == len(kept.roles) == len(kept.ends) == kept.ends[-1]
    assert any(mark is not None for mark in kept.marks) == ("think" in turns) and len(history) > 1


def test_a_history_is_found_at_its_answer_and_before_it_and_by_another_proxy_on_the_workspace(tmp_path: Path) -> None:
    """The index holds the end of the stored history and the end before its last
    answer (a client retrying continues from there); a second proxy on the same
    workspace finds both through the store, for the conversation a client names only."""
    workspace = Workspace(tmp_path)
    history, exchange = _loop(Recorder(workspace, SETTINGS), ["call", "say"])
    assert exchange is not None and exchange.session is not None
    conversation = exchange.session.conversation
    other = Recorder(Workspace(tmp_path), SETTINGS)  # no index_workspace: the store's index is asked
    retried = other.prepare("anthropic", _body(history[:-2]), client=ALPHA)  # the last request again
    assert retried.session is not None and retried.session.conversation == conversation
    third = Recorder(Workspace(tmp_path), SETTINGS)
    named = Client.of({"x-api-key": "sk-alpha-key", CONVERSATION_HEADER: conversation})
    assert third.histories.match(_digests(history), named)[0] == (conversation, "main")
    elsewhere = Client.of({"x-api-key": "sk-alpha-key", CONVERSATION_HEADER: "another"})
    assert Recorder(Workspace(tmp_path), SETTINGS).histories.match(_digests(history), elsewhere) == (None, 0)
    assert third.histories.match((), ALPHA) == (None, 0)


def _digests(history: list[Json]) -> tuple[bytes, ...]:
    from glyphpack._proxy.histories import _read_request, digests

    _, messages = _read_request("anthropic", _body(history))
    return tuple(digests(messages))


def test_a_request_the_ladder_cannot_bring_under_the_window_goes_as_sent_and_is_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = Workspace(tmp_path)
    body = _body([{"role": "user", "content": _words("big", 1, 12_000)}])
    exchange = Recorder(workspace, SETTINGS).prepare("anthropic", body, client=ALPHA)
    why = ("the system prompt, the tools and the task alone take ~40,615 tokens, over the 24,000-token window: compaction keeps them "
           "verbatim, so no request can fit; a larger context_window or a shorter task would")
    assert capsys.readouterr().err == f"glyphpack proxy: not compacted: {why}\n"
    assert exchange.note == f"not compacted: {why}" and exchange.forwarded is body and exchange.body is body
    assert (exchange.api, exchange.client_tokens, exchange.sent_tokens) == ("anthropic", 40_615, 40_615)
    assert exchange.session is not None and exchange.still_current() and exchange.messages == exchange.session.messages
    assert exchange.report is exchange.session.last_request


def test_the_system_prompt_is_read_where_each_api_puts_it() -> None:
    from glyphpack._proxy.histories import _system_text

    blocks = [{"type": "text", "text": "One."}, "not a block", {"type": "text"}, {"type": "text", "text": "Two."}]
    assert _system_text("anthropic", {"system": "Be terse."}) == "Be terse."
    assert _system_text("anthropic", {"system": blocks}) == "One.\n\n\n\nTwo."
    assert [_system_text("anthropic", body) for body in ({"system": ""}, {"system": []}, {}, {"system": 7}, {"instructions": "x"})] == [None] * 5
    assert _system_text("openai-responses", {"instructions": "Be brief."}) == "Be brief."
    assert _system_text("openai-responses", {"system": "x"}) is None and _system_text("openai-chat", {"system": "x", "instructions": "y"}) is None
    parts = {"parts": [{"text": "A."}, "no part", {"inline_data": {}}, {"text": "B."}]}
    assert _system_text("gemini", {"systemInstruction": "Plain."}) == "Plain."
    assert _system_text("gemini", {"systemInstruction": parts}) == "A.\n\nB."
    assert _system_text("gemini", {"system_instruction": parts}) == "A.\n\nB."
    assert _system_text("gemini", {"systemInstruction": {"parts": [{"text": "camel"}]}, "system_instruction": parts}) == "camel"
    assert [_system_text("gemini", body) for body in ({"systemInstruction": ""}, {"systemInstruction": {"parts": []}},
                                                     {"systemInstruction": {"parts": "A."}}, {"system": "x"}, {})] == [None] * 5


def test_a_subagent_without_a_type_is_named_task_and_an_odd_type_is_made_an_id(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    prompts = {"Task": ("Count the failing tests.", {}), "Agent": ("Read the auth log.", {"subagent_type": "code reviewer/2"})}
    names = {}
    for tool, (prompt, extra) in prompts.items():
        parent = recorder.prepare("anthropic", _body([{"role": "user", "content": f"Start {tool}"}]), client=ALPHA)
        answer = answer_body("anthropic", Turn(calls=((tool, {"prompt": prompt, **extra}),)), 1, 100)
        recorder.finish(parent, answer)
        (use,) = answer["content"]
        sub = recorder.prepare("anthropic", _body([{"role": "user", "content": f"<env>x</env>\n{prompt}"}]), client=ALPHA)
        assert sub.session is not None and parent.session is not None and sub.session.conversation == parent.session.conversation
        names[tool] = (sub.session.agent, use["id"][-8:])
    assert names["Task"][0] == f"task-{names['Task'][1]}" and names["Agent"][0] == f"code-reviewer-2-{names['Agent'][1]}"
    # another client's waiting call is not its subagent, nor a call of another named conversation
    stranger = recorder.prepare("anthropic", _body([{"role": "user", "content": "Read the auth log."}]), client=BRAVO)
    assert stranger.session is not None and stranger.session.agent == "main"


def test_new_conversations_are_named_by_their_time_and_a_random_tail(tmp_path: Path) -> None:
    import re

    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    names = {recorder._new_conversation() for _ in range(20)}
    assert len(names) == 20 and all(re.fullmatch(r"proxy-20\d{6}-\d{6}-[0-9a-f]{6}", name) for name in names)


def test_a_responses_input_string_and_a_gemini_rest_body_are_recorded(tmp_path: Path) -> None:
    import base64

    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    responses = recorder.prepare("openai-responses", {"model": "gpt-5", "instructions": "Be brief.", "input": OPENING}, client=ALPHA)
    assert responses.session is not None and [(m.role, m.text) for m in responses.session.messages] == [("system", "Be brief."), ("user", OPENING)]
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
    body = {"model": "gemini-2.5-flash", "systemInstruction": {"parts": [{"text": "Be terse."}]},
            "contents": [{"role": "user", "parts": [{"text": OPENING}, {"inlineData": {"mimeType": "image/png", "data": png}}]}]}
    gemini = recorder.prepare("gemini", body, client=ALPHA)
    assert gemini.session is not None and gemini.forwarded is body
    system, user = gemini.session.messages
    assert (system.text, user.text, [i.media_type for i in user.images]) == ("Be terse.", OPENING, ["image/png"])


def test_an_answer_the_session_cannot_read_is_not_recorded_and_the_next_request_records_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    opening = [{"role": "user", "content": OPENING}]
    exchange = recorder.prepare("anthropic", _body(opening), client=ALPHA)
    assert recorder.finish(exchange, {"role": "assistant", "content": "not a list"}) is None
    err = capsys.readouterr().err
    assert err.startswith("glyphpack proxy: answer not recorded: ") and err.count("\n") == 1
    assert exchange.session is not None
    went_on = [*opening, {"role": "assistant", "content": "The auth service."}, {"role": "user", "content": "Why?"}]
    later = recorder.prepare("anthropic", _body(went_on), client=ALPHA)
    assert later.session is not None and later.session is not exchange.session  # forgotten, read again
    assert later.session.conversation == exchange.session.conversation
    assert [m.text for m in later.session.messages][-3:] == [OPENING, "The auth service.", "Why?"]


def test_a_turn_another_proxy_recorded_is_read_again_and_the_request_continues_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two proxies on one workspace (two hosts behind a balancer): the client's second
    turn went through the other one. The first proxy's open session is a turn behind;
    its save is refused as a conflict, and the request is recorded on the history read
    again (the other proxy's turn once, not twice)."""
    here, there = Recorder(Workspace(tmp_path), SETTINGS), Recorder(Workspace(tmp_path), SETTINGS)
    history: list[Json] = [{"role": "user", "content": OPENING}]
    summarizer = Summarizer(fake_summary, window=100_000)
    for recorder, words in ((here, "which logs?"), (there, "the auth ones"), (here, "done")):
        exchange = recorder.prepare("anthropic", _body(history), summarizer, client=ALPHA)
        assert exchange.session is not None and exchange.note is None and exchange.session.summarizer is summarizer
        assert [m.text for m in exchange.session.messages] == ["You are terse.", *(m["content"] for m in history)]
        answer = _answer(words, to=exchange.forwarded)
        assert recorder.finish(exchange, answer) is None
        history += [{"role": "assistant", "content": words}, {"role": "user", "content": f"after {words}"}]
    stored = Workspace(tmp_path).load(exchange.session.conversation, "main")
    assert [m.text for m in stored.messages] == ["You are terse.", *(m["content"] for m in history[:-1])]
    assert capsys.readouterr().err == ""


def test_a_history_another_proxy_holds_longer_wins_over_an_opening_this_one_knows(tmp_path: Path) -> None:
    """One key's two windows with one first prompt, through two proxies: the second
    proxy knows only the other window's opening, which this window's history begins
    with too. The longer history the first proxy stored is the one it continues."""
    first, second = Recorder(Workspace(tmp_path), SETTINGS), Recorder(Workspace(tmp_path), SETTINGS)
    window = [{"role": "user", "content": OPENING}]
    for words in ("first answer", "second answer"):
        first.finish(first.prepare("anthropic", _body(window), client=ALPHA), _answer(words))
        window += [{"role": "assistant", "content": words}, {"role": "user", "content": f"after {words}"}]
    other = second.prepare("anthropic", _body([{"role": "user", "content": OPENING}]), client=ALPHA)
    second.finish(other, _answer("the other window's answer"))
    went_on = second.prepare("anthropic", _body(window), client=ALPHA)
    second.flush(went_on)
    assert went_on.session is not None and other.session is not None
    assert went_on.session.conversation != other.session.conversation
    stored = Workspace(tmp_path).load(went_on.session.conversation, "main").messages
    assert [m.text for m in stored] == ["You are terse.", *(m["content"] for m in window)]
    assert [m.text for m in Workspace(tmp_path).load(other.session.conversation, "main").messages][-1] == "the other window's answer"


def test_the_store_is_asked_only_when_a_match_here_leaves_more_than_a_turn_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from glyphpack._proxy.histories import TURN_MESSAGES

    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    asked: list[int] = []
    real = recorder.workspace.tree.ending_with
    monkeypatch.setattr(recorder.workspace.tree, "ending_with", lambda digests: asked.append(len(digests)) or real(digests))
    history = [{"role": "user", "content": OPENING}]
    recorder.finish(recorder.prepare("anthropic", _body(history), client=ALPHA), _answer("first"))
    assert asked == [2]  # a new history: nothing here, so the store was asked (system prompt and opening)
    # The answer, then the user's words: a turn's messages, found here alone.
    history += [{"role": "assistant", "content": "first"}, {"role": "user", "content": "go on"}]
    assert TURN_MESSAGES == 2
    recorder.prepare("anthropic", _body(history), client=ALPHA)  # not finished: its answer comes back with the next request
    history += [{"role": "assistant", "content": "second"}, {"role": "user", "content": "and on"}]
    recorder.prepare("anthropic", _body(history), client=ALPHA)  # two new since the last held: still a turn
    assert asked == [2]
    history += [{"role": "assistant", "content": "third"}, {"role": "user", "content": "more"}, {"role": "assistant", "content": "fourth"}, {"role": "user", "content": "last"}]
    exchange = recorder.prepare("anthropic", _body(history), client=ALPHA)  # four new: the store asked too
    assert len(asked) == 2 and exchange.session is not None and len(exchange.session.messages) == len(history) + 1


def test_a_conflict_on_the_second_reading_too_leaves_the_request_unrecorded_and_sent_as_it_came(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from glyphpack import ConflictError

    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    tries: list[Any] = []

    def always_behind(*args: Any) -> Any:
        tries.append(args[1])
        raise ConflictError("revision 3 was saved since revision 2")

    monkeypatch.setattr(recorder, "_session", always_behind)
    body = _body([{"role": "user", "content": OPENING}])
    exchange = recorder.prepare("anthropic", body, client=ALPHA)
    assert len(tries) == 2  # read again once, then given up
    assert exchange.forwarded is body and exchange.session is None
    assert exchange.note == "not recorded: revision 3 was saved since revision 2"
    assert capsys.readouterr().err == "glyphpack proxy: not recorded: revision 3 was saved since revision 2\n"


def _long_history(turns: int) -> list[Any]:
    from glyphpack import Message, Text, ToolCall, ToolResult

    messages = [Message("system", (Text("You are terse."),)), Message("user", (Text(OPENING),))]
    for n in range(turns):
        messages += [Message("assistant", (ToolCall(f"call_{n}", "Bash", {"command": f"cat {n}.log"}),)),
                     Message("tool", (ToolResult(f"call_{n}", (Text(_words("alpha", n)),)),))]
    return messages


@pytest.mark.parametrize("api, model", [("anthropic", "claude-sonnet-4-5"), ("openai-chat", "gpt-4o"), ("openai-responses", "gpt-5"), ("gemini", "gemini-2.5-flash")])
def test_a_compacted_request_per_api_and_the_last_recall_round_asks_for_an_answer(tmp_path: Path, api: str, model: str) -> None:
    """A client's long history compacted on the way in, built in the client's own API
    (Gemini's as the REST API's JSON, not the SDK's snake_case); where the proxy answers
    the recall (not Gemini), rounds of nothing but recall calls go on until the last one
    allowed, which asks the model for an answer: ``tool_choice`` none, in the API's
    spelling."""
    import json

    from glyphpack import RECALL_TOOL, recall_tool, resolve
    from glyphpack._proxy.conversations import RECALL_ROUNDS
    from glyphpack._wire import provider_api
    from glyphpack._wire.gemini import to_rest

    build = provider_api(api)
    body = {**build.build(model, _long_history(12), 0, resolve(model)), "model": model}
    if api == "gemini":
        body = {"contents": to_rest(body["contents"]), **({"systemInstruction": to_rest(body["config"]["system_instruction"])} if "config" in body else {}), "model": model}
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    exchange = recorder.prepare(api, body, Summarizer(fake_summary, window=100_000), ALPHA)
    assert exchange.compacted and exchange.note is None
    forwarded = exchange.forwarded[build.request_key]
    if api == "gemini":
        assert not exchange.recall and "glyphpack_recall" not in json.dumps(exchange.forwarded)
        assert forwarded == to_rest(forwarded) and "function_call" not in json.dumps(forwarded) and "functionCall" in json.dumps(forwarded)
        return
    assert exchange.recall and exchange.forwarded["tools"][-1] == recall_tool(api)
    recorder_rounds = []
    current = exchange
    while current is not None:
        recorder_rounds.append(current.forwarded.get("tool_choice"))
        answer = answer_body(api, Turn(calls=((RECALL_TOOL, {"ref": "call_0"}),)), len(recorder_rounds), 100)
        current = recorder.finish(current, answer)
    none = {"type": "none"} if api == "anthropic" else "none"
    assert recorder_rounds == [None] * (RECALL_ROUNDS - 1) + [none]


def test_what_the_client_holds_leaves_out_the_proxys_recall_rounds_and_joins_the_answers_around_them() -> None:
    from glyphpack import RECALL_TOOL, Message, Text, ToolCall, ToolResult
    from glyphpack._proxy.histories import RECALL_ID_PREFIX, Shown, client_view, proxy_recall_ids, recall_id_prefix

    r1, r2 = recall_id_prefix() + "r1", recall_id_prefix() + "r2"
    messages = [
        Message("user", (Text("task"),), id="u0"),
        Message("assistant", (Text("look"), ToolCall(r1, RECALL_TOOL, {"ref": "x"})), id="a1"),
        Message("tool", (ToolResult(r1, (Text("recalled"),)),), id="t2"),
        Message("assistant", (Text("found"),), id="a3"),
        Message("user", (Text("next"),), id="u4"),
        Message("assistant", (ToolCall(r2, RECALL_TOOL, {"ref": "y"}),), id="a5"),
        Message("tool", (ToolResult(r2, (Text("again"),)),), id="t6"),
        Message("assistant", (Text("answer"),), id="a7"),
        Message("assistant", (ToolCall("own", RECALL_TOOL, {"ref": "z"}), ToolCall(recall_id_prefix() + "x", "Bash", {})), id="a8"),
        # a client's own recall whose id begins as the proxy's did before the nonce (its own session's ids)
        Message("assistant", (ToolCall(RECALL_ID_PREFIX + "toolu_1", RECALL_TOOL, {"ref": "w"}), ToolCall(RECALL_ID_PREFIX + "0123456789ab", RECALL_TOOL, {})), id="a9"),
    ]
    assert proxy_recall_ids(messages) == {r1, r2}  # not the client's own recalls, nor a prefixed call of another tool
    joined = Message("assistant", (Text("look"), Text("found")), id="a1")
    assert client_view(messages) == Shown((messages[0], joined, messages[4], messages[7], messages[8], messages[9]), (1, 4, 5, 8, 9, 10))
    assert client_view(messages, 4) == Shown((messages[4], messages[7], messages[8], messages[9]), (5, 8, 9, 10))
    assert client_view(messages, 0, frozenset()) == Shown(tuple(messages), tuple(range(1, 11)))


def test_a_history_is_indexed_at_its_end_and_before_its_last_answer(tmp_path: Path) -> None:
    from glyphpack import Message, Text
    from glyphpack._proxy.histories import client_view, digests

    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    asked = [Message("user", (Text("task"),), id="u0")]
    answered = [*asked, Message("assistant", (Text("done"),), id="a1")]
    went_on = [*answered, Message("user", (Text("more"),), id="u2")]
    for history, kept in ((asked, 1), (answered, 2), (went_on, 1)):
        workspace.save("c", "main", history, revision=workspace.load("c", "main").revision, replace=True)
        chain = digests(client_view(history).messages)
        assert recorder.histories.remember(("c", "main"), history) == tuple(chain[-kept:])
    assert Recorder(workspace, SETTINGS).index_workspace() == 1
    assert workspace.tree.ending_with(digests(client_view(went_on).messages)[-1:]) == [("c", "main")]


@pytest.mark.parametrize(
    ("own", "built", "developer"),
    [
        (None, "Be brief.\n\nUse tools.", "Be brief.\n\nUse tools."),
        ("Be brief.", "Be brief.\n\nUse tools.", "Use tools."),  # what the client's instructions already say, once
        ("Other words.", "Be brief.\n\nUse tools.", "Be brief.\n\nUse tools."),
        (["not", "text"], "Be brief.", "Be brief."),
        ("Be brief.", "Be brief.", None),  # the client's own instructions say it all
        (None, "", None),
        (None, 5, None),
    ],
)
def test_a_compacted_responses_request_puts_what_its_instructions_miss_first_in_its_input(
    tmp_path: Path, own: object, built: object, developer: str | None
) -> None:
    from types import SimpleNamespace

    body = {"model": "gpt-5", "input": "ignored", **({"instructions": own} if own is not None else {})}
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]}
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    in_force = SimpleNamespace(view=object())  # a session with a compaction in force: its history is sent
    forwarded = recorder._forwarded("openai-responses", body, {"input": [item], "instructions": built}, in_force)  # type: ignore[arg-type]
    expected = [] if developer is None else [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": developer}]}]
    assert forwarded["input"] == [*expected, item] and forwarded.get("instructions") == own


def test_a_proxys_session_takes_its_settings_target_and_the_clients_tools_as_overhead(tmp_path: Path) -> None:
    from glyphpack._proxy.conversations import ProxySettings
    from glyphpack._session.session import RECALL_SCHEMA, _schema_text

    tool = {"name": "Bash", "description": "run a command " * 20, "input_schema": {"type": "object"}}
    settings = ProxySettings(context_window=24_000, threshold=9_000, target=4_000)
    with_tools = Recorder(Workspace(tmp_path / "a"), settings).prepare("anthropic", {**_body([{"role": "user", "content": OPENING}]), "tools": [tool]}, client=ALPHA)
    session = with_tools.session
    assert session is not None and session.thresholds.target == 4_000 and session.thresholds.threshold == 9_000
    assert session.estimator.overhead == session.cost().text(_schema_text([[tool], RECALL_SCHEMA])) > 0
    odd = Recorder(Workspace(tmp_path / "b"), settings).prepare("anthropic", {**_body([{"role": "user", "content": OPENING}]), "tools": {"not": "a list"}}, client=ALPHA)
    assert odd.session is not None and odd.session.estimator.overhead == 0  # not tools: no overhead, no recall offered


def test_the_open_sessions_are_the_newest_and_the_oldest_is_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from glyphpack._proxy import conversations

    monkeypatch.setattr(conversations, "OPEN_SESSIONS", 2)
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    exchanges = [recorder.prepare("anthropic", _body([{"role": "user", "content": f"task {n}"}]), client=ALPHA) for n in range(3)]
    keys = [(e.session.conversation, "main") for e in exchanges if e.session is not None]
    # Each request still unrecorded (upstream, no answer yet): none may go, or a session
    # opened again would not hold it.
    assert list(recorder._sessions) == keys
    for exchange in exchanges:
        recorder.flush(exchange)
    recorder.prepare("anthropic", _body([{"role": "user", "content": "task 2"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}]), client=ALPHA)
    assert list(recorder._sessions) == keys[1:]  # the first was the least recently used
    recorder.prepare("anthropic", _body([{"role": "user", "content": "task 1"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]), client=ALPHA)
    assert list(recorder._sessions) == [keys[2], keys[1]]  # used again: the newest


def test_in_a_named_conversation_each_other_task_is_an_agent_of_its_own(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    in_flight = []  # none answered yet: each task's place is found from what the process holds
    for conversation, tasks in (("other", ["task A", "task B"]), ("shared", ["task A", "task C", "task A", "task D"])):
        named = Client.of({"x-api-key": "sk-alpha-key", CONVERSATION_HEADER: conversation})
        for task in tasks:
            in_flight.append(recorder.prepare("anthropic", _body([{"role": "user", "content": task}]), client=named))
    for exchange in in_flight:
        recorder.flush(exchange)
    other, shared = (Client.of({"x-api-key": "sk-alpha-key", CONVERSATION_HEADER: name}).scoped().conversation for name in ("other", "shared"))
    agents = sorted(workspace.transcripts())
    assert agents == sorted([(other, "agent"), (other, "main"), (shared, "agent"), (shared, "agent-2"), (shared, "main")])
    assert workspace.load(shared, "agent").messages[-1].text == "task C" and workspace.load(shared, "agent-2").messages[-1].text == "task D"


def test_adjacent_texts_digest_as_one_and_anything_between_them_parts_them() -> None:
    from glyphpack import Image, Message, Text
    from glyphpack._proxy.histories import digests

    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
    one = digests([Message("assistant", (Text("Let me look. "), Text("Found it.")))])
    assert one == digests([Message("assistant", (Text("Let me look. Found it."),))])
    assert one != digests([Message("assistant", (Text("Let me look. "), Image("image/png", png), Text("Found it.")))])
    assert one != digests([Message("user", (Text("Let me look. Found it."),))])


def test_a_body_nested_to_the_limit_is_recorded_and_one_level_deeper_is_not(tmp_path: Path) -> None:
    from glyphpack._proxy.histories import MAX_NESTING, nesting

    def nested(levels: int) -> Json:
        value: Any = "deep"
        for _ in range(levels):
            value = [value]
        return {**_body([{"role": "user", "content": OPENING}]), "metadata": value}

    at = nested(MAX_NESTING - 1)
    assert nesting(at) == MAX_NESTING
    assert Recorder(Workspace(tmp_path / "a"), SETTINGS).prepare("anthropic", at, client=ALPHA).session is not None
    over = Recorder(Workspace(tmp_path / "b"), SETTINGS).prepare("anthropic", nested(MAX_NESTING), client=ALPHA)
    assert over.session is None and over.note == f"not recorded: the body is nested {MAX_NESTING + 1}+ levels deep; glyphpack records at most {MAX_NESTING}"


def test_a_compacted_exchange_logs_the_whole_history_and_what_was_sent(tmp_path: Path) -> None:
    _, exchange = _until_compacted(Recorder(Workspace(tmp_path), SETTINGS))
    session = exchange.session
    assert session is not None and exchange.report is session.last_request
    assert exchange.sent_tokens == session.last_request.tokens < exchange.client_tokens  # type: ignore[union-attr]
    assert exchange.client_tokens == session.cost().history(session.messages) + session.estimator.overhead


def test_a_subagent_is_found_past_other_clients_and_other_conversations_sessions(tmp_path: Path) -> None:
    """The open sessions are looked through, oldest first: another client's, and for a
    client that names its conversation, another conversation's, are passed over, never
    the end of the search."""
    from glyphpack.testing.fake import Turn, answer_body

    workspace = Workspace(tmp_path)
    recorder = Recorder(workspace, SETTINGS)
    recorder.prepare("anthropic", _body([{"role": "user", "content": "bravo's own task"}]), client=BRAVO)
    named = Client.of({"x-api-key": "sk-alpha-key", CONVERSATION_HEADER: "mine"})
    recorder.prepare("anthropic", _body([{"role": "user", "content": "alpha's other task"}]), client=Client.of({"x-api-key": "sk-alpha-key", CONVERSATION_HEADER: "other"}))
    prompt = "Find the first failing service."
    caller = recorder.prepare("anthropic", _body([{"role": "user", "content": OPENING}]), client=named)
    answer = answer_body("anthropic", Turn(calls=(("Task", {"prompt": prompt}),)), 1, 100)
    recorder.finish(caller, answer)
    (use,) = answer["content"]
    sub = recorder.prepare("anthropic", _body([{"role": "user", "content": prompt}]), client=named)
    assert sub.session is not None and (sub.session.conversation, sub.session.agent) == (named.scoped().conversation, f"task-{use['id'][-8:]}")
    # Unnamed: another client's session, older, is passed over by whose it is.
    others = Recorder(Workspace(tmp_path / "unnamed"), SETTINGS)
    others.prepare("anthropic", _body([{"role": "user", "content": "bravo's own task"}]), client=BRAVO)
    caller = others.prepare("anthropic", _body([{"role": "user", "content": OPENING}]), client=ALPHA)
    others.finish(caller, answer)
    sub = others.prepare("anthropic", _body([{"role": "user", "content": prompt}]), client=ALPHA)
    assert caller.session is not None and sub.session is not None
    assert (sub.session.conversation, sub.session.agent) == (caller.session.conversation, f"task-{use['id'][-8:]}")


def test_a_request_over_the_window_after_others_logs_all_of_it_as_sent(tmp_path: Path) -> None:
    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    opening = [{"role": "user", "content": OPENING}]
    first = recorder.prepare("anthropic", _body(opening), client=ALPHA)
    recorder.finish(first, _answer("which logs?", to=first.forwarded))
    huge = [*opening, {"role": "assistant", "content": "which logs?"}, {"role": "user", "content": _words("big", 1, 12_000)}]
    exchange = recorder.prepare("anthropic", _body(huge), client=ALPHA)
    assert exchange.note is not None and exchange.note.startswith("not compacted: ")
    assert exchange.session is not None and exchange.report is exchange.session.last_request is not None  # the request before it
    assert exchange.sent_tokens == exchange.client_tokens > exchange.report.tokens  # type: ignore[union-attr]


def test_a_workspace_recorded_without_a_proxy_is_indexed_into_the_store(tmp_path: Path) -> None:
    from glyphpack import Message, Text
    from glyphpack._proxy.histories import client_view, digests

    workspace = Workspace(tmp_path)
    history = [Message("user", (Text("task"),)), Message("assistant", (Text("done"),))]
    workspace.save("c", "main", history, revision=0)
    ends = digests(client_view(history).messages)
    assert workspace.tree.ending_with(ends[-1:]) == []  # saved by hand: no proxy indexed it
    assert Recorder(workspace, SETTINGS).index_workspace() == 1
    assert workspace.tree.ending_with(ends[-1:]) == [("c", "main")] == workspace.tree.ending_with(ends[:1])


def test_a_client_whose_own_recall_ids_begin_glyphpack_keeps_one_conversation(tmp_path: Path) -> None:
    """A client that defines glyphpack_recall itself (a glyphpack session behind the
    proxy) and whose call ids began ``glyphpack_`` had its own calls taken for the
    proxy's: left out of its stored history's view, so each request matched nothing
    and started a new conversation (11 in 15 requests)."""
    from test_proxy_clients import _answer

    from glyphpack import recall_tool

    recorder = Recorder(Workspace(tmp_path), SETTINGS)
    own = recall_tool("anthropic")
    history: list[Json] = [{"role": "user", "content": OPENING}]
    for turn in range(1, 16):
        exchange = recorder.prepare("anthropic", {**_body(history), "tools": [own]}, None, ALPHA)
        call = ("glyphpack_recall", {"ref": "x"}) if turn % 3 == 0 else ("Bash", {"command": f"cat {turn}.log"})
        answer = _answer(f"step {turn}", (call,), to=exchange.forwarded)
        (use,) = [b for b in answer["content"] if b["type"] == "tool_use"]
        use["id"] = f"glyphpack_{turn}"
        assert recorder.finish(exchange, answer) is None
        history += [{"role": "assistant", "content": answer["content"]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": _words("alpha", turn, 200)}]}]
    ((conversation, agent),) = recorder.workspace.transcripts()
    assert len(recorder.workspace.load(conversation, agent).messages) == 1 + 1 + 2 * 14  # system, task, rounds (the last waits for its results)


@pytest.mark.parametrize("proxies", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_one_key_two_windows_keep_their_own_transcripts_on_one_proxy_or_two(workspace_location: str, proxies: int) -> None:
    """The same person's two terminals, the same first prompt, each request of one on
    the first proxy and of the other on the second (a fleet): each proxy matched against
    its stale memory of the other's saves, and each request replaced the shared
    transcript with its window's history (about 250 tree nodes for 28 turns). Now each
    window's words are in its own transcript, and the tree holds what was said, once."""
    recorders = [Recorder(Workspace(workspace_location), SETTINGS) for _ in range(proxies)]
    histories: dict[int, list[dict[str, Any]]] = {1: [{"role": "user", "content": OPENING}], 2: [{"role": "user", "content": OPENING}]}
    turns = 10
    for turn in range(turns):
        for window in (1, 2):
            recorder = recorders[(window - 1) % proxies]
            exchange = recorder.prepare("anthropic", _body(histories[window]), None, ALPHA)
            said = f"window-{window}-answer-{turn}"
            recorder.finish(exchange, _answer(said))
            histories[window] += [{"role": "assistant", "content": [{"type": "text", "text": said}]},
                                  {"role": "user", "content": f"window-{window}-asks-{turn}"}]
    workspace = recorders[0].workspace
    transcripts = workspace.transcripts()
    assert len(transcripts) == 2
    owners = {}
    for key in transcripts:
        text = " ".join(m.text for m in workspace.load(*key).messages)
        mine = {window for window in (1, 2) if f"window-{window}-" in text}
        assert len(mine) == 1, text[:300]
        owners[mine.pop()] = key
    assert set(owners) == {1, 2}
    for window, key in owners.items():
        stored = [m.text for m in workspace.load(*key).messages]
        assert stored[-1] == f"window-{window}-answer-{turns - 1}" and len(stored) == 1 + 2 * turns  # the system prompt, then the turns
    nodes = sum(len(workspace.tree.nodes(conversation)) for conversation in {c for c, _ in transcripts})
    assert nodes <= 2 * (1 + 2 * turns) + 2  # each window's messages once (the second window's first turn may begin as a retry of the first's)
    for recorder in recorders:
        recorder.close()
        recorder.workspace.close()
