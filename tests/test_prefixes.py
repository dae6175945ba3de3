"""Work over a whole history resumed where it left off (``_history/prefixes.py``): the
history check, the call ids, the cost model's sums, each equal to the same work done
from the start, for histories that grow, branch, and are rebuilt from equal but other
message objects; and the memo's own limits, both sides of each."""

from __future__ import annotations

import dataclasses

import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from glyphpack import HistoryError, Message, Text, ToolCall, ToolResult
from glyphpack._compaction.cost import CostModel
from glyphpack._history import prefixes
from glyphpack._history.messages import call_ids, validate_history
from glyphpack._history.prefixes import HELD_MESSAGES, KEPT, LOOKBACK, SHORTEST_KEPT, PrefixFolds


def _message(kind: int, n: int, calls: int) -> Message:
    """A message of one of four kinds: user words, an answer, an answer with a call
    (ids drawn from a few, so some repeat), the result of a call (maybe one never made)."""
    if kind == 0:
        return Message("user", (Text(f"words {n}"),))
    if kind == 1:
        return Message("assistant", (Text(f"answer {n}"),))
    if kind == 2:
        return Message("assistant", (ToolCall(f"c{calls}", "read", {"n": n}),))
    return Message("tool", (ToolResult(f"c{calls}", (Text(f"output {n}"),)),))


STEPS = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(0, 6)), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(STEPS)
def test_the_check_and_the_sums_resumed_equal_them_from_the_start(steps: list[tuple[int, int, int]]) -> None:
    """Each step extends the history (the very objects), or goes back to a prefix and
    goes on from there (a branch), or rebuilds it from equal copies (a process that read
    it again): every check, call-id set and sum equals the one done from the start."""
    cost = CostModel.for_model("claude-sonnet-4-5")
    history: tuple[Message, ...] = ()
    for n, (action, kind, calls) in enumerate(steps):
        if action == 3 and history:
            history = history[: len(history) // 2]
        elif action == 4:
            history = tuple(dataclasses.replace(m) for m in history)
        history = (*history, *(_message(kind, n * 40 + i, calls + i % 2) for i in range(1 + (calls * 7) % 40)))
        for allow_pending in (True, False):
            expected = reference.validate_history(history, allow_pending)
            try:
                validate_history(history, allow_pending=allow_pending)
                said = None
            except HistoryError as exc:
                said = str(exc)
            assert said == expected
        assert call_ids(history) == {c.id for m in history for c in m.tool_calls}
        assert cost.history(history) == sum(cost.message(m) for m in history)
        assert cost.images(history) == sum(cost.image(i) for m in history for i in m.images)


def _history(length: int) -> tuple[Message, ...]:
    return tuple(Message("user", (Text(f"m{n}"),)) for n in range(length))


def test_a_fold_resumes_at_the_longest_kept_prefix_within_the_lookback() -> None:
    folds: PrefixFolds[str] = PrefixFolds()
    base = _history(SHORTEST_KEPT + LOOKBACK)
    other = (*base[:SHORTEST_KEPT], *_history(1))  # a branch: not the longer one's prefix
    folds.keep(base[: SHORTEST_KEPT + 1], "shorter")
    folds.keep(other, "branch")
    assert folds.resume(base[: SHORTEST_KEPT + 2]) == (SHORTEST_KEPT + 1, "shorter")
    folds.keep(base[: SHORTEST_KEPT + 3], "longer")  # the history grew: its earlier end is kept within it
    assert folds.resume(base[: SHORTEST_KEPT + 5]) == (SHORTEST_KEPT + 3, "longer")
    assert folds.resume(base[: SHORTEST_KEPT + 2]) == (SHORTEST_KEPT + 1, "shorter")
    assert folds.resume(other) == (SHORTEST_KEPT + 1, "branch")
    # The kept end LOOKBACK - 1 messages back is found; LOOKBACK back is not.
    longer = (*base[: SHORTEST_KEPT + 3], *_history(LOOKBACK))
    assert folds.resume(longer[: SHORTEST_KEPT + 3 + LOOKBACK - 1]) == (SHORTEST_KEPT + 3, "longer")
    assert folds.resume(longer[: SHORTEST_KEPT + 3 + LOOKBACK]) == (0, None)
    folds.keep(base[: SHORTEST_KEPT + 4], "one more")  # an end one message back is kept within it too
    assert folds.resume(base[: SHORTEST_KEPT + 3]) == (SHORTEST_KEPT + 3, "longer")
    assert folds.resume(base[: SHORTEST_KEPT + 4]) == (SHORTEST_KEPT + 4, "one more")


def test_a_grown_history_holds_its_earlier_ends_within_the_lookback_once() -> None:
    """The ends LOOKBACK - 1 messages back and nearer are kept within the grown history
    (its messages held once); one LOOKBACK back keeps its own (held beside it)."""
    grown = _history(SHORTEST_KEPT + LOOKBACK)
    near: PrefixFolds[str] = PrefixFolds()
    near.keep(grown[:SHORTEST_KEPT], "start")
    near.keep(grown[: SHORTEST_KEPT + LOOKBACK - 1], "end")
    assert near._held == SHORTEST_KEPT + LOOKBACK - 1
    assert near.resume(grown[: SHORTEST_KEPT + 1]) == (SHORTEST_KEPT, "start")
    far: PrefixFolds[str] = PrefixFolds()
    far.keep(grown[:SHORTEST_KEPT], "start")
    far.keep(grown, "end")
    assert far._held == 2 * SHORTEST_KEPT + LOOKBACK
    assert far.resume(grown[: SHORTEST_KEPT + 1]) == (SHORTEST_KEPT, "start")
    far.keep(grown, "again")  # the same history kept again: held once still
    assert far._held == 2 * SHORTEST_KEPT + LOOKBACK and far.resume(grown) == (len(grown), "again")


def test_an_evicted_history_shared_by_its_earlier_ends_stops_counting_once() -> None:
    folds: PrefixFolds[int] = PrefixFolds()
    grown = _history(SHORTEST_KEPT + 2)
    folds.keep(grown[:SHORTEST_KEPT], 0)
    folds.keep(grown, 1)
    for number in range(KEPT):  # the two ends go, oldest first: the shared one counts nothing
        folds.keep(_history(SHORTEST_KEPT), 2 + number)
    assert folds.resume(grown) == (0, None)
    assert folds._held == KEPT * SHORTEST_KEPT


def test_a_fold_is_resumed_for_the_very_messages_only() -> None:
    folds: PrefixFolds[str] = PrefixFolds()
    base = _history(SHORTEST_KEPT)
    folds.keep(base, "state")
    assert folds.resume((*base, *_history(2))) == (SHORTEST_KEPT, "state")
    equal = tuple(dataclasses.replace(m) for m in base)  # equal, other objects: not the history folded
    assert folds.resume((*equal, *_history(2))) == (0, None)
    changed = (*base[:-2], Message("user", (Text("other"),)), base[-1])  # the same last message, another before it
    assert folds.resume(changed) == (0, None)


def test_only_histories_of_the_shortest_kept_length_are_kept_and_at_most_kept_many() -> None:
    folds: PrefixFolds[int] = PrefixFolds()
    short = _history(SHORTEST_KEPT - 1)
    folds.keep(short, 1)
    assert folds.resume(short) == (0, None)
    long = _history(SHORTEST_KEPT)
    folds.keep(long, 2)
    assert folds.resume(long) == (SHORTEST_KEPT, 2)
    histories = [_history(SHORTEST_KEPT) for _ in range(KEPT)]
    for number, history in enumerate(histories):
        folds.keep(history, number)
    assert folds.resume(long) == (0, None)  # the oldest went when the KEPT-th more came
    assert folds.resume(histories[0]) == (SHORTEST_KEPT, 0) and folds.resume(histories[-1]) == (SHORTEST_KEPT, KEPT - 1)


def test_a_resumed_fold_is_the_most_recently_used_and_outlives_the_others() -> None:
    folds: PrefixFolds[int] = PrefixFolds()
    first = _history(SHORTEST_KEPT)
    folds.keep(first, 0)
    for number in range(1, KEPT):
        folds.keep(_history(SHORTEST_KEPT), number)
    assert folds.resume(first) == (SHORTEST_KEPT, 0)  # used: now the newest
    folds.keep(_history(SHORTEST_KEPT), KEPT)
    assert folds.resume(first) == (SHORTEST_KEPT, 0)
    assert prefixes.begins_with(first, first[:3]) and not prefixes.begins_with(first[:3], first)


def test_a_list_kept_is_copied_so_the_callers_later_changes_do_not_reach_the_fold() -> None:
    folds: PrefixFolds[str] = PrefixFolds()
    base = _history(SHORTEST_KEPT)
    held = list(base)
    folds.keep(held, "state")
    held[3] = Message("user", (Text("changed"),))  # the caller's list, changed after
    assert folds.resume(base) == (SHORTEST_KEPT, "state")


def test_the_kept_histories_hold_at_most_held_messages_together() -> None:
    size = HELD_MESSAGES // 4
    histories = [_history(size) for _ in range(4)]

    def filled() -> PrefixFolds[int]:
        folds: PrefixFolds[int] = PrefixFolds()
        for number, history in enumerate(histories):
            folds.keep(history, number)
        return folds

    assert filled().resume(histories[0]) == (size, 0)  # exactly at the bound: all four kept
    over = filled()
    over.keep(_history(SHORTEST_KEPT), 4)  # over it: the oldest goes, the next stays
    assert over.resume(histories[0]) == (0, None) and over.resume(histories[2]) == (size, 2)
    over.keep(_history(size), 5)  # the count goes on from there: over again, the next oldest goes
    assert over.resume(histories[1]) == (0, None) and over.resume(histories[2]) == (size, 2)


def test_a_history_that_grows_counts_once_toward_the_bound() -> None:
    folds: PrefixFolds[int] = PrefixFolds()
    grown = _history(HELD_MESSAGES // 2 + 3)
    for extra in range(4):  # four ends of one history, each the next one's prefix: held once
        folds.keep(grown[: HELD_MESSAGES // 2 + extra], extra)
    assert folds.resume(grown) == (HELD_MESSAGES // 2 + 3, 3)


def test_a_branch_from_an_earlier_end_a_grown_history_took_resumes_there() -> None:
    folds: PrefixFolds[str] = PrefixFolds()
    base = _history(SHORTEST_KEPT + 8)
    folds.keep(base[:SHORTEST_KEPT], "start")
    folds.keep(base, "grown")  # takes the start's end with it
    branch = (*base[:SHORTEST_KEPT], *_history(1))  # goes on from that end another way
    assert folds.resume(branch) == (SHORTEST_KEPT, "start")
    assert prefixes.begins_with(base, base) and not prefixes.begins_with(base[:-1], base)


def test_each_earlier_end_within_the_lookback_gives_way_one_and_two_messages_back() -> None:
    grown = _history(SHORTEST_KEPT + 2)
    for back in (1, 2):
        folds: PrefixFolds[str] = PrefixFolds()
        folds.keep(grown[: SHORTEST_KEPT + 2 - back], "earlier")
        folds.keep(grown, "grown")
        assert folds._held == SHORTEST_KEPT + 2  # the earlier history is held within the grown one only
        assert folds.resume(grown[: SHORTEST_KEPT + 2 - back]) == (SHORTEST_KEPT + 2 - back, "earlier")


def test_a_tuple_found_to_begin_with_a_kept_history_is_compared_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each fold of a session checks the same history against the same kept one: the
    first check compares the messages, the next ones (as long or shorter) do not; a
    longer one, another history, or a list (which may change) is compared again."""
    import operator

    compared: list[int] = []

    class Counting:
        @staticmethod
        def is_(a: object, b: object) -> bool:
            compared.append(1)
            return a is b

    monkeypatch.setattr(prefixes, "operator", Counting)
    kept = _history(40)
    history = (*kept[:30], *_history(1))
    assert prefixes._begins_with_first(history, kept, 30) and len(compared) == 30
    assert prefixes._begins_with_first(history, kept, 30) and prefixes._begins_with_first(history, kept, 20) and len(compared) == 30
    assert not prefixes._begins_with_first(history, kept, 31) and len(compared) == 61  # longer: compared, and not so
    as_list = list(history)
    assert prefixes._begins_with_first(as_list, kept, 30) and prefixes._begins_with_first(as_list, kept, 30) and len(compared) == 121
    assert prefixes._begins_with_first(kept, kept, 40) and len(compared) == 121  # itself
    assert operator.is_ is not Counting.is_
