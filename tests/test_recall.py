"""Recall: every stub the ladder leaves names a ref, and ``glyphpack_recall`` brings the
original back from the stored history, exactly, paged when long; end to end through
each SDK, the fake model reads a stub's ref, calls the tool, and the session answers
it without the harness seeing the call."""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

import glyphpack
from glyphpack import Image, Message, Text, ToolCall, ToolResult
from glyphpack._compaction.cost import CostModel
from glyphpack._compaction.rungs import cap_images, drop_images, elide
from glyphpack._compaction.snapshot import serialize_message
from glyphpack._history.recall import RECALL_PAGE_CHARS, RECALL_TOOL, recall
from glyphpack._wire import REGISTRY, recall_tool
from glyphpack.testing.fake import NEWEST_REF, FakeModel, Turn

MODEL = "claude-sonnet-4-5"
REF = re.compile(r'ref "([^"]+)"')


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (width, height), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def _history() -> list[Message]:
    shot = Image("image/png", _png(300, 200))
    return [
        Message("user", "read the parser", id="u1"),
        Message("assistant", (ToolCall("c1", "read", {"path": "parser.py"}),), id="a1"),
        Message("tool", (ToolResult("c1", (Text("def parse():\n    return 1\n" * 300),)),), id="t1"),
        Message("assistant", (ToolCall("c2", "write", {"path": "x.py", "body": "y = 2\n" * 500}),), id="a2"),
        Message("tool", (ToolResult("c2", (Text("written"), shot, Image("image/png", _png(20, 10)))),), id="t2"),
        Message("user", (Text("and this screen"), shot), id="u2"),
        Message("assistant", "done", id="a3"),
        Message("user", "next", id="u3"),
        Message("assistant", "ok", id="a4"),
        Message("user", "again", id="u4"),
    ]


def _refs(messages) -> list[str]:
    """The refs the notes in ``messages`` name, in order."""
    texts = [t for m in messages for b in m.content for t in (_strings(b.arguments) if isinstance(b, ToolCall) else b.texts())]
    return [ref for text in texts for ref in REF.findall(text)]


def test_each_stub_names_a_ref_that_brings_back_exactly_what_it_stands_for():
    history = _history()
    cost = CostModel.for_model(MODEL)
    policy = glyphpack.CompactionPolicy(elide_min_chars=200)
    elided = elide(history, cost, policy).view
    dropped = drop_images(history, cost, protect_turns=1).view
    assert _refs(elided) == ["c1", "c2:arguments"]
    assert _refs(dropped) == ["t2:image:1", "t2:image:2", "u2:image:1"]
    # The result's own blocks, as they were; the arguments as JSON; each image.
    assert recall(history, "c1").content == history[2].content[0].content
    assert json.loads(recall(history, "c2:arguments").content[0].text) == history[3].content[0].arguments
    assert recall(history, "t2:image:2").content == (history[4].content[0].content[2],)
    assert recall(history, "u2:image:1").content == (history[5].content[1],)
    assert not any(recall(history, ref).is_error for ref in _refs(elided) + _refs(dropped))
    capped = cap_images(history, cost, limit=1).view  # oldest first, a block's images together
    assert _refs(capped) == ["t2:image:1", "t2:image:2"] and capped[5] == history[5]


def test_long_text_comes_in_pages_that_join_to_the_original():
    text = "".join(f"line {n}: " + "x" * (n % 70) + "\n" for n in range(1_200))
    assert len(text) > 2 * RECALL_PAGE_CHARS
    history = [Message("assistant", (ToolCall("big", "read", {}),), id="a"), Message("tool", (ToolResult("big", (Text(text),)),), id="t")]
    pages = (len(text) + RECALL_PAGE_CHARS - 1) // RECALL_PAGE_CHARS
    answers = [recall(history, "big", page) for page in range(1, pages + 1)]
    assert "".join(a.content[1].text for a in answers) == text
    first = answers[0].content[0].text
    assert first == f"[glyphpack recall of big: page 1 of {pages}, characters 1-{RECALL_PAGE_CHARS:,} of {len(text):,}; page 2 has the next]"
    assert answers[-1].content[0].text.endswith(f"of {len(text):,}]")  # the last names no next page
    past = recall(history, "big", pages + 1)
    assert past.is_error and past.content[0].text == f"glyphpack recall: 'big' has {pages} page(s), not a page {pages + 1}"


def test_a_range_ref_gives_the_messages_as_snapshot_text():
    history = _history()
    answer = recall(history, "messages:a1..t1", range_text=lambda ms: "".join(map(serialize_message, ms)))
    assert answer.content[0].text == serialize_message(history[1]) + serialize_message(history[2])
    assert recall(history, "messages:t1..a1", range_text=str).is_error  # backwards
    assert recall(history, "messages:a1..t1").content[0].text == "glyphpack recall: this session cannot render a range of messages as text"


@pytest.mark.parametrize(("ref", "page", "reason"), [
    ("nope", 1, "nothing in this conversation has the ref 'nope'"),
    ("", 1, "ref must be a non-empty string, not ''"),
    (7, 1, "ref must be a non-empty string, not 7"),
    ("c1", 0, "page must be a whole number from 1, not 0"),
    ("c1", True, "page must be a whole number from 1, not True"),
    ("c1", "2", "page must be a whole number from 1, not '2'"),
    ("t2:image:3", 1, "message 't2' has 2 image(s), not an image 3"),
    ("t2:image:0", 1, "message 't2' has 2 image(s), not an image 0"),
    ("zz:image:1", 1, "no message 'zz' in this conversation"),
    ("c9:arguments", 1, "no tool call 'c9' in this conversation"),
    ("messages:u1..zz", 1, "no range of messages 'u1'..'zz' in this conversation"),
])
def test_a_bad_call_is_an_answer_the_model_can_read(ref, page, reason):
    answer = recall(_history(), ref, page)
    assert answer.is_error and answer.content == (Text(f"glyphpack recall: {reason}"),)
    assert answer.as_result("call-9") == ToolResult("call-9", answer.content, is_error=True)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=3_000), min_size=1, max_size=6), st.integers(1, 3))
def test_elided_results_come_back_byte_for_byte(outputs, protect):
    history = [Message("user", "go", id="u0")]
    for n, output in enumerate(outputs):
        history += [Message("assistant", (ToolCall(f"k{n}", "run", {"n": n}),), id=f"a{n}"),
                    Message("tool", (ToolResult(f"k{n}", (Text(output),)),), id=f"t{n}"),
                    Message("user", f"turn {n}", id=f"u{n + 1}")]
    view = elide(history, CostModel.for_model(MODEL), glyphpack.CompactionPolicy(elide_min_chars=10, protect_turns=protect)).view
    for ref in _refs(view):
        assert _whole(history, ref) == outputs[int(ref[1:])]


def test_the_tool_is_defined_in_each_apis_shape_and_added_once():
    for name, api in REGISTRY.items():
        tool = recall_tool(name)
        assert api.tool_names(tool) == {RECALL_TOOL}
        own = api.tool("read", "read a file", {"type": "object", "properties": {}})
        key = "config" if name == "gemini" else None
        extra = {"config": {"tools": [own], "temperature": 0}} if key else {"tools": [own], "max_tokens": 5}
        merged = api.with_tools(extra, [tool])
        tools = merged["config"]["tools"] if key else merged["tools"]
        assert tools == [own, tool] and (merged["config"]["temperature"] == 0 if key else merged["max_tokens"] == 5)
        again = api.with_tools(merged, [tool])
        assert (again["config"]["tools"] if key else again["tools"]) == [own, tool]  # the caller's own copy is kept
    with pytest.raises(glyphpack.UsageError, match="tools must be a list of Messages tool definitions, not dict"):
        REGISTRY["anthropic"].with_tools({"tools": {}}, [recall_tool("anthropic")])
    with pytest.raises(glyphpack.UsageError, match="config must be a dict"):
        REGISTRY["gemini"].with_tools({"config": object()}, [recall_tool("gemini")])


APIS = {"anthropic": "claude-sonnet-4-5", "openai-chat": "gpt-5.4", "openai-responses": "gpt-5.4", "gemini": "gemini-3-pro"}


@pytest.mark.parametrize("api", [*list(APIS)[:1], *(pytest.param(a, marks=pytest.mark.slow) for a in list(APIS)[1:])])
def test_the_model_recalls_an_elided_result_through_the_sdk(tmp_path, api):
    """Three large reads in a small window: the session elides the oldest; the fake
    model reads the stub's ref and calls glyphpack_recall; the session answers it from
    the transcript (the harness's loop never sees the call) and the next request
    carries the original byte for byte."""
    bodies = {n: f"body of file {n}\n" + "".join(f"    line {n}.{k} = value_{k}\n" for k in range(500)) for n in range(4)}
    script = [Turn(text=f"reading {n}", calls=(("read_file", {"n": n}),)) for n in range(4)]
    script += [Turn(text="let me look again", calls=((RECALL_TOOL, {"ref": NEWEST_REF}),)), Turn(text="all read")]
    fake = FakeModel(script)
    client = fake.client(api)
    policy = glyphpack.CompactionPolicy(rungs=("elision",), elide_min_chars=1_000, protect_turns=0)
    with glyphpack.open_session(tmp_path / "ws", "c", "main", model=APIS[api], policy=policy, recall=True,
                                context_window=20_000, threshold=10_000) as session:
        session.add_user("read the four files")
        tools = [REGISTRY[api].tool("read_file", "read a file", {"type": "object", "properties": {"n": {"type": "integer"}}})]
        extra = {"config": {"tools": tools}} if api == "gemini" else {"tools": tools}
        seen = []
        while True:
            message = session.call(client, api=api, **extra)
            if not message.tool_calls:
                break
            seen += [c.name for c in message.tool_calls]
            session.add_tool_results({c.id: bodies[c.arguments["n"]] for c in message.tool_calls})
        assert seen == ["read_file"] * 4  # the recall never reached the harness
        assert session.view is not None and session.view.trigger == "proactive"
        recalled = [m for m in session.messages if m.tool_calls and m.tool_calls[0].name == RECALL_TOOL]
        assert len(recalled) == 1
        ref = recalled[0].tool_calls[0].arguments["ref"]
        answer = next(m for m in session.messages if m.tool_results and m.tool_results[0].call_id == recalled[0].tool_calls[0].id)
        original = next(r for m in session.messages for r in m.tool_results if r.call_id == ref)
        assert answer.tool_results[0].text == original.text and not answer.tool_results[0].is_error
        assert original.text in {bodies[n] for n in bodies}
        assert len(original.text) < RECALL_PAGE_CHARS  # one page: the result's own text
        assert original.text in _strings(fake.requests[-1])  # sent back to the model as it was


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_without_recall_the_tool_is_not_offered(tmp_path):
    fake = FakeModel([Turn(text="x", calls=((RECALL_TOOL, {"ref": NEWEST_REF}),))])
    with glyphpack.open_session(tmp_path / "ws", "c", "main", model=MODEL, recall=False) as session:
        session.add_user("hello")
        request = session.request("anthropic", max_tokens=10)
        assert "tools" not in request
        with pytest.raises(Exception, match=f"the model called {RECALL_TOOL}, which this request does not define"):
            session.call(fake.client("anthropic"))
    with pytest.raises(glyphpack.UsageError, match="recall must be True or False, not 'yes'"):
        glyphpack.open_session(tmp_path / "ws2", "c", "main", model=MODEL, recall="yes")


@pytest.mark.parametrize("rungs", [("snapshot",), ("summarization",)])
def test_pages_and_summaries_name_the_range_they_stand_for(rungs):
    """The range a snapshot's pages or a summary replaced is named by its ref, and the
    ref brings back exactly the messages the view no longer holds."""
    from glyphpack.testing import generate_session

    history = generate_session(60_000, seed=3)
    policy = glyphpack.CompactionPolicy(rungs=rungs, fidelity="dense")
    summarizer = glyphpack.Summarizer(lambda prompt: "the work so far, in short")
    result = glyphpack.compact(history, MODEL, 8_000, summarizer=summarizer, policy=policy)
    assert result.report.fits
    [ref] = [r for r in _refs(result.view) if r.startswith("messages:")]
    kept = {m.id for m in result.view}
    gone = [m for m in history if m.id not in kept]
    assert ref == f"messages:{gone[0].id}..{gone[-1].id}"
    assert _whole(history, ref) == "".join(map(serialize_message, gone))


def _whole(history, ref) -> str:
    """Every page of what ``ref`` stands for, joined."""
    pages = [recall(history, ref, 1, range_text=lambda ms: "".join(map(serialize_message, ms)))]
    if not pages[0].content[0].text.startswith(f"[glyphpack recall of {ref}: page 1 of "):
        return pages[0].content[0].text
    while pages[-1].content[0].text.endswith("has the next]"):
        pages.append(recall(history, ref, len(pages) + 1, range_text=lambda ms: "".join(map(serialize_message, ms))))
    return "".join(p.content[1].text for p in pages)


def test_the_recall_command_shows_what_a_note_stands_for(tmp_path):
    big = "the whole output\n" * 200
    policy = glyphpack.CompactionPolicy(elide_min_chars=100, protect_turns=0)
    with glyphpack.open_session(tmp_path / "ws", "c", "main", model=MODEL, policy=policy) as session:
        session.add_user("run it")
        session.add_response(Message("assistant", (ToolCall("run-1", "run", {"cmd": "make"}),)))
        session.add_tool_results({"run-1": big})
        session.add_response(Message("assistant", "done"))
        shaken = session.command("/shake")
        assert shaken.data["rungs"][0]["changed"] == 1
        assert _refs(session.request_view()[0]) == ["run-1"]
        shown = session.command("/recall run-1")
        assert shown.text == big and shown.data == {"ref": "run-1", "blocks": 1}
        with pytest.raises(glyphpack.UsageError, match="^glyphpack recall: nothing in this conversation has the ref 'nope'$"):
            session.command("/recall nope")
        with pytest.raises(glyphpack.UsageError, match=r"^usage: /recall REF \[PAGE\]"):
            session.command("/recall run-1 two")


def test_a_range_of_one_message_and_images_only_with_the_first_page():
    history = _history()
    one = recall(history, "messages:t1..t1", range_text=lambda ms: "".join(map(serialize_message, ms)))
    assert not one.is_error and one.content[0].text == serialize_message(history[2])
    shot = Image("image/png", _png(30, 20))
    long = [Message("assistant", (ToolCall("L", "shot", {}),), id="a"),
            Message("tool", (ToolResult("L", (Text("x" * (RECALL_PAGE_CHARS + 5)), shot)),), id="t")]
    first, second = recall(long, "L", 1), recall(long, "L", 2)
    assert first.content[-1] == shot and shot not in second.content and second.content[1].text == "x" * 5
    assert recall(history, "c1", 2).content[0].text == "glyphpack recall: 'c1' has 1 page(s), not a page 2"
    assert recall(history, "c1").content == history[2].content[0].content  # one page: the result's own blocks


def _file_text(n: int, chars: int) -> str:
    """File ``n``: ``chars`` characters, the same cost for every ``n`` under 10,000."""
    return (f"# file {n:04d}\n" + "x = compute(a, b)\n" * chars)[:chars]


def _saving(session, chars: int) -> int:
    """Tokens eliding one result of ``chars`` characters frees."""
    pair = [
        Message("assistant", (ToolCall("toolu_000", "read", {"path": "f0.py"}),)),
        Message("tool", (ToolResult("toolu_000", (Text(_file_text(0, chars)),)),)),
    ]
    elided = elide(pair, session.cost(), glyphpack.CompactionPolicy(protect_turns=0))
    return elided.report.tokens_before - elided.report.tokens_after


def _tool_rounds(session, rounds: int, chars: int, start: int = 0) -> None:
    """``rounds`` model calls, each reading a file of ``chars`` characters."""
    for n in range(start, start + rounds):
        session.request("anthropic")
        call = {"type": "tool_use", "id": f"toolu_{n:03d}", "name": "read", "input": {"path": f"f{n}.py"}}
        session.add_response({"role": "assistant", "content": [call]}, "anthropic")
        session.add_tool_results({f"toolu_{n:03d}": _file_text(n, chars)})


@pytest.mark.parametrize("recall_on", [True, False])
def test_with_recall_old_results_are_elided_below_the_threshold_in_batches(tmp_path, recall_on):
    """With recall, a result that left the newest protected rounds is elided before the
    threshold, once those results free a batch's worth of the room (in a session long
    enough that the cache rewrite pays back); the view then stays the prefix of every
    later request (cached) until the next batch, and every elided result comes back
    byte for byte. Without recall nothing is elided below it."""
    from glyphpack._compaction.rungs import PROTECTED_ROUNDS
    from glyphpack._session.compactor import ELISION_BATCH_SHARE

    window = {"context_window": 800_000, "threshold": 600_000}
    with glyphpack.open_session(tmp_path, "c", "a", model=MODEL, recall=recall_on, **window) as s:
        s.add_user("read every file")
        _tool_rounds(s, 40, 500, start=1000)  # short results, never elided: a long session so far
        room = s.thresholds.threshold - s.estimator.overhead
        needed = int(ELISION_BATCH_SHARE * room / _saving(s, 10_000)) + 1  # results that free a batch
        _tool_rounds(s, PROTECTED_ROUNDS + needed - 1, 10_000)
        s.request("anthropic")  # one short of a batch: nothing elided
        assert s.last_request.elided == 0 and s.view is None
        sent = [m for m in s.request_view()[0] if m.tool_results]
        assert all("elided by glyphpack" not in m.text for m in sent)
        call = {"type": "tool_use", "id": "toolu_last", "name": "read", "input": {"path": "last.py"}}
        s.add_response({"role": "assistant", "content": [call]}, "anthropic")
        s.add_tool_results({"toolu_last": _file_text(999, 10_000)})
        s.request("anthropic")
        if not recall_on:
            assert s.last_request.elided == 0 and s.view is None
            return
        assert s.last_request.elided == needed and s.view.trigger == "elision"
        view, prefix = s.request_view()
        stubs = [m for m in view if m.tool_results and "elided by glyphpack" in m.text]
        assert len(stubs) == needed
        assert sum(1 for m in view if m.tool_results and len(m.text) == 10_000) == PROTECTED_ROUNDS
        for ref in _refs(stubs):  # every word comes back
            original = next(r for m in s.messages for r in m.tool_results if r.call_id == ref)
            assert s.recall(ref).content == original.content
        # The next round keeps the whole previous request as its prefix: no new batch yet.
        _tool_rounds(s, 1, 10_000, start=500)
        s.request("anthropic")
        assert s.last_request.elided == 0 and s.last_request.prefix_kept
        assert s.request_view()[0][:prefix] == view[:prefix]
        # The next batch leaves the first one as it is and elides the results after it.
        _tool_rounds(s, needed - 1, 10_000, start=600)
        assert s.request_view()[1] == prefix  # one short of a batch again
        s.request("anthropic")
        assert s.last_request.elided == needed
        second, _ = s.request_view()
        assert second[:prefix] == view[:prefix]
        assert sum(1 for m in second if m.tool_results and "elided by glyphpack" in m.text) == 2 * needed
    # A restarted process sends the same request: the batch is the stored view.
    with glyphpack.open_session(tmp_path, "c", "a", model=MODEL, recall=True, **window) as again:
        assert again.request_view() == s.request_view()


@pytest.mark.parametrize("recall_on", [True, False])
def test_below_whole_below_the_next_request_goes_whole(tmp_path, recall_on):
    """``Session.whole_below``, which the proxy's forecast relies on to send a request
    before reading it: wherever the estimate is below it, the next request is not built
    (no compaction, no elision batch); a batch below the threshold does come (with
    recall), so the bound is the batch's, not the threshold's; with a view in force it is 0."""
    window = {"context_window": 800_000, "threshold": 600_000}
    built_below_threshold = 0
    with glyphpack.open_session(tmp_path, "c", "a", model=MODEL, recall=recall_on, **window) as s:
        s.add_user("read every file")
        _tool_rounds(s, 40, 500, start=1000)
        for n in range(60):
            below, estimate = s.whole_below(), s.estimate()
            built = s.request_if_compacted("anthropic")
            assert built is None or estimate >= below, (n, estimate, below)
            if built is not None:
                assert s.view is not None and s.whole_below() == 0
                built_below_threshold += estimate < s.thresholds.threshold
                break
            call = {"type": "tool_use", "id": f"toolu_{n:03d}", "name": "read", "input": {"path": f"f{n}.py"}}
            s.add_response({"role": "assistant", "content": [call]}, "anthropic")
            s.add_tool_results({f"toolu_{n:03d}": _file_text(n, 10_000)})
        if not recall_on:
            assert s.view is None and s.whole_below() == s.threshold  # no batches: the threshold alone
    assert built_below_threshold == recall_on  # a batch came, under the threshold


@pytest.mark.parametrize("calls_before", [0, 50])
def test_a_batch_waits_until_the_session_is_long_enough_to_pay_it_back(tmp_path, calls_before):
    """A batch rewrites the cache from its first stub on, so it waits until it would pay
    that back within ``ELISION_PAYBACK_CALLS`` calls; a session that made few calls is
    taken to have as many left as half of those (a batch that frees enough of the room
    still waits for them)."""
    from glyphpack._compaction.rungs import PROTECTED_ROUNDS
    from glyphpack._session.compactor import ELISION_BATCH_SHARE, ELISION_PAYBACK_CALLS, REWRITE_PER_READ

    with glyphpack.open_session(tmp_path, "c", "a", model=MODEL, context_window=120_000, threshold=100_000, recall=True) as s:
        s.add_user("read every file")
        _tool_rounds(s, calls_before, 500, start=1000)  # short results, never elided
        room = s.thresholds.threshold - s.estimator.overhead
        past_room = PROTECTED_ROUNDS + int(ELISION_BATCH_SHARE * room / _saving(s, 10_000)) + 1
        _tool_rounds(s, past_room + 1, 10_000)
        assert s.view is None  # enough to free, too few calls to pay the rewrite back
        for n in range(past_room + 1, 60):
            _tool_rounds(s, 1, 10_000, start=n)
            if s.view is not None:
                break
        # The rule at the call that made the batch (the round added since left out) ...
        calls = sum(1 for m in s.messages if m.role == "assistant") - 1
        view, _ = s.request_view()
        first = next(i for i, (old, new) in enumerate(zip(s.messages, view)) if old != new)
        freed = s.cost().history(s.messages) - s.cost().history(view)
        rewritten = s.cost().history(view[first:-2])
        assert REWRITE_PER_READ == pytest.approx(11.5)  # a cache write at 1.25x, a read at 0.1x
        assert freed * min(ELISION_PAYBACK_CALLS, calls // 2) >= REWRITE_PER_READ * rewritten
        # ... and at the call before, with one result fewer out of the protected rounds.
        saving = _saving(s, 10_000)
        before = rewritten + saving - s.cost().history(view[-4:-2])
        assert (freed - saving) * min(ELISION_PAYBACK_CALLS, (calls - 1) // 2) < REWRITE_PER_READ * before


@pytest.mark.parametrize("recall_on", [True, False])
def test_with_recall_the_pages_are_drawn_at_the_readers_gist_shape(tmp_path, monkeypatch, recall_on):
    """A reader measured to follow the gist at 5x8 but to read exactly only at 9x15: with
    recall the far past goes to 5x8 pages (every word of it comes back on request),
    without it to 9x15 pages."""
    exact = {"shape": "9x15-loose", "source": "a test", "note": "", "recorded": "2026-12-03"}
    gist = {**exact, "shape": "5x8"}
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps({MODEL: {"name": "measured", "exact": exact, "gist": gist}}))
    monkeypatch.setenv("GLYPHPACK_READING_PROFILES", str(profiles))
    from glyphpack._compaction.snapshot import snapshot_shape

    with glyphpack.open_session(tmp_path / "ws", "c", "a", model=MODEL, recall=recall_on) as s:
        assert snapshot_shape(s.profile, s.policy).name == ("5x8" if recall_on else "9x15-loose")
        # With recall the whole ladder (elision loses nothing); without, 9x15 pages are
        # not cheap enough to skip elision either.
        assert "elision" in s.policy.rungs and s._fallback is None


def test_a_batch_after_a_compaction_keeps_its_pages_and_their_geometry(tmp_path):
    """A batch adds to the view in force: the compaction's pages, the text they draw,
    the range they stand for and their pinned geometry stay, so the next compaction
    draws unchanged text to the same pages."""
    with glyphpack.open_session(tmp_path, "c", "a", model="claude-fable-5", recall=True, context_window=60_000) as s:
        s.add_user("read every file")
        _tool_rounds(s, 12, 6_000)
        s.compact(8_000)
        compacted = s.view
        assert compacted.pages and compacted.page_text and compacted.source and compacted.shape == "5x8"
        for n in range(100, 200):
            _tool_rounds(s, 1, 6_000, start=n)
            if s.view.trigger == "elision":
                break
        batch = s.view
        assert batch.trigger == "elision" and batch.messages[: len(compacted.messages)] == compacted.messages
        kept = ("source", "shape", "page_size", "pages", "page_text")
        assert [getattr(batch, k) for k in kept] == [getattr(compacted, k) for k in kept]
        assert batch.tokens == s.cost().history(batch.messages) and "elided below the threshold" in batch.report


_IMAGE_MESSAGE = Message("user", (Text("look"), Image("image/png", b"\x89PNG\r\n\x1a\n" + b"0" * 32)), id="m1")


@pytest.mark.parametrize("number", ["²", "١", "𝟙", "9" * 5000, "-1", "1.0", "", " 1", "0"])
def test_an_image_ref_with_any_number_is_an_answer_never_a_crash(number: str) -> None:
    """A model's ref such as ``m1:image:²`` (``str.isdigit`` accepts the superscript,
    ``int`` refuses it) or a 5,000-digit number: an error answer the model can read."""
    answer = recall([_IMAGE_MESSAGE], f"m1:image:{number}")
    assert answer.is_error and answer.content[0].text.startswith(("glyphpack recall: nothing in this conversation has the ref", "glyphpack recall: message 'm1' has 1 image(s)"))


def test_an_image_ref_with_a_plain_number_still_recalls_the_image() -> None:
    assert recall([_IMAGE_MESSAGE], "m1:image:1").content == (_IMAGE_MESSAGE.images[0],)


@given(ref=st.text(max_size=60), page=st.one_of(st.integers(-3, 5), st.text(max_size=3), st.none(), st.floats(allow_nan=True)))
def test_recall_answers_any_ref_and_page(ref: str, page: object) -> None:
    """Whatever a model sends as the ref and page, recall answers: never raises."""
    messages = [_IMAGE_MESSAGE, Message("assistant", (ToolCall("c1", "Bash", {"cmd": "ls"}),), id="m2"),
                Message("tool", (ToolResult("c1", (Text("out"),)),), id="m3")]
    answer = recall(messages, ref, page, range_text=lambda ms: "\n".join(m.text for m in ms))
    assert isinstance(answer.content, tuple) and answer.content


@pytest.mark.slow  # CI runs it, for each reader
@pytest.mark.parametrize("model", ["claude-fable-5", "claude-sonnet-4-5", "gemini-3-pro"])
def test_a_result_elided_once_is_never_sent_whole_again(tmp_path, model):
    """No ping-pong between batches and the threshold's compactions, for any reader: a 5x8
    reader's threshold compaction drew on its pages whole the results a batch had elided,
    and the next batch elided them again, each rewriting the other's cached prefix (+11.9%
    on the 471-call pi session at 100k; here, 48 of 120 requests for Fable 5 before the
    fix). With recall, once a result is elided no later request holds it whole again, as
    text or on a page."""
    # The window's threshold, given: batches then come between the threshold's
    # compactions (at the depth that bills least they rarely do; see test_session.py).
    with glyphpack.open_session(tmp_path, "c", "a", model=model, context_window=60_000, threshold=52_500,
                                summarizer=glyphpack.Summarizer(lambda prompt: "the work so far " * 40)) as s:
        s.add_user("read every file")
        elided: set[str] = set()
        compactions = batches = 0
        for n in range(120):
            s.request("anthropic")
            compactions += s.last_request.compaction is not None
            batches += s.last_request.elided > 0
            view, _ = s.request_view()
            whole = {r.call_id for m in view for r in m.tool_results if r.text == _file_text(int(r.call_id[-3:]), 6_000)}
            drawn = s.view.page_text if s.view is not None else ""
            assert not whole & elided, f"request {n} holds whole again: {sorted(whole & elided)}"
            assert not any(_file_text(int(c[-3:]), 6_000)[:400] in drawn for c in elided), f"request {n} draws an elided result whole"
            elided |= {r.call_id for m in view for r in m.tool_results if r.text.startswith("[elided by glyphpack")}
            call = {"type": "tool_use", "id": f"toolu_{n:03d}", "name": "read", "input": {"path": f"f{n}.py"}}
            thought = {"type": "text", "text": f"step {n}: " + "reasoning about the module and what to do next. " * 30}
            s.add_response({"role": "assistant", "content": [thought, call]}, "anthropic")
            s.add_tool_results({f"toolu_{n:03d}": _file_text(n, 6_000)})
        assert compactions >= 2 and batches >= 2, (compactions, batches)  # both kinds, each more than once


@pytest.mark.parametrize(("chars", "pages"), [(0, 1), (RECALL_PAGE_CHARS - 1, 1), (RECALL_PAGE_CHARS, 1), (RECALL_PAGE_CHARS + 1, 2),
                                              (2 * RECALL_PAGE_CHARS, 2), (2 * RECALL_PAGE_CHARS + 1, 3)])
def test_a_result_exactly_a_multiple_of_the_page_comes_back_in_that_many_pages(chars, pages):
    """Both sides of each page boundary: no empty last page, no character lost or doubled."""
    text = "".join(chr(ord("a") + n % 26) for n in range(chars))
    messages = [Message("assistant", (ToolCall("c1", "read", {}),), id="a"), Message("tool", (ToolResult("c1", (Text(text),)),), id="t")]
    got = []
    for page in range(1, pages + 1):
        answer = recall(messages, "c1", page)
        assert not answer.is_error
        got.append(answer.content[-1].text)
        if pages > 1:
            assert answer.content[0].text.startswith(f"[glyphpack recall of c1: page {page} of {pages}, ")
    assert "".join(got) == text
    past = recall(messages, "c1", pages + 1)
    assert past.is_error and past.content[0].text == f"glyphpack recall: 'c1' has {pages} page(s), not a page {pages + 1}"


def test_a_compactions_range_ref_is_short_printed_by_its_report_and_recalled():
    """A range ref was two whole message ids (~75 characters) and the report said
    "messages 2-372", which recall does not take. Now the note names the shortest unique
    starts of the two ids (8 characters each here), the report prints that same ref, and
    recall takes it, or the whole ids, and says so when a start is not unique."""
    history = [Message(m.role, m.content) for m in glyphpack.generate_session(60_000, seed=3)]  # ids as a session makes them
    summarizer = glyphpack.Summarizer(lambda prompt: "what happened, in short")
    result = glyphpack.compact(history, "claude-sonnet-4-5", 4_000, summarizer=summarizer, policy=glyphpack.CompactionPolicy(rungs=("summarization",)))
    report = result.report.rung("summarization")
    assert re.fullmatch(r"messages:[0-9a-f]{8}\.\.[0-9a-f]{8}", report.ref)
    assert f'ref "{report.ref}"' in result.view[report.first_message - 1].text  # the note names it
    assert f'ref "{report.ref}"' in report.details  # the report prints it
    first, last = history[report.first_message - 1], history[report.last_message - 1]
    text = "".join(map(serialize_message, history[report.first_message - 1 : report.last_message]))
    for ref in (report.ref, f"messages:{first.id}..{last.id}"):
        answer = recall(history, ref, range_text=lambda ms: "".join(map(serialize_message, ms)))
        assert not answer.is_error and text[:2_000] in answer.content[-1].text
    twins = [Message("user", (Text("a"),), id="abcdefgh-1"), Message("user", (Text("b"),), id="abcdefgh-2")]
    assert recall(twins, "messages:abcdefgh..abcdefgh-2", range_text=str).content[0].text == (
        "glyphpack recall: no range of messages 'abcdefgh'..'abcdefgh-2' in this conversation "
        "(2 messages have ids starting 'abcdefgh')"
    )
    assert recall(twins, "abcdefg:image:1").content[0].text == "glyphpack recall: no message 'abcdefg' in this conversation"  # under 8: whole ids only


def test_recall_at_the_page_size_and_of_arguments_exactly():
    """A result exactly one page long comes back as its own blocks (two texts stay two,
    not joined); arguments come back as indented JSON with their own characters; a page
    past the end names the ref; a range whose ends are ambiguous says so for each."""
    half = RECALL_PAGE_CHARS // 2
    blocks = (Text("a" * (half - 1)), Text("b" * half))  # joined by a newline: exactly one page
    call = ToolCall("c1", "write", {"path": "café.txt", "lines": [1, 2]})
    messages = [Message("assistant", (call,), id="conv/aaaaaaaa-1"), Message("tool", (ToolResult("c1", blocks),), id="conv/aaaaaaaa-2")]
    assert len(messages[1].tool_results[0].text) == RECALL_PAGE_CHARS
    assert recall(messages, "c1").content == blocks
    assert recall(messages, "c1:arguments").content == (Text('{\n "path": "café.txt",\n "lines": [\n  1,\n  2\n ]\n}'),)
    assert recall(messages, "c1:arguments", 2).content == (Text("glyphpack recall: 'c1:arguments' has 1 page(s), not a page 2"),)
    answer = recall(messages, "messages:conv/aaaaaaaa..conv/aaaaaaaa", range_text=lambda ms: "x").content[0].text
    assert answer == ("glyphpack recall: no range of messages 'conv/aaaaaaaa'..'conv/aaaaaaaa' in this conversation"
                      " (2 messages have ids starting 'conv/aaaaaaaa') (2 messages have ids starting 'conv/aaaaaaaa')")


def test_a_call_id_with_the_range_separator_is_recalled_as_a_call():
    messages = [Message("assistant", (ToolCall("run..1", "bash", {}),), id="m1"), Message("tool", (ToolResult("run..1", (Text("out"),)),), id="m2")]
    assert recall(messages, "run..1", range_text=lambda ms: "range").content == (Text("out"),)
