"""Where a session with recall compacts, and how its summary is asked: the room between
compactions that bills least (``economic_room``) against a plain search, the session's
threshold and target from it, and a summary request that continues the conversation so
the provider reads it from its prompt cache (through the anthropic SDK against the fake
provider, which checks every request)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import glyphpack
from glyphpack import Message, Summarizer, Text
from glyphpack._compaction.cost import CostModel
from glyphpack._compaction.summarize import Sent, continued_instruction, summarize
from glyphpack._history.messages import ToolCall, ToolResult
from glyphpack._providers.catalog import CACHE_PRICES
from glyphpack._session.compactor import GROWTH_CALLS, RECALL_KEPT, SUMMARY_TOKENS, economic_room
from glyphpack.testing.fake import SUMMARY_REQUEST, FakeModel, Turn, fake_summary, summary_prompt


def per_call(room: float, kept: int, growth: float, write: float, read: float) -> float:
    """What a call bills on average over a cycle of whole calls that compacts every
    ``room`` tokens of growth (the model ``economic_room`` minimizes), summed plainly."""
    calls = max(1, round(room / growth))
    reads = sum(read * (kept + growth * n) for n in range(calls))
    return (reads + write * kept + read * (kept + growth * calls)) / calls


@given(
    kept=st.integers(1_000, 60_000),
    growth=st.floats(50, 20_000),
    prices=st.sampled_from(sorted(set(CACHE_PRICES.values()))),
)
def test_the_room_that_bills_least_is_the_least_of_the_cost_it_minimizes(kept: int, growth: float, prices: tuple[float, float]) -> None:
    write, read = prices
    room = economic_room(kept, growth, write, read)
    assume(room >= 10 * growth)  # cycles of many calls, where whole calls barely matter

    def smooth(d: float) -> float:  # the continuous form the formula solves
        return read * (kept + d / 2) + (write * kept + read * (kept + d)) * growth / d

    assert room == int(math.sqrt(2 * growth * (write + read) * kept / read))
    for other in (room * 0.8, room * 0.95, room * 1.05, room * 1.25):
        assert smooth(room) <= smooth(other) * (1 + 1e-9)
    # Against the plain sum over whole calls (no formula): within 3% of the least of a
    # search from half to twice the room.
    search = min((room * (0.5 + k / 20) for k in range(31)), key=lambda d: per_call(d, kept, growth, write, read))
    assert per_call(room, kept, growth, write, read) <= per_call(search, kept, growth, write, read) * 1.03


def test_no_growth_leaves_no_room_and_dearer_reads_compact_sooner() -> None:
    assert economic_room(8_000, 0, 1.25, 0.1) == 0
    # Reads dearer against writes: compacting pays sooner.
    assert economic_room(8_000, 600, 1.25, 0.1) > economic_room(8_000, 600, 1.25, 0.5)
    # A bigger kept context costs more to write again: compact less often.
    assert economic_room(20_000, 600, 1.25, 0.1) > economic_room(8_000, 600, 1.25, 0.1)


def _grow(session: glyphpack.Session, calls: int, chars: int = 2_000, start: int = 0) -> None:
    for n in range(start, start + calls):
        session.request("anthropic")
        session.add_response({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "read", "input": {"n": n}}]}, "anthropic")
        session.add_tool_results({f"t{n}": f"{n} " + "x" * chars})


def test_with_recall_the_threshold_comes_from_the_growth_and_the_prices(tmp_path: Any) -> None:
    summarizer = Summarizer(lambda prompt: "Summary: the files were read.")
    with glyphpack.open_session(tmp_path, "c", "a", model="claude-sonnet-4-5", context_window=200_000, summarizer=summarizer) as s:
        s.add_user("read the files")
        window_threshold = s.thresholds.threshold
        _grow(s, GROWTH_CALLS - 1)
        assert s.threshold == window_threshold  # the growth is not known yet
        _grow(s, 1, start=GROWTH_CALLS - 1)
        growth = s.compactor.growth()
        assert growth is not None and growth > 0
        write, read = CACHE_PRICES["anthropic"]
        head = s.cost().history(s.messages[:1])  # the task, kept verbatim
        assert s.target == s.estimator.overhead + head + RECALL_KEPT
        assert s.threshold == s.target + economic_room(head + RECALL_KEPT, growth, write, read) < window_threshold
        # It compacts there, long before the window's threshold, to about the target.
        while s.last_request is None or s.last_request.compaction is None:
            threshold = s.threshold
            before = s.estimate()
            _grow(s, 1, start=100 + len(s.messages))
        assert before >= threshold and s.last_request.tokens <= s.target * 1.1 < threshold < window_threshold
        assert s.threshold == window_threshold  # the growth since is measured again


@pytest.mark.parametrize("options", [{"recall": False}, {"threshold": 150_000}, {"target": 20_000}, {"summarizer": None}])
def test_the_windows_thresholds_stay_without_recall_a_summarizer_or_with_either_given(tmp_path: Any, options: dict[str, Any]) -> None:
    summarizer = Summarizer(lambda prompt: "Summary.")
    kwargs: dict[str, Any] = {"summarizer": summarizer, **options}
    with glyphpack.open_session(tmp_path, "c", "a", model="claude-sonnet-4-5", context_window=200_000, **kwargs) as s:
        s.add_user("read the files")
        _grow(s, GROWTH_CALLS + 2)
        assert s.threshold == s.thresholds.threshold
        assert s.target == s.thresholds.target_for(s.estimator.overhead)


def test_a_compaction_that_would_not_pay_back_in_half_the_calls_made_waits(tmp_path: Any) -> None:
    """Past the threshold that bills least, a session compacts only once what the calls
    after it stop reading covers the compaction's cost within half the calls made so far
    (the rest of a short session may not be long enough); the window's threshold always
    compacts."""
    summarizer = Summarizer(lambda prompt: "Summary.")
    with glyphpack.open_session(tmp_path, "c", "a", model="claude-sonnet-4-5", context_window=200_000, summarizer=summarizer) as s:
        s.add_user("read the files")
        waited = 0
        while s.last_request is None or s.last_request.compaction is None:
            past = s.compactor.growth() is not None and s.estimate() >= s.threshold
            pays = s.compactor.pays(s.estimate())
            _grow(s, 1, chars=8_000, start=len(s.messages))
            compacted = s.last_request.compaction is not None  # type: ignore[union-attr]
            assert compacted == (past and pays)
            waited += past and not pays
        assert waited >= 1  # past its threshold, a few calls in: it waited
        estimate = s.last_request.compaction.report.tokens_before  # type: ignore[union-attr]
        calls = sum(1 for m in s.messages if m.role == "assistant") - 1
        write, read = CACHE_PRICES["anthropic"]
        saved = read * (estimate - s.target) * (calls // 2)
        assert saved >= write * s.target + read * estimate + 5.0 * SUMMARY_TOKENS


def test_a_ladder_that_cannot_reach_the_depth_goes_back_to_the_windows_thresholds(tmp_path: Any) -> None:
    """A summarizer whose summaries are longer than the room that bills least: the
    compaction leaves the request over that threshold (every request would compact
    again), so after one try the session takes the window's thresholds."""
    summarizer = Summarizer(lambda prompt: "Summary: " + "every detail again. " * 8_000)
    with glyphpack.open_session(tmp_path, "c", "a", model="claude-sonnet-4-5", context_window=200_000, summarizer=summarizer) as s:
        s.add_user("read the files")
        reports = []
        for n in range(40):
            _grow(s, 1, chars=6_000, start=n)
            reports.append(s.last_request)
        compacted = [r for r in reports if r is not None and r.compaction is not None]
        assert len(compacted) == 1 and compacted[0].tokens > s.estimator.overhead + RECALL_KEPT
        assert s.threshold == s.thresholds.threshold and s.target == s.thresholds.target_for(s.estimator.overhead)


# ---------------------------------------------------------------------- the continued summary


def _history(reads: int) -> list[Message]:
    messages = [Message("user", (Text("Find the parser."),), id="task")]
    for n in range(reads):
        messages += [
            Message("assistant", (ToolCall(f"c{n}", "read_file", {"path": f"mod_{n}.py"}),), id=f"a{n}"),
            Message("tool", (ToolResult(f"c{n}", (Text(f"module {n} " + "def f(): pass\n" * 200),)),), id=f"r{n}"),
        ]
    return messages


def test_the_instruction_names_what_stays_and_carries_what_was_not_sent() -> None:
    messages = _history(6)
    summarizer = Summarizer(lambda prompt: "")
    sent = Sent(tuple(messages[:7]))  # the request before the last two rounds
    instruction = continued_instruction(messages, 1, 11, sent, summarizer)
    assert instruction is not None and instruction.startswith(SUMMARY_REQUEST)
    assert "module 3" in instruction and "module 4" in instruction  # sent after: in the instruction, as text
    assert "module 2 " not in instruction and "module 5" not in instruction  # sent already; kept after the summary
    assert "stay as they are" in instruction and "[tool call read_file #c5]" in instruction
    # A conversation that is not this history's: no instruction (the text prompt is used).
    assert continued_instruction(messages, 1, 11, Sent((Message("user", (Text("other"),)),)), summarizer) is None


def test_a_summary_that_continues_the_conversation_is_one_request_and_the_text_prompt_the_fallback() -> None:
    messages = _history(8)
    asked: list[tuple[Sent, str]] = []
    prompts: list[str] = []

    def continues(sent: Sent, instruction: str) -> str:
        asked.append((sent, instruction))
        return answer

    summarizer = Summarizer(lambda prompt: prompts.append(prompt) or "Summary from the text.", window=60_000, continues=continues)
    cost = CostModel.for_model("claude-sonnet-4-5")
    sent = Sent(tuple(messages), 0)
    answer = "Summary from the conversation."
    result = summarize(messages, cost, 3_000, summarizer, sent=sent)
    assert len(asked) == 1 and not prompts and asked[0][0] is sent
    assert "Summary from the conversation." in result.view[1].text and result.report.summarizer_calls == 1
    answer = "   "  # no text back (the model called a tool): the text prompt instead
    result = summarize(messages, cost, 3_000, summarizer, sent=sent)
    assert prompts and "Summary from the text." in result.view[1].text
    # Over the summarizer's own window: never asked that way.
    asked.clear()
    small = Summarizer(summarizer.fn, window=8_000, output_reserve=1_000, continues=continues)
    summarize(messages, cost, 3_000, small, sent=sent)
    assert not asked


def test_a_sessions_summary_continues_its_cached_conversation_through_the_sdk(tmp_path: Any) -> None:
    """The session's own model summarizes by continuing the request it would send:
    the same messages, byte for byte up to the last one sent, the same tools, and the
    instruction as one more message; the fake provider accepts it."""
    # The model's own words (not elidable, unlike results) make the summary rung run.
    thoughts = "I read the module and weigh where the parser could be; the imports say more. " * 12
    fake = FakeModel([Turn(text=f"reading {n}: {thoughts}", calls=(("read_file", {"path": f"mod_{n}.py"}),)) for n in range(80)])
    client = fake.client("anthropic")
    summarizer = glyphpack.sdk_summarizer(client, "claude-sonnet-4-5", window=200_000, continues=True)
    tool = {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
    with glyphpack.open_session(tmp_path, "c", "a", model="claude-sonnet-4-5", context_window=200_000, summarizer=summarizer) as s:
        s.add_user("Find the parser.")
        while s.last_request is None or s.last_request.compaction is None:
            answer = s.call(client, tools=[tool], max_tokens=1000)
            s.add_tool_results({c.id: f"{c.arguments['path']}: " + "def f(): pass\n" * 150 for c in answer.tool_calls})
    summaries = [(n, body) for n, body in enumerate(fake.requests) if summary_prompt(body) is not None]
    assert len(summaries) == 1 and set(fake.statuses) == {200}
    number, body = summaries[0]
    previous = fake.requests[number - 1]

    def unmarked(value: Any) -> Any:
        return json.loads(json.dumps(value).replace(', "cache_control": {"type": "ephemeral"}', ""))

    # The previous request's messages open the summary request unchanged (what the
    # cache holds), then what came since, then the instruction.
    assert unmarked(body["messages"][: len(previous["messages"])]) == unmarked(previous["messages"])
    assert body["tools"] == previous["tools"] and body.get("system") == previous.get("system")
    instruction = body["messages"][-1]["content"][-1]["text"]
    assert instruction.startswith(SUMMARY_REQUEST) and len(body["messages"]) == len(previous["messages"]) + 2
    # Its answer is the summary the view holds.
    assert s.view is not None and any(fake_summary(instruction) in m.text for m in s.view.messages)


def test_no_batch_elides_below_the_threshold_that_bills_least(tmp_path: Any) -> None:
    """Where the session compacts where it bills least, that compaction elides (sooner
    than a batch would): a batch below it would only rewrite the cached prefix once more.
    The same loop with the window's threshold given elides in batches (test_recall.py)."""
    summarizer = Summarizer(lambda prompt: "the work so far " * 40)
    with glyphpack.open_session(tmp_path, "c", "a", model="claude-sonnet-4-5", context_window=60_000, summarizer=summarizer) as s:
        s.add_user("read every file")
        compactions = batches = 0
        for n in range(80):
            _grow(s, 1, chars=6_000, start=n)
            assert s.last_request is not None
            compactions += s.last_request.compaction is not None
            batches += s.last_request.elided > 0
        assert compactions >= 2 and batches == 0


def test_the_growth_is_the_mean_per_call_since_the_first_request_and_again_since_each_compaction(tmp_path: Any) -> None:
    """What each call added, on average: measured from the first request built (its
    estimate, its call count), unknown until ``GROWTH_CALLS`` calls were made since,
    and measured again from the request that compacted."""
    summarizer = Summarizer(lambda prompt: "Summary: the files were read.")
    with glyphpack.open_session(tmp_path, "c", "a", model="claude-sonnet-4-5", context_window=200_000, summarizer=summarizer) as s:
        s.add_user("read the files")
        first = s.estimate()
        for n in range(GROWTH_CALLS):
            assert s.compactor.growth() is None
            _grow(s, 1, start=n)
        assert s.compactor.growth() == (s.estimate() - first) / GROWTH_CALLS
        _grow(s, 1, start=GROWTH_CALLS)
        assert s.compactor.growth() == (s.estimate() - first) / (GROWTH_CALLS + 1)
        while s.last_request is None or s.last_request.compaction is None:
            _grow(s, 1, start=100 + len(s.messages))
        compacted = s.last_request.tokens
        for n in range(GROWTH_CALLS - 1):
            assert s.compactor.growth() is None
            _grow(s, 1, start=1_000 + n)
        assert s.last_request.compaction is None  # nothing compacted since
        assert s.compactor.growth() == (s.estimate() - compacted) / GROWTH_CALLS
