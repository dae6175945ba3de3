"""The compaction ladder: free context cheapest-first.

Rungs, each run only if the ones before did not free enough:

    elision        old, large, unremarkable tool results become one-line stubs (free)
    image drop     old images become one-line stubs (free)
    snapshots      head verbatim, the middle rendered to page images, tail verbatim
                   (free; readers with vision only)
    summarization  a caller-supplied summarizer condenses the middle (one model call
                   per chunk; readers without vision always get this instead)

Every rung takes a history and returns a new view and a report; the stored history is
never changed. Snapshot pages are rendered from the history's text on every pass, and
the serialization of each message does not depend on where the middle ends, so pages
before the first changed character are byte-identical between passes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
import time
from collections.abc import Callable, Sequence
from functools import lru_cache

from ._errors import GlyphpackError
from ._messages import Image, Message, Text, Thinking, ToolCall, ToolResult, turn_boundaries
from ._providers import Profile, resolve
from ._tokens import DEFAULT_ESTIMATOR, MESSAGE_OVERHEAD, TextEstimator, block_tokens, message_tokens

#: Characters kept from each end of a long tool result in a snapshot.
SNAPSHOT_RESULT_CAP = 4000
#: Tokens assumed for an image whose size or price is unknown.
UNKNOWN_IMAGE_TOKENS = 1568
_DATA_URL = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]{64,}")


class CompactionError(GlyphpackError):
    """Compaction was asked for something it cannot do (a bad budget or error)."""


# ------------------------------------------------------------------------------ costs


@lru_cache(maxsize=4096)
def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) of image bytes, read from the header only."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as image:
            return image.size
    except Exception:  # an unreadable image still costs something: price it as a full page
        return (1568, 784)


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Estimated tokens of messages for one reader.

    Text goes through ``tokenizer`` when the caller has an exact one, else the
    per-script ``estimator``; images count the tokens they take in the reader's
    context (exact from the profile), which is what a budget limits.
    """

    profile: Profile
    estimator: TextEstimator = DEFAULT_ESTIMATOR
    tokenizer: Callable[[str], int] | None = None
    # id(message) -> (message, tokens): the ladder prices the same messages many
    # times; holding the message keeps its id from being reused.
    _memo: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def text(self, text: str) -> int:
        if not text:
            return 0
        return self.tokenizer(text) if self.tokenizer is not None else self.estimator.estimate(text)

    def image(self, block: Image) -> int:
        # A referenced image's size is unknown, and a text-only reader cannot take
        # images at all: both are priced as a full standard page until dropped.
        if block.data is None or not self.profile.vision:
            return UNKNOWN_IMAGE_TOKENS
        return self.profile.context_tokens(*image_size(block.data))

    def block(self, block) -> int:
        return block_tokens(block, self.text, self.image)

    def message(self, message: Message) -> int:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        tokens = message_tokens(message, self.text, self.image)
        self._memo[id(message)] = (message, tokens)
        return tokens

    def history(self, messages: Sequence[Message]) -> int:
        return sum(self.message(m) for m in messages)

    def breakdown(self, messages: Sequence[Message]) -> dict[str, int]:
        """Tokens per category: system, user, assistant, thinking, tool calls, tool
        results, images."""
        out = dict.fromkeys(("system", "user", "assistant", "thinking", "tool calls", "tool results", "images"), 0)
        for message in messages:
            out["system" if message.role == "system" else "user" if message.role == "user" else "assistant"] += MESSAGE_OVERHEAD
            for block in message.content:
                if isinstance(block, Image):
                    out["images"] += self.image(block)
                elif isinstance(block, ToolResult):
                    images = sum(self.image(b) for b in block.content if isinstance(b, Image))
                    out["images"] += images
                    out["tool results"] += self.block(block) - images
                elif isinstance(block, ToolCall):
                    out["tool calls"] += self.block(block)
                elif isinstance(block, Thinking):
                    out["thinking"] += self.block(block)
                elif message.role in ("system", "user", "assistant"):
                    out[message.role] += self.block(block)
                else:
                    out["tool results"] += self.block(block)
        return out


# ----------------------------------------------------------------------------- reports


@dataclasses.dataclass(frozen=True)
class RungReport:
    """What one rung did: tokens before and after, how many things it changed, and how."""

    rung: str
    tokens_before: int
    tokens_after: int
    changed: int
    seconds: float
    details: str = ""
    pages: int = 0

    @property
    def freed(self) -> int:
        return self.tokens_before - self.tokens_after


@dataclasses.dataclass(frozen=True)
class LadderReport:
    budget: int
    tokens_before: int
    tokens_after: int
    fits: bool
    rungs: tuple = ()
    message: str = ""

    def lines(self) -> list[str]:
        out = [f"{'rung':<14} {'before':>10} {'after':>10} {'freed':>10} {'changed':>8} {'pages':>6} {'seconds':>8}  details"]
        for r in self.rungs:
            out.append(
                f"{r.rung:<14} {r.tokens_before:>10,} {r.tokens_after:>10,} {r.freed:>10,} {r.changed:>8,} "
                f"{r.pages:>6} {r.seconds:>8.3f}  {r.details}"
            )
        out.append(self.message)
        return out


@dataclasses.dataclass(frozen=True)
class Compaction:
    """A view to send instead of the stored history, and how it was made."""

    view: tuple
    report: LadderReport
    pages: tuple = ()  # snapshot pages, also present in the view as Image blocks


# ------------------------------------------------------------------------------ helpers


def _protected_from(messages: Sequence[Message], protect_turns: int) -> int:
    """Index of the first message in the last ``protect_turns`` user turns."""
    if protect_turns <= 0:
        return len(messages)
    user_starts = [i for i, m in enumerate(messages) if m.role == "user"]
    if len(user_starts) < protect_turns:
        return 0
    return user_starts[-protect_turns]


def _call_names(messages: Sequence[Message]) -> dict[str, ToolCall]:
    return {c.id: c for m in messages for c in m.tool_calls}


def _short(arguments: dict, width: int = 60) -> str:
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def _image_stub(block: Image) -> Text:
    if block.data is None:
        return Text(f"[image dropped by glyphpack: {block.media_type}, {block.ref}]")
    width, height = image_size(block.data)
    return Text(f"[image dropped by glyphpack: {block.media_type}, {width}x{height}, {len(block.data):,} bytes]")


def _replace(message: Message, content: tuple) -> Message:
    return dataclasses.replace(message, content=content)


# ------------------------------------------------------------------------------- rungs


def elide(
    messages: Sequence[Message],
    cost: CostModel,
    *,
    protect_turns: int = 2,
    min_chars: int = 1000,
    remarkable: Callable[[ToolResult, ToolCall | None], bool] | None = None,
) -> tuple[list[Message], RungReport]:
    """Old tool results (outside the last ``protect_turns`` turns) longer than
    ``min_chars`` become a one-line stub, unless remarkable: errors always are, and
    ``remarkable(result, call)`` may say so of others."""
    started = time.perf_counter()
    before = cost.history(messages)
    calls = _call_names(messages)
    protected = _protected_from(messages, protect_turns)
    out, changed = [], 0
    for index, message in enumerate(messages):
        if index >= protected or not message.tool_results:
            out.append(message)
            continue
        content = []
        for block in message.content:
            if isinstance(block, ToolResult):
                text = "\n".join(b.text for b in block.content if isinstance(b, Text))
                call = calls.get(block.call_id)
                keep = block.is_error or len(text) < min_chars or (remarkable is not None and remarkable(block, call))
                if not keep:
                    described = f"{call.name}({_short(call.arguments)})" if call else "a tool call"
                    stub = Text(f"[elided by glyphpack: result of {described}, {len(text):,} chars, {text.count(chr(10)) + 1:,} lines]")
                    others = tuple(b for b in block.content if not isinstance(b, Text))
                    block = dataclasses.replace(block, content=(stub,) + others)
                    changed += 1
            content.append(block)
        out.append(_replace(message, tuple(content)))
    after = cost.history(out)
    report = RungReport("elision", before, after, changed, time.perf_counter() - started, f"{changed} tool results elided")
    return out, report


def drop_images(
    messages: Sequence[Message], cost: CostModel, *, protect_turns: int = 2
) -> tuple[list[Message], RungReport]:
    """Old images (outside the last ``protect_turns`` turns) become a one-line stub;
    with ``protect_turns=0`` every image does."""
    started = time.perf_counter()
    before = cost.history(messages)
    protected = _protected_from(messages, protect_turns)
    out, changed = [], 0

    def strip(blocks: tuple) -> tuple:
        nonlocal changed
        result = []
        for block in blocks:
            if isinstance(block, Image):
                result.append(_image_stub(block))
                changed += 1
            elif isinstance(block, ToolResult):
                result.append(dataclasses.replace(block, content=strip(block.content)))
            else:
                result.append(block)
        return tuple(result)

    for index, message in enumerate(messages):
        out.append(message if index >= protected else _replace(message, strip(message.content)))
    after = cost.history(out)
    return out, RungReport("image drop", before, after, changed, time.perf_counter() - started, f"{changed} images dropped")


def serialize_message(message: Message, result_cap: int = SNAPSHOT_RESULT_CAP) -> str:
    """One message as snapshot text: role-marked blocks, long results head/tail-capped,
    data URLs and images replaced by stubs, thinking left out. Independent of the
    messages around it, so a growing middle keeps its earlier text unchanged."""
    parts = []
    for block in message.content:
        if isinstance(block, Text):
            parts.append(f"[{message.role}] {_DATA_URL.sub('[data URL elided]', block.text)}")
        elif isinstance(block, ToolCall):
            parts.append(f"[tool call {block.name} #{block.id}] {json.dumps(block.arguments, ensure_ascii=False)}")
        elif isinstance(block, ToolResult):
            text = _DATA_URL.sub("[data URL elided]", "\n".join(b.text for b in block.content if isinstance(b, Text)))
            if len(text) > 2 * result_cap:
                cut = len(text) - 2 * result_cap
                text = f"{text[:result_cap]}\n[... {cut:,} chars cut by glyphpack ...]\n{text[-result_cap:]}"
            images = sum(isinstance(b, Image) for b in block.content)
            label = "tool error" if block.is_error else "tool result"
            parts.append(f"[{label} #{block.call_id}] {text}" + (f" [+{images} image(s) not shown]" if images else ""))
        elif isinstance(block, Image):
            parts.append(f"[{message.role}] [image {block.media_type}, {len(block.data or b''):,} bytes, not shown]")
    return "\n".join(parts) + "\n"


def _head_end(messages: Sequence[Message]) -> int:
    """End of the verbatim head: leading system messages and the first user message."""
    for index, message in enumerate(messages):
        if message.role == "user":
            return index + 1
    return len(messages)


def snapshot(
    messages: Sequence[Message],
    cost: CostModel,
    budget: int,
    *,
    layout: str = "flow",
    shape=None,
) -> tuple[list[Message], RungReport, list]:
    """Head verbatim, the middle as page images, the newest turns that fit verbatim.

    Cuts fall only at turn boundaries. Returns (view, report, pages); the view is the
    input unchanged when no cut fits the budget or the reader has no vision.
    """
    from ._render import render
    from ._shapes import get_shape

    started = time.perf_counter()
    before = cost.history(messages)
    profile = cost.profile

    def unchanged(reason: str):
        return list(messages), RungReport("snapshot", before, before, 0, time.perf_counter() - started, reason), []

    if not profile.vision:
        return unchanged("skipped: the reader has no vision")
    head = _head_end(messages)
    cuts = [t for t in turn_boundaries(messages) if t > head]
    if not cuts:
        return unchanged("skipped: nothing between the head and the tail")
    texts = [serialize_message(m) for m in messages[head:]]
    costs = [cost.message(m) for m in messages]
    head_cost = sum(costs[:head])
    tail_cost = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        tail_cost[i] = tail_cost[i + 1] + costs[i]
    prefix_chars = [0]
    for text in texts:
        prefix_chars.append(prefix_chars[-1] + len(text))
    # Price the middle from one full page of the reader's geometry (exactly checked
    # after rendering; this only orders the search).
    page_shape = get_shape(shape)
    page_width, page_height = profile.page_size(page_shape)
    cols, rows_per_page = page_width // page_shape.advance, page_height // page_shape.pitch
    full_page_tokens = profile.context_tokens(page_width, page_height)

    def pages_tokens(chars: int) -> int:
        """Tokens of the pages for ``chars`` flowed characters: full pages, then a last
        page as tall as its rows (the way ``render`` crops it)."""
        full, rest = divmod(chars, cols * rows_per_page)
        tokens = full * full_page_tokens
        if rest:
            tokens += profile.context_tokens(page_width, -(-rest // cols) * page_shape.pitch)
        return tokens

    images_from = [0] * (len(messages) + 1)  # images in messages[t:], for the per-request limit
    for i in range(len(messages) - 1, -1, -1):
        images_from[i] = images_from[i + 1] + len(messages[i].images)
    header_cost = 100
    correction = 0  # how far the estimate fell short on the last render: raised as renders teach
    renders = 0
    for t in cuts:  # smallest t first: the largest verbatim tail
        chars = prefix_chars[t - head]
        approx = head_cost + header_cost + pages_tokens(chars) + tail_cost[t]
        if approx + correction > budget:
            continue
        renders += 1
        middle_text = "".join(texts[: t - head])
        pages = render(middle_text, model=profile, shape=shape, layout=layout, max_pages=100_000)
        if profile.max_images is not None and len(pages) + images_from[t] > profile.max_images:
            continue
        digest = hashlib.sha256(middle_text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        header = Text(
            f"[glyphpack snapshot] Messages {head + 1}-{t} of this conversation ({len(middle_text):,} characters) "
            f"follow as {len(pages)} page image(s) of small bitmap text, oldest first. Lines start with the role: "
            f"[user], [assistant], [tool call NAME #ID], [tool result #ID], [tool error #ID]; the return-arrow "
            f"glyph marks a line break."
        )
        blocks = (header,) + tuple(Image("image/png", p.png) for p in pages)
        view = list(messages[:head]) + [Message("user", blocks, id=f"snapshot-{digest}")] + list(messages[t:])
        after = cost.history(view)
        if after <= budget:
            report = RungReport(
                "snapshot",
                before,
                after,
                t - head,
                time.perf_counter() - started,
                f"messages {head + 1}-{t} ({len(middle_text):,} chars, ~{cost.text(middle_text):,} text tokens) "
                f"-> {len(pages)} pages, {sum(profile.context_tokens(p.width, p.height) for p in pages):,} image tokens",
                len(pages),
            )
            return view, report, list(pages)
        correction = max(correction, after - approx)
        if renders >= 8:
            break
    return unchanged(f"no cut fits {budget:,} tokens with the middle as pages")


@dataclasses.dataclass(frozen=True)
class Summarizer:
    """A caller's summarizing model: ``fn(prompt) -> summary``, whose own window is
    ``window`` tokens. glyphpack makes no network call; ``fn`` does."""

    fn: Callable[[str], str]
    window: int = 100_000
    output_reserve: int = 4_000
    instructions: str = (
        "Summarize this part of an agent's conversation for the agent itself to continue the work. "
        "Keep the task, the decisions and why, file paths, commands, errors and their fixes, and what "
        "is still open. Be concise.\n\n"
    )


def _chunks(texts: list[str], cost: CostModel, limit: int) -> list[str]:
    """Pack message texts into chunks of at most ``limit`` estimated tokens (a text
    too long alone is cut by characters)."""
    chunks, current, current_tokens = [], [], 0
    for text in texts:
        tokens = cost.text(text)
        while tokens > limit:  # a single huge message: cut it into pieces that fit
            take = max(1, int(len(text) * limit / tokens))
            while take > 1 and cost.text(text[:take]) > limit:
                take = max(1, int(take * 0.9))  # the text's density varies: shrink until it fits
            piece_tokens = cost.text(text[:take])
            chunks.append(text[:take])
            text = text[take:]
            tokens -= piece_tokens  # estimates add up over pieces, so no re-estimate of the rest
        if current and current_tokens + tokens > limit:
            chunks.append("".join(current))
            current, current_tokens = [], 0
        current.append(text)
        current_tokens += tokens
    if current:
        chunks.append("".join(current))
    return chunks


def summarize(
    messages: Sequence[Message],
    cost: CostModel,
    budget: int,
    summarizer: Summarizer,
    *,
    max_levels: int = 3,
) -> tuple[list[Message], RungReport]:
    """Head and tail verbatim, the middle replaced by the summarizer's summary.

    The middle is sent in chunks that fit the summarizer's own window (so this works
    right after an overflow); summaries of chunks are summarized again, at most
    ``max_levels`` deep, until they fit the room left in the budget.
    """
    started = time.perf_counter()
    before = cost.history(messages)
    head = _head_end(messages)
    cuts = [t for t in turn_boundaries(messages) if t > head]
    if not cuts:
        return list(messages), RungReport("summarization", before, before, 0, time.perf_counter() - started, "skipped: nothing to summarize")
    costs = [cost.message(m) for m in messages]
    head_cost = sum(costs[:head])
    allowance = max(200, min(summarizer.output_reserve, budget // 5))
    t = next((t for t in cuts if head_cost + allowance + sum(costs[t:]) <= budget), cuts[-1])
    limit = summarizer.window - summarizer.output_reserve - cost.text(summarizer.instructions) - 64
    if limit < 256:
        raise CompactionError(f"a summarizer window of {summarizer.window:,} tokens leaves no room for the transcript")
    texts = [serialize_message(m) for m in messages[head:t]]
    calls = 0
    for _ in range(max_levels):
        summaries = []
        for chunk in _chunks(texts, cost, limit):
            summaries.append(summarizer.fn(summarizer.instructions + chunk))
            calls += 1
        texts = [s.strip() + "\n" for s in summaries]
        if len(texts) == 1 or cost.text("".join(texts)) <= allowance:
            break
    summary = "".join(texts).strip()
    digest = hashlib.sha256(summary.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    note = Message("user", (Text(f"[glyphpack summary of messages {head + 1}-{t}]\n{summary}"),), id=f"summary-{digest}")
    view = list(messages[:head]) + [note] + list(messages[t:])
    after = cost.history(view)
    details = f"messages {head + 1}-{t} -> {cost.text(summary):,} tokens of summary in {calls} summarizer call(s)"
    return view, RungReport("summarization", before, after, t - head, time.perf_counter() - started, details)


# ------------------------------------------------------------------------------ ladder


def _cost_model(profile, estimator, tokenizer) -> CostModel:
    return CostModel(resolve(profile), estimator or DEFAULT_ESTIMATOR, tokenizer)


def _has_images(messages: Sequence[Message]) -> bool:
    return any(m.images for m in messages)


def shake(
    history: Sequence[Message],
    profile: Profile | str,
    *,
    protect_turns: int = 2,
    elide_min_chars: int = 1000,
    remarkable=None,
    estimator: TextEstimator | None = None,
    tokenizer=None,
) -> Compaction:
    """Only the free rungs (elision, image drop), whatever the budget."""
    cost = _cost_model(profile, estimator, tokenizer)
    before = cost.history(history)
    view, elided = elide(history, cost, protect_turns=protect_turns, min_chars=elide_min_chars, remarkable=remarkable)
    view, dropped = drop_images(view, cost, protect_turns=0 if not cost.profile.vision else protect_turns)
    after = cost.history(view)
    report = LadderReport(after, before, after, True, (elided, dropped), f"shake: {before:,} -> {after:,} estimated tokens")
    return Compaction(tuple(view), report)


def compact(
    history: Sequence[Message],
    profile: Profile | str,
    budget: int,
    *,
    summarizer: Summarizer | None = None,
    protect_turns: int = 2,
    elide_min_chars: int = 1000,
    remarkable=None,
    layout: str = "flow",
    shape=None,
    estimator: TextEstimator | None = None,
    tokenizer=None,
) -> Compaction:
    """Run the ladder until the view's estimated tokens fit ``budget``.

    Each rung runs at most once, so compaction always ends; when even the last rung
    cannot get under the budget, the report says so (``fits`` is False) and the view
    is the smallest one reached. A reader without vision never receives an image
    block: its images are dropped whatever the budget, and it gets a summary, never
    snapshots.
    """
    if not isinstance(budget, int) or budget <= 0:
        raise CompactionError(f"budget must be a positive number of tokens, not {budget!r}")
    cost = _cost_model(profile, estimator, tokenizer)
    vision = cost.profile.vision
    before = cost.history(history)
    view, rungs, pages = list(history), [], []

    def fits() -> bool:
        return cost.history(view) <= budget

    if not vision and _has_images(view):
        view, report = drop_images(view, cost, protect_turns=0)
        rungs.append(dataclasses.replace(report, details=report.details + " (the reader has no vision)"))
    if not fits():
        view, report = elide(view, cost, protect_turns=protect_turns, min_chars=elide_min_chars, remarkable=remarkable)
        rungs.append(report)
    if not fits() and vision:
        view, report = drop_images(view, cost, protect_turns=protect_turns)
        rungs.append(report)
    if not fits() and vision:
        snapped, report, snapped_pages = snapshot(view, cost, budget, layout=layout, shape=shape)
        rungs.append(report)
        if snapped_pages:
            view, pages = snapped, snapped_pages
    if not fits():
        if summarizer is not None:
            view, report = summarize(view, cost, budget, summarizer)
            pages = []
            rungs.append(report)
        else:
            rungs.append(RungReport("summarization", cost.history(view), cost.history(view), 0, 0.0, "skipped: no summarizer supplied"))
    after = cost.history(view)
    ok = after <= budget
    message = (
        f"fits: {before:,} -> {after:,} estimated tokens (budget {budget:,})"
        if ok
        else f"does not fit: the ladder got {before:,} down to {after:,} estimated tokens, over the budget of {budget:,}"
        + ("" if summarizer is not None else "; a summarizer would free more")
    )
    return Compaction(tuple(view), LadderReport(budget, before, after, ok, tuple(rungs), message), tuple(pages))


def should_compact(history: Sequence[Message], profile: Profile | str, threshold: int, *, estimator=None, tokenizer=None) -> bool:
    """Proactive trigger: whether the history's estimated tokens reached ``threshold``."""
    return _cost_model(profile, estimator, tokenizer).history(history) >= threshold


# ------------------------------------------------------------------- reactive recovery


@dataclasses.dataclass(frozen=True)
class Overflow:
    """A provider's "too long" rejection: ``kind`` is ``tokens`` or ``bytes``; the
    provider's measured size and limit when its message gave them."""

    kind: str
    measured: int | None = None
    limit: int | None = None
    provider: str | None = None


_TOKEN_PATTERNS = (
    # Anthropic: "prompt is too long: 215000 tokens > 200000 maximum"
    ("anthropic", re.compile(r"prompt is too long:\s*(?P<measured>\d+)\s*tokens\s*>\s*(?P<limit>\d+)\s*maximum", re.I)),
    # OpenAI: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens."
    ("openai", re.compile(r"maximum context length is (?P<limit>\d+) tokens.*?(?:resulted in|requested) (?P<measured>\d+) tokens", re.I | re.S)),
    # Gemini: "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576)."
    ("gemini", re.compile(r"input token count \((?P<measured>\d+)\) exceeds the maximum number of tokens allowed \((?P<limit>\d+)\)", re.I)),
    ("gemini", re.compile(r"input token count \((?P<measured>\d+)\) exceeds the maximum", re.I)),
)
_TOKEN_WORDINGS = (
    ("openai", re.compile(r"context_length_exceeded|exceeds the context window|reduce the length of the messages", re.I)),
    ("anthropic", re.compile(r"prompt is too long", re.I)),
    ("gemini", re.compile(r"exceeds the maximum number of tokens", re.I)),
)
_BYTE_WORDINGS = re.compile(r"\b413\b|request_too_large|request entity too large|payload too large|exceeds the maximum allowed number of bytes", re.I)


def parse_overflow(error) -> Overflow | None:
    """Recognize a provider's "request too long" error (an exception, its message, or
    its JSON body), or None if ``error`` is something else."""
    status = getattr(error, "status_code", None) or getattr(error, "status", None) or getattr(error, "code", None)
    if isinstance(error, dict):
        text = json.dumps(error)
        status = status or error.get("status") or error.get("code")
    else:
        text = str(error)
        body = getattr(error, "body", None)
        if body is not None:
            text += " " + json.dumps(body, default=str)
    if status == 413 or _BYTE_WORDINGS.search(text):
        return Overflow("bytes", provider=None)
    for provider, pattern in _TOKEN_PATTERNS:
        match = pattern.search(text)
        if match:
            return Overflow("tokens", int(match["measured"]), int(match["limit"]) if "limit" in match.groupdict() and match["limit"] else None, provider)
    for provider, pattern in _TOKEN_WORDINGS:
        if pattern.search(text):
            return Overflow("tokens", provider=provider)
    return None


def request_bytes(messages: Sequence[Message]) -> int:
    """About how many bytes a request carrying ``messages`` is (images base64-encoded)."""
    from ._messages import message_to_json

    return sum(len(json.dumps(message_to_json(m), ensure_ascii=False).encode("utf-8", "surrogatepass")) for m in messages)


def recover(
    history: Sequence[Message],
    profile: Profile | str,
    error,
    *,
    margin: float = 0.1,
    summarizer: Summarizer | None = None,
    estimator: TextEstimator | None = None,
    tokenizer=None,
    **options,
) -> Compaction:
    """Reactive compaction after the provider rejected ``history`` as too long.

    Token overflows: the provider's measured count is trusted over the local
    estimate (the estimator is rescaled to match it), and the ladder aims at
    ``(1 - margin)`` of the provider's limit. An HTTP 413 needs fewer bytes, not fewer
    tokens: images go first, then large results, then (if still too large) the middle
    is summarized, aiming at ``(1 - margin)`` of half the rejected size.
    """
    overflow = parse_overflow(error)
    if overflow is None:
        raise CompactionError(f"not a 'request too long' error: {str(error)[:200]!r}")
    cost = _cost_model(profile, estimator, tokenizer)
    if overflow.kind == "bytes":
        return _recover_bytes(history, cost, margin, summarizer, options)
    estimate = cost.history(history)
    estimator = cost.estimator
    if overflow.measured and tokenizer is None:
        estimator = calibrate(history, cost.profile, overflow.measured, estimator)
    limit = overflow.limit or int((overflow.measured or estimate) * 0.8)
    target = max(1, int(limit * (1 - margin)))
    result = compact(history, cost.profile, target, summarizer=summarizer, estimator=estimator, tokenizer=tokenizer, **options)
    note = f"recovered from a {overflow.provider or 'provider'} token overflow" + (
        f" ({overflow.measured:,} > {overflow.limit:,} measured by the provider)" if overflow.measured and overflow.limit else ""
    )
    return dataclasses.replace(result, report=dataclasses.replace(result.report, message=f"{note}; {result.report.message}"))


def calibrate(
    history: Sequence[Message], profile: Profile | str, measured_tokens: int, estimator: TextEstimator | None = None
) -> TextEstimator:
    """An estimator rescaled so that ``history`` costs what the provider measured
    (``usage.input_tokens`` of a response, or the count in an overflow error).

    Image tokens are exact already, so only the text part is rescaled.
    """
    cost = _cost_model(profile, estimator, None)
    estimate = cost.history(history)
    images = cost.breakdown(history)["images"]
    text_part = estimate - images
    if text_part <= 0 or measured_tokens <= images:
        return cost.estimator
    return cost.estimator.scaled((measured_tokens - images) / text_part)


def _recover_bytes(history, cost: CostModel, margin: float, summarizer, options) -> Compaction:
    started_bytes = request_bytes(history)
    target = int(started_bytes * 0.5 * (1 - margin))
    before = cost.history(history)
    view, rungs = list(history), []
    view, report = drop_images(view, cost, protect_turns=0)
    rungs.append(report)
    if request_bytes(view) > target:
        view, report = elide(view, cost, protect_turns=options.get("protect_turns", 2), min_chars=options.get("elide_min_chars", 1000))
        rungs.append(report)
    if request_bytes(view) > target and summarizer is not None:
        view, report = summarize(view, cost, max(1, int(cost.history(view) * 0.5)), summarizer)
        rungs.append(report)
    final = request_bytes(view)
    ok = final <= target
    message = f"recovered from an HTTP 413: request {started_bytes:,} -> {final:,} bytes (target {target:,})" + (
        "" if ok else "; still over the target" + ("" if summarizer else " (a summarizer would free more)")
    )
    after = cost.history(view)
    return Compaction(tuple(view), LadderReport(after, before, after, ok, tuple(rungs), message))


def compact_transcript(workspace, conversation: str, agent: str, profile: Profile | str, budget: int, **options) -> Compaction:
    """Compact a stored transcript into a view to send; the stored file is not touched."""
    transcript = workspace.load(conversation, agent)
    return compact(transcript.messages, profile, budget, **options)
