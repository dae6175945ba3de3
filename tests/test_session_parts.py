"""The session's methods a proxy and a framework adapter call, one by one: ``extend``,
``next_view``, ``request_if_compacted``, ``measured``, and when a compaction below the
window's threshold pays back. Each is checked on both sides of its limits."""

from __future__ import annotations

import pytest

import glyphpack
from glyphpack import Message, Text, ToolCall, ToolResult, UsageError


def turns(count: int, size: int = 200) -> list[Message]:
    out: list[Message] = [Message("user", (Text("the task"),))]
    for n in range(count):
        out += [Message("assistant", (Text(f"answer {n} " + "w" * size),)), Message("user", (Text(f"next {n}"),))]
    return out


def session(tmp_path, **options):
    return glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5", **options)


def test_extend_saves_once_at_the_end_and_an_empty_extend_saves_nothing(tmp_path):
    with session(tmp_path) as s:
        revision = s.revision
        s.extend([])
        assert s.revision == revision and s.messages == ()
        added = turns(2)
        s.extend(added)
        assert s.messages == tuple(added) and s.revision != revision
    with session(tmp_path) as again:
        assert [m.id for m in again.messages] == [m.id for m in added]


def test_extend_refuses_a_history_ending_mid_call_and_keeps_what_was_there(tmp_path):
    with session(tmp_path) as s:
        s.extend(turns(1))
        before = (s.messages, s.revision)
        with pytest.raises(glyphpack.GlyphpackError):
            s.extend([Message("assistant", (ToolCall("c1", "run", {}),))])
        assert (s.messages, s.revision) == before


def test_next_view_needs_a_user_message_and_no_pending_calls(tmp_path):
    with session(tmp_path) as s:
        with pytest.raises(UsageError, match="nothing to send yet: add a user message first"):
            s.next_view("anthropic")
        s.extend(turns(1))
        assert s.next_view("anthropic") == s.messages  # below the threshold: the history as it is
        s.add_response(Message("assistant", (ToolCall("c9", "run", {}),)))
        with pytest.raises(UsageError, match=r"cannot build a request while tool calls are pending \(c9\): add their results first"):
            s.next_view("anthropic")
        with pytest.raises(UsageError, match=r"cannot build a request while tool calls are pending \(c9\)"):
            s.request_if_compacted("anthropic")


def test_request_if_compacted_is_none_until_a_compaction_is_in_force(tmp_path):
    with session(tmp_path, context_window=200_000) as s:
        s.extend(turns(3))
        assert s.request_if_compacted("anthropic") is None
    with session(tmp_path / "small", context_window=20_000, threshold=8_000, target=4_000, recall=False,
                 summarizer=lambda prompt: "what was done") as small:
        small.extend(turns(80, size=400))
        assert small.estimate() >= 8_000
        built = small.request_if_compacted("anthropic", max_tokens=64)
        assert built is not None and built["max_tokens"] == 64
        assert len(built["messages"]) < len(small.messages)


def test_measured_takes_a_whole_number_after_a_request_and_learns_from_it(tmp_path):
    with session(tmp_path) as s:
        s.extend(turns(4))
        for bad in (True, -1, 2.5, "10"):
            with pytest.raises(UsageError, match="input_tokens must be a whole number of tokens, not "):
                s.measured(bad)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="no request was built by this session to measure"):
            s.measured(100)
        s.next_view("anthropic")
        estimate = s.estimate()
        s.measured(0)  # a provider that counted nothing: nothing learned
        assert s.estimate() == estimate
        s.measured(estimate + 3_000)  # the provider counts 3,000 more: an overhead the estimate learns
        assert s.estimate() > estimate
    with session(tmp_path) as again:  # what was learned is kept for the next process
        assert again.estimate() > estimate


def test_measured_learns_nothing_with_an_exact_tokenizer(tmp_path):
    with session(tmp_path, policy=glyphpack.CompactionPolicy(tokenizer=len)) as s:
        s.extend(turns(4))
        s.next_view("anthropic")
        estimate = s.estimate()
        s.measured(estimate + 3_000)
        assert s.estimate() == estimate


def test_a_compaction_below_the_threshold_pays_when_the_calls_left_read_less(tmp_path):
    """Anthropic's prices: cache writes 1.25, reads 0.1, output 5 times the input price;
    a summary of 2,000 tokens. With a target of 1,000 and 7 answers (3 calls left, half
    of them, rounded down): 0.1 (e - 1000) 3 >= 1.25 * 1000 + 0.1 e + 5 * 2000 from
    e = 57,750 on."""
    with session(tmp_path, context_window=400_000, threshold=300_000, target=1_000, recall=False) as s:
        s.extend(turns(7)[:-1] + [Message("user", (Text("go on"),))])
        assert sum(1 for m in s.messages if m.role == "assistant") == 7
        assert s.compactor.pays(57_760) and not s.compactor.pays(57_740)
        assert not s.compactor.pays(1_000)


# --------------------------------------------------------------- recover


TOO_LARGE = {"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}}


def too_long(tokens: int, limit: int) -> dict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": f"prompt is too long: {tokens} tokens > {limit} maximum"}}


def reads(count: int, size: int = 4_000) -> list[Message]:
    out: list[Message] = [Message("user", (Text("read the files"),))]
    for n in range(count):
        out += [Message("assistant", (ToolCall(f"r{n}", "read", {"path": f"f{n}.py"}),)),
                Message("tool", (ToolResult(f"r{n}", (Text(f"# f{n}\n" + "x = 1\n" * (size // 6)),)),))]
    return [*out, Message("assistant", (Text("read them all"),)), Message("user", (Text("go on"),))]


def test_recover_refuses_what_is_not_an_overflow_and_a_call_before_any_request(tmp_path):
    with session(tmp_path) as s:
        s.extend(turns(2))
        with pytest.raises(UsageError, match=r"^recover\(\) follows a rejected request built by this session's request\(\)$"):
            s.recover(TOO_LARGE)
        s.next_view("anthropic")
        text = "a rate limit, " + "z" * 300
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.recover(text)
        assert str(raised.value) == f"not a 'request too long' error: {text[:200]!r}"
        error = ValueError("something else")
        with pytest.raises(ValueError) as again:
            s.recover(error)
        assert again.value is error  # raised as it was


def test_a_third_rejection_in_a_row_is_an_error_naming_the_count_with_or_without_a_summarizer(tmp_path):
    """Without a summarizer a second rejection gave up ("no rung left"); the tail cut is
    free, so it compacts deeper as the summarizer's does, and only a third is an error."""
    with session(tmp_path, recall=False) as s:
        s.extend(reads(12))
        s.next_view("anthropic")
        measured = s.estimate() + 500
        first = s.recover(too_long(measured, measured // 2))
        second = s.recover(too_long(measured, measured // 2))
        assert second.report.tokens_after < first.report.tokens_after and second.report.fits
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.recover(too_long(measured, measured // 2))
        message = str(raised.value)
        assert message.startswith("the provider rejected the request as too long 3 times in a row after compacting; "
                                  "with no summarizer configured there is no rung left (")
        assert message.endswith(f"prompt is too long: {measured} tokens > {measured // 2} maximum'}}}})")
    with session(tmp_path / "with", recall=False, summarizer=lambda p: "done so far") as s:
        s.extend(reads(12))
        s.next_view("anthropic")
        s.recover(too_long(measured, measured // 2))
        s.recover(too_long(measured, measured // 2))
        with pytest.raises(glyphpack.CompactionError, match=r"^the provider rejected the request as too long 3 times in a row after compacting \("):
            s.recover(too_long(measured, measured // 2))


def test_a_413_is_recovered_by_the_free_rungs_and_then_by_the_summarizer(tmp_path):
    from glyphpack._compaction.recovery import request_bytes

    with session(tmp_path, recall=False) as s:
        s.extend(reads(12))
        sent = s.next_view("anthropic")
        result = s.recover(TOO_LARGE)
        assert request_bytes(result.view) < request_bytes(sent)
        assert s.request_view()[0] == result.view + s.messages[len(s.messages):]
        assert not any(m.id.startswith("summary-") for m in result.view)  # the free rungs, first


def test_a_413_the_free_rungs_cannot_shrink_goes_to_the_summarizer_or_says_one_would(tmp_path):
    from glyphpack._compaction.recovery import request_bytes

    chat = turns(40, size=600)  # no results to elide, no images to drop
    with session(tmp_path, recall=False) as s:
        s.extend(chat)
        s.next_view("anthropic")
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.recover(TOO_LARGE)
        assert str(raised.value) == ("the request is too large in bytes and neither dropping images nor eliding old tool results "
                                     "made it smaller; a summarizer would: pass summarizer=...")
    prompts: list[str] = []
    with session(tmp_path / "with", recall=False, summarizer=lambda p: prompts.append(p) or "what was said") as s:
        s.extend(chat)
        sent = s.next_view("anthropic")
        result = s.recover(TOO_LARGE)
        assert prompts and request_bytes(result.view) < request_bytes(sent)
        assert any(m.id.startswith("summary-") for m in result.view)
        with pytest.raises(glyphpack.CompactionError, match="3 times in a row"):  # it went straight to the second step
            s.recover(TOO_LARGE)


def test_a_413_a_summary_cannot_shrink_either_is_an_error_without_the_hint(tmp_path):
    with session(tmp_path, recall=False, summarizer=lambda p: "a summary longer than what it stands for " * 2_000) as s:
        s.extend(turns(40, size=600))
        s.next_view("anthropic")
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.recover(TOO_LARGE)
        assert str(raised.value) == ("the request is too large in bytes and neither dropping images nor eliding old tool results "
                                     "made it smaller")


# --------------------------------------------------------------- the tree, commands and tool output


@pytest.mark.parametrize(("what", "call"), [
    ("shake", lambda s: s.shake()),
    ("compact", lambda s: s.compact()),
    ("branch", lambda s: s.branch(s.messages[0].id)),
    ("fork", lambda s: s.fork("copy")),
    ("set a checkpoint", lambda s: s.checkpoint("here")),
    ("rewind", lambda s: s.rewind("here", "learned")),
    ("add another response", lambda s: s.add_response(Message("assistant", (Text("again"),)))),
])
def test_each_operation_waits_for_the_pending_calls_by_name(tmp_path, what, call):
    with session(tmp_path) as s:
        s.extend(turns(1))
        s.add_response(Message("assistant", (ToolCall("c7", "run", {}),)))
        with pytest.raises(UsageError) as raised:
            call(s)
        assert str(raised.value) == f"cannot {what} while tool calls are pending (c7): add their results first"


def test_a_shake_is_kept_as_the_view_with_its_trigger(tmp_path):
    from glyphpack._history.view import read_view

    with session(tmp_path) as s:
        s.extend(reads(12))
        s.shake()
        view = read_view(s.workspace, "c", "a")
        assert view is not None and view.trigger == "/shake" and view.covers == s.messages[-1].id
        s.compact(3_000)
        assert read_view(s.workspace, "c", "a").trigger == "/compact"  # type: ignore[union-attr]


def test_a_new_sessions_system_prompt_is_saved_by_its_first_checkpoint(tmp_path):
    with session(tmp_path, system="be brief") as s:
        assert s.revision == 0
        s.checkpoint("start")
        assert s.revision > 0
    with session(tmp_path) as again:
        assert [m.text for m in again.messages] == ["be brief"]


def test_a_rewind_forgets_the_request_sent_and_the_rejections_counted(tmp_path):
    with session(tmp_path, recall=False) as s:
        s.extend(reads(12))
        s.checkpoint("before")
        s.next_view("anthropic")
        s.recover(TOO_LARGE)
        s.rewind("before", "what the detour taught")
        with pytest.raises(UsageError, match="recover\\(\\) follows a rejected request"):
            s.recover(TOO_LARGE)
        s.next_view("anthropic")
        s.recover(TOO_LARGE)  # the first rejection again: no error without a summarizer


def test_recall_answers_a_range_page_by_page_from_the_stored_text(tmp_path):
    from glyphpack._compaction.snapshot import serialize_message
    from glyphpack._history.recall import range_ref

    with session(tmp_path) as s:
        s.extend(reads(30, size=6_000))
        ref = range_ref(s.messages[1].id, s.messages[-3].id)
        first, second = (s.recall(ref, page=p).as_result("k").text for p in (1, 2))
        whole = "".join(serialize_message(m) for m in s.messages[1:-2])
        assert first != second
        # Each page holds a stretch of the range's text as the snapshot serializes it.
        assert whole.index(first.split("\n", 1)[1][:200]) < whole.index(second.split("\n", 1)[1][:200])


def test_a_recall_call_asks_for_the_page_it_names(tmp_path):
    from glyphpack._history.recall import RECALL_TOOL, range_ref

    with session(tmp_path) as s:
        s.extend(reads(30, size=6_000))
        ref = range_ref(s.messages[1].id, s.messages[-3].id)
        s.add_response(Message("assistant", (ToolCall("k1", RECALL_TOOL, {"ref": ref, "page": 2}),)))
        answered = s.add_tool_results([])
        assert answered.tool_results[0].text == s.recall(ref, page=2).as_result("k1").text != s.recall(ref).as_result("k1").text


@pytest.mark.parametrize(("data", "expected"), [
    (b"plain text", "plain text"),
    ("caf\u00e9".encode(), "caf\u00e9"),
    (b"abc\xff" + b"d" * 6, "abc\\xffdddddd\n[1 bytes were not UTF-8: shown as \\xNN]"),
    (b"\xff\xfe\xfd" + b"a" * 7, "\\xff\\xfe\\xfdaaaaaaa\n[3 bytes were not UTF-8: shown as \\xNN]"),  # 3 of 10: the share, still text
])
def test_tool_output_bytes_are_text_up_to_the_binary_share(data, expected):
    from glyphpack._session.tool_outputs import _from_bytes

    assert _from_bytes(data) == Text(expected)


def test_tool_output_bytes_past_the_binary_share_are_named_and_kept_whole():
    import base64
    import hashlib

    from glyphpack._session.tool_outputs import _from_bytes

    data = b"\xff\xfe\xfd\xfc" + b"a" * 6  # 4 of 10 undecodable
    digest = hashlib.sha256(data).hexdigest()[:16]
    assert _from_bytes(data) == Text(f"[binary output: 10 bytes, sha256 {digest}..., as base64]\n{base64.b64encode(data).decode()}")
    assert _from_bytes(b"a\x00b").text.startswith("[binary output: 3 bytes")  # type: ignore[union-attr]


# --------------------------------------------------------------- tool results as harnesses give them


def pending(tmp_path, *calls: ToolCall, recall: bool = True):
    s = session(tmp_path, recall=recall)
    s.extend(turns(1))
    s.add_response(Message("assistant", calls))
    return s


def test_tool_outputs_become_blocks_as_the_docs_say(tmp_path):
    with pending(tmp_path, ToolCall("c1", "a", {}), ToolCall("c2", "b", {}), ToolCall("c3", "c", {}), ToolCall("c4", "d", {})) as s:
        message = s.add_tool_results({"c1": {"city": "Zürich", "n": [1, 2]}, "c2": None, "c3": ["line", Text("block")],
                                      "c4": ToolResult("c4", (Text("given whole"),), is_error=True)})
        by_id = {r.call_id: r for r in message.tool_results}
        assert by_id["c1"].content == (Text('{\n "city": "Zürich",\n "n": [\n  1,\n  2\n ]\n}'),)
        assert by_id["c2"].content == () and by_id["c3"].content == (Text("line"), Text("block"))
        assert by_id["c4"] == ToolResult("c4", (Text("given whole"),), is_error=True)


def test_a_tool_output_of_another_kind_is_refused_by_call_and_type(tmp_path):
    with pending(tmp_path, ToolCall("c1", "a", {})) as s:
        with pytest.raises(UsageError) as raised:
            s.add_tool_results({"c1": 3.5})
        assert str(raised.value) == ("the output for call 'c1' is of type float: give text, bytes, JSON (a dict or list), "
                                     "a list of strings and Text/Image blocks, a ToolResult, or None for no output")
        with pytest.raises(UsageError, match=r"^the output for call 'c1' is a block of another kind: "):
            s.add_tool_results({"c1": ToolCall("x", "y", {})})
        with pytest.raises(UsageError, match=r"^the output for call 'c1' is of type dict but not JSON: "):
            s.add_tool_results({"c1": {"when": object()}})
        with pytest.raises(UsageError, match=r"^result for 'c1' carries call id 'c9'$"):
            s.add_tool_results({"c1": ToolResult("c9", (Text("x"),))})
        with pytest.raises(UsageError, match=r"^results must be a mapping of call ids to outputs, or ToolResult values, not str$"):
            s.add_tool_results("just text")  # type: ignore[arg-type]
        with pytest.raises(UsageError, match=r"^results must be a mapping of call ids to outputs, or ToolResult values, not str, int$"):
            s.add_tool_results(["a", 1])  # type: ignore[list-item]
        assert s.pending_calls  # nothing stored


def test_results_need_pending_calls_and_recall_calls_left_out_are_answered_by_the_session(tmp_path):
    from glyphpack._history.recall import RECALL_TOOL

    with session(tmp_path) as s:
        s.extend(turns(1))
        with pytest.raises(UsageError, match=r"^no tool calls are pending$"):
            s.add_tool_results({})
    with pending(tmp_path / "r", ToolCall("c1", "run", {}), ToolCall("k1", RECALL_TOOL, {"ref": "nothing-such"})) as s:
        with pytest.raises(UsageError, match=r"results must answer exactly the pending calls \['c1', 'k1'\], got \['k1'\]"):
            s.add_tool_results({})  # the recall call is answered; the other is not
        message = s.add_tool_results({"c1": "ran"})
        assert [r.call_id for r in message.tool_results] == ["c1", "k1"] and message.tool_results[1].is_error


# --------------------------------------------------------------- thresholds and the room that bills least


def test_the_economic_room_is_the_square_root_rule():
    from glyphpack._session.compactor import economic_room

    assert economic_room(10_000, 500.0, 1.25, 0.1) == 11_618  # sqrt(2 * 500 * 1.35 * 10,000 / 0.1)
    assert economic_room(10_000, 1.0, 1.25, 0.1) == 519
    assert economic_room(10_000, 0.0, 1.25, 0.1) == economic_room(10_000, -3.0, 1.25, 0.1) == 0
    assert economic_room(40_000, 500.0, 1.25, 0.1) == 2 * economic_room(10_000, 500.0, 1.25, 0.1) + 1  # grows as the root of kept


def test_the_target_is_half_way_from_the_overhead_to_the_threshold():
    from glyphpack._session.compactor import Thresholds

    thresholds = Thresholds.for_window(200_000, threshold=100_001)
    assert thresholds.target_for(0) == thresholds.target_for(-50) == 50_000
    assert thresholds.target_for(1_001) == 1_001 + 49_500
    assert thresholds.target_for(100_000) == 100_000 + 0 and thresholds.target_for(100_001) == thresholds.target_for(10**6) == 100_001
    assert Thresholds.for_window(200_000, threshold=100_001, target=7).target_for(99_999) == 7


# --------------------------------------------------------------- requests and the compaction kept


def words(count: int) -> list[Message]:
    out: list[Message] = [Message("user", (Text("the task"),))]
    for n in range(count):
        out += [Message("assistant", (Text(f"step {n}: " + "the work goes on. " * 30),)), Message("user", (Text(f"ok {n}"),))]
    return out


def test_a_compaction_is_kept_with_its_range_geometry_pages_tokens_and_report(tmp_path):
    from glyphpack._history.view import read_view

    with session(tmp_path, recall=False, policy=glyphpack.CompactionPolicy(fidelity="dense", tail_tokens=0)) as s:
        s.extend(words(40))
        result = s.compact(s.estimate() // 2)
        snap = result.report.rung("snapshot")
        assert snap is not None and snap.skipped is None and result.pages
        view = read_view(s.workspace, "c", "a")
        assert view is not None and view.covers == s.messages[-1].id and view.trigger == "/compact"
        assert view.source == (s.messages[snap.first_message - 1].id, s.messages[snap.last_message - 1].id)
        first = result.pages[0]
        assert (view.shape, view.page_size, view.pages) == (first.shape, (first.width, first.full_height), len(result.pages))
        assert (view.tokens, view.report, view.page_text) == (result.report.tokens_after, result.report.message, result.page_text)
        assert view.messages == result.view and s.last_compaction is result


def test_a_compaction_that_changed_nothing_is_not_kept(tmp_path):
    from glyphpack._history.view import read_view

    with session(tmp_path, recall=False) as s:
        s.extend(turns(2))
        result = s.compact(10**6)
        assert s.last_compaction is result and read_view(s.workspace, "c", "a") is None


def test_a_request_over_the_window_after_compacting_says_so_and_what_would_free_more(tmp_path):
    """A task the window cannot hold is named as such (no rung touches it); a request
    over it for another reason (a user's later message, which no rung cuts) says what
    would free more."""
    with session(tmp_path, recall=False, context_window=1_000, threshold=900, target=500) as s:
        s.extend([Message("user", (Text("the task " + "word " * 3_000),))])
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.request("anthropic")
        estimate = s.estimate()
        assert str(raised.value) == (f"the system prompt, the tools and the task alone take ~{estimate:,} tokens, over the 1,000-token "
                                     "window: compaction keeps them verbatim, so no request can fit; a larger context_window or a shorter task would")
    with session(tmp_path / "later", recall=False, context_window=1_000, threshold=900, target=500) as s:
        s.extend([Message("user", (Text("the task"),)), Message("assistant", (Text("go on"),)), Message("user", (Text("word " * 3_000),))])
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.request("anthropic")
        estimate = s.estimate()
        assert str(raised.value) == (f"the request is still ~{estimate:,} tokens after compaction, over the 1,000-token window; "
                                     "a summarizer would free more")


def test_a_request_with_recall_offers_the_recall_tool_beside_the_callers(tmp_path):
    from glyphpack._history.recall import RECALL_DESCRIPTION, RECALL_PARAMETERS, RECALL_TOOL

    mine = {"name": "run", "description": "run a command", "input_schema": {"type": "object", "properties": {}}}
    with session(tmp_path) as s:
        s.extend(turns(1))
        request = s.request("anthropic", tools=[mine], max_tokens=100)
        assert request["tools"] == [mine, {"name": RECALL_TOOL, "description": RECALL_DESCRIPTION, "input_schema": RECALL_PARAMETERS}]
        assert request["max_tokens"] == 100
    with session(tmp_path / "off", recall=False) as s:
        s.extend(turns(1))
        assert s.request("anthropic", tools=[mine])["tools"] == [mine]


def test_the_threshold_compacts_at_the_estimate_exactly_and_the_summary_sees_the_tools_sent(tmp_path):
    from glyphpack import Sent, Summarizer

    seen: list[Sent] = []

    def continues(sent: Sent, instruction: str) -> str:
        seen.append(sent)
        return "what happened"

    mine = {"name": "run", "description": "run", "input_schema": {"type": "object", "properties": {}}}
    summarizer = Summarizer(lambda p: "what happened", continues=continues, window=200_000)
    probe_path = tmp_path / "probe"
    with session(probe_path, recall=False) as probe:
        probe.extend(words(30))
        at = probe.estimate()
    policy = glyphpack.CompactionPolicy(rungs=("summarization",))
    with session(tmp_path / "below", recall=False, threshold=at + 1, target=at // 3, summarizer=summarizer, policy=policy) as below:
        below.extend(words(30))
        below.request("anthropic", tools=[mine])
        assert below.last_request.compaction is None
    with session(tmp_path / "at", recall=False, threshold=at, target=at // 3, summarizer=summarizer, policy=policy) as s:
        s.extend(words(30))
        s.request("anthropic", tools=[mine])  # the first request: compacted, with nothing sent before it
        assert s.last_request.compaction is not None
        s.extend([Message("assistant", (Text("more"),)), Message("user", (Text("and more " * 2_000),))])
        s.request("anthropic", tools=[mine])  # compacted again: the summary continues what was sent, tools included
        assert seen and seen[-1].tools == (mine,)


# --------------------------------------------------------------- what a session opens with


class SdkTool:
    """A tool schema as an SDK object, which JSON takes through its ``model_dump``."""

    def model_dump(self) -> dict:
        return {"name": "météo", "description": "le temps qu'il fait", "input_schema": {"type": "object"}}


def test_before_any_count_the_tool_schemas_are_the_requests_overhead(tmp_path):
    import json

    from glyphpack._compaction.cost import CostModel
    from glyphpack._session.session import RECALL_SCHEMA

    cost = CostModel.for_model("claude-sonnet-4-5")
    tool = SdkTool()
    with session(tmp_path / "a", tools=[tool]) as s:
        schemas = [[tool.model_dump()], RECALL_SCHEMA]
        assert s.estimator.overhead == cost.text(json.dumps(schemas, ensure_ascii=False)) > 0
    with session(tmp_path / "b") as s:  # recall's own tool only
        assert s.estimator.overhead == cost.text(json.dumps([RECALL_SCHEMA], ensure_ascii=False))
    with session(tmp_path / "c", recall=False, tools=[tool]) as s:
        assert s.estimator.overhead == cost.text(json.dumps([tool.model_dump()], ensure_ascii=False))
    with session(tmp_path / "d", recall=False) as s:
        assert s.estimator.overhead == 0
    circular: list = []
    circular.append(circular)
    with pytest.raises(UsageError, match=r"^tools must be JSON-like \(dicts, lists, SDK objects\), not list: "):
        session(tmp_path / "e", recall=False, tools=circular)


def test_what_a_session_ran_with_is_kept_with_what_it_learned(tmp_path):
    with session(tmp_path, context_window=50_000, threshold=40_000, target=20_000) as s:
        s.extend(turns(3))
        s.next_view("anthropic")
        s.measured(s.estimate() + 100)
        assert s.workspace.settings("c", "a") == {"model": "claude-sonnet-4-5", "context_window": 50_000, "threshold": 40_000, "target": 20_000}
    with session(tmp_path / "defaults") as s:
        s.extend(turns(3))
        s.next_view("anthropic")
        s.measured(s.estimate() + 100)
        assert s.workspace.settings("c", "a") == {"model": "claude-sonnet-4-5", "context_window": 200_000}  # None: the defaults


def test_a_summarizer_named_by_model_continues_the_session_only_when_it_is_the_sessions_own(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-sent")
    with session(tmp_path / "own", context_window=150_000, summarizer="claude-sonnet-4-5") as s:
        assert s.summarizer is not None and s.summarizer.continues is not None and s.summarizer.window == 150_000
        assert s.summarizer.fn.model == "claude-sonnet-4-5"  # type: ignore[attr-defined]
    with session(tmp_path / "other", context_window=150_000, summarizer="claude-haiku-4-5") as s:
        assert s.summarizer is not None and s.summarizer.continues is None and s.summarizer.window == 200_000
        assert s.summarizer.fn.model == "claude-haiku-4-5"  # type: ignore[attr-defined]


def test_pages_without_elision_fall_back_to_the_whole_ladder_only_when_they_cannot_fit(tmp_path):
    """Gemini reads pages dense enough that, without recall, a session pages results
    whole rather than elide them; when the pages cannot fit, the whole ladder runs."""
    with glyphpack.open_session(tmp_path / "ws", "c", "a", model="gemini-2.5-flash", recall=False) as s:
        assert "elision" not in s.policy.rungs
        s.extend(reads(30, size=6_000))
        tight = s.compact(6_000)
        assert tight.report.fits and tight.report.rung("elision") is not None and tight.report.rung("elision").changed == 23  # type: ignore[union-attr]
        roomy = s.compact(40_000)
        assert roomy.report.fits and roomy.report.rung("elision") is None and roomy.report.rung("snapshot") is not None


def test_a_first_rejection_the_ladder_cannot_shrink_is_an_error_without_a_summarizer(tmp_path):
    with session(tmp_path, recall=False) as s:
        s.extend([Message("user", (Text("one long task " * 400),))])  # nothing to elide, page or summarize around
        s.next_view("anthropic")
        before = s.estimate()
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.recover(too_long(before, before // 2))
        assert str(raised.value).startswith("the ladder could not shrink the rejected request (~") and str(raised.value).endswith(
            " tokens) and no summarizer is configured")


def test_a_first_rejection_no_rung_can_shrink_takes_the_second_step_at_once_and_then_says_so(tmp_path):
    """With a summarizer, a first rejection the ladder cannot shrink went on as it was
    (the very request the provider refused, sent again) and only the next rejection
    raised. Now the second step runs at once, and where it cannot shrink the request
    either, that is said now, before anything is kept."""
    prompts: list[str] = []
    with session(tmp_path, recall=False, summarizer=lambda p: prompts.append(p) or "what was said") as s:
        s.extend([Message("user", (Text("one long task " * 400),))])  # the task is kept verbatim
        s.next_view("anthropic")
        before = s.estimate()
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.recover(too_long(before, before // 2))
        assert str(raised.value) == f"the ladder could not shrink the rejected request (~{before:,} tokens), even with the summarizer"
        assert s.view is None and s.last_compaction is None


def test_a_second_rejection_compacts_to_a_smaller_budget_and_learns_only_without_a_tokenizer(tmp_path):
    with session(tmp_path, recall=False, summarizer=lambda p: "done so far") as s:
        s.extend(reads(12))
        s.next_view("anthropic")
        measured = s.estimate() + 500
        first = s.recover(too_long(measured, measured // 2))
        second = s.recover(too_long(measured, measured // 2))
        assert second.report.budget < first.report.budget  # half the margin's budget, the summarizer there to reach it
    with session(tmp_path / "exact", recall=False, policy=glyphpack.CompactionPolicy(tokenizer=len)) as s:
        s.extend(reads(12))
        s.next_view("anthropic")
        calibration = s.calibration
        s.recover(too_long(s.estimate() + 5_000, s.estimate()))
        assert s.calibration == calibration  # an exact tokenizer is not recalibrated by a provider's count


# --------------------------------------------------------------- what the mutation run found unread


@pytest.mark.parametrize("name, kwargs", [("context_window", {"context_window": 0}), ("threshold", {"threshold": 0}), ("target", {"target": 0})])
def test_each_limit_is_refused_by_its_name_at_zero_and_taken_at_one(tmp_path, name, kwargs):
    with pytest.raises(UsageError) as raised:
        session(tmp_path, **kwargs)
    assert str(raised.value) == f"{name} must be a positive number of tokens, not 0"
    from glyphpack._session.compactor import Thresholds

    assert Thresholds.for_window(10, threshold=10, target=1) == Thresholds(10, 10, 1)  # threshold at the window: taken
    with pytest.raises(UsageError, match="need 0 < target < threshold <= window, got the default / 11 / 10"):
        Thresholds.for_window(10, threshold=11)


def test_an_overhead_at_the_threshold_leaves_the_target_at_the_threshold():
    from glyphpack._session.compactor import TARGET_SHARE, Thresholds

    limits = Thresholds(1_000, 500)
    assert limits.target_for(500) == 500 and limits.target_for(600) == 500
    assert limits.target_for(499) == 499 + int(1 * TARGET_SHARE) and limits.target_for(-5) == int(500 * TARGET_SHARE)


def test_requests_that_add_nothing_grow_by_nothing(tmp_path):
    from glyphpack._session.compactor import GROWTH_CALLS

    with session(tmp_path, summarizer=lambda p: "Summary.") as s:
        s.add_user("the task")
        for _ in range(GROWTH_CALLS):
            s.request("anthropic")
        assert s.compactor.growth() == 0.0


def test_a_request_reports_what_it_shares_with_the_last_one(tmp_path):
    with session(tmp_path) as s:
        s.add_user("the task")
        assert s.request_view() == (s.messages, 0)
        s.request("anthropic")
        first = s.last_request
        assert first is not None and first.reused_tokens == 0 and not first.prefix_kept
        s.add_response(Message("assistant", (Text("an answer"),)))
        s.add_user("and then?")
        s.request("anthropic")
        second = s.last_request
        assert second is not None and second.prefix_kept and second.messages == 3
        assert second.reused_tokens == s.cost().history(s.messages[:1]) + s.estimator.overhead


def test_the_loops_refusals_say_what_and_why(tmp_path):
    with session(tmp_path, system="be brief") as s:
        with pytest.raises(UsageError) as raised:
            s.request("anthropic")
        assert str(raised.value) == "nothing to send yet: add a user message first"  # a system message is not enough
        with pytest.raises(UsageError) as raised:
            s.add_response({"role": "assistant", "content": "hi"})
        assert str(raised.value) == "add_response needs api=... (no request was built by this session)"
        with pytest.raises(UsageError) as raised:
            s.measured(10)
        assert str(raised.value) == "no request was built by this session to measure"
        with pytest.raises(UsageError) as raised:
            s.add_response(Message("user", (Text("hi"),)))
        assert str(raised.value) == "a response is an assistant message, not a user one"
        s.add_user([Text("look at "), Text("this")])
        assert s.messages[-1].content == (Text("look at "), Text("this"))
        s.request("anthropic")
        s.add_response(Message("assistant", (ToolCall("a", "read", {}), ToolCall("b", "read", {}))))
        with pytest.raises(UsageError) as raised:
            s.add_user("more")
        assert str(raised.value) == "cannot add a user message while tool calls are pending (a, b): add their results first"


def test_a_reused_call_id_is_made_unique_and_the_text_beside_it_kept(tmp_path):
    with session(tmp_path) as s:
        s.add_user("the task")
        for n in range(2):
            s.request("anthropic")
            message = s.add_response(Message("assistant", (Text(f"reading {n}"), ToolCall("call", "read", {"n": n}))))
            s.add_tool_results({"call": f"result {n}"})
        assert message.content == (Text("reading 1"), ToolCall("call-2", "read", {"n": 1}))
        assert [r.call_id for r in s.messages[-1].tool_results] == ["call-2"]


def test_a_request_still_over_the_window_says_so_without_the_hint_when_a_summarizer_is_there(tmp_path):
    with session(tmp_path, context_window=2_000, summarizer=lambda p: "Summary.") as s:
        s.extend([Message("user", (Text("the task"),)), Message("assistant", (Text("go on"),))])
        s.add_user("one long message " * 2_000)
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.request("anthropic")
        tokens = s.estimate()
        assert str(raised.value) == f"the request is still ~{tokens:,} tokens after compaction, over the 2,000-token window"


def test_a_rejection_without_a_count_is_named_with_the_estimate_and_a_long_error_is_cut(tmp_path):
    with session(tmp_path, recall=False) as s:
        s.extend([Message("user", (Text("one long task " * 400),))])
        s.next_view("anthropic")
        before = s.estimate()
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.recover({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}})
        assert str(raised.value) == f"the ladder could not shrink the rejected request (~{before:,} tokens) and no summarizer is configured"
    long = "prompt is too long: 900 tokens > 800 maximum " + "x" * 300
    with session(tmp_path / "two", recall=False, summarizer=lambda p: "Summary.") as s:
        s.extend(turns(12))
        s.next_view("anthropic")
        s._overflows = 2  # two rejections already
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.recover(long)
        assert str(raised.value) == f"the provider rejected the request as too long 3 times in a row after compacting ({long[:200]})"


def test_a_second_413_summarizes_and_the_view_says_it_came_from_a_recovery(tmp_path):
    prompts: list[str] = []
    with session(tmp_path, recall=False, summarizer=lambda p: prompts.append(p) or "Summary of the reads.") as s:
        s.extend(reads(12))
        s.next_view("anthropic")
        first = s.recover(TOO_LARGE)
        assert not prompts and s.view is not None and s.view.trigger == "recovery"
        assert not any(m.id.startswith("summary-") for m in first.view)
        s.next_view("anthropic")
        second = s.recover(TOO_LARGE)
        assert prompts and any(m.id.startswith("summary-") for m in second.view) and s.view.trigger == "recovery"


def test_tool_schemas_of_any_object_are_their_json_or_their_text():
    from glyphpack._session.session import _schema_text

    class Schema:
        def model_dump(self) -> dict:
            return {"name": "é"}

    class Plain:
        def __str__(self) -> str:
            return "plain tool"

    assert _schema_text([Schema(), Plain()]) == '[{"name": "é"}, "plain tool"]'


def test_a_session_made_directly_offers_recall_and_leaves_its_workspace_open(tmp_path):
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        s = glyphpack.Session(ws, "c", "a", model="claude-sonnet-4-5")
        assert s.recall_enabled
        s.close()
        ws.save("c", "other", [Message("user", (Text("still open"),))], revision=0)  # the caller's workspace, still usable


def test_the_first_rejection_of_a_new_session_is_its_first(tmp_path):
    with session(tmp_path, recall=False) as s:
        s.add_user("one long task " * 400)
        s.request("anthropic")
        before = s.estimate()
        with pytest.raises(glyphpack.CompactionError) as raised:
            s.recover(too_long(before, before // 2))
        assert str(raised.value).startswith("the ladder could not shrink the rejected request")  # not "2 times in a row"


def test_a_compaction_before_any_request_continues_no_tools(tmp_path):
    from glyphpack import Sent, Summarizer

    seen: list[Sent] = []

    def continues(sent: Sent, instruction: str) -> str:
        seen.append(sent)
        return "what happened"

    with session(tmp_path, recall=False, summarizer=Summarizer(lambda p: "what happened", continues=continues, window=200_000)) as s:
        s.extend(turns(30, size=400))
        s.compact(1_500)
    assert seen and all(sent.tools is None and sent.prefix == 0 for sent in seen)


def test_a_view_keeps_the_pages_geometry_when_a_later_compaction_draws_none_and_nothing_changed_keeps_no_view(tmp_path):
    with session(tmp_path / "small", recall=False) as s:
        s.extend(turns(4))
        unchanged = s.compact(200_000)  # fits already: no rung runs
        assert s.last_compaction is unchanged and not unchanged.report.rungs and s.view is None
        tried = s.compact(s.estimate() - 10)  # the rungs run and none has anything to take
        assert tried.report.rungs and not any(r.changed for r in tried.report.rungs) and s.view is None
    with session(tmp_path) as s:
        s.extend(reads(12))
        paged = s.compact(9_000)  # five results elided, the middle drawn on a page
        first = s.view
        assert paged.pages and first is not None and first.shape is not None and first.pages == len(paged.pages)
        more = [m for n in range(8) for m in (Message("assistant", (ToolCall(f"later{n}", "read", {"path": f"g{n}.py"}),)),
                                              Message("tool", (ToolResult(f"later{n}", (Text(f"# g{n}\n" + "y = 2\n" * 600),)),)))]
        screenshot = glyphpack.render("a screenshot", model="claude-sonnet-4-5")[0].png
        s.extend([*more, Message("assistant", (Text("read them too"),)), Message("user", (Text("and now?"), glyphpack.Image("image/png", screenshot)))])
        shaken = s.shake()  # elision only: no new pages
        assert not shaken.pages and shaken.report.rung("elision").changed  # type: ignore[union-attr]
        view = s.view
        assert view is not None and view.trigger == "/shake"
        assert (view.shape, view.page_size) == (first.shape, first.page_size)
        # the view's images (the newest message's screenshot; the page went with the snapshot the shake replaced)
        assert view.pages == sum(1 for m in shaken.view for b in m.content if isinstance(b, glyphpack.Image)) == 1
        assert view.source is None  # elision replaced no range
