"""The snapshot rung: head verbatim, the middle rendered to page images, tail verbatim.

Pages are rendered from the history's text on every pass, and the serialization of each
message does not depend on where the middle ends, so pages before the first changed
character are byte-identical between passes (the prompt cache keeps hitting).
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
from collections.abc import Sequence

from .._history.messages import (
    Block,
    Image,
    Message,
    Opaque,
    RedactedThinking,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    turn_boundaries,
)
from .._types import Role
from .cost import CostModel
from .results import CompactionPolicy, RungReport, RungResult

#: Characters kept from each end of a long tool result in a snapshot.
SNAPSHOT_RESULT_CAP = 4000
#: Tokens the search reserves for the header text before the pages (checked after rendering).
SNAPSHOT_HEADER_TOKENS = 100
#: Renders the cut search may spend before it gives up.
MAX_SNAPSHOT_RENDERS = 8
_DATA_URL = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]{64,}")


def _without_data_urls(text: str) -> str:
    return _DATA_URL.sub("[data URL elided]", text)


@functools.singledispatch
def block_snapshot_text(block: Block, role: Role, result_cap: int) -> str | None:
    """One block as snapshot text (None: left out)."""
    raise TypeError(f"no snapshot text for {type(block).__name__}")


@block_snapshot_text.register
def _(block: Text, role: Role, result_cap: int) -> str | None:
    return f"[{role}] {_without_data_urls(block.text)}"


@block_snapshot_text.register
def _(block: ToolCall, role: Role, result_cap: int) -> str | None:
    return f"[tool call {block.name} #{block.id}] {block.arguments_json}"


@block_snapshot_text.register
def _(block: ToolResult, role: Role, result_cap: int) -> str | None:
    text = _without_data_urls(block.text)
    if len(text) > 2 * result_cap:
        cut = len(text) - 2 * result_cap
        text = f"{text[:result_cap]}\n[... {cut:,} chars cut by glyphpack ...]\n{text[-result_cap:]}"
    images = len(block.images())
    label = "tool error" if block.is_error else "tool result"
    return f"[{label} #{block.call_id}] {text}" + (f" [+{images} image(s) not shown]" if images else "")


@block_snapshot_text.register
def _(block: Image, role: Role, result_cap: int) -> str | None:
    return f"[{role}] [image {block.media_type}, {len(block.data or b''):,} bytes, not shown]"


@block_snapshot_text.register
def _(block: Thinking, role: Role, result_cap: int) -> str | None:
    return None  # a model's thinking is its own; the snapshot keeps what it said and did


@block_snapshot_text.register
def _(block: RedactedThinking, role: Role, result_cap: int) -> str | None:
    return None


@block_snapshot_text.register
def _(block: Opaque, role: Role, result_cap: int) -> str | None:
    return f"[{role}] [{block.kind} block]"


def serialize_message(message: Message, result_cap: int = SNAPSHOT_RESULT_CAP) -> str:
    """One message as snapshot text: role-marked blocks, long results head/tail-capped,
    data URLs and images replaced by stubs, thinking left out. Independent of the
    messages around it, so a growing middle keeps its earlier text unchanged."""
    parts = [block_snapshot_text(block, message.role, result_cap) for block in message.content]
    return "\n".join(p for p in parts if p is not None) + "\n"


def head_end(messages: Sequence[Message]) -> int:
    """End of the verbatim head: leading system messages and the first user message."""
    for index, message in enumerate(messages):
        if message.role == "user":
            return index + 1
    return len(messages)


def snapshot(
    messages: Sequence[Message], cost: CostModel, budget: int, policy: CompactionPolicy = CompactionPolicy()
) -> RungResult:
    """Head verbatim, the middle as page images, the newest turns that fit verbatim.

    Cuts fall only at turn boundaries. The view is the input unchanged (and the report
    says why) when no cut fits the budget or the reader has no vision.
    """
    # The renderer (and numba) loads only when a snapshot is rendered.
    from .._render.render import render
    from .._render.shapes import get_shape

    started = time.perf_counter()
    before = cost.history(messages)
    profile = cost.profile

    def unchanged(reason: str) -> RungResult:
        report = RungReport("snapshot", before, before, 0, time.perf_counter() - started, skipped=reason)
        return RungResult(tuple(messages), report)

    if not profile.vision:
        return unchanged("the reader has no vision")
    head = head_end(messages)
    cuts = [t for t in turn_boundaries(messages) if t > head]
    if not cuts:
        return unchanged("nothing between the head and the tail")
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
    page_shape = get_shape(policy.shape)
    page_width, page_height = profile.page_size(page_shape)
    cols, rows_per_page = page_width // page_shape.advance, page_height // page_shape.pitch
    full_page_tokens = int(profile.context_tokens(page_width, page_height))

    def pages_tokens(chars: int) -> int:
        """Tokens of the pages for ``chars`` flowed characters: full pages, then a last
        page as tall as its rows (the way ``render`` crops it)."""
        full, rest = divmod(chars, cols * rows_per_page)
        tokens = full * full_page_tokens
        if rest:
            tokens += int(profile.context_tokens(page_width, -(-rest // cols) * page_shape.pitch))
        return tokens

    images_from = [0] * (len(messages) + 1)  # images in messages[t:], for the per-request limit
    for i in range(len(messages) - 1, -1, -1):
        images_from[i] = images_from[i + 1] + len(messages[i].images)
    correction = 0  # how far the estimate fell short on the last render: raised as renders teach
    renders = 0
    for t in cuts:  # smallest t first: the largest verbatim tail
        chars = prefix_chars[t - head]
        approx = head_cost + SNAPSHOT_HEADER_TOKENS + pages_tokens(chars) + tail_cost[t]
        if approx + correction > budget:
            continue
        renders += 1
        middle_text = "".join(texts[: t - head])
        pages = render(middle_text, model=profile, shape=policy.shape, layout=policy.layout, max_pages=100_000)
        if profile.max_images is not None and len(pages) + images_from[t] > profile.max_images:
            continue
        digest = hashlib.sha256(middle_text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        header = Text(
            f"[glyphpack snapshot] Messages {head + 1}-{t} of this conversation ({len(middle_text):,} characters) "
            f"follow as {len(pages)} page image(s) of small bitmap text, oldest first. Lines start with the role: "
            f"[user], [assistant], [tool call NAME #ID], [tool result #ID], [tool error #ID]; the return-arrow "
            f"glyph marks a line break."
        )
        blocks = (header, *(Image("image/png", p.png) for p in pages))
        view = (*messages[:head], Message("user", blocks, id=f"snapshot-{digest}"), *messages[t:])
        after = cost.history(view)
        if after <= budget:
            report = RungReport(
                "snapshot",
                before,
                after,
                t - head,
                time.perf_counter() - started,
                first_message=head + 1,
                last_message=t,
                middle_chars=len(middle_text),
                middle_text_tokens=cost.text(middle_text),
                pages=len(pages),
                image_tokens=sum(int(profile.context_tokens(p.width, p.height)) for p in pages),
            )
            return RungResult(view, report, tuple(pages))
        correction = max(correction, after - approx)
        if renders >= MAX_SNAPSHOT_RENDERS:
            break
    return unchanged(f"no cut fits {budget:,} tokens with the middle as pages")
