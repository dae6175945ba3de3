"""The last rung: a caller-supplied summarizer condenses the middle, in chunks that fit
its own window (so it works right after an overflow)."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from .._errors import CompactionError, UsageError
from .._history.messages import Message, Text, turn_boundaries
from .._history.recall import recall_hint, short_range_ref
from .._types import public
from .cost import CostModel
from .results import CompactionPolicy, RungReport, RungResult
from .snapshot import head_end, serialize_message, tail_cuts

#: The summary gets at least this many tokens of the budget ...
SUMMARY_MIN_TOKENS = 200
#: ... and at most this share of it (and at most the summarizer's output reserve).
SUMMARY_MAX_SHARE = 0.2
#: The least room for transcript a summarizer's window must leave, in tokens.
SUMMARIZER_MIN_ROOM = 256
#: Tokens kept free in each summarizer prompt for the estimate's error.
SUMMARIZER_PROMPT_SLACK = 64
#: Summaries of summaries, at most.
SUMMARY_MAX_LEVELS = 3
#: How much a too-long piece of one huge message shrinks per try.
CHUNK_SHRINK = 0.9


@public
@dataclasses.dataclass(frozen=True)
class Sent:
    """The conversation as the next request would carry it without compacting (the last
    request sent and what came since): its ``messages``, how many of them are the stored
    compaction (``prefix``), and the tools the last request offered (``tools``: the
    API's tool definitions, None: none). A summary request that repeats them and adds
    one message reads the part already sent from the provider's prompt cache."""

    messages: tuple[Message, ...]
    prefix: int = 0
    tools: tuple[dict[str, object], ...] | None = None


@public
@dataclasses.dataclass(frozen=True)
class Summarizer:
    """A caller's summarizing model: ``fn(prompt) -> summary``, whose own window is
    ``window`` tokens. glyphpack makes no network call; ``fn`` does.

    ``continues`` (optional): ``continues(sent, instruction) -> summary``, a summary
    request that continues the conversation (``Sent``) with one more user message, the
    instruction: the provider reads what was sent before from its prompt cache (a fresh
    prompt is billed whole). It answers "" when it cannot; without it, or without a
    conversation that holds the range, ``fn`` gets the range as text."""

    fn: Callable[[str], str]
    window: int = 100_000
    output_reserve: int = 4_000
    instructions: str = (
        "Summarize this part of an agent's conversation for the agent itself to continue the work. "
        "Keep the task, the decisions and why, file paths, commands, errors and their fixes, and what "
        "is still open. Be concise.\n\n"
    )
    continues: Callable[[Sent, str], str] | None = None


class SummarizerFailed(CompactionError):
    """The summarizer's own call failed (a provider's 429, 529 or 401, a network error, an
    answer with no text, a bug in a caller's function): the summarization rung is then
    reported skipped, and the request goes as the cheaper rungs left it. A summary is a
    side request: its failure must never fail the request it serves."""


def _asked(ask: Callable[[], str], what: str) -> str:
    """``ask()``'s summary; any exception it raises as ``SummarizerFailed`` naming its
    type and the start of its message (never a traceback through the caller's request)."""
    try:
        return ask()
    except Exception as exc:  # a caller's function or an SDK: whatever it raises, the request goes on
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise SummarizerFailed(f"{what} failed: {type(exc).__name__}" + (f": {detail}" if detail else "")) from exc


@runtime_checkable
class Billed(Protocol):
    """A summarizer function that counts what its provider billed (``sdk_summarizer``'s)."""

    billed_input: int
    billed_output: int


def as_summarizer(value: object) -> Summarizer | None:
    """A ``summarizer=`` argument as a ``Summarizer``: one as it is, a plain function
    ``fn(prompt) -> summary`` (the natural first try) wrapped with the default window, None
    as None; anything else a ``UsageError`` naming its type."""
    if value is None or isinstance(value, Summarizer):
        return value
    if callable(value):
        return Summarizer(value)
    raise UsageError(
        "summarizer must be a glyphpack.Summarizer, a function taking the prompt and returning the summary "
        f"(or, for a session, a model id), not {type(value).__name__}"
    )


def _billed(summarizer: Summarizer) -> tuple[int, int]:
    fn = summarizer.fn
    return (fn.billed_input, fn.billed_output) if isinstance(fn, Billed) else (0, 0)


def chunks(texts: list[str], cost: CostModel, limit: int) -> list[str]:
    """Pack message texts into chunks of at most ``limit`` estimated tokens (a text
    too long alone is cut by characters)."""
    out: list[str] = []
    current: list[str] = []
    current_tokens = 0
    for text in texts:
        tokens = cost.text(text)
        # A single huge message: cut into pieces that fit (until none is left, should an
        # exact tokenizer's counts of the pieces add up to less than the whole's).
        while text and tokens > limit:
            take = max(1, int(len(text) * limit / tokens))
            while take > 1 and cost.text(text[:take]) > limit:
                take = max(1, int(take * CHUNK_SHRINK))  # the text's density varies: shrink until it fits
            piece_tokens = cost.text(text[:take])
            out.append(text[:take])
            text = text[take:]
            tokens -= piece_tokens  # estimates add up over pieces, so no re-estimate of the rest
        if not text:  # the pieces took it all (a character alone over the limit)
            continue
        if current and current_tokens + tokens > limit:
            out.append("".join(current))
            current, current_tokens = [], 0
        current.append(text)
        current_tokens += tokens
    if current:
        out.append("".join(current))
    return out


def summarize(
    messages: Sequence[Message],
    cost: CostModel,
    budget: int,
    summarizer: Summarizer,
    tail_tokens: int | None = None,
    sent: Sent | None = None,
) -> RungResult:
    """Head and tail verbatim, the middle replaced by the summarizer's summary. The
    tail keeps the newest work (``tail_cuts``; ``tail_tokens`` None: the default
    policy's ``tail_for(budget)``) even when the budget cannot hold it.

    The middle is sent in chunks that fit the summarizer's own window; summaries of
    chunks are summarized again, at most ``SUMMARY_MAX_LEVELS`` deep, until they fit
    the room left in the budget. With ``sent`` and a summarizer that ``continues``, one
    request continues that conversation instead (``continued_summary``).
    """
    started = time.perf_counter()
    before = cost.history(messages)
    head = head_end(messages)
    costs = [cost.message(m) for m in messages]
    cuts = tail_cuts(
        messages,
        [t for t in turn_boundaries(messages) if t > head],
        costs,
        CompactionPolicy().tail_for(budget) if tail_tokens is None else tail_tokens,
    )
    if not cuts:
        report = RungReport(rung="summarization", tokens_before=before, tokens_after=before, seconds=time.perf_counter() - started, skipped="nothing to summarize")
        return RungResult(tuple(messages), report)
    head_cost = sum(costs[:head])
    allowance = summary_allowance(summarizer, budget)
    t = next((t for t in cuts if head_cost + allowance + sum(costs[t:]) <= budget), cuts[-1])
    return _summarized(messages, head, t, cost, summarizer, allowance, started, sent)


def summary_allowance(summarizer: Summarizer, budget: int) -> int:
    """The tokens of the budget a summary may take."""
    return max(SUMMARY_MIN_TOKENS, min(summarizer.output_reserve, int(budget * SUMMARY_MAX_SHARE)))


def continued_instruction(messages: Sequence[Message], head: int, t: int, sent: Sent, summarizer: Summarizer) -> str | None:
    """The one user message that asks a model to summarize ``messages[head:t]`` by
    continuing ``sent`` (the conversation as last sent): what to keep (the task before
    the range, the newest turns after it) and, as text, the range's messages the sent
    conversation does not hold yet. None when it cannot say: the sent conversation's
    last message is not in ``messages`` (another history), or the range ends before it
    begins to hold its messages verbatim."""
    where = {m.id: n for n, m in enumerate(messages)}
    last = where.get(sent.messages[-1].id) if sent.messages else None
    if last is None:
        return None
    unsent = messages[max(head, last + 1) : t]
    keep = serialize_message(messages[t]).strip().replace("\n", " ")[:120] if t < len(messages) else ""
    parts = [
        summarizer.instructions.strip(),
        "Summarize the conversation above, from after the task at its start, for the agent to continue the work "
        "from your summary: it will stand in place of those messages.",
    ]
    if keep:
        parts.append(f"The newest turns, from the message that begins {keep!r}, stay as they are after your summary: leave them out.")
    if unsent:
        parts.append("Include these newer messages too:\n\n" + "".join(serialize_message(m) for m in unsent))
    parts.append("Answer with the summary only, as text: no tool calls.")
    return "\n\n".join(parts)


def continued_summary(messages: Sequence[Message], head: int, t: int, cost: CostModel, summarizer: Summarizer, sent: Sent | None) -> str | None:
    """The summary of ``messages[head:t]`` from one request that continues ``sent``, or
    None when it cannot be asked that way (no ``continues``, no conversation, an
    instruction it cannot write, or a request larger than the summarizer's window) or
    the answer had no text."""
    if summarizer.continues is None or sent is None:
        return None
    instruction = continued_instruction(messages, head, t, sent, summarizer)
    if instruction is None:
        return None
    tokens = cost.history(sent.messages) + cost.estimator.overhead + cost.text(instruction) + SUMMARIZER_PROMPT_SLACK
    if tokens + summarizer.output_reserve > summarizer.window:
        return None
    continues = summarizer.continues
    summary = _asked(lambda: continues(sent, instruction), "the summary request that continues the conversation").strip()
    return summary or None


def _summarized(
    messages: Sequence[Message],
    head: int,
    t: int,
    cost: CostModel,
    summarizer: Summarizer,
    allowance: int,
    started: float,
    sent: Sent | None = None,
) -> RungResult:
    """``messages`` with ``messages[head:t]`` replaced by the summarizer's summary (a
    user message naming the range's recall ref)."""
    before = cost.history(messages)
    limit = summarizer.window - summarizer.output_reserve - cost.text(summarizer.instructions) - SUMMARIZER_PROMPT_SLACK
    if limit < SUMMARIZER_MIN_ROOM:
        raise CompactionError(f"a summarizer window of {summarizer.window:,} tokens leaves no room for the transcript")
    billed_before = _billed(summarizer)
    continued = continued_summary(messages, head, t, cost, summarizer, sent)
    calls = 1 if continued is not None else 0
    texts = [continued] if continued is not None else [serialize_message(m) for m in messages[head:t]]
    for _ in range(SUMMARY_MAX_LEVELS if continued is None else 0):
        summaries = []
        for chunk in chunks(texts, cost, limit):
            prompt = summarizer.instructions + chunk
            summaries.append(_asked(lambda: summarizer.fn(prompt), "the summary request"))  # noqa: B023 (called at once)
            calls += 1
        texts = [s.strip() + "\n" for s in summaries]
        if len(texts) == 1 or cost.text("".join(texts)) <= allowance:
            break
    summary = "".join(texts).strip()
    digest = hashlib.sha256(summary.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    stands_for = recall_hint(short_range_ref(messages, head, t - 1))
    note = Message("user", (Text(f"[glyphpack summary of messages {head + 1}-{t}, {stands_for}]\n{summary}"),), id=f"summary-{digest}")
    view = (*messages[:head], note, *messages[t:])
    report = RungReport.replaced_middle(
        "summarization",
        before,
        cost.history(view),
        messages,
        head,
        t,
        started,
        summary_tokens=cost.text(summary),
        summarizer_calls=calls,
        summarizer_input_tokens=_billed(summarizer)[0] - billed_before[0],
        summarizer_output_tokens=_billed(summarizer)[1] - billed_before[1],
    )
    return RungResult(view, report)


def summarize_then_page(
    messages: Sequence[Message], cost: CostModel, budget: int, summarizer: Summarizer, policy: CompactionPolicy, sent: Sent | None = None
) -> RungResult | None:
    """When the whole middle cannot go on pages (the budget, or the reader's image
    limit): the newest part of the middle on as many pages as fit, and only the oldest
    remainder summarized (behind its recall ref), rather than the whole middle. The
    split is the earliest turn boundary from which a snapshot of the rest fits the
    budget less the summary's allowance, priced from the pages' layout (nothing drawn
    but the chosen pages). None when no split leaves room for a page: the caller then
    summarizes the whole middle."""
    from .snapshot import fits_as_pages, snapshot

    if not cost.profile.vision or "snapshot" not in policy.rungs:
        return None
    started = time.perf_counter()
    head = head_end(messages)
    costs = [cost.message(m) for m in messages]
    cuts = tail_cuts(messages, [t for t in turn_boundaries(messages) if t > head], costs, policy.tail_for(budget))
    splits = [s for s in cuts if s < cuts[-1]] if cuts else []
    allowance = summary_allowance(summarizer, budget)

    def pages_fit(split: int) -> bool:
        return fits_as_pages((*messages[:head], *messages[split:]), cost, budget - allowance, policy)

    # The earliest split that fits (more split off, fewer pages needed: fits grows with it).
    low, high = 0, len(splits)
    while low < high:
        middle = (low + high) // 2
        if pages_fit(splits[middle]):
            high = middle
        else:
            low = middle + 1
    if low == len(splits):
        return None
    summarized = _summarized(messages, head, splits[low], cost, summarizer, allowance, started, sent)
    paged = snapshot(summarized.view, cost, budget, policy, head=head + 1)
    if paged.report.skipped is not None:  # the summary came out longer than its allowance
        return None
    report = dataclasses.replace(
        summarized.report, tokens_after=paged.report.tokens_after, seconds=time.perf_counter() - started,
        note=f"the middle did not fit as pages: its oldest {splits[low] - head} messages summarized, "
        f"the {paged.report.changed} after them on {paged.report.pages} pages",
    )  # fmt: skip
    return RungResult(paged.view, report, paged.pages, paged.page_text, also=(paged.report,))
