"""What compaction returns: one result type for every rung, with its figures as fields;
the ladder's report; the policy that steers the ladder."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import UsageError
from .._history.messages import Message, ToolCall, ToolResult
from .._history.recall import recall_hint, short_range_ref
from .._providers.text_tokens import TextEstimator
from .._types import FIDELITIES, RUNGS, Fidelity, Layout, Rung, check_kind, public

if TYPE_CHECKING:  # the renderer (numba) is imported only when a snapshot is rendered
    from .._render.render import Page
    from .._render.shapes import Shape


@public
@dataclasses.dataclass(frozen=True)
class CompactionPolicy:
    """How the ladder compacts, beyond the budget.

    Attributes:
        protect_turns: the newest user turns the free rungs (elision, image drop) leave alone.
        elide_min_chars: tool results shorter than this are never elided.
        remarkable: ``remarkable(result, call) -> bool``: results to keep verbatim
            besides errors (which always are).
        layout: snapshot page layout, ``"flow"`` or ``"lines"``.
        shape: snapshot glyph shape (None: chosen from the text).
        page_size: snapshot page size limit, px (None: the largest the reader takes
            unresized). Pin ``shape`` and ``page_size`` to the previous pass's
            (``Compaction.keep_geometry``) so a growing conversation's earlier pages stay
            byte-identical: an automatic switch (to Unifont as CJK text grows, to smaller
            pages past 20 images) would redraw every page.
        fidelity: with no ``shape``, pages in the densest shape the reader is known to
            read ``"exact"``-ly (the default: a snapshot the model cannot read is a deleted
            conversation) or for the ``"gist"`` (``glyphpack.reading_profile``); ``"dense"``:
            the densest pages (5x8), whatever the reader.
        estimator: text token rates (None: the default estimate).
        tokenizer: an exact ``tokenizer(text) -> tokens``, used instead of the estimate.
        tail_tokens: the newest work the snapshot and summary keep verbatim: the newest
            round (the last assistant message and the results it waits for) and at least
            ``tail_for(budget)`` tokens of the newest messages: this many, or a tenth of
            the budget when that is less. pi keeps about 20k tokens of a 200k window (a
            tenth); so does the default, and a small budget still has room for pages.
        rungs: the rungs the ladder may use (default: all four), in the ladder's
            order (another order or a rung twice is refused, not silently reordered). ``("summarization",)``
            compacts as most harnesses do today; images a reader cannot take, or more
            images than a request may carry, are dropped whatever this says.
        summary_pages: when the whole middle cannot go on pages, page its newest part
            and summarize only the rest (True), or summarize the whole middle (False:
            deeper, so compactions come less often and bill less; a session with recall,
            whose summary stands behind a recall ref that brings every word back, uses it).
    """

    protect_turns: int = 2
    elide_min_chars: int = 1000
    remarkable: Callable[[ToolResult, ToolCall | None], bool] | None = None
    layout: Layout = "flow"
    shape: Shape | str | None = None
    page_size: tuple[int, int] | None = None
    fidelity: Fidelity = "exact"
    estimator: TextEstimator | None = None
    tokenizer: Callable[[str], int] | None = None
    tail_tokens: int = 20_000
    rungs: tuple[Rung, ...] = RUNGS
    summary_pages: bool = True

    def tail_for(self, budget: int) -> int:
        """Tokens of the newest messages kept verbatim in a view of ``budget`` tokens."""
        return min(self.tail_tokens, budget // 10)

    def __post_init__(self) -> None:
        check_kind(self.fidelity, FIDELITIES, "fidelity")
        for rung in self.rungs:
            check_kind(rung, RUNGS, "a rung")
        if list(self.rungs) != [rung for rung in RUNGS if rung in self.rungs]:
            raise UsageError(
                f"rungs {self.rungs!r}: the ladder runs each rung once, cheapest first ({', '.join(RUNGS)}); "
                f"give them in that order"
            )
        if not isinstance(self.summary_pages, bool):
            raise UsageError(f"summary_pages must be True or False, not {self.summary_pages!r}")
        if not isinstance(self.protect_turns, int) or self.protect_turns < 0:
            raise UsageError(f"protect_turns must be a non-negative int, not {self.protect_turns!r}")
        if not isinstance(self.tail_tokens, int) or self.tail_tokens < 0:
            raise UsageError(f"tail_tokens must be a non-negative int, not {self.tail_tokens!r}")
        if not isinstance(self.elide_min_chars, int) or self.elide_min_chars < 0:
            raise UsageError(f"elide_min_chars must be a non-negative int, not {self.elide_min_chars!r}")


@public
@dataclasses.dataclass(frozen=True, kw_only=True)
class RungReport:
    """What one rung did, as figures.

    Attributes:
        rung: which rung.
        tokens_before, tokens_after: estimated tokens of the view before and after.
        changed: blocks (reasoning drop, elision, image drop) or messages (snapshot, summarization) replaced.
        seconds: time the rung took.
        skipped: why the rung changed nothing (None when it ran).
        first_message, last_message: 1-based range of the messages a snapshot or summary replaced.
        ref: the recall ref of that range, as the view's note names it (``glyphpack_recall``
            and ``Session.recall`` take it).
        middle_chars: characters of the middle a snapshot rendered.
        middle_text_tokens: estimated text tokens of that middle.
        pages: snapshot pages; ``image_tokens``: what they take in the context.
        results_cut: tool results a snapshot cut to their ends (only when the whole
            middle could not fit as pages); ``result_cap``: the characters it kept of
            each end (at least ``SNAPSHOT_RESULT_CAP``, wider where the budget allowed).
        replaced_scripts: characters the pages draw as the replacement glyph, per
            script: always empty (a message with a character no font draws stays text).
        summary_tokens: estimated tokens of the summary; ``summarizer_calls``: calls made;
            ``summarizer_input_tokens``, ``summarizer_output_tokens``: what the provider
            billed for them (0 when the summarizer does not say: a caller's own function).
        note: a remark on why the rung ran (e.g. the reader has no vision).
    """

    rung: Rung
    tokens_before: int
    tokens_after: int
    changed: int = 0
    seconds: float = 0.0
    skipped: str | None = None
    first_message: int | None = None
    last_message: int | None = None
    ref: str = ""
    middle_chars: int = 0
    middle_text_tokens: int = 0
    pages: int = 0
    image_tokens: int = 0
    results_cut: int = 0
    result_cap: int = 0
    summary_tokens: int = 0
    summarizer_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    replaced_scripts: dict[str, int] = dataclasses.field(default_factory=dict)
    note: str = ""

    @property
    def freed(self) -> int:
        return self.tokens_before - self.tokens_after

    @classmethod
    def replaced_middle(
        cls, rung: Rung, before: int, after: int, messages: Sequence[Message], head: int, cut: int, started: float, **figures: Any
    ) -> RungReport:
        """The report of a rung that replaced ``messages[head:cut]`` (snapshot, summarization)."""
        ref = short_range_ref(messages, head, cut - 1)
        return cls(
            rung=rung, tokens_before=before, tokens_after=after, changed=cut - head, seconds=time.perf_counter() - started,
            first_message=head + 1, last_message=cut, ref=ref, **figures,
        )

    @property
    def details(self) -> str:
        """One line of prose from the figures (for tables; read the fields in code)."""
        if self.skipped is not None:
            text = f"skipped: {self.skipped}"
        elif self.rung == "elision":
            text = f"{self.changed} tool results and arguments elided"
        elif self.rung == "image drop":
            text = f"{self.changed} images dropped"
        elif self.rung == "snapshot":
            text = (
                f"messages {self.first_message}-{self.last_message} ({recall_hint(self.ref)}; {self.middle_chars:,} chars, "
                f"~{self.middle_text_tokens:,} text tokens) -> {self.pages} pages, {self.image_tokens:,} image tokens"
            )
            if self.results_cut:
                text += f"; {self.results_cut} long tool results cut to {self.result_cap:,} chars at each end to fit"
        elif self.rung == "tail cut":
            text = (
                f"{self.results_cut} tool results cut to their ends, the oldest first, each behind its ref (the newest of them "
                f"to {self.result_cap:,} chars at each end)"
                if self.result_cap
                else f"{self.changed} tool results and arguments elided and images dropped after the task, each behind its ref"
            )
        else:
            text = (
                f"messages {self.first_message}-{self.last_message} ({recall_hint(self.ref)}) -> {self.summary_tokens:,} tokens of summary "
                f"in {self.summarizer_calls} summarizer call(s)"
                + (f" billed {self.summarizer_input_tokens:,} in, {self.summarizer_output_tokens:,} out" if self.summarizer_input_tokens else "")
            )
        return f"{text} ({self.note})" if self.note else text


@dataclasses.dataclass(frozen=True)
class RungResult:
    """What every rung returns: the new view, its report, and any snapshot pages (with
    ``page_text``, the text they draw: stubs and cut results as drawn)."""

    view: tuple[Message, ...]
    report: RungReport
    pages: tuple[Page, ...] = ()
    page_text: str = ""
    #: Reports of further rungs this one ran (a summary followed by pages: the pages').
    also: tuple[RungReport, ...] = ()


@public
@dataclasses.dataclass(frozen=True, kw_only=True)
class LadderReport:
    """The whole ladder: the budget, tokens before and after, whether it fits, each rung."""

    budget: int
    tokens_before: int
    tokens_after: int
    fits: bool
    rungs: tuple[RungReport, ...] = ()
    message: str = ""

    def rung(self, name: Rung) -> RungReport | None:
        """The report of rung ``name``, if it ran."""
        return next((r for r in self.rungs if r.rung == name), None)

    def lines(self) -> list[str]:
        out = [f"{'rung':<14} {'before':>10} {'after':>10} {'freed':>10} {'changed':>8} {'pages':>6} {'seconds':>8}  details"]
        for r in self.rungs:
            out.append(
                f"{r.rung:<14} {r.tokens_before:>10,} {r.tokens_after:>10,} {r.freed:>10,} {r.changed:>8,} "
                f"{r.pages:>6} {r.seconds:>8.3f}  {r.details}"
            )
        out.append(self.message)
        return out

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"rungs": [dataclasses.asdict(r) | {"details": r.details} for r in self.rungs]}


@public
@dataclasses.dataclass(frozen=True, kw_only=True)
class Compaction:
    """A view to send instead of the stored history, and how it was made."""

    view: tuple[Message, ...]
    report: LadderReport
    pages: tuple[Page, ...] = ()  # snapshot pages, also present in the view as Image blocks
    page_text: str = ""  # the text the pages draw, exactly ("" without pages)

    def keep_geometry(self, policy: CompactionPolicy = CompactionPolicy()) -> CompactionPolicy:
        """``policy`` with this compaction's page geometry (shape and page size) pinned,
        for the next pass over the same conversation; unchanged when no pages were made."""
        if not self.pages:
            return policy
        first = self.pages[0]
        return dataclasses.replace(policy, shape=first.shape, page_size=(first.width, first.full_height))
