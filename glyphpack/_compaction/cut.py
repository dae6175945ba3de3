"""The last rung: when every other rung has run and the view is still over the budget,
the tool results the others keep whole (the newest rounds', which elision and the
snapshot protect) are cut to their ends behind a recall ref, the longest first.

A window is a budget that must be met: a harness told 40k tokens whose newest tool
outputs alone take 50k would otherwise get an error on every turn from there on.
Nothing is lost: each cut names the ref that brings its result back whole.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from .._history.messages import Block, Message, Text, ToolCall, ToolResult
from .._history.recall import cut_to_ends, result_ref
from .cost import CostModel
from .results import RungReport, RungResult
from .rungs import drop_images, elided_call, elided_result
from .snapshot import head_end

#: The least a cut result keeps of each end, in characters; a view that still does not
#: fit then has those results elided whole (a one-line stub with the ref).
TAIL_CUT_MIN_END = 200


def cut_tail(messages: Sequence[Message], cost: CostModel, budget: int) -> RungResult:
    """``messages`` under ``budget`` by cutting the tool results after the head (the
    system prompt and the task, never touched) to their ends, the oldest first: the
    fewest that fit, each to ``TAIL_CUT_MIN_END`` characters at each end but the newest
    of them, which keeps the widest ends that fit; the results after it stay whole (the
    model reads the newest first). When even every result cut does not fit, every result
    and long call argument after the head is elided and every image after it dropped.
    Reported skipped when the view already fits or there is nothing to cut."""
    started = time.perf_counter()
    before = cost.history(messages)
    head = head_end(messages)

    def report(view: Sequence[Message], changed: int, skipped: str | None = None, keep: int = 0) -> RungResult:
        after = cost.history(view)
        rung = RungReport(rung="tail cut", tokens_before=before, tokens_after=after, changed=changed, seconds=time.perf_counter() - started,
                          skipped=skipped, results_cut=changed if keep else 0, result_cap=keep)  # fmt: skip
        return RungResult(tuple(view), rung)

    if before <= budget:
        return report(messages, 0, "the view fits")
    long_results = [
        (index, block.call_id)
        for index, message in enumerate(messages[head:], head)
        for block in message.content
        if isinstance(block, ToolResult) and len(block.text) > 2 * TAIL_CUT_MIN_END
    ]

    def fits(count: int, keep: int) -> bool:
        return cost.history(_cut(messages, long_results[:count], keep)) <= budget

    if long_results and fits(len(long_results), TAIL_CUT_MIN_END):
        # The fewest of the oldest that fit (more cut never costs more: binary search) ...
        low, high = 1, len(long_results)
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if fits(middle, TAIL_CUT_MIN_END) else (middle + 1, high)
        count = low
        # ... and the newest of them with the widest ends that fit.
        index, call_id = long_results[count - 1]
        widest = max(len(b.text) for b in messages[index].tool_results if b.call_id == call_id) // 2
        keep, high = TAIL_CUT_MIN_END, widest
        while keep < high:
            middle = (keep + high + 1) // 2
            keep, high = (middle, high) if fits(count, middle) else (keep, middle - 1)
        return report(_cut(messages, long_results[:count], keep), count, keep=keep)
    view, changed = _elide_all(messages, head)
    dropped = drop_images(view, cost, 0)
    view, changed = dropped.view, changed + dropped.report.changed
    if not changed:
        return report(messages, 0, "nothing after the task to cut")
    return report(view, changed)


def _cut(messages: Sequence[Message], chosen: Sequence[tuple[int, str]], keep: int) -> tuple[Message, ...]:
    """The view with the ``chosen`` results ((message index, call id), oldest first) cut
    to their ends: the last of them to ``keep`` characters at each end, the others to
    ``TAIL_CUT_MIN_END``; their images stay. Other messages are the same objects (their
    prices stay cached)."""
    ends = {(index, call_id): TAIL_CUT_MIN_END for index, call_id in chosen}
    if chosen:
        ends[chosen[-1]] = keep
    out = list(messages)
    for index in {index for index, _ in chosen}:
        content = tuple(
            dataclasses.replace(b, content=(Text(cut_to_ends(b.text, ends[index, b.call_id], result_ref(b.call_id))), *b.images()))
            if isinstance(b, ToolResult) and (index, b.call_id) in ends
            else b
            for b in messages[index].content
        )
        out[index] = messages[index].with_content(content)
    return tuple(out)


def _elide_all(messages: Sequence[Message], head: int) -> tuple[tuple[Message, ...], int]:
    calls = {c.id: c for m in messages for c in m.tool_calls}

    def elided(block: Block) -> Block | None:
        if isinstance(block, ToolResult) and len(block.text) > 2 * TAIL_CUT_MIN_END:
            return elided_result(block, calls.get(block.call_id))
        if isinstance(block, ToolCall) and len(block.arguments_json) > 2 * TAIL_CUT_MIN_END:
            return elided_call(block)
        return None

    return _replaced(messages, head, elided)


def _replaced(messages: Sequence[Message], head: int, change: Callable[[Block], Block | None]) -> tuple[tuple[Message, ...], int]:
    """``messages`` with each block after ``head`` that ``change`` gives a replacement
    for replaced (unchanged messages kept as the same objects: their prices stay
    cached), and the number replaced."""
    out = list(messages[:head])
    changed = 0
    for message in messages[head:]:
        content = [change(block) for block in message.content]
        if not any(content):
            out.append(message)
            continue
        changed += sum(1 for block in content if block is not None)
        out.append(message.with_content(tuple(new or old for new, old in zip(content, message.content))))
    return tuple(out), changed
