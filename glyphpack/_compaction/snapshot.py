"""The snapshot rung: head verbatim, the middle rendered to page images, tail verbatim.

Pages are rendered from the history's text on every pass, and the serialization of each
message does not depend on where the middle ends, so pages before the first changed
character are byte-identical between passes (the prompt cache keeps hitting).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
from .._providers.profile import Profile
from .._providers.resolve import reading_profile
from .._types import Role
from .cost import CostModel
from .results import CompactionPolicy, RungReport, RungResult

if TYPE_CHECKING:
    from .._render.shapes import Shape

#: Characters kept from each end of a long tool result, only when the whole middle
#: cannot fit the budget as pages.
SNAPSHOT_RESULT_CAP = 4000
#: The text before the pages. The same on every pass (the range, sizes and counts are
#: in the report), so a prompt cache keeps hitting on the pages that did not change.
SNAPSHOT_HEADER = (
    "[glyphpack snapshot] The earlier part of this conversation follows as page images of small bitmap "
    "text, oldest first. Lines start with the role: [user], [assistant], [tool call NAME #ID], "
    "[tool result #ID], [tool error #ID]; the return-arrow glyph marks a line break."
)
#: Tokens the search reserves for the header text before the pages (checked after rendering).
SNAPSHOT_HEADER_TOKENS = 100
#: Renders the cut search may spend before it gives up.
MAX_SNAPSHOT_RENDERS = 8
_DATA_URL = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]{64,}")


def _without_data_urls(text: str) -> str:
    return _DATA_URL.sub("[data URL elided]", text)


@functools.singledispatch
def block_snapshot_text(block: Block, role: Role, result_cap: int | None) -> str | None:
    """One block as snapshot text (None: left out)."""
    raise TypeError(f"no snapshot text for {type(block).__name__}")


@block_snapshot_text.register
def _(block: Text, role: Role, result_cap: int | None) -> str | None:
    return f"[{role}] {_without_data_urls(block.text)}"


@block_snapshot_text.register
def _(block: ToolCall, role: Role, result_cap: int | None) -> str | None:
    # Arguments as the tool saw them: strings unescaped (code keeps its lines and tabs).
    lines = [f"[tool call {block.name} #{block.id}]"]
    for key, value in block.arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{key}:\n{text}" if "\n" in text else f"{key}: {text}")
    return "\n".join(lines)


@block_snapshot_text.register
def _(block: ToolResult, role: Role, result_cap: int | None) -> str | None:
    text = _without_data_urls(block.text)
    if result_cap is not None and len(text) > 2 * result_cap:
        cut = len(text) - 2 * result_cap
        text = f"{text[:result_cap]}\n[... {cut:,} chars cut by glyphpack ...]\n{text[-result_cap:]}"
    images = len(block.images())
    label = "tool error" if block.is_error else "tool result"
    return f"[{label} #{block.call_id}] {text}" + (f" [+{images} image(s) not shown]" if images else "")


@block_snapshot_text.register
def _(block: Image, role: Role, result_cap: int | None) -> str | None:
    return f"[{role}] [image {block.media_type}, {len(block.data or b''):,} bytes, not shown]"


@block_snapshot_text.register
def _(block: Thinking, role: Role, result_cap: int | None) -> str | None:
    return None  # a model's thinking is its own; the snapshot keeps what it said and did


@block_snapshot_text.register
def _(block: RedactedThinking, role: Role, result_cap: int | None) -> str | None:
    return None


@block_snapshot_text.register
def _(block: Opaque, role: Role, result_cap: int | None) -> str | None:
    return f"[{role}] [{block.kind} block]"


def serialize_message(message: Message, result_cap: int | None = None) -> str:
    """One message as snapshot text: role-marked blocks (results cut to ``result_cap``
    characters from each end when one is given), data URLs and images replaced by
    stubs, thinking left out. Independent of the messages around it, so a growing
    middle keeps its earlier text unchanged."""
    parts = [block_snapshot_text(block, message.role, result_cap) for block in message.content]
    return "\n".join(p for p in parts if p is not None) + "\n"


#: How harnesses begin the user messages they write themselves, before the user's task:
#: Codex's AGENTS.md and environment context, Claude Code's command markers and caveats,
#: and the summaries of an earlier compaction.
HARNESS_PREAMBLES = (
    "# AGENTS.md instructions",
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "<command-message>",
    "<command-name>",
    "<local-command-stdout>",
    "Caveat: The messages below were generated",
    "[pi compaction summary]",
    "[codex compaction summary]",
)


def is_harness_preamble(message: Message) -> bool:
    return message.text.lstrip().startswith(HARNESS_PREAMBLES)


def head_end(messages: Sequence[Message]) -> int:
    """End of the verbatim head: everything up to and including the task, the first
    user message a harness did not write itself (the first user message when every one
    looks like a harness's)."""
    users = [index for index, message in enumerate(messages) if message.role == "user"]
    if not users:
        return len(messages)
    task = next((i for i in users if not is_harness_preamble(messages[i])), users[0])
    return task + 1



def snapshot_shape(profile: Profile, policy: CompactionPolicy) -> Shape:
    """The shape snapshot pages start in: the policy's, else the reader's for its fidelity."""
    from .._render.shapes import get_shape  # shapes only: no numba

    if policy.shape is None and policy.fidelity is not None:
        return get_shape(reading_profile(profile).evidence(policy.fidelity).shape)
    return get_shape(policy.shape)


def page_density(profile: Profile, policy: CompactionPolicy) -> float:
    """Characters per image token of a full snapshot page in the shape ``policy`` picks."""
    return profile.page_density(snapshot_shape(profile, policy))


def snapshot(
    messages: Sequence[Message], cost: CostModel, budget: int, policy: CompactionPolicy = CompactionPolicy()
) -> RungResult:
    """Head verbatim, the middle as page images, the newest turns that fit verbatim.

    Cuts fall only at turn boundaries. The view is the input unchanged (and the report
    says why) when no cut fits the budget or the reader has no vision.
    """
    # The renderer (and numba) loads only when a snapshot is rendered.
    from .._render.render import render

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
    shape = snapshot_shape(profile, policy)
    search = _Search(messages, cost, budget, policy, head, cuts, render, shape)
    # Every word first; results cut to their ends only when the whole middle cannot fit.
    found = search.run(result_cap=None) or search.run(result_cap=SNAPSHOT_RESULT_CAP)
    if found is None:
        return unchanged(search.why_not())
    view, pages, t, middle_text, cut = found
    report = RungReport.replaced_middle(
        "snapshot",
        before,
        cost.history(view),
        head,
        t,
        started,
        middle_chars=len(middle_text),
        middle_text_tokens=cost.text(middle_text),
        pages=len(pages),
        image_tokens=sum(int(profile.context_tokens(p.width, p.height)) for p in pages),
        results_cut=cut,
    )
    return RungResult(view, report, tuple(pages))


class _Search:
    """The cut search: the largest verbatim tail whose head, pages and tail fit the
    budget and the provider's image rules, within ``MAX_SNAPSHOT_RENDERS`` renders."""

    def __init__(
        self,
        messages: Sequence[Message],
        cost: CostModel,
        budget: int,
        policy: CompactionPolicy,
        head: int,
        cuts: list[int],
        render: Any,
        shape: Any,
    ) -> None:
        self.messages, self.cost, self.budget, self.policy = messages, cost, budget, policy
        self.head, self.cuts, self.render, self.shape = head, cuts, render, shape
        self.renders = 0
        self.stopped_by: set[str] = set()
        costs = [cost.message(m) for m in messages]
        self.head_cost = sum(costs[:head])
        self.tail_cost = [0] * (len(messages) + 1)
        self.images_from = [0] * (len(messages) + 1)  # images in messages[t:]
        for i in range(len(messages) - 1, -1, -1):
            self.tail_cost[i] = self.tail_cost[i + 1] + costs[i]
            self.images_from[i] = self.images_from[i + 1] + len(messages[i].images)
        self.head_images = sum(len(m.images) for m in messages[:head])
        profile = cost.profile
        self.page_width, page_height = policy.page_size or profile.page_size(shape)
        self.cols, self.rows_per_page = self.page_width // shape.advance, page_height // shape.pitch
        self.full_page_tokens = int(profile.context_tokens(self.page_width, page_height))
        self._last_page_tokens: dict[int, int] = {}  # rows -> tokens: cuts share page heights

    def _page_size(self, other_images: int) -> tuple[int, int] | None:
        """The pinned page size, unless the request's images make it too large for the
        reader's many-image rule (then the reader's own size for so many images)."""
        pinned = self.policy.page_size
        many = self.cost.profile.reader.many_images
        if pinned is not None and many is not None and other_images + 1 > many[0] and max(pinned) > many[1]:
            return None
        return pinned

    def pages_tokens(self, chars: int) -> int:
        """Tokens of the pages for ``chars`` flowed characters: full pages, then a last
        page as tall as its rows (the way ``render`` crops it)."""
        full, rest = divmod(chars, self.cols * self.rows_per_page)
        tokens = full * self.full_page_tokens
        if rest:
            rows = -(-rest // self.cols)
            last = self._last_page_tokens.get(rows)
            if last is None:
                last = self._last_page_tokens[rows] = int(self.cost.profile.context_tokens(self.page_width, rows * self.shape.pitch))
            tokens += last
        return tokens

    def run(self, result_cap: int | None) -> tuple[tuple[Message, ...], Any, int, str, int] | None:
        """(view, pages, cut, middle text, results cut) of the first cut that fits, or None."""
        messages, head, profile = self.messages, self.head, self.cost.profile
        texts = [serialize_message(m, result_cap) for m in messages[head:]]
        prefix_chars = [0]
        for text in texts:
            prefix_chars.append(prefix_chars[-1] + len(text))
        correction = 0  # how far the estimate fell short on the last render: raised as renders teach
        for t in self.cuts:  # smallest t first: the largest verbatim tail
            approx = self.head_cost + SNAPSHOT_HEADER_TOKENS + self.pages_tokens(prefix_chars[t - head]) + self.tail_cost[t]
            if approx + correction > self.budget:
                self.stopped_by.add("budget")
                continue
            other_images = self.head_images + self.images_from[t]
            if profile.max_images is not None and other_images + 1 > profile.max_images:
                self.stopped_by.add("images")
                continue
            if self.renders >= MAX_SNAPSHOT_RENDERS:
                self.stopped_by.add("renders")
                return None
            self.renders += 1
            middle_text = "".join(texts[: t - head])
            pages = self.render(
                middle_text, model=profile, shape=self.policy.shape, layout=self.policy.layout, max_pages=100_000,
                other_images=other_images, page_size=self._page_size(other_images), fidelity=self.policy.fidelity,
            )
            if profile.max_images is not None and len(pages) + other_images > profile.max_images:
                self.stopped_by.add("images")
                continue
            digest = hashlib.sha256(middle_text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            blocks = (Text(SNAPSHOT_HEADER), *(Image("image/png", p.png) for p in pages))
            view = (*messages[:head], Message("user", blocks, id=f"snapshot-{digest}"), *messages[t:])
            after = self.cost.history(view)
            if after <= self.budget:
                cut = 0 if result_cap is None else sum(
                    1 for m in messages[head:t] for r in m.tool_results if len(r.text) > 2 * result_cap
                )
                return view, pages, t, middle_text, cut
            self.stopped_by.add("budget")
            correction = max(correction, after - approx)
        return None

    def why_not(self) -> str:
        """Which bounds stopped every cut, named."""
        reasons = []
        if "budget" in self.stopped_by:
            reasons.append(f"the budget of {self.budget:,} tokens")
        if "images" in self.stopped_by:
            reasons.append(f"{self.cost.profile.name}'s limit of {self.cost.profile.max_images} images per request")
        if "renders" in self.stopped_by:
            reasons.append(f"the search's limit of {MAX_SNAPSHOT_RENDERS} renders")
        return "no cut fits " + (" or ".join(reasons) or "the budget") + " with the middle as pages"

