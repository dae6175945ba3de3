"""Reactive compaction: recognize a provider's "too long" rejection and compact to fit,
trusting the provider's measured count over the local estimate."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence

from .._errors import CompactionError
from .._history.codec import message_to_json
from .._history.messages import Message
from .._providers.profile import Profile
from .._types import OVERFLOW_KINDS, OverflowKind, check_kind, public
from .._wire import REGISTRY
from .calibration import calibrated
from .cost import CostModel
from .ladder import LADDER, Climb, climb, compact, cost_model
from .results import Compaction, CompactionPolicy, LadderReport
from .summarize import Summarizer, as_summarizer

#: Aim this far under the provider's limit.
DEFAULT_MARGIN = 0.1
#: With no limit in the error, assume it is this share of the measured (or estimated) size.
UNKNOWN_LIMIT_SHARE = 0.8
#: After an HTTP 413, aim at this share of the rejected request's bytes (before the margin).
BYTES_TARGET_SHARE = 0.5
#: After a 413, the summarizer is asked for this share of the view's tokens.
BYTES_SUMMARY_SHARE = 0.5


#: The smallest context window a provider's error is believed to state (no model has less).
MIN_PLAUSIBLE_LIMIT = 1_000


@dataclasses.dataclass(frozen=True)
class Overflow:
    """A provider's "too long" rejection: ``kind`` is ``tokens`` or ``bytes``; the
    provider's measured size and limit when its message gave them."""

    kind: OverflowKind
    measured: int | None = None
    limit: int | None = None
    provider: str | None = None

    def __post_init__(self) -> None:
        check_kind(self.kind, OVERFLOW_KINDS, "an overflow's kind", CompactionError)
        # A count no provider gives (a context under MIN_PLAUSIBLE_LIMIT tokens, a
        # measured size at or under the limit) is taken as unknown, not trusted.
        if self.limit is not None and self.limit < MIN_PLAUSIBLE_LIMIT:
            object.__setattr__(self, "limit", None)
        if self.measured is not None and (self.measured < MIN_PLAUSIBLE_LIMIT or (self.limit and self.measured <= self.limit)):
            object.__setattr__(self, "measured", None)


#: Token-limit errors: the registered APIs' own, then those of services in front of
#: them (most specific first: OpenRouter's wording is a looser form of OpenAI's).
_TOKEN_PATTERNS = (
    *dict.fromkeys(pattern for api in REGISTRY.values() for pattern in api.overflow_patterns),
    # OpenRouter: "This endpoint's maximum context length is 200000 tokens. However, you requested about 250796 tokens"
    (
        "openrouter",
        re.compile(
            r"maximum context length is (?P<limit>\d+) tokens.*?requested (?:about )?(?P<measured>\d+) tokens", re.I | re.S
        ),
    ),
    # Mistral: "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length"
    (
        "mistral",
        re.compile(
            r"prompt contains (?P<measured>\d+) tokens.*?too large for model with (?P<limit>\d+) maximum context length",
            re.I | re.S,
        ),
    ),
)
_TOKEN_WORDINGS = (
    *dict.fromkeys(wording for api in REGISTRY.values() for wording in api.overflow_wordings),
    ("bedrock", re.compile(r"input is too long for requested model|too many input tokens", re.I)),
    ("litellm", re.compile(r"ContextWindowExceededError", re.I)),
)
# Byte limits are worded; a bare "413" in a message is not one (OpenAI's rate-limit
# errors end "Requested 413.": tokens per minute).
_BYTE_WORDINGS = re.compile(
    r"request_too_large|request entity too large|payload too large|exceeds the maximum allowed number of bytes"
    r"|request payload size exceeds the limit",
    re.I,
)
_RATE_LIMIT = re.compile(r"rate limit|rate_limit|tokens per min|\bTPM\b|requests per min", re.I)


def _shown(value: object) -> str:
    """``value`` as text to search: JSON where it is JSON-like, else its ``str``; a value
    that refers to itself, nests past what Python encodes, or whose ``str`` fails is
    shown by its type (an error answer is never a crash of its own)."""
    if isinstance(value, (dict, list)):
        try:
            return json.dumps(value, default=str)
        except (ValueError, TypeError, RecursionError):
            pass
    try:
        return str(value)
    except Exception:  # a caller's object whose __str__ raises: it is still an error to report
        return f"<{type(value).__name__}>"


@public
def parse_overflow(error: object) -> Overflow | None:
    """Recognize a provider's "request too long" error (an exception, its message, or
    its JSON body), or None if ``error`` is something else (a rate limit included).

    A measured count is the input's part when the error separates it from the
    completion's; an HTTP 413 is recognized from the status code or its wording, never
    from a number in the text."""
    status = getattr(error, "status_code", None) or getattr(error, "status", None) or getattr(error, "code", None)
    if isinstance(error, dict):
        text = _shown(error)
        status = status or error.get("status") or error.get("code")
    else:
        text = f"{type(error).__name__}: {_shown(error)}"
        body = getattr(error, "body", None)
        if body is not None:
            text += " " + _shown(body)
    if status == 413 or _BYTE_WORDINGS.search(text):
        return Overflow("bytes")
    if status == 429 or _RATE_LIMIT.search(text):
        return None
    for provider, pattern in _TOKEN_PATTERNS:
        match = pattern.search(text)
        if match:
            found = match.groupdict()
            measured = int(found["measured"])
            if found.get("context"):  # input + completion > context: the input may have context - completion
                limit: int | None = int(found["context"]) - int(found["completion"])
            else:
                limit = int(found["limit"]) if found.get("limit") else None
            return Overflow("tokens", measured, limit, provider)
    for provider, pattern in _TOKEN_WORDINGS:
        if pattern.search(text):
            return Overflow("tokens", provider=provider)
    return None


def overflow_budget(overflow: Overflow, estimate: int, margin: float, share: float = 1.0) -> int:
    """The tokens to compact to after a token overflow: ``(1 - margin)`` of the provider's
    limit, or, when the error gave none, of ``UNKNOWN_LIMIT_SHARE`` of what it measured
    (else of ``estimate``); times ``share`` (a second rejection aims lower)."""
    limit = overflow.limit or int((overflow.measured or estimate) * UNKNOWN_LIMIT_SHARE)
    return max(1, int(limit * (1 - margin) * share))


def request_bytes(messages: Sequence[Message]) -> int:
    """About how many bytes a request carrying ``messages`` is (images base64-encoded)."""
    return sum(len(json.dumps(message_to_json(m), ensure_ascii=False).encode("utf-8", "surrogatepass")) for m in messages)


@public
def recover(
    history: Sequence[Message],
    profile: Profile | str,
    error: object,
    *,
    margin: float = DEFAULT_MARGIN,
    summarizer: Summarizer | Callable[[str], str] | None = None,
    policy: CompactionPolicy = CompactionPolicy(),
) -> Compaction:
    """Reactive compaction after the provider rejected ``history`` as too long.

    Token overflows: the provider's measured count is trusted over the local
    estimate (``calibrate`` gives the estimator the overhead that matches it), and the ladder aims at
    ``(1 - margin)`` of the provider's limit. An HTTP 413 needs fewer bytes, not fewer
    tokens: images go first, then large results, then (if still too large) the middle
    is summarized, aiming at ``(1 - margin)`` of half the rejected size.
    """
    overflow = parse_overflow(error)
    if overflow is None:
        raise CompactionError(f"not a 'request too long' error: {_shown(error)[:200]!r}")
    summarizer = as_summarizer(summarizer)
    cost = cost_model(profile, policy)
    if overflow.kind == "bytes":
        return _recover_bytes(history, cost, margin, summarizer, policy)
    estimate = cost.history(history) + cost.estimator.overhead
    if overflow.measured and policy.tokenizer is None:
        policy = dataclasses.replace(policy, estimator=calibrated(cost, history, overflow.measured))
    result = compact(history, cost.profile, overflow_budget(overflow, estimate, margin), summarizer=summarizer, policy=policy)
    note = f"recovered from a {overflow.provider or 'provider'} token overflow" + (
        f" ({overflow.measured:,} > {overflow.limit:,} measured by the provider)" if overflow.measured and overflow.limit else ""
    )
    return dataclasses.replace(result, report=dataclasses.replace(result.report, message=f"{note}; {result.report.message}"))


def _recover_bytes(
    history: Sequence[Message], cost: CostModel, margin: float, summarizer: Summarizer | None, policy: CompactionPolicy
) -> Compaction:
    """The ladder's rungs that free bytes, every image first (images are most of a
    request's bytes), until the request is ``BYTES_TARGET_SHARE`` of its size less the
    margin; the summary (with a summarizer) and then the tail cut aim at
    ``BYTES_SUMMARY_SHARE`` of the tokens the free rungs left."""
    started_bytes = request_bytes(history)
    target = int(started_bytes * BYTES_TARGET_SHARE * (1 - margin))
    before = cost.history(history)
    steps = sorted((step for step in LADDER if step.frees_bytes), key=lambda step: not step.bytes_first)
    # The free rungs whatever the policy says (a 413 must shed bytes); the others as it
    # allows, the summary only with a summarizer.
    free = [s for s in steps if s.shake]
    paid = [s for s in steps if not s.shake and s.rung in policy.rungs and (summarizer is not None or s.rung != "summarization")]

    def small_enough(view: Sequence[Message]) -> bool:
        return request_bytes(view) <= target

    view, rungs, _, _ = climb(history, free, Climb(cost, 0, policy, every_image=True), small_enough)
    # The summary (with a summarizer), then the tail cut; climb stops before the first
    # step when the free rungs were enough.
    budget = max(1, int(cost.history(view) * BYTES_SUMMARY_SHARE))
    view, paid_reports, _, _ = climb(view, paid, Climb(cost, budget, policy, summarizer, pages=False), small_enough)
    rungs += paid_reports
    final = request_bytes(view)
    ok = final <= target
    message = f"recovered from an HTTP 413: request {started_bytes:,} -> {final:,} bytes (target {target:,})" + (
        "" if ok else "; still over the target" + ("" if summarizer else " (a summarizer would free more)")
    )
    after = cost.history(view)
    return Compaction(view=view, report=LadderReport(budget=after, tokens_before=before, tokens_after=after, fits=ok, rungs=tuple(rungs), message=message))
