"""When and how deep a session compacts, and how it recovers: the policy half of a
``Session``.

The thresholds a window gives (``Thresholds``), where compacting bills least with a
prompt cache (``economic_room``, the payback rule), elision in batches below the
threshold, driving the ladder over the stored history, keeping a result as the view in
force, and recovery from "too long" (escalating to the summarizer, never looping). A
``Compactor`` works on one ``Session``'s state; the session, the proxy and the adapters
reach it through the session (``Session.compact``, ``recover``, ``threshold``,
``target``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Protocol

from .._compaction.cost import CostModel
from .._compaction.ladder import compact, shake
from .._compaction.recovery import DEFAULT_MARGIN, overflow_budget, parse_overflow, request_bytes
from .._compaction.recovery import recover as recover_bytes_or_tokens
from .._compaction.results import Compaction, CompactionPolicy
from .._compaction.rungs import elide, protected_from
from .._compaction.snapshot import head_end
from .._compaction.summarize import Sent, Summarizer
from .._errors import CompactionError, UsageError
from .._history.messages import Image, Message
from .._history.store import Workspace
from .._history.view import StoredView, write_view
from .._providers.catalog import CACHE_PRICES, OUTPUT_PRICES
from .._providers.profile import Profile
from .._providers.text_tokens import TextEstimator
from .._types import public

#: Tokens kept free for the reply: this share of the window, at most REPLY_RESERVE_MAX.
REPLY_RESERVE_SHARE = 0.125
REPLY_RESERVE_MAX = 32_000


#: Proactive compaction aims at the requests' overhead plus this share of what the
#: threshold leaves after it, so the turns that follow have room before the next
#: compaction (each one rewrites the prompt cache). On the overhead's share of the
#: window, not the window's: a harness whose system prompt and tools take 43k of a 100k
#: window would otherwise be asked for a target under its own overhead.
TARGET_SHARE = 0.5


def _without_tail_cut(policy: CompactionPolicy) -> CompactionPolicy:
    """``policy`` without its last resort, the tail cut."""
    return dataclasses.replace(policy, rungs=tuple(rung for rung in policy.rungs if rung != "tail cut"))


#: Characters per image token from which a reader's pages are cheap enough to keep old
#: tool results whole (text runs about 3.5-4 per token).
PAGES_OVER_ELISION = 10.0


#: With recall on (and no threshold or target given), a session compacts where it bills
#: least: every word it puts away comes back exactly, so depth costs nothing it cannot
#: undo. It keeps this many tokens of messages beside the overhead (the task, a summary
#: and the newest turns: Claude Code resumes from about as much) ...
RECALL_KEPT = 8_000


#: ... and compacts again once the history has grown by the room that bills least
#: (``economic_room``), learned from the tokens each model call added since the last
#: compaction, after this many calls (before, at the window's threshold).
GROWTH_CALLS = 3


#: ... when it pays back: what the calls that follow no longer read covers the compaction
#: (the kept part written again, the request read by the summary, a summary of about
#: this many tokens as output) within half as many calls as the session made so far (a
#: session's remaining calls are unknown; one that made few is taken to have few left).
SUMMARY_TOKENS = 2_000


def economic_room(kept: int, growth: float, write: float, read: float) -> int:
    """The tokens a history should grow by, after a compaction to ``kept`` tokens, before
    the next one, for the least billed per call: ``growth`` tokens a call, cache writes
    and reads at ``write`` and ``read`` times the input price.

    Between compactions every call reads the request so far (``read`` a token); each
    compaction writes ``kept`` again and reads the request it summarizes. Per call, over
    a room ``d``: ``read * (kept + d / 2) + (write * kept + read * (kept + d)) * growth / d``;
    its least is at ``d = sqrt(2 * growth * (write + read) * kept / read)``.
    """
    if growth <= 0:
        return 0
    return int(math.sqrt(2 * growth * (write + read) * kept / read))


#: With recall on, old tool results are elided below the threshold too, once a batch of
#: them frees this share of what the threshold leaves after the overhead: each batch
#: rewrites the prompt cache from its first stub on, so batches come seldom and large.
ELISION_BATCH_SHARE = 0.1


#: ... and once what a batch frees pays for the cache rewrite it causes (everything after
#: its first stub is written again, at 1.25x, where it would have been read, at 0.1x:
#: 11.5 reads each) within this many calls, at 0.1x per freed token per call.
ELISION_PAYBACK_CALLS = 20
REWRITE_PER_READ = (1.25 - 0.1) / 0.1


#: A second overflow since the last answer compacts to this share of the first target,
#: with the summarizer required; a third raises.
ESCALATION_SHARE = 0.5


@public
@dataclasses.dataclass(frozen=True)
class Thresholds:
    """When a session compacts, in estimated tokens of a request.

    Attributes:
        window: the model's input window.
        threshold: a request estimated at this or more is compacted first.
        target: what proactive compaction aims at (well under ``threshold``); None:
            the requests' overhead plus ``TARGET_SHARE`` of what the threshold leaves
            after it (``target_for``).
    """

    window: int
    threshold: int
    target: int | None = None

    def target_for(self, overhead: int) -> int:
        """What proactive compaction aims at for requests that carry ``overhead``
        tokens beyond their messages (an overhead at or over the threshold leaves
        messages nothing: the threshold, which the ladder then refuses by name)."""
        if self.target is not None:
            return self.target
        overhead = max(0, overhead)
        return overhead + int((self.threshold - overhead) * TARGET_SHARE) if overhead < self.threshold else self.threshold

    @classmethod
    def for_window(cls, window: int, threshold: int | None = None, target: int | None = None) -> Thresholds:
        for name, value in (("context_window", window), ("threshold", threshold), ("target", target)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise UsageError(f"{name} must be a positive number of tokens, not {value!r}")
        threshold = threshold if threshold is not None else window - min(REPLY_RESERVE_MAX, int(window * REPLY_RESERVE_SHARE))
        if threshold > window or (target is not None and target >= threshold):
            shown = "the default" if target is None else f"{target:,}"
            raise UsageError(f"need 0 < target < threshold <= window, got {shown} / {threshold:,} / {window:,}")
        return cls(window, threshold, target)


class CompactedSession(Protocol):
    """What a ``Compactor`` reads and sets of its session (``Session`` is one): its
    history and settings, the view in force, what was last sent, and the policy's own
    state (the fallback rungs, whether it compacts where it bills least, the growth it
    measures from, the overflows since the last answer)."""

    workspace: Workspace
    conversation: str
    agent: str
    profile: Profile
    policy: CompactionPolicy
    summarizer: Summarizer | None
    recall_enabled: bool
    thresholds: Thresholds
    messages: tuple[Message, ...]
    last_compaction: Compaction | None
    _view: StoredView | None
    _fallback: CompactionPolicy | None
    _economic: bool
    _calls: int
    _grown_from: tuple[int, int] | None
    _overflows: int
    _sent: tuple[Message, ...] | None
    _sent_tools: tuple[dict[str, object], ...] | None

    @property
    def estimator(self) -> TextEstimator: ...

    def cost(self) -> CostModel: ...

    def estimate(self) -> int: ...

    def request_view(self) -> tuple[tuple[Message, ...], int]: ...

    def _after_view(self) -> int: ...

    def _compactable(self) -> tuple[Message, ...]: ...

    def _learn(self, sent: Sequence[Message], measured_tokens: int) -> None: ...

    def _learn_window(self, window: int) -> None: ...

    def _no_pending(self, what: str) -> None: ...

    def flush(self) -> None: ...


class Compactor:
    """The policy of one session: when its next request is compacted (``threshold``), to
    what (``target``), whether it pays (``pays``), elision batches below the threshold,
    ``compact``, ``shake`` and ``recover``. It reads and sets the session's state (its
    history, the view in force, the calibration, what was last sent)."""

    def __init__(self, session: CompactedSession):
        self.session = session

    @property
    def target(self) -> int:
        """What proactive compaction aims at now (``Thresholds.target_for`` the
        calibrated overhead; with recall on and no target given, at most the overhead,
        the verbatim head and ``RECALL_KEPT``)."""
        target = self.session.thresholds.target_for(self.session.estimator.overhead)
        if self.session._economic:
            # The head (the system prompt and the task, kept verbatim) and RECALL_KEPT more.
            head = self.session.cost().history(self.session.messages[: head_end(self.session.messages)])
            target = min(target, self.session.estimator.overhead + head + RECALL_KEPT)
        return target

    @property
    def threshold(self) -> int:
        """Where the next request is compacted first: the window's threshold, or with
        recall on and none given, the target and the room that bills least
        (``economic_room``) once the growth per call is known; never more than the
        window's threshold."""
        threshold = self.session.thresholds.threshold
        growth = self.growth()
        if not self.session._economic or growth is None:
            return threshold
        write, read = CACHE_PRICES[self.session.profile.reader.provider]
        target = self.target
        return min(threshold, target + max(economic_room(target - self.session.estimator.overhead, growth, write, read), 2 * int(growth)))

    def pays(self, estimate: int) -> bool:
        """Whether compacting a request of ``estimate`` tokens to the target pays back
        within half the calls made so far (``SUMMARY_TOKENS``), at the provider's prices."""
        provider = self.session.profile.reader.provider
        write, read = CACHE_PRICES[provider]
        target = self.target
        cost = write * target + read * estimate + OUTPUT_PRICES[provider] * SUMMARY_TOKENS
        calls_left = sum(1 for m in self.session.messages if m.role == "assistant") // 2
        return read * (estimate - target) * calls_left >= cost

    def growth(self) -> float | None:
        """Tokens a model call added to the request, on average, since the last
        compaction (None: fewer than ``GROWTH_CALLS`` calls measured)."""
        if self.session._grown_from is None:
            return None
        calls, tokens = self.session._grown_from
        made = self.session._calls - calls
        if made < GROWTH_CALLS:
            return None
        return max(0.0, (self.session.estimate() - tokens) / made)

    def policy_for(self, policy: CompactionPolicy | None = None) -> CompactionPolicy:
        policy = dataclasses.replace(policy or self.session.policy, estimator=self.session.estimator)
        if self.session._view is not None and self.session._view.shape and self.session.policy.shape is None:
            # Same geometry as the last compaction: unchanged text redraws to the same pages.
            return dataclasses.replace(policy, shape=self.session._view.shape, page_size=self.session._view.page_size)
        return policy

    def ladder(self, budget: int, limit: int | None = None) -> Compaction:
        """The ladder over the whole stored history (pages re-rendered from its text);
        ``limit``: what the tail cut, the last resort, gets it under. By default halfway
        from the budget (a proactive target, which the other rungs meet or not) up to
        the threshold: under the threshold, with room for the next turns (a cut just
        under it would compact, and rewrite the prompt cache, on every turn)."""
        if limit is None:
            threshold = self.session.thresholds.threshold
            limit = budget if budget >= threshold else (budget + threshold) // 2
        # The session's own cost model: every message is priced once, not at every compaction.
        cost = self.session.cost()
        # The request as it would go without compacting: the last one sent and what came
        # since (a summary request that continues it reads the sent part from the cache).
        view, prefix = self.session.request_view()
        sent = Sent(view, prefix, self.session._sent_tools)
        messages = self.session._compactable()
        policy = self.policy_for()
        if self.session._fallback is not None:
            # Pages that keep old results whole, when they fit without cutting a tail;
            # else the whole ladder (elision before any tail cut).
            result = compact(messages, self.session.profile, budget, summarizer=self.session.summarizer, policy=_without_tail_cut(policy), cost=cost, sent=sent)
            if result.report.fits:
                return result
            policy = self.policy_for(self.session._fallback)
        return compact(messages, self.session.profile, budget, summarizer=self.session.summarizer, policy=policy, cost=cost, sent=sent, limit=limit)

    def _batch(self) -> float | None:
        """The tokens an elision batch must free (``ELISION_BATCH_SHARE`` of the room the
        threshold leaves), or None where batches do not run."""
        # The default rungs for a reader with cheap pages skip elision at the threshold
        # (pages hold old results whole there); below it pages play no part, so batches
        # run unless the caller's own policy leaves elision out.
        # Where the session compacts where it bills least, that compaction elides too, and
        # sooner: a batch below it would only rewrite the cache once more.
        session = self.session
        if not session.recall_enabled or session._economic or "elision" not in (session._fallback or session.policy).rungs:
            return None
        return ELISION_BATCH_SHARE * max(1, session.thresholds.threshold - session.estimator.overhead)

    def whole_below(self) -> int:
        """Estimated tokens below which the next request goes whole, nothing built: no
        view in force (0 with one), under the threshold, and too little history for an
        elision batch (a batch frees at most the history it elides)."""
        if self.session._view is not None:
            return 0
        batch = self._batch()
        return self.threshold if batch is None else min(self.threshold, int(batch))

    def elide_batch(self) -> int:
        """With recall on (and elision among the rungs): the tool results that left the
        protected newest rounds since the view in force, elided once together they free
        ``ELISION_BATCH_SHARE`` of the room the threshold leaves and pay back the cache
        rewrite they cause within ``ELISION_PAYBACK_CALLS`` calls (or half the calls
        made so far, when fewer). The view then covers up to those rounds, so what is
        before them never changes until the next compaction (the prompt cache reads it)
        and the protected rounds are elided by a later batch. Returns how many results
        and arguments it elided (0: no batch yet)."""
        policy = self.policy_for()
        batch = self._batch()
        if batch is None:
            return 0
        tail = self.session.messages[self.session._after_view() :]
        # Never the newest round: the model has not read its results yet (a recall's answer
        # elided as it arrives would be asked for again).
        newest = max((i for i, m in enumerate(tail) if m.role == "assistant"), default=0)
        unprotected = min(protected_from(tail, policy.protect_turns), newest)
        cost = self.session.cost()
        if cost.history(tail[:unprotected]) < batch:
            return 0  # eliding all of it could not free a batch: not worth building the stubs (prices are cached)
        # The view ends before an assistant round, so each result's call is in the tail.
        result = elide(tail[:unprotected], cost, dataclasses.replace(policy, protect_turns=0))
        freed = result.report.tokens_before - result.report.tokens_after
        if freed < batch:
            return 0
        first = next(i for i, (old, new) in enumerate(zip(tail, result.view)) if old != new)
        rewritten = cost.history(result.view[first:]) + cost.history(tail[unprotected:])
        # A session's remaining calls are unknown; one that made few so far is taken to
        # have few left (a batch near the end of a short session would not pay back).
        calls_so_far = sum(1 for m in self.session.messages if m.role == "assistant")
        if freed * min(ELISION_PAYBACK_CALLS, calls_so_far // 2) < REWRITE_PER_READ * rewritten:
            return 0
        # The view in force grows by the batch; its pages, their text, range and geometry stay.
        previous = self.session._view or StoredView(covers="", messages=())
        messages = previous.messages + result.view
        view = dataclasses.replace(
            previous,
            covers=tail[unprotected - 1].id,
            messages=messages,
            tokens=cost.history(messages),
            trigger="elision",
            report=f"{result.report.changed:,} tool results and arguments elided below the threshold, ~{freed:,} tokens freed; recall brings each back",
        )
        self.session.flush()  # the view names stored messages: the transcript holds them first
        write_view(self.session.workspace, self.session.conversation, self.session.agent, view)
        self.session._view = view
        return result.report.changed

    def compact_to(self, budget: int, trigger: str) -> Compaction:
        result = self.ladder(budget)
        self.keep(result, trigger)
        return result

    def keep(self, result: Compaction, trigger: str) -> None:
        """Persist ``result`` as the view standing for the whole transcript so far (when
        a rung changed something: an unchanged view would only pin the prefix for nothing)."""
        self.session.last_compaction = result
        if not result.report.rungs or all(r.skipped is not None or not r.changed for r in result.report.rungs):
            return
        replaced = [r for r in result.report.rungs if r.first_message is not None and r.last_message is not None]
        source = None
        if replaced:
            compacted = self.session._compactable()  # what the rungs' message numbers count in
            first = min(r.first_message for r in replaced if r.first_message is not None)
            last = max(r.last_message for r in replaced if r.last_message is not None)
            source = (compacted[first - 1].id, compacted[last - 1].id)
        page = result.pages[0] if result.pages else None
        view = StoredView(
            covers=self.session.messages[-1].id,
            messages=tuple(result.view),
            source=source,
            shape=page.shape if page else (self.session._view.shape if self.session._view else None),
            page_size=(page.width, page.full_height) if page else (self.session._view.page_size if self.session._view else None),
            pages=len(result.pages) or sum(1 for m in result.view for b in m.content if isinstance(b, Image)),
            tokens=result.report.tokens_after,
            trigger=trigger,
            report=result.report.message,
            page_text=result.page_text,
        )
        self.session.flush()  # the view names stored messages: the transcript holds them first
        write_view(self.session.workspace, self.session.conversation, self.session.agent, view)
        self.session._view = view

    def compact(self, budget: int | None = None) -> Compaction:
        """Compact now, to ``budget`` (default: the target; the tail cut, last of the rungs,
        meets it), and keep it: only when it fits and is no larger than the request in
        force (an imported harness's compaction, an earlier one of glyphpack's); else what
        was in force stays, and the report's message says why."""
        self.session._no_pending("compact")
        budget = budget or self.target
        result = self.ladder(budget, limit=budget)  # asked for: the tail cut meets it (a proactive one stops halfway)
        in_force = self.session.estimate()
        report = result.report
        if report.fits and report.tokens_after <= in_force:
            self.keep(result, "/compact")
            return result
        why = ("it does not fit" if not report.fits else
               f"the request in force is smaller (~{in_force:,} tokens)")
        left = dataclasses.replace(report, message=f"{report.message}; not kept, {why}: the compaction in force stays")
        self.session.last_compaction = dataclasses.replace(result, report=left)
        return self.session.last_compaction

    def shake(self) -> Compaction:
        """Only the free rungs (reasoning drop, elision, image drop), kept as the view."""
        self.session._no_pending("shake")
        result = shake(self.session._compactable(), self.session.profile, policy=self.policy_for())
        self.keep(result, "/shake")
        return result

    def recover(self, error: BaseException | object, *, margin: float = DEFAULT_MARGIN) -> Compaction:
        """After the provider rejected the last request as too long: compact to fit,
        trusting the provider's count. A second rejection before an answer compacts
        harder with the summarizer; a third raises ``CompactionError``: it never loops.
        An error that is not "too long" is raised again as it is."""
        overflow = parse_overflow(error)
        if overflow is None:
            if isinstance(error, BaseException):
                raise error
            raise CompactionError(f"not a 'request too long' error: {str(error)[:200]!r}")
        if self.session._sent is None:
            raise UsageError("recover() follows a rejected request built by this session's request()")
        self.session._overflows += 1
        if self.session._overflows > 2:
            raise CompactionError(
                f"the provider rejected the request as too long {self.session._overflows} times in a row after compacting"
                + ("" if self.session.summarizer else "; with no summarizer configured there is no rung left")
                + f" ({str(error)[:200]})"
            )
        before = self.session.cost().history(self.session._sent) + self.session.estimator.overhead
        if overflow.kind == "bytes":

            def by_bytes(summarizer: Summarizer | None, tail_cut: bool = True) -> Compaction:
                policy = self.policy_for() if tail_cut else _without_tail_cut(self.policy_for())
                return recover_bytes_or_tokens(self.session._compactable(), self.session.profile, error, margin=margin, summarizer=summarizer, policy=policy)

            # With a summarizer, the free rungs first, then it (before the tail cut, as on the ladder).
            result = by_bytes(self.session.summarizer if self.session._overflows == 2 else None, tail_cut=self.session.summarizer is None or self.session._overflows == 2)
            if self.session._overflows == 1 and self.session.summarizer is not None and request_bytes(result.view) >= request_bytes(self.session._sent):
                # The free rungs freed no bytes (old results a reader must keep, say): go
                # straight to the summarizer, as the token path does, rather than send a
                # request the provider already refused (a proxy retries only once).
                self.session._overflows = 2
                result = by_bytes(self.session.summarizer)
            # Snapshots are no help here: a page's PNG, base64-encoded, takes more bytes than
            # the text it shows. What the free rungs, the summarizer and the tail cut freed is what there is.
            if request_bytes(result.view) >= request_bytes(self.session._sent):
                raise CompactionError(
                    "the request is too large in bytes and neither dropping images nor eliding old tool results "
                    "made it smaller" + ("" if self.session._overflows == 2 else "; a summarizer would: pass summarizer=...")
                )
            self.keep(result, "recovery")
            return result
        # Tokens: the rungs from the stored text, to the provider's limit less the margin
        # (half that on a second rejection, where the summarizer is there to reach it).
        if overflow.measured and self.session.policy.tokenizer is None:
            self.session._learn(self.session._sent, overflow.measured)
            before = self.session.cost().history(self.session._sent) + self.session.estimator.overhead  # on the scale the ladder now uses
        # The window, from now on: the provider's limit, or at most the refused request
        # (a wording without numbers), so the next turns compact before they reach it.
        self.session._learn_window(overflow.limit or before)
        budget = overflow_budget(overflow, before, margin, ESCALATION_SHARE if self.session._overflows == 2 else 1.0)
        result = self.ladder(budget, limit=budget)  # the provider's limit: the tail cut meets it
        if self.session._overflows == 1 and result.report.tokens_after >= before:
            if self.session.summarizer is None:
                raise CompactionError(
                    f"the ladder could not shrink the rejected request (~{before:,} tokens) and no summarizer is configured"
                )
            # No progress: the second step now, as the byte path does, rather than send a
            # request the provider already refused (a proxy retries only once).
            self.session._overflows = 2
            budget = overflow_budget(overflow, before, margin, ESCALATION_SHARE)
            result = self.ladder(budget, limit=budget)
        if result.report.tokens_after >= before:
            raise CompactionError(f"the ladder could not shrink the rejected request (~{before:,} tokens), even with the summarizer")
        self.keep(result, "recovery")
        return result
