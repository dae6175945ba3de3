"""The compaction ladder: free context cheapest-first.

    reasoning drop reasoning items sent back to the model (Responses' encrypted
                   reasoning), all but the newest answer's, left out (free)
    elision        old, large, unremarkable tool results become one-line stubs (free)
    image drop     old images become one-line stubs (free)
    snapshots      head verbatim, the middle rendered to page images, tail verbatim
                   (free; readers with vision only)
    summarization  a caller-supplied summarizer condenses the middle (one model call
                   per chunk; readers without vision always get this instead)
    tail cut       the last resort, when the view is still over the budget: the tool
                   results the others keep whole (the newest rounds') cut to their
                   ends behind a recall ref, the longest first (free)

Every rung takes a view and returns a ``RungResult``; the stored history is never
changed. Each rung runs at most once, so compaction always ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .._errors import CompactionError
from .._history.messages import Image, Message, Opaque
from .._providers.profile import Profile
from .._providers.resolve import resolve
from .._types import RUNGS, Rung, public
from .cost import CostModel
from .cut import cut_tail
from .results import Compaction, CompactionPolicy, LadderReport, RungReport, RungResult
from .rungs import cap_images, drop_images, drop_reasoning, elide
from .snapshot import snapshot
from .summarize import Sent, Summarizer, SummarizerFailed, as_summarizer, summarize, summarize_then_page

if TYPE_CHECKING:
    from .._render.render import Page


def cost_model(profile: Profile | str, policy: CompactionPolicy) -> CostModel:
    return CostModel.for_model(profile, policy.estimator, policy.tokenizer)


@dataclasses.dataclass(frozen=True)
class Climb:
    """What a rung works with: the pricing, the budget for the messages, the policy,
    and the summarizer (None: summarization is reported as skipped)."""

    cost: CostModel
    budget: int
    policy: CompactionPolicy
    summarizer: Summarizer | None = None
    sent: Sent | None = None  # the conversation as last sent, for a summary that continues it
    every_image: bool = False  # image drop takes the newest turns' images too
    pages: bool = True  # rungs may add pages (not on the HTTP 413 path: a page's PNG takes more bytes than its text)
    limit: int | None = None  # the most the view may take, for the tail cut (None: the budget)

    @property
    def hard_limit(self) -> int:
        return self.budget if self.limit is None else self.limit

    @property
    def image_protect_turns(self) -> int:
        return 0 if self.every_image else self.policy.protect_turns


def _summarization(view: Sequence[Message], context: Climb) -> RungResult:
    if context.summarizer is None:
        return _unchanged(view, context, "no summarizer supplied")
    try:
        if context.pages and context.policy.summary_pages and not any(m.images for m in view if m.id.startswith("snapshot-")):
            # No snapshot in the view: the whole middle did not fit as pages. Page what does.
            both = summarize_then_page(view, context.cost, context.budget, context.summarizer, context.policy, context.sent)
            if both is not None:
                return both
        return summarize(view, context.cost, context.budget, context.summarizer, context.policy.tail_for(context.budget), context.sent)
    except SummarizerFailed as failed:
        # A side request: the view stays as the cheaper rungs left it, and the report says why.
        return _unchanged(view, context, str(failed))


def _unchanged(view: Sequence[Message], context: Climb, why: str) -> RungResult:
    tokens = context.cost.history(view)
    return RungResult(tuple(view), RungReport(rung="summarization", tokens_before=tokens, tokens_after=tokens, skipped=why))


@dataclasses.dataclass(frozen=True)
class Step:
    """One rung of the ladder, as data.

    Attributes:
        rung: its name (``Rung``).
        run: ``run(view, climb) -> RungResult``.
        shake: run by ``shake`` (free, and no pages: elision and image drop).
        vision: only for a reader with vision (pages; images kept or dropped by age).
        frees_bytes: makes the request smaller in bytes, so the HTTP 413 path uses it
            (pages add bytes).
        bytes_first: on the HTTP 413 path, runs before the others (images are most of
            a request's bytes).
        applies: whether the rung has anything to do with a view (None: always); one
            that has not is passed over without a report.
    """

    rung: Rung
    run: Callable[[Sequence[Message], Climb], RungResult]
    shake: bool
    vision: bool
    frees_bytes: bool
    bytes_first: bool = False
    applies: Callable[[Sequence[Message]], bool] | None = None


#: The ladder, cheapest first: ``compact`` climbs it, ``shake`` takes its free rungs,
#: the HTTP 413 path the ones that free bytes, and a ``Session`` all but elision where
#: pages are cheap. A new rung is one line here and its name in ``Rung``.
LADDER: tuple[Step, ...] = (
    Step(
        "reasoning drop",
        lambda view, c: drop_reasoning(view, c.cost),
        shake=True,
        vision=False,
        frees_bytes=True,
        applies=lambda view: any(isinstance(b, Opaque) and b.sends_reasoning for m in view for b in m.content),
    ),
    Step("elision", lambda view, c: elide(view, c.cost, c.policy), shake=True, vision=False, frees_bytes=True),
    Step(
        "image drop",
        lambda view, c: drop_images(view, c.cost, c.image_protect_turns),
        shake=True,
        vision=True,
        frees_bytes=True,
        bytes_first=True,
    ),
    Step("snapshot", lambda view, c: snapshot(view, c.cost, c.budget, c.policy), shake=False, vision=True, frees_bytes=False),
    Step("summarization", _summarization, shake=False, vision=False, frees_bytes=True),
    Step("tail cut", lambda view, c: cut_tail(view, c.cost, c.hard_limit), shake=False, vision=False, frees_bytes=True),
)
if tuple(step.rung for step in LADDER) != RUNGS:
    raise AssertionError("LADDER and the Rung names disagree")


def climb(
    view: Sequence[Message], steps: Sequence[Step], context: Climb, done: Callable[[Sequence[Message]], bool]
) -> tuple[tuple[Message, ...], list[RungReport], tuple[Page, ...], str]:
    """Run ``steps`` in order on ``view`` until ``done(view)``; the reader's images per
    request hold before and after each (a snapshot's pages count). Returns the view,
    the reports, and the snapshot pages the view still carries with the text they draw."""
    current, reports = tuple(view), []
    made: list[Page] = []
    page_text = ""
    cost, limit = context.cost, context.cost.profile.max_images

    def within_image_limit() -> None:
        nonlocal current
        if cost.profile.vision and limit is not None and sum(len(m.images) for m in current) > limit:
            capped = cap_images(current, cost, limit)
            current = capped.view
            reports.append(capped.report)

    within_image_limit()
    for step in steps:
        if done(current):
            break
        if step.applies is not None and not step.applies(current):
            continue
        result = step.run(current, context)
        reports.append(result.report)
        reports.extend(result.also)
        current = result.view
        made.extend(result.pages)
        page_text = result.page_text if result.pages else page_text
        within_image_limit()
    # The pages a later step (or the image cap) took out again are not handed back.
    pages = tuple(page for page in made if _carries(current, page))
    return current, reports, pages, page_text if pages else ""


def _carries(view: Sequence[Message], page: Page) -> bool:
    """Whether a page is still in the view (a summary replaces the pages it covered)."""
    return any(isinstance(block, Image) and block.data is page.png for message in view for block in message.content)


@public
def shake(history: Sequence[Message], profile: Profile | str, *, policy: CompactionPolicy = CompactionPolicy()) -> Compaction:
    """Only the free rungs (reasoning drop, elision, image drop), whatever the budget."""
    cost = cost_model(profile, policy)
    before = cost.history(history)
    context = Climb(cost, 0, policy, every_image=not cost.profile.vision)  # a reader without vision takes no image
    view, reports, _, _ = climb(history, [step for step in LADDER if step.shake], context, lambda _: False)
    after = cost.history(view)
    report = LadderReport(budget=after, tokens_before=before, tokens_after=after, fits=True, rungs=tuple(reports), message=f"shake: {before:,} -> {after:,} estimated tokens")
    return Compaction(view=view, report=report)


@public
def compact(
    history: Sequence[Message],
    profile: Profile | str,
    budget: int,
    *,
    summarizer: Summarizer | Callable[[str], str] | None = None,
    policy: CompactionPolicy = CompactionPolicy(),
    cost: CostModel | None = None,
    sent: Sent | None = None,
    limit: int | None = None,
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

    ``sent``: the conversation as the last request carried it; with a summarizer that
    ``continues``, the summary request continues it (read from the prompt cache).

    ``limit``: the most the request may take (default: ``budget``). The last rung, the
    tail cut, cuts the newest tool results only down to it: a budget that is a target
    well under the window (a session's proactive one) is not met by cutting what the
    model reads next.
    """
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        raise CompactionError(f"budget must be a positive number of tokens, not {budget!r}")
    summarizer = as_summarizer(summarizer)
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
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < budget):
        raise CompactionError(f"limit must be a number of tokens at least the budget ({budget:,}), not {limit!r}")
    full_budget, budget = budget, budget - overhead  # the rungs work on the messages' share
    vision = cost.profile.vision
    before = cost.history(history)
    view: tuple[Message, ...] = tuple(history)
    rungs: list[RungReport] = []
    if not vision and any(m.images for m in view):
        result = drop_images(view, cost, 0, note="the reader has no vision")
        view = result.view
        rungs.append(result.report)
    steps = [step for step in LADDER if step.rung in policy.rungs and (vision or not step.vision)]
    view, climbed, pages, page_text = climb(
        view, steps, Climb(cost, budget, policy, summarizer, sent, limit=None if limit is None else limit - overhead),
        lambda current: cost.history(current) <= budget,
    )
    rungs += climbed
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
    return Compaction(
        view=view,
        report=LadderReport(budget=full_budget, tokens_before=before, tokens_after=after, fits=ok, rungs=tuple(rungs), message=message),
        pages=pages,
        page_text=page_text,
    )


@public
def should_compact(
    history: Sequence[Message], profile: Profile | str, threshold: int, *, policy: CompactionPolicy = CompactionPolicy()
) -> bool:
    """Proactive trigger: whether a request with the history (and the estimator's
    overhead) reached ``threshold`` estimated tokens."""
    cost = cost_model(profile, policy)
    return cost.history(history) + cost.estimator.overhead >= threshold
