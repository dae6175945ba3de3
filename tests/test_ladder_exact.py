"""The ladder and recovery, pinned to exact figures: the 413 path's target, report and
message on both sides of its target, with and without a summarizer; the overflow's
plausibility bounds on both sides; calibration's floor; the rungs' reports when a rung
cannot run; the reader's image limit at exactly the limit and one over; the policy's
tokenizer and tail; the pages a compaction hands back are the ones its view carries.
(A mutmut pass over ladder.py and recovery.py found each of these unguarded.)"""

from __future__ import annotations

import pytest

from glyphpack import CompactionError, CompactionPolicy, Image, Message, Summarizer, Text
from glyphpack._compaction.cost import CostModel
from glyphpack._compaction.ladder import LADDER, Climb, _carries, climb, compact
from glyphpack._compaction.recovery import (
    BYTES_SUMMARY_SHARE,
    BYTES_TARGET_SHARE,
    DEFAULT_MARGIN,
    MIN_PLAUSIBLE_LIMIT,
    Overflow,
    calibrated,
    recover,
    request_bytes,
)
from glyphpack._providers.resolve import resolve
from glyphpack.testing import generate_session

CLAUDE = resolve("claude-sonnet-4-5")
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 20_000
TOO_LARGE = "Error code: 413 - {'error': {'type': 'request_too_large'}}"


def target_of(history) -> int:
    return int(request_bytes(history) * BYTES_TARGET_SHARE * (1 - DEFAULT_MARGIN))


def recording_summarizer(calls: list[str]) -> Summarizer:
    def fn(prompt: str) -> str:
        calls.append(prompt)
        return "Summary: the user asked for several long explanations."

    return Summarizer(fn, window=50_000, output_reserve=500)


def wordy(turns: int) -> list[Message]:
    """Turns of long user messages and answers: nothing the free rungs can take."""
    out = []
    for n in range(turns):
        out += [Message("user", (Text(f"question {n}: " + "explain this in detail please " * 200),)),
                Message("assistant", (Text(f"answer {n}: " + "here is the explanation " * 200),))]
    return out


def pictured(turns: int) -> list[Message]:
    """Turns whose screenshots are most of the request's bytes, the newest included."""
    out = []
    for n in range(turns):
        out += [Message("user", (Text(f"look at screen {n}"), Image("image/png", PNG))), Message("assistant", (Text(f"seen {n}"),))]
    return out


def test_a_413_the_free_rungs_cannot_answer_says_so_exactly_without_a_summarizer():
    history = wordy(6)
    cost = CostModel.for_model(CLAUDE)
    started, target = request_bytes(history), target_of(history)
    result = recover(history, CLAUDE, TOO_LARGE)
    report = result.report
    assert not report.fits and list(result.view) == history
    assert report.tokens_before == report.tokens_after == report.budget == cost.history(history)
    assert report.message == (f"recovered from an HTTP 413: request {started:,} -> {started:,} bytes (target {target:,}); "
                              "still over the target (a summarizer would free more)")


def test_a_413_takes_every_image_first_and_calls_no_summarizer_when_that_is_enough():
    history = pictured(4)
    calls: list[str] = []
    result = recover(history, CLAUDE, TOO_LARGE, summarizer=recording_summarizer(calls))
    final, target = request_bytes(result.view), target_of(history)
    assert result.report.fits and final <= target and calls == []
    assert not any(m.images for m in result.view)  # the newest screenshot too: bytes are what the provider refused
    assert result.report.message == f"recovered from an HTTP 413: request {request_bytes(history):,} -> {final:,} bytes (target {target:,})"
    assert result.report.rung("summarization") is None
    assert result.report.tokens_after == result.report.budget == CostModel.for_model(CLAUDE).history(result.view)


def test_a_413_still_over_its_target_with_a_summarizer_does_not_ask_for_one():
    history = [*wordy(3), Message("user", (Text("the newest message, kept verbatim: " + "word " * 40_000),))]
    result = recover(history, CLAUDE, TOO_LARGE, summarizer=recording_summarizer([]))
    assert not result.report.fits and result.report.message.endswith("; still over the target")


def test_a_413_the_free_rungs_cannot_answer_is_summarized_toward_half_of_what_they_left():
    history = wordy(8)
    calls: list[str] = []
    result = recover(history, CLAUDE, TOO_LARGE, summarizer=recording_summarizer(calls))
    rung = result.report.rung("summarization")
    assert calls and rung is not None and rung.skipped is None
    assert result.report.fits and request_bytes(result.view) <= target_of(history)
    assert result.report.message.endswith(f"(target {target_of(history):,})")
    # the summary's allowance is a share of the summarization budget: half of what the free rungs left
    budget = int(CostModel.for_model(CLAUDE).history(history) * BYTES_SUMMARY_SHARE)
    assert rung.summary_tokens <= max(200, int(budget * 0.2))


@pytest.mark.parametrize("limit, kept", [(MIN_PLAUSIBLE_LIMIT - 1, None), (MIN_PLAUSIBLE_LIMIT, MIN_PLAUSIBLE_LIMIT)])
def test_an_overflow_limit_under_the_plausible_floor_is_unknown(limit, kept):
    assert Overflow("tokens", limit=limit).limit == kept


@pytest.mark.parametrize("measured, kept", [(5_000, None), (5_001, 5_001)])
def test_an_overflow_measured_at_or_under_its_limit_is_unknown(measured, kept):
    assert Overflow("tokens", measured=measured, limit=5_000).measured == kept


@pytest.mark.parametrize("measured, kept", [(MIN_PLAUSIBLE_LIMIT - 1, None), (MIN_PLAUSIBLE_LIMIT, MIN_PLAUSIBLE_LIMIT)])
def test_an_overflow_measured_under_the_plausible_floor_is_unknown(measured, kept):
    assert Overflow("tokens", measured=measured).measured == kept


def test_an_overflow_of_another_kind_is_refused_by_name():
    with pytest.raises(CompactionError, match="an overflow's kind must be one of tokens, bytes, not 'pages'"):
        Overflow("pages")  # type: ignore[arg-type]


def test_calibration_takes_any_positive_count_and_refuses_the_rest():
    cost = CostModel.for_model(CLAUDE)
    history = wordy(1)
    assert calibrated(cost, history, 1).overhead < 0  # a count under the estimate is taken as it is
    for absurd in (0, -5, True, 2.5):
        with pytest.raises(Exception, match="measured"):
            calibrated(cost, history, absurd)  # type: ignore[arg-type]


def test_without_a_summarizer_the_last_rung_says_why_it_did_nothing():
    result = compact(wordy(6), CLAUDE, 500, policy=CompactionPolicy(rungs=("elision", "summarization")))
    rung = result.report.rung("summarization")
    assert rung is not None and rung.skipped == "no summarizer supplied" and rung.freed == 0


def test_the_policys_tokenizer_is_what_the_ladder_counts():
    history = wordy(6)
    calls: list[str] = []
    plain = compact(history, CLAUDE, 20_000, summarizer=recording_summarizer(calls), policy=CompactionPolicy(rungs=("summarization",)))
    assert plain.report.tokens_before == CostModel.for_model(CLAUDE).history(history) < 20_000 and not calls
    tenfold = CompactionPolicy(rungs=("summarization",), tokenizer=lambda text: 10 * len(text.split()))
    counted = compact(history, CLAUDE, 20_000, summarizer=recording_summarizer(calls), policy=tenfold)
    assert counted.report.tokens_before > 20_000 and calls  # the same history is over budget by the caller's count


@pytest.mark.parametrize("extra, capped", [(0, False), (1, True)])
def test_the_readers_image_limit_holds_at_exactly_the_limit_and_caps_one_over(extra, capped):
    limit = CLAUDE.max_images
    assert limit is not None
    history = []
    for n in range(limit + extra):
        history += [Message("user", (Text(f"shot {n}"), Image("image/png", PNG[:100]))), Message("assistant", (Text("ok"),))]
    result = compact(history, CLAUDE, 10_000_000, policy=CompactionPolicy(rungs=("elision",)))
    images = sum(len(m.images) for m in result.view)
    assert images == min(limit, limit + extra)
    assert (result.report.rung("image drop") is not None) == capped  # the cap's own report is kept


def test_the_pages_handed_back_are_the_ones_the_view_carries():
    history = generate_session(120_000, seed=5)
    paged = compact(history, CLAUDE, 20_000, summarizer=recording_summarizer([]), policy=CompactionPolicy(fidelity="dense"))
    assert paged.pages and all(_carries(paged.view, page) for page in paged.pages)
    other = Message("user", (Image("image/png", bytes(bytearray(paged.pages[0].png))),))  # equal bytes, another object: not the page
    assert not _carries([other, Message("user", (Text("x"),))], paged.pages[0])
    # A step after the snapshot that takes every image (the 413 path's image drop) takes
    # the pages too: they are not handed back.
    steps = {step.rung: step for step in LADDER}
    context = Climb(CostModel.for_model(CLAUDE), 20_000, CompactionPolicy(fidelity="dense"), every_image=True)
    view, _, pages, page_text = climb(history, [steps["snapshot"], steps["image drop"]], context, lambda current: False)
    assert not any(m.images for m in view) and pages == () and page_text == ""  # no pages: no text they draw
    view, _, pages, page_text = climb(history, [steps["snapshot"]], context, lambda current: False)
    assert pages and all(_carries(view, page) for page in pages)
    assert page_text and sum(page.chars for page in pages) >= len(page_text.replace("\n", ""))
