"""The compaction ladder: free context cheapest-first.

    elision        old, large, unremarkable tool results become one-line stubs (free)
    image drop     old images become one-line stubs (free)
    snapshots      head verbatim, the middle rendered to page images, tail verbatim
                   (free; readers with vision only)
    summarization  a caller-supplied summarizer condenses the middle (one model call
                   per chunk; readers without vision always get this instead)

Every rung takes a view and returns a ``RungResult``; the stored history is never
changed. Each rung runs at most once, so compaction always ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._errors import CompactionError
from .._history.messages import Message
from .._providers.profile import Profile
from .._providers.resolve import resolve
from .._types import public
from .cost import CostModel
from .results import Compaction, CompactionPolicy, LadderReport, RungReport
from .rungs import cap_images, drop_images, elide
from .snapshot import snapshot
from .summarize import Summarizer, summarize

if TYPE_CHECKING:
    from .._history.store import Workspace


def cost_model(profile: Profile | str, policy: CompactionPolicy) -> CostModel:
    return CostModel.for_model(profile, policy.estimator, policy.tokenizer)


@public
def shake(history: Sequence[Message], profile: Profile | str, *, policy: CompactionPolicy = CompactionPolicy()) -> Compaction:
    """Only the free rungs (elision, image drop), whatever the budget."""
    cost = cost_model(profile, policy)
    before = cost.history(history)
    elided = elide(history, cost, policy)
    dropped = drop_images(elided.view, cost, 0 if not cost.profile.vision else policy.protect_turns)
    after = cost.history(dropped.view)
    report = LadderReport(
        after, before, after, True, (elided.report, dropped.report), f"shake: {before:,} -> {after:,} estimated tokens"
    )
    return Compaction(dropped.view, report)


@public
def compact(
    history: Sequence[Message],
    profile: Profile | str,
    budget: int,
    *,
    summarizer: Summarizer | None = None,
    policy: CompactionPolicy = CompactionPolicy(),
    cost: CostModel | None = None,
) -> Compaction:
    """Run the ladder until the view's estimated tokens fit ``budget``.

    Each rung runs at most once, so compaction always ends; when even the last rung
    cannot get under the budget, the report says so (``fits`` is False) and the view
    is the smallest one reached. A reader without vision never receives an image
    block: its images are dropped whatever the budget, and it gets a summary, never
    snapshots.

    ``cost``: a ``CostModel`` for ``profile`` to price with instead of the policy's
    estimator and tokenizer; the messages it priced before keep their prices (a
    harness that compacts again and again prices each message once).
    """
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        raise CompactionError(f"budget must be a positive number of tokens, not {budget!r}")
    if cost is None:
        cost = cost_model(profile, policy)
    elif cost.profile != resolve(profile):
        raise CompactionError(f"the cost model prices for {cost.profile.name}, not for {resolve(profile).name}")
    overhead = cost.estimator.overhead
    if budget <= overhead:
        raise CompactionError(
            f"a budget of {budget:,} tokens leaves nothing for messages: requests carry {overhead:,} tokens "
            f"of system prompt and tool schemas (the estimator's overhead)"
        )
    full_budget, budget = budget, budget - overhead  # the rungs work on the messages' share
    vision = cost.profile.vision
    before = cost.history(history)
    view: tuple[Message, ...] = tuple(history)
    rungs: list[RungReport] = []
    pages: tuple = ()

    def fits() -> bool:
        return cost.history(view) <= budget

    if not vision and any(m.images for m in view):
        result = drop_images(view, cost, 0, note="the reader has no vision")
        view = result.view
        rungs.append(result.report)
    allowed = set(policy.rungs)
    if not fits() and "elision" in allowed:
        result = elide(view, cost, policy)
        view = result.view
        rungs.append(result.report)
    if not fits() and vision and "image drop" in allowed:
        result = drop_images(view, cost, policy.protect_turns)
        view = result.view
        rungs.append(result.report)
    if not fits() and vision and "snapshot" in allowed:
        result = snapshot(view, cost, budget, policy)
        rungs.append(result.report)
        if result.pages:
            view, pages = result.view, result.pages
    limit = cost.profile.max_images
    if vision and limit is not None and sum(len(m.images) for m in view) > limit:
        result = cap_images(view, cost, limit)
        view = result.view
        rungs.append(result.report)
    if not fits() and "summarization" in allowed:
        if summarizer is not None:
            result = summarize(view, cost, budget, summarizer, policy.tail_for(budget))
            view, pages = result.view, ()
            rungs.append(result.report)
        else:
            tokens = cost.history(view)
            rungs.append(RungReport("summarization", tokens, tokens, skipped="no summarizer supplied"))
    after = cost.history(view)
    ok = after <= budget
    before, after = before + overhead, after + overhead
    plus = (
        f", {overhead:,} of them the requests' overhead"
        if overhead > 0
        else f", after taking {-overhead:,} off the estimate to match the provider's count"
        if overhead < 0
        else ""
    )
    message = (
        f"fits: {before:,} -> {after:,} estimated tokens (budget {full_budget:,}{plus})"
        if ok
        else f"does not fit: the ladder got {before:,} down to {after:,} estimated tokens{plus}, over the budget of {full_budget:,}"
        + ("" if summarizer is not None else "; a summarizer would free more")
    )
    return Compaction(view, LadderReport(full_budget, before, after, ok, tuple(rungs), message), pages)


@public
def should_compact(
    history: Sequence[Message], profile: Profile | str, threshold: int, *, policy: CompactionPolicy = CompactionPolicy()
) -> bool:
    """Proactive trigger: whether a request with the history (and the estimator's
    overhead) reached ``threshold`` estimated tokens."""
    cost = cost_model(profile, policy)
    return cost.history(history) + cost.estimator.overhead >= threshold


def compact_transcript(
    workspace: Workspace,
    conversation: str,
    agent: str,
    profile: Profile | str,
    budget: int,
    *,
    summarizer: Summarizer | None = None,
    policy: CompactionPolicy = CompactionPolicy(),
) -> Compaction:
    """Compact a stored transcript into a view to send; the stored file is not touched."""
    transcript = workspace.load(conversation, agent)
    return compact(transcript.messages, profile, budget, summarizer=summarizer, policy=policy)
