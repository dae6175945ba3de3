"""The snapshot rung: head verbatim, the middle rendered to page images, tail verbatim.

Pages are rendered from the history's text on every pass, and the serialization of each
message does not depend on where the middle ends, so pages before the first changed
character are byte-identical between passes (the prompt cache keeps hitting).
"""

from __future__ import annotations

import dataclasses
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
from .._history.recall import cut_to_ends, range_ref, recall_hint, result_ref, short_range_ref
from .._providers.profile import Profile
from .._types import Role
from .cost import CostModel
from .results import CompactionPolicy, RungReport, RungResult

if TYPE_CHECKING:
    from .._render.shapes import Shape

#: Characters kept from each end of a long tool result, only when the whole middle
#: cannot fit the budget as pages: at least this many, more where the budget allows.
SNAPSHOT_RESULT_CAP = 4000
#: Plans spent widening the cap for the chosen cut, and the width it stops at.
CAP_REFINEMENTS = 6
CAP_STEP = 500
#: The text before the pages. The same on every pass (the range, sizes and counts are
#: in the report), so a prompt cache keeps hitting on the pages that did not change.
SNAPSHOT_HEADER = (
    "[glyphpack snapshot] The earlier part of this conversation follows as page images of small bitmap "
    "text, oldest first. Lines start with the role: [user], [assistant], [tool call NAME #ID], "
    "[tool result #ID], [tool error #ID]; the return-arrow glyph marks a line break."
)
def range_note(ref: str) -> str:
    """What a snapshot's pages stand for: the range's ``ref``."""
    return f"[the pages above show the stored messages {recall_hint(ref)}]"


def priced_header(messages: Sequence[Message]) -> Message:
    """The snapshot message without its pages, as the cut search prices it: the header
    and the range note at the longest ids it may name."""
    longest = max((m.id for m in messages), key=len, default="")
    return Message("user", (Text(SNAPSHOT_HEADER), Text(range_note(range_ref(longest, longest)))))


#: Layouts the search prices exactly (pages laid out, not drawn) before it gives up.
MAX_SNAPSHOT_PLANS = 64
#: Cuts priced one by one, largest tail first, before a binary search takes over.
LINEAR_CUTS = 24
#: Cuts before the binary search's answer priced too: a page boundary can make a larger
#: middle cheaper than a smaller one, locally.
BACKTRACK = 8
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
    if result_cap is not None:
        text = cut_to_ends(text, result_cap, result_ref(block.call_id))
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


def serialize_messages(messages: Sequence[Message]) -> str:
    """``messages`` as snapshot text, whole (a recalled range of them)."""
    return "".join(map(serialize_message, messages))


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
    from .._render.shapes import get_shape, reading_shape  # shapes only: no numba

    if policy.shape is None and policy.fidelity != "dense":
        return reading_shape(profile, policy.fidelity)[0]
    return get_shape(policy.shape)


def page_density(profile: Profile, policy: CompactionPolicy) -> float:
    """Characters per image token of a full snapshot page in the shape ``policy`` picks."""
    return profile.page_density(snapshot_shape(profile, policy))


def tail_cuts(messages: Sequence[Message], cuts: Sequence[int], costs: Sequence[int], tail_tokens: int) -> list[int]:
    """The ``cuts`` that keep the newest work verbatim: the newest round (every message
    from the last turn boundary before the end) and the newest messages that together
    cost at most ``tail_tokens`` (``costs`` per message). Empty when that is everything."""
    end = len(messages)
    newest = max((b for b in turn_boundaries(messages) if b < end), default=0)
    tail, kept_from = 0, end
    while kept_from > 0 and tail + costs[kept_from - 1] <= tail_tokens:
        kept_from -= 1
        tail += costs[kept_from]
    return [t for t in cuts if t <= min(newest, kept_from)]


def snapshot(
    messages: Sequence[Message], cost: CostModel, budget: int, policy: CompactionPolicy = CompactionPolicy(), head: int | None = None
) -> RungResult:
    """Head verbatim, the middle as page images, the newest turns verbatim.

    The cut is the one keeping the most newest messages as text whose pages, head and
    tail fit the budget and the reader's image rules, priced exactly (pages laid out,
    not drawn), so a larger budget never keeps fewer messages as text. Cuts fall only
    at turn boundaries and keep the newest work (``tail_cuts``) and every message with
    a character no font draws verbatim. When the snapshot's shape lacks characters
    the middle has, the middle is drawn in Unifont instead (and the note says so). The
    view is the input unchanged (and the report says why) when no cut fits the budget
    or the reader has no vision. ``head``: where the verbatim head ends, when not
    ``head_end`` (a summary of older messages kept as text before the pages).
    """
    started = time.perf_counter()
    before = cost.history(messages)

    def unchanged(reason: str) -> RungResult:
        report = RungReport(rung="snapshot", tokens_before=before, tokens_after=before, seconds=time.perf_counter() - started, skipped=reason)
        return RungResult(tuple(messages), report)

    planned = _plan(messages, cost, budget, policy, head)
    if isinstance(planned, str):
        return unchanged(planned)
    search, cuts, note = planned
    policy, profile = search.policy, cost.profile
    found = search.run(cuts)
    if found is None:
        return unchanged(search.why_not())
    pages = found[1]
    if policy.page_size is not None and pages and (pages[0].width, pages[0].full_height) != tuple(policy.page_size):
        note = "pages made smaller than the pinned size: the request has too many images for it (the many-image rule)"
    view, pages, t, middle_text, cut, cap = found
    report = RungReport.replaced_middle(
        "snapshot",
        before,
        cost.history(view),
        messages,
        search.head,
        t,
        started,
        middle_chars=len(middle_text),
        middle_text_tokens=cost.text(middle_text),
        pages=len(pages),
        image_tokens=sum(int(profile.context_tokens(p.width, p.height)) for p in pages),
        results_cut=cut,
        result_cap=cap,
        replaced_scripts=pages.report.replaced_scripts,
        note=note,
    )
    return RungResult(view, report, tuple(pages), middle_text)


def fits_as_pages(messages: Sequence[Message], cost: CostModel, budget: int, policy: CompactionPolicy = CompactionPolicy()) -> bool:
    """Whether ``snapshot`` would find a cut for ``messages`` within ``budget``: priced
    from the pages' layout, nothing drawn."""
    planned = _plan(messages, cost, budget, policy, None)
    return not isinstance(planned, str) and planned[0].choose(planned[1]) is not None


def _plan(
    messages: Sequence[Message], cost: CostModel, budget: int, policy: CompactionPolicy, head: int | None
) -> tuple[_Search, list[int], str] | str:
    """The cut search for a snapshot of ``messages``, its candidate cuts and the note on
    the shape; or why there is none."""
    # The renderer (and numba) loads only when a snapshot is priced or rendered.
    from .._render.shapes import SHAPES, WIDE_SCRIPT_SHAPE
    from .._render.text import by_script, replaced_characters

    profile = cost.profile
    if not profile.vision:
        return "the reader has no vision"
    head = head_end(messages) if head is None else head
    costs = [cost.message(m) for m in messages]
    cuts = tail_cuts(messages, [t for t in turn_boundaries(messages) if t > head], costs, policy.tail_for(budget))
    texts = [serialize_message(m) for m in messages[head:]]
    fallback = SHAPES[WIDE_SCRIPT_SHAPE]
    # A message with a character no font draws stays text: the middle ends before it.
    undrawable = next((head + i for i, text in enumerate(texts) if replaced_characters(text, fallback.atlas)), len(messages))
    cuts = [t for t in cuts if t <= undrawable]
    if not cuts:
        return "nothing between the head and the newest work kept as text"
    shape, note = snapshot_shape(profile, policy), ""
    lacking: dict[int, int] = {}
    for text in texts[: cuts[-1] - head]:
        for codepoint, occurrences in replaced_characters(text, shape.atlas).items():
            lacking[codepoint] = lacking.get(codepoint, 0) + occurrences
    if lacking:  # Unifont draws them all: the middle ends before any it does not
        scripts = ", ".join(f"{count:,} {script}" for script, count in by_script(lacking).items())
        note = f"drawn in Unifont: {shape.name}'s font lacks characters of the middle ({scripts})"
        if policy.shape is not None:
            note += "; the pinned geometry changed, so earlier pages are redrawn"
        policy = dataclasses.replace(policy, shape=WIDE_SCRIPT_SHAPE, page_size=None)
    return _Search(messages, cost, budget, policy, head, costs, texts), cuts, note


class _Search:
    """The cut search: the largest verbatim tail whose head, pages and tail fit the
    budget and the provider's image rules. Every cut is priced exactly from the pages'
    layout (``page_sizes``), so the first cut that fits is the answer; only it is drawn."""

    def __init__(
        self,
        messages: Sequence[Message],
        cost: CostModel,
        budget: int,
        policy: CompactionPolicy,
        head: int,
        costs: list[int],
        texts: list[str],
    ) -> None:
        self.messages, self.cost, self.budget, self.policy = messages, cost, budget, policy
        self.head, self.texts = head, texts
        self.plans = 0
        self.stopped_by: set[str] = set()
        self._priced: dict[int, tuple[str, dict[str, Any]] | None] = {}
        self._capped: list[str] | None = None  # the messages' text with long results cut, made on first need
        self.head_cost = sum(costs[:head])
        self.header_cost = cost.message(priced_header(messages))
        self.tail_cost = [0] * (len(messages) + 1)
        self.images_from = [0] * (len(messages) + 1)  # images in messages[t:]
        for i in range(len(messages) - 1, -1, -1):
            self.tail_cost[i] = self.tail_cost[i + 1] + costs[i]
            self.images_from[i] = self.images_from[i + 1] + len(messages[i].images)
        self.head_images = sum(len(m.images) for m in messages[:head])

    def _breaks_many_image_rule(self, page_size: tuple[int, int] | None, images: int) -> bool:
        """Whether pages of ``page_size`` in a request of ``images`` images break the
        reader's many-image rule (Anthropic: more than 20, each at most 2000 px)."""
        many = self.cost.profile.reader.many_images
        return page_size is not None and many is not None and images > many[0] and max(page_size) > many[1]

    def run(self, cuts: Sequence[int]) -> tuple[tuple[Message, ...], Any, int, str, int, int] | None:
        """(view, pages, cut, middle text, results cut, the characters kept of each end
        of a cut result) of the cut keeping the largest tail that fits, or None."""
        chosen = self.choose(cuts)
        return None if chosen is None else self.draw(chosen)

    def choose(self, cuts: Sequence[int]) -> int | None:
        """The cut keeping the largest tail that fits, priced from the layout, or None.

        The cuts whose head and tail alone fit are a suffix of ``cuts``; the first
        ``LINEAR_CUTS`` of them are priced one by one, largest tail first, and the first
        that fits is the answer (so a larger budget never picks a smaller tail); past
        them a binary search finds where the priced views start to fit, and the
        ``BACKTRACK`` cuts before that are priced too. At each cut every word of the
        middle is tried first, then long tool results cut to their ends."""
        start = next((i for i, t in enumerate(cuts) if self._room(t)), len(cuts))
        candidates = list(cuts[start:])
        # The largest tails first, one by one: a page boundary, or a stretch of messages
        # that cost less as text than as pages, makes "fits" uneven in the cut.
        chosen = next((t for t in candidates[:LINEAR_CUTS] if self._fits(t) is not None), None)
        rest = candidates[LINEAR_CUTS:]
        if chosen is None and rest:
            low, high = 0, len(rest)  # the first fitting cut of the rest lies in [low, high]
            while low < high:
                middle = (low + high) // 2
                if self._fits(rest[middle]) is not None:
                    high = middle
                else:
                    low = middle + 1
            for index in range(min(low, len(rest) - 1), max(low - BACKTRACK, 0) - 1, -1):
                if self._fits(rest[index]) is not None:
                    chosen = rest[index]
        return chosen

    def draw(self, t: int) -> tuple[tuple[Message, ...], Any, int, str, int, int] | None:
        """The view cut at ``t`` with its middle drawn (``run``'s answer for that cut)."""
        from .._render.render import render

        fitting = self._fits(t)
        if fitting is None:
            return None
        (middle_text, arguments), head = fitting, self.head
        cap = None
        if middle_text != "".join(self.texts[: t - head]):
            middle_text, arguments, cap = self._widest_cap(t, middle_text, arguments)
        pages = render(middle_text, max_pages=100_000, **arguments)
        digest = hashlib.sha256(middle_text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        note = range_note(short_range_ref(self.messages, head, t - 1))
        blocks = (Text(SNAPSHOT_HEADER), *(Image("image/png", p.png) for p in pages), Text(note))
        view = (*self.messages[:head], Message("user", blocks, id=f"snapshot-{digest}"), *self.messages[t:])
        cut = 0 if cap is None else sum(1 for m in self.messages[head:t] for r in m.tool_results if len(r.text) > 2 * cap)
        return view, pages, t, middle_text, cut, cap or 0

    def _room(self, t: int) -> bool:
        """Whether the head, the header and the tail from ``t`` leave room for pages."""
        if self.head_cost + self.header_cost + self.tail_cost[t] > self.budget:
            self.stopped_by.add("budget")
            return False
        max_images = self.cost.profile.max_images
        if max_images is not None and self.head_images + self.images_from[t] + 1 > max_images:
            self.stopped_by.add("images")
            return False
        return True

    def _fits(self, t: int) -> tuple[str, dict[str, Any]] | None:
        """(middle text, render arguments) of the view cut at ``t`` when it fits, priced
        from the pages' layout: every word first, then long results cut to their ends."""
        if t in self._priced:
            return self._priced[t]
        profile, head = self.cost.profile, self.head
        other_images = self.head_images + self.images_from[t]
        arguments: dict[str, Any] = dict(
            model=profile, shape=self.policy.shape, layout=self.policy.layout, other_images=other_images,
            page_size=self.policy.page_size, fidelity=self.policy.fidelity,
        )  # fmt: skip
        whole = "".join(self.texts[: t - head])
        if self._capped is None:
            self._capped = [serialize_message(m, SNAPSHOT_RESULT_CAP) for m in self.messages[head:]]
        capped = "".join(self._capped[: t - head])
        found = None
        for middle_text in (whole, capped) if capped != whole else (whole,):
            if self.plans >= MAX_SNAPSHOT_PLANS:
                self.stopped_by.add("plans")
                break
            priced = self._priced_pages(middle_text, arguments, t)
            if priced is not None:
                found = (middle_text, priced)
                break
        self._priced[t] = found
        return found

    def _priced_pages(self, middle_text: str, arguments: dict[str, Any], t: int) -> dict[str, Any] | None:
        """The render arguments that draw ``middle_text`` within the budget and the
        image limit with the tail from ``t`` (one priced plan), or None."""
        from .._render.render import page_sizes

        profile, other_images = self.cost.profile, self.head_images + self.images_from[t]
        self.plans += 1
        sizes = page_sizes(middle_text, **arguments)
        if self._breaks_many_image_rule(arguments["page_size"], len(sizes) + other_images):
            # The pinned size held for a few pages, not for this many: the reader's own
            # size for so many images (every page is redrawn; the note says so).
            arguments = {**arguments, "page_size": None}
            sizes = page_sizes(middle_text, **arguments)
        if profile.max_images is not None and len(sizes) + other_images > profile.max_images:
            self.stopped_by.add("images")
            return None
        pages_cost = sum(int(profile.context_tokens(w, h)) for w, h in sizes)
        if self.head_cost + self.header_cost + pages_cost + self.tail_cost[t] > self.budget:
            self.stopped_by.add("budget")
            return None
        return arguments

    def _widest_cap(self, t: int, middle_text: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any], int]:
        """Long results cut to their ends fit at ``SNAPSHOT_RESULT_CAP``: the widest
        cap, bisected in ``CAP_REFINEMENTS`` more plans, that still fits (a result is
        kept whole up to twice its cap, so the pages fill the budget rather than land
        far under it)."""
        middle = self.messages[self.head : t]
        longest = max((len(r.text) for m in middle for r in m.tool_results), default=0)
        low, high, best = SNAPSHOT_RESULT_CAP, longest // 2 + 1, (middle_text, arguments, SNAPSHOT_RESULT_CAP)
        for _ in range(CAP_REFINEMENTS):
            if high - low <= CAP_STEP:
                break
            cap = (low + high) // 2
            text = "".join(serialize_message(m, cap) for m in middle)
            priced = self._priced_pages(text, arguments, t)
            if priced is None:
                high = cap
            else:
                low, best = cap, (text, priced, cap)
        return best

    def why_not(self) -> str:
        """Which bounds stopped every cut, named."""
        reasons = []
        if "budget" in self.stopped_by:
            reasons.append(f"the budget of {self.budget:,} tokens")
        if "images" in self.stopped_by:
            reasons.append(f"{self.cost.profile.name}'s limit of {self.cost.profile.max_images} images per request")
        if "plans" in self.stopped_by:
            reasons.append(f"the search's limit of {MAX_SNAPSHOT_PLANS} priced cuts")
        return "no cut fits " + (" or ".join(reasons) or "the budget") + " with the middle as pages"
