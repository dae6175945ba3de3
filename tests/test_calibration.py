"""Calibration learns a scale on the text rates and the requests' overhead from a
provider's counts; a session's target counts that overhead (issue: a 100k-window replay
of a Claude Code session stopped at call 16, its calibration having learned the
provider's proportional over-count as an overhead growing past the target)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import glyphpack
from glyphpack import Message, Text, ToolCall, ToolResult
from glyphpack._compaction.calibration import COUNTS_KEPT, SCALE_BOUNDS, Calibration, calibrated, fit_scale
from glyphpack._compaction.cost import CostModel
from glyphpack._session.compactor import TARGET_SHARE, Thresholds
from glyphpack.testing.fake import Turn, answer_body

MODEL = "claude-sonnet-4-5"
WORDS = "the parser reads each record and keeps its offset for the index "


def _history(turns: int) -> list[Message]:
    out = [Message("user", "index the records", id="u0")]
    for n in range(turns):
        out.append(Message("assistant", (ToolCall(f"c{n}", "read", {"n": n}),), id=f"a{n}"))
        out.append(Message("tool", (ToolResult(f"c{n}", (Text(f"{n} " + WORDS * 40),)),), id=f"t{n}"))
    return out


def _provider(scale: float, overhead: int):
    """A provider whose tokenizer counts text at ``scale`` times the base rates, the
    messages' structure and images as the estimate does, and ``overhead`` tokens of
    system prompt and tools."""
    base = CostModel.for_model(MODEL)
    counted = CostModel.for_model(MODEL, base.estimator.scaled(scale))

    def count(view: list[Message] | tuple[Message, ...]) -> int:
        return counted.history(view) + overhead

    return count


def _learned(counts: list[tuple[list[Message], int]]) -> Calibration:
    calibration = Calibration(base=CostModel.for_model(MODEL).estimator)
    for view, measured in counts:
        calibration = calibration.learn(CostModel.for_model(MODEL, calibration.estimator), view, measured)
    return calibration


def test_one_count_is_all_overhead():
    history = _history(3)
    cost = CostModel.for_model(MODEL)
    learned = _learned([(history, 9_000)])
    assert learned.scale == 1.0 and learned.estimator.latin == cost.estimator.latin
    assert learned.overhead == 9_000 - cost.history(history) == calibrated(cost, history, 9_000).overhead
    assert learned.counts == ((cost.history(history), 9_000),)


def test_counts_from_a_tokenizer_that_counts_more_give_its_scale_and_the_true_overhead():
    count = _provider(1.22, 40_000)
    views = [_history(n) for n in range(2, 30, 3)]
    learned = _learned([(view, count(view)) for view in views])
    # The prior holds the scale a step short of the truth; the overhead takes the rest.
    assert learned.scale == pytest.approx(1.21)
    text = CostModel.for_model(MODEL).history(views[-1])
    assert 0 <= learned.overhead - 40_000 <= 0.01 * text + 2
    # What additive calibration learned instead: the over-count as overhead.
    additive = calibrated(CostModel.for_model(MODEL), views[-1], count(views[-1])).overhead
    assert additive - 40_000 > 0.2 * text
    # A far smaller view (a compaction's target) is priced within 1% of the provider's count.
    small = views[0]
    priced = CostModel.for_model(MODEL, learned.estimator).history(small) + learned.overhead
    assert priced == pytest.approx(count(small), rel=0.01)


def test_images_are_counted_exactly_and_not_scaled():
    """Screenshots in the history: the provider counts them as the estimate does, so
    they stay out of the fit; taken as text, they would pull the scale towards 1."""
    import io

    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", (1200, 900), "white").save(buffer, format="PNG")
    shot = glyphpack.Image("image/png", buffer.getvalue())
    count = _provider(1.22, 3_000)
    views = []
    for n in range(2, 30, 3):
        view = _history(n)
        views.append(view + [Message("user", (shot,) * n, id="shots")])  # images grow faster than text
    learned = _learned([(view, count(view)) for view in views])
    assert learned.scale == pytest.approx(1.21)


def test_the_last_count_is_matched_exactly():
    count = _provider(0.8, 2_000)
    views = [_history(n) for n in (4, 9, 14)]
    learned = _learned([(view, count(view) + (37 if n == 1 else 0)) for n, view in enumerate(views)])
    cost = CostModel.for_model(MODEL, learned.estimator)
    assert abs(cost.history(views[-1]) + learned.overhead - count(views[-1])) <= 1  # the overhead is rounded


def test_counts_that_do_not_spread_keep_the_scale_at_one():
    view = _history(10)
    measured = round(CostModel.for_model(MODEL).history(view) * 1.3)  # a scale no spread could show
    learned = _learned([(view, measured)] * 5)
    assert learned.scale == 1.0 and learned.overhead == measured - CostModel.for_model(MODEL).history(view)


@pytest.mark.parametrize(("scale", "bound"), [(3.0, SCALE_BOUNDS[1]), (0.2, SCALE_BOUNDS[0])])
def test_the_scale_stays_within_its_bounds(scale, bound):
    count = _provider(scale, 1_000)
    learned = _learned([(view, count(view)) for view in (_history(n) for n in range(2, 20, 4))])
    assert learned.scale == bound


def test_fit_scale_moves_in_steps_and_weighs_newer_counts_more():
    assert fit_scale([(1000.0, 1100)]) == 1.0
    assert fit_scale([(1000.0, 2000), (3000.0, 4300)]) == pytest.approx(1.12)  # 1.15 exactly, pulled towards 1
    assert fit_scale([(1000.0, 2000), (1010.0, 2300)]) == 1.01  # a slope of 30 over counts 1% apart: one step
    # The same two lines of counts, in the other order: the newer ones win.
    old, new = [(t, round(1.1 * t)) for t in (1000.0, 2000.0, 3000.0)], [(t, round(1.4 * t)) for t in (1000.0, 2000.0, 3000.0)]
    assert fit_scale(old * 3 + new * 3) > 1.25 > fit_scale(new * 3 + old * 3)
    assert round(fit_scale(new) * 100) == fit_scale(new) * 100  # hundredths


def test_only_the_newest_counts_are_kept():
    view = _history(2)
    learned = _learned([(view, 5_000 + n) for n in range(COUNTS_KEPT + 3)])
    assert len(learned.counts) == COUNTS_KEPT and learned.counts[0][1] == 5_003 and learned.counts[-1][1] == 5_000 + COUNTS_KEPT + 2


def test_a_record_reads_back_and_a_damaged_one_is_taken_as_far_as_it_goes():
    count = _provider(1.22, 4_000)
    learned = _learned([(view, count(view)) for view in (_history(n) for n in (3, 8, 13))])
    base = learned.base
    back = Calibration.from_record(base, learned.to_record())
    assert (back.scale, back.overhead) == (learned.scale, learned.overhead)
    assert back.counts == tuple((round(t, 1), r) for t, r in learned.counts)
    assert Calibration.from_record(base, {"overhead": 12}) == Calibration(base=base, overhead=12)  # an older record
    assert Calibration.from_record(base, {"overhead": "12"}) == Calibration(base=base)
    assert Calibration.from_record(base, {"overhead": True}) == Calibration(base=base)
    for damaged in ({"scale": 7.0}, {"scale": "x"}, {"counts": [[1, 2, 3]]}, {"counts": [["nan", 2]]}):
        assert Calibration.from_record(base, {"overhead": 12, **damaged}) == Calibration(base=base, overhead=12)
    edge = {"overhead": 12, "scale": SCALE_BOUNDS[1], "counts": [[10, 20]]}
    assert Calibration.from_record(base, edge) == Calibration(base=base, overhead=12, scale=SCALE_BOUNDS[1], counts=((10.0, 20),))


def test_the_default_target_is_the_overhead_plus_a_share_of_what_the_threshold_leaves():
    limits = Thresholds.for_window(100_000)
    assert limits.threshold == 87_500 and limits.target is None
    assert limits.target_for(0) == limits.target_for(-500) == int(87_500 * TARGET_SHARE)
    assert limits.target_for(40_000) == 40_000 + int(47_500 * TARGET_SHARE)
    assert limits.target_for(87_499) == 87_499 and limits.target_for(87_500) == limits.target_for(90_000) == 87_500
    given = Thresholds.for_window(100_000, target=30_000)
    assert given.target_for(40_000) == 30_000  # a target the caller gives is theirs
    with pytest.raises(glyphpack.UsageError, match="need 0 < target < threshold <= window, got 87,500"):
        Thresholds.for_window(100_000, target=87_500)
    assert Thresholds.for_window(100_000, target=87_499).target == 87_499
    with pytest.raises(glyphpack.UsageError, match="got the default / 100,001 / 100,000"):
        Thresholds.for_window(100_000, threshold=100_001)


@pytest.mark.parametrize("recall", [False, True])
def test_a_session_whose_provider_counts_more_keeps_going(tmp_path, recall):
    """A 100k window, 44k of system prompt and tools, a tokenizer counting 1.22x: the
    session compacts at its threshold and goes on, every request under the window by
    the provider's count. Additive calibration learns ~60k of overhead here, and a
    target of half the threshold (43,750) leaves nothing for messages even without it."""
    count = _provider(1.22, 44_000)
    with glyphpack.open_session(tmp_path / "ws", "c", "main", model=MODEL, context_window=100_000, recall=recall) as session:
        session.add_user("index the records")
        compactions = elided = 0
        for n in range(60):
            session.request("anthropic")
            view, _ = session.request_view()
            measured = count(view)
            assert measured <= 100_000, f"request {n} counted {measured:,}"
            compactions += session.last_request.compaction is not None
            elided += session.last_request.elided > 0
            session.add_response(answer_body("anthropic", Turn(calls=(("read", {"n": n}),)), n, measured), "anthropic")
            session.add_tool_results({session.pending_calls[0].id: f"{n} " + WORDS * 80})
        # Without recall it compacts at the threshold; with it (the default), batches of
        # elision below the threshold keep it there too, each result recallable.
        assert compactions >= 2 if not recall else compactions + elided >= 2
        # Towards the provider's, held by the prior (less far with recall: its requests,
        # kept small by elision, weigh less in the fit).
        assert (1.15 if not recall else 1.12) <= session.calibration.scale <= 1.22
        # What the scale falls short by is in the overhead, no more.
        shortfall = (1.22 - session.calibration.scale) * CostModel.for_model(MODEL).history(session.request_view()[0])
        assert 0 <= session.estimator.overhead - 44_000 <= shortfall + 2


def test_a_restart_prices_as_the_last_process_did(tmp_path):
    count = _provider(1.22, 3_000)
    with glyphpack.open_session(tmp_path / "ws", "c", "main", model=MODEL) as session:
        session.add_user("index the records")
        for n in range(6):
            session.request("anthropic")
            view, _ = session.request_view()
            session.add_response(answer_body("anthropic", Turn(calls=(("read", {"n": n}),)), n, count(view)), "anthropic")
            session.add_tool_results({session.pending_calls[0].id: f"{n} " + WORDS * 40 * (n + 1)})
        learned, estimate = session.calibration, session.estimate()
    assert learned.scale != 1.0
    with glyphpack.open_session(tmp_path / "ws", "c", "main", model=MODEL) as again:
        assert dataclasses.replace(again.calibration, counts=learned.counts) == learned
        assert again.estimate() == estimate


def _reference_scale(counts: list[tuple[float, int]]) -> tuple[float, float]:
    """``fit_scale`` in plain Python: the 2x2 normal equations of the weighted fit with
    the prior on the scale, solved by Cramer's rule. (the rounded scale, the raw one in steps)"""
    from glyphpack._compaction.calibration import COUNT_DECAY, SCALE_PRIOR, SCALE_STEP

    if len(counts) < 2:
        return 1.0, 0.0
    unit = sum(t for t, _ in counts) / len(counts) or 1.0
    n = len(counts)
    a11 = a12 = a22 = b1 = b2 = 0.0
    for i, (text, rest) in enumerate(counts):
        w = COUNT_DECAY ** (n - 1 - i)
        x = text / unit
        a11, a12, a22 = a11 + w * x * x, a12 + w * x, a22 + w
        b1, b2 = b1 + w * x * rest, b2 + w * rest
    a11 += SCALE_PRIOR
    b1 += SCALE_PRIOR * unit
    determinant = a11 * a22 - a12 * a12
    if determinant == 0:
        return 1.0, 0.0
    scale = (b1 * a22 - a12 * b2) / determinant / unit
    clamped = min(SCALE_BOUNDS[1], max(SCALE_BOUNDS[0], scale))
    return round(clamped / SCALE_STEP) * SCALE_STEP, clamped / SCALE_STEP


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2_000_000).map(lambda tenths: tenths / 10), st.integers(1, 400_000)), min_size=0, max_size=40))
def test_fit_scale_is_the_weighted_fit_with_its_prior_in_plain_python(counts: list[tuple[float, int]]) -> None:
    """Text tokens as a record keeps them (tenths), measured counts as providers give them."""
    expected, steps = _reference_scale(counts)
    tie = abs(abs(steps - int(steps)) - 0.5) < 1e-6  # halfway between two steps, float noise may round either way
    assert fit_scale(counts) == pytest.approx(expected, abs=1e-9) or (tie and fit_scale(counts) == pytest.approx(expected, abs=0.0100001))
