"""The public entry: ``render`` text to pages, ``count_pages`` without rasterizing."""

from __future__ import annotations

import dataclasses
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .._errors import LimitError, ProfileWarning, UsageError
from .._providers.blocks import image_block
from .._providers.profile import Profile
from .._providers.resolve import resolve
from .._providers.text_tokens import DEFAULT_ESTIMATOR, script_classes
from .._types import FIDELITIES, LAYOUTS, Api, Fidelity, Layout, check_kind, public
from .fonts import FontAtlas
from .layout import PageBreaks, page_breaks, wrap_glyph
from .png import encode_png
from .raster import draw
from .shapes import DEFAULT_SHAPE, SHAPES, WIDE_SCRIPT_SHAPE, Shape, get_shape, reading_shape, shape_metadata
from .text import NormalizedText, certainly_drawn, normalize

#: Longest text accepted, in characters (a 10 MB log is well inside it).
MAX_TEXT_CHARS = 64 * 1024 * 1024
#: Default cap on pages per render; pass ``max_pages`` to raise it.
DEFAULT_MAX_PAGES = 5000


@public
@dataclasses.dataclass(frozen=True)
class Page:
    """One rendered page.

    Attributes:
        png: the page as PNG bytes (1-bit, black on white).
        width, height: pixel size; the height hugs the rows used.
        chars: characters drawn on the page (newline markers included).
        rows, cols: the cell grid on the page.
        index: position in the rendering, from 0.
        shape: name of the shape drawn with.
        layout: ``"flow"`` or ``"lines"``.
        tokens: image tokens billed for this page on the profile's route (None
            without a model).
        profile: the ``Profile`` the page was sized for (None without a model).
        full_height: the height of a full page of the rendering (its page size limit
            holds ``width x full_height``); a last page may be shorter.
    """

    png: bytes = dataclasses.field(repr=False)
    width: int
    height: int
    chars: int
    rows: int
    cols: int
    index: int
    shape: str
    layout: Layout
    tokens: int | None = None
    profile: Profile | None = dataclasses.field(default=None, repr=False)
    full_height: int = 0

    def to_block(self, api: Api, *, cache: bool = False) -> dict[str, Any]:
        """This page as an image content block for ``api``: ``anthropic``,
        ``openai-chat``, ``openai-responses`` or ``gemini``; ``cache=True`` marks an
        Anthropic prompt-cache breakpoint (see ``glyphpack._blocks.image_block``)."""
        return image_block(self.png, api, self.profile, cache=cache)


@public
@dataclasses.dataclass(frozen=True, kw_only=True)
class RenderReport:
    """What a rendering did to a text and what it costs.

    ``folded``, ``replaced``, ``dropped``, ``controls`` and ``ansi_sequences`` count
    source characters changed by normalization (see ``glyphpack._text``), and
    ``replaced_scripts`` the replaced ones per script (``{"CJK": 12}``; empty when
    every character was drawn);
    ``cells_used`` of ``cells_total`` are the cells on the billed page area that hold
    something; ``png_bytes`` is None when nothing was encoded (``plan``).
    With a model: ``image_tokens`` billed for all pages, ``requests`` needed to carry
    them (the route's images-per-request limit). ``text_tokens`` estimates what the
    same text costs sent as text.
    """

    shape: str
    layout: Layout
    source_chars: int
    chars: int
    pages: int
    page_width: int
    page_height: int
    cells_used: int
    cells_total: int
    folded: int
    replaced: int
    dropped: int
    controls: int
    ansi_sequences: int
    text_tokens: int
    replaced_scripts: dict[str, int] = dataclasses.field(default_factory=dict)
    png_bytes: int | None = None
    model: str | None = None
    profile: str | None = None
    image_tokens: int | None = None
    requests: int | None = None
    shape_reason: str = ""

    @property
    def cells_used_fraction(self) -> float:
        return self.cells_used / self.cells_total if self.cells_total else 0.0

    @property
    def compression(self) -> float | None:
        """Text tokens per billed image token (None without a model or when free)."""
        if not self.image_tokens:
            return None
        return self.text_tokens / self.image_tokens

    def as_dict(self) -> dict:
        extra = {"cells_used_fraction": round(self.cells_used_fraction, 4)}
        if self.compression is not None:
            extra["compression"] = round(self.compression, 3)
        return dataclasses.asdict(self) | extra


@public
class Pages(list):
    """A ``list[Page]`` that also carries the ``RenderReport`` of its rendering."""

    def __init__(self, pages: list[Page], report: RenderReport):
        super().__init__(pages)
        self.report = report


def _check_text(text: str) -> None:
    if not isinstance(text, str):
        raise UsageError(f"text must be str, not {type(text).__name__} (decode bytes first)")
    if len(text) > MAX_TEXT_CHARS:
        raise LimitError(
            f"text has {len(text):,} characters, over the limit of {MAX_TEXT_CHARS:,}; split it and render the parts"
        )


#: Texts this long are normalized on a page thread (``_normalized``).
_HANDOFF_CHARS = 1 << 15


def _normalized(text: str, atlas: FontAtlas, layout: Layout) -> NormalizedText:
    """``normalize`` with the script classes counted. A long text is normalized on one
    of the page threads: its arrays (the code points, the glyphs) are fresh memory, and
    on the caller's thread here that cost 1.6 times the work itself in page faults
    (glibc's main heap gives large blocks back at once; a thread's arena keeps them).
    The hand-off costs less than the faults of a text over ``_HANDOFF_CHARS``."""
    if len(text) < _HANDOFF_CHARS:
        return normalize(text, atlas, layout, script_classes())
    return _pool().submit(normalize, text, atlas, layout, script_classes()).result()


def _normalize_for(
    text: str, shape: Shape | str | None, layout: Layout, preferred: Shape
) -> tuple[Shape, NormalizedText, dict[str, int] | None]:
    """Normalize for the shape given; with none, for ``preferred``, or Unifont when the
    preferred font would draw some character as the replacement glyph (CJK in a 5x8
    page, for instance) and Unifont draws fewer. The third value, when Unifont was
    chosen so, is what ``preferred`` would have replaced, per script."""
    if shape is not None:
        chosen = get_shape(shape)
        return chosen, _normalized(text, chosen.atlas, layout), None
    normalized = _normalized(text, preferred.atlas, layout)
    if normalized.counts.replaced == 0:
        return preferred, normalized, None
    wide = SHAPES[WIDE_SCRIPT_SHAPE]
    wide_normalized = _normalized(text, wide.atlas, layout)
    if wide_normalized.counts.replaced < normalized.counts.replaced:
        return wide, wide_normalized, normalized.counts.replaced_scripts
    return preferred, normalized, None


def _preferred_shape(shape: Shape | str | None, profile: Profile | None, fidelity: Fidelity | None) -> tuple[Shape, str]:
    """The shape to try first, and why (the report's ``shape_reason``)."""
    if shape is not None:
        return get_shape(shape), "given by the caller"
    if fidelity is None:  # the reader's exact shape when there is a reader: pages it cannot read save nothing
        if profile is None:
            return SHAPES[DEFAULT_SHAPE], "the default without a model"
        fidelity = "exact"
    check_kind(fidelity, FIDELITIES, "fidelity")
    if fidelity == "dense":
        return SHAPES[DEFAULT_SHAPE], "the densest shape (fidelity 'dense')"
    if profile is None:
        raise UsageError(f"fidelity {fidelity!r} needs a model: it picks the shape the model is known to read")
    chosen, reading = reading_shape(profile, fidelity)
    evidence = reading.evidence(fidelity)
    if reading.name == "conservative":  # one wording for it everywhere: the README, the CLI, the docs
        return chosen, f"no reading evidence for {profile.model}: {evidence.note} ({evidence.source})"
    known = "read exactly" if fidelity == "exact" else "read for the gist"
    return chosen, f"the densest shape {reading.name} is known to {known} ({evidence.source}: {evidence.note})"


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Everything decided before rasterizing."""

    text: str
    shape: Shape
    layout: Layout
    normalized: NormalizedText
    breaks: PageBreaks
    profile: Profile | None
    shape_reason: str = ""

    @property
    def pages(self) -> int:
        return self.breaks.pages

    @property
    def rows(self) -> int:
        return self.breaks.rows


def _prepare(
    text: str,
    shape: Shape | str | None,
    layout: Layout,
    page_size: tuple[int, int] | None,
    model: str | Profile | None,
    max_pages: int | None = None,
    other_images: int = 0,
    fidelity: Fidelity | None = None,
) -> _Plan:
    _check_text(text)
    check_kind(layout, LAYOUTS, "layout")
    profile = None
    if model is not None:
        profile = resolve(model)
        profile.fits(1, 1)  # a text-only model fails here, before any work
    preferred, reason = _preferred_shape(shape, profile, fidelity)
    densest = preferred  # denser than Unifont, the one other shape automatic choice picks
    if page_size is not None:
        densest = densest.with_page_size(*page_size)  # an impossible page size fails before any work
    elif profile is not None:
        densest = densest.with_page_size(*profile.page_size(densest))
    if max_pages is not None and len(text) > max_pages * densest.cells_per_page:
        # Before normalizing: a lower bound from the characters that are always drawn
        # (never more than the text's length, so only counted for a text that long).
        at_least = -(-certainly_drawn(text) // densest.cells_per_page)
        if at_least > max_pages:
            raise LimitError(
                f"text needs at least {at_least:,} pages of {densest.page_width}x{densest.page_height(densest.max_rows)} px, "
                f"over max_pages={max_pages:,}; raise max_pages or split the text"
            )
    chosen, normalized, lacked = _normalize_for(text, shape, layout, preferred)
    if lacked is not None:
        scripts = ", ".join(f"{count:,} {script}" for script, count in lacked.items())
        reason = f"Unifont: {preferred.name}'s font lacks characters of the text ({scripts}; tried first: {reason})"
    if page_size is not None:
        chosen = chosen.with_page_size(*page_size)
        full_page = (chosen.page_width, chosen.page_height(chosen.max_rows))
        if profile is not None and not bool(profile.fits(*full_page)):
            warnings.warn(
                f"{full_page[0]}x{full_page[1]} pages will be resized by {profile.name} to "
                f"{'x'.join(map(str, profile.resize(*full_page)))}, which blurs small glyphs; "
                f"leave page_size unset to get pages sized for the model",
                ProfileWarning,
                stacklevel=3,
            )
    elif profile is not None:
        chosen = chosen.with_page_size(*profile.page_size(chosen))
        # Every glyph takes a cell: a lower bound on the pages that may already settle
        # the many-image rule, so that the pages are counted once, at the smaller size.
        glyphs = normalized.glyphs
        cells = glyphs.size if layout == "flow" else int(np.count_nonzero(glyphs >= 0))
        at_least = -(-cells // chosen.cells_per_page)
        chosen = chosen.with_page_size(*profile.page_size(chosen, at_least + other_images))
    breaks = page_breaks(normalized, chosen, layout)
    if profile is not None and page_size is None:
        # Many pages may need smaller ones (Anthropic: over 20 images, each <= 2000 px).
        resized = chosen.with_page_size(*profile.page_size(chosen, breaks.pages + other_images))
        if resized != chosen:
            chosen = resized
            breaks = page_breaks(normalized, chosen, layout)
    return _Plan(text, chosen, layout, normalized, breaks, profile, reason)


def _text_tokens(prepared: _Plan) -> int:
    """The text-token estimate of the input, from the classes normalization counted
    (in its own pass over the code points: no second decode of the text)."""
    counted = prepared.normalized.classes_counted
    assert counted is not None, "render normalizes with script_classes()"
    return DEFAULT_ESTIMATOR.estimate_counts(counted)


def _report(prepared: _Plan, pages: list[Page] | None, cells_drawn: int = 0) -> RenderReport:
    """The report of a plan, or of its drawn ``pages`` (with the cells they hold)."""
    shape, normalized, rows, profile = prepared.shape, prepared.normalized, prepared.rows, prepared.profile
    if pages is not None:
        cells_used = cells_drawn
        chars = sum(page.chars for page in pages)
    else:  # not drawn: every glyph is a char, wide glyphs take two cells
        glyphs = normalized.glyphs[normalized.glyphs >= 0]
        chars = int(glyphs.size)
        cells_used = int(shape.atlas.cell_widths[glyphs].sum())
    image_tokens = requests = None
    if profile is not None:
        if pages is not None:
            image_tokens = sum(page.tokens or 0 for page in pages)
        else:  # every page but the last is full height
            full = shape.page_height(shape.max_rows)
            last = shape.page_height(rows - (prepared.pages - 1) * shape.max_rows) if rows else 0
            image_tokens = (prepared.pages - 1) * profile.tokens(shape.page_width, full) if prepared.pages > 1 else 0
            image_tokens += profile.tokens(shape.page_width, last) if rows else 0
        requests = -(-prepared.pages // profile.max_images) if profile.max_images else 1
    return RenderReport(
        shape=shape.name,
        layout=prepared.layout,
        source_chars=normalized.source_chars,
        chars=chars,
        pages=prepared.pages,
        page_width=shape.page_width if rows else 0,
        page_height=shape.page_height(min(rows, shape.max_rows)),
        cells_used=cells_used,
        cells_total=rows * shape.cols,
        text_tokens=_text_tokens(prepared),
        png_bytes=None if pages is None else sum(len(p.png) for p in pages),
        model=None if profile is None else profile.model,
        profile=None if profile is None else profile.name,
        image_tokens=image_tokens,
        requests=requests,
        shape_reason=prepared.shape_reason,
        **dataclasses.asdict(normalized.counts),
    )


@public
def plan(
    text: str,
    *,
    model: str | Profile | None = None,
    shape: Shape | str | None = None,
    layout: Layout = "flow",
    page_size: tuple[int, int] | None = None,
    fidelity: Fidelity | None = None,
) -> RenderReport:
    """The ``RenderReport`` of rendering ``text`` (pages, cost), without rasterizing or encoding."""
    return _report(_prepare(text, shape, layout, page_size, model, fidelity=fidelity), None)


def page_sizes(
    text: str,
    *,
    model: str | Profile | None = None,
    shape: Shape | str | None = None,
    layout: Layout = "flow",
    page_size: tuple[int, int] | None = None,
    other_images: int = 0,
    fidelity: Fidelity | None = None,
) -> list[tuple[int, int]]:
    """(width, height) of each page ``render`` makes with the same arguments, without
    drawing: what a search over many texts prices before it renders one."""
    prepared = _prepare(text, shape, layout, page_size, model, None, other_images, fidelity)
    chosen, rows = prepared.shape, prepared.rows
    return [
        (chosen.page_width, chosen.page_height(min(chosen.max_rows, rows - index * chosen.max_rows)))
        for index in range(prepared.pages)
    ]


@public
def count_pages(
    text: str,
    *,
    model: str | Profile | None = None,
    shape: Shape | str | None = None,
    layout: Layout = "flow",
    page_size: tuple[int, int] | None = None,
    fidelity: Fidelity | None = None,
) -> int:
    """How many pages ``render`` would produce, without rasterizing."""
    return _prepare(text, shape, layout, page_size, model, fidelity=fidelity).pages


@public
def render(
    text: str,
    *,
    model: str | Profile | None = None,
    shape: Shape | str | None = None,
    layout: Layout = "flow",
    page_size: tuple[int, int] | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
    progress: Callable[[int, int], None] | None = None,
    other_images: int = 0,
    fidelity: Fidelity | None = None,
) -> Pages:
    """Render ``text`` to pages of bitmap glyphs.

    Args:
        text: any str (lone surrogates, controls and ANSI escapes included).
        model: a model id (``"claude-sonnet-4-5"``, ``"openrouter/openai/gpt-5.4"``) or
            a ``Profile``: pages are sized so that model never resizes them, and each
            page carries its billed ``tokens``. Raises ``TextOnlyModelError`` for a
            model without vision.
        shape: a ``Shape``, a name from ``SHAPES``, or None to choose automatically.
        layout: ``"flow"`` (dense; newlines drawn as a marker) or ``"lines"``
            (a row per source line, long lines wrapped with a marker; for code).
        page_size: (width, height) page size limit in px, replacing the shape's
            (or the model's).
        max_pages: refuse, before rasterizing, a text that needs more pages.
        progress: called as ``progress(pages_done, pages_total)`` after each page.
        fidelity: with no shape, ``"exact"`` picks the densest shape the model is
            known to read exactly (ids, numbers, code), ``"gist"`` the densest known to
            keep the gist (``glyphpack.reading_profile``), ``"dense"`` the densest shape
            (5x8) whatever the reader; the report's ``shape_reason`` says which and why.
            None (the default): ``"exact"`` with a model, ``"dense"`` without one.
        other_images: images the same request carries besides these pages; they count
            toward the provider's many-image rule (Anthropic: more than 20 images in a
            request, each at most 2000 px), which can make pages smaller.

    Returns:
        ``Pages``, a list of ``Page`` with a ``report`` attribute (``RenderReport``).
        An empty or all-whitespace text gives no pages.
    """
    return _render_prepared(_prepare(text, shape, layout, page_size, model, max_pages, other_images, fidelity), max_pages, progress)


def _render_prepared(prepared: _Plan, max_pages: int, progress: Callable[[int, int], None] | None) -> Pages:
    """``render`` of a plan already made (the CLI prices it first, then draws the same)."""
    chosen = prepared.shape
    if prepared.pages > max_pages:
        raise LimitError(
            f"text needs {prepared.pages:,} pages of {chosen.page_width}x{chosen.page_height(chosen.max_rows)} px "
            f"with shape {chosen.name!r}, over max_pages={max_pages:,}; raise max_pages or split the text"
        )
    profile = prepared.profile
    if profile is not None and profile.max_images is not None and prepared.pages > profile.max_images:
        warnings.warn(
            f"{prepared.pages:,} pages exceed {profile.name}'s {profile.max_images} images per request: "
            f"they need {-(-prepared.pages // profile.max_images)} requests",
            ProfileWarning,
            stacklevel=3,
        )
    return _draw_pages(prepared, progress)


_POOL: ThreadPoolExecutor | None = None
_POOL_THREADS = 1
_POOL_LOCK = threading.Lock()


def _forget_pool_in_child() -> None:
    """A forked child inherits the pool without its threads (its next render would wait
    forever) and perhaps a held lock: it starts with neither."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


#: Environment variable: how many threads draw pages (default: the cores this process may
#: run on). A host running many agents gives each fewer.
RENDER_THREADS_VARIABLE = "GLYPHPACK_RENDER_THREADS"


def render_threads() -> int:
    """The page threads the pool is made with: ``GLYPHPACK_RENDER_THREADS``, else the
    cores this process may run on (its affinity, which a container or ``taskset``
    narrows; ``os.cpu_count`` counts the machine's)."""
    value = os.environ.get(RENDER_THREADS_VARIABLE, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise UsageError(f"{RENDER_THREADS_VARIABLE} must be a whole number of threads, 1 or more; it is {value!r}")
        return int(value)
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _pool() -> ThreadPoolExecutor:
    """One pool of page threads for the process, made on first use (making one per call
    cost 0.35 ms, more at the 90th percentile) with ``render_threads()`` threads. A page
    is drawn and deflated in one task: both the kernel and ISA-L's deflate release the
    GIL, so pages go through on every core at once, with no parallel region inside the
    kernel and no OpenMP threads."""
    global _POOL, _POOL_THREADS
    with _POOL_LOCK:
        if _POOL is None:
            _POOL_THREADS = render_threads()
            _POOL = ThreadPoolExecutor(max_workers=_POOL_THREADS, thread_name_prefix="glyphpack-page")
        return _POOL


def _draw_pages(prepared: _Plan, progress: Callable[[int, int], None] | None) -> Pages:
    """Every page of the plan, drawn and encoded; the report."""
    shape, profile, total = prepared.shape, prepared.profile, prepared.pages
    glyphs, wrap = prepared.normalized.glyphs, wrap_glyph(shape.atlas, prepared.layout)
    full_height = shape.page_height(shape.max_rows)
    metadata = shape_metadata(shape, prepared.layout)
    # Billed tokens per page height (every page but the last is full): priced once each.
    tokens_of: dict[int, int | None] = {}

    def page(index: int) -> tuple[Page, int]:
        drawn = draw(glyphs, prepared.breaks, index, shape, wrap)
        height = drawn.rows * shape.pitch
        png = encode_png(drawn.scanlines, shape.page_width, metadata)
        tokens = tokens_of.get(height, -1)
        if tokens == -1:
            tokens = tokens_of[height] = None if profile is None else profile.tokens(shape.page_width, height)
        return Page(
            png=png, width=shape.page_width, height=height, chars=drawn.chars, rows=drawn.rows, cols=shape.cols,
            index=index, shape=shape.name, layout=prepared.layout, tokens=tokens, profile=profile,
            full_height=full_height,
        ), drawn.cells  # fmt: skip

    # A small call is drawn on this thread: no hand-off.
    results = map(page, range(total)) if total <= 1 else _in_pool(page, total)
    drawn_pages = []
    for result in results:
        drawn_pages.append(result)
        if progress is not None:
            progress(len(drawn_pages), total)
    pages = [drawn for drawn, _ in drawn_pages]
    return Pages(pages, _report(prepared, pages, sum(cells for _, cells in drawn_pages)))


#: Pages drawn per task of the pool: a hand-off cost about 40 us (the caller woken for
#: each result), a tenth of a page's work at 5x8. The last tasks take a page each, so
#: that no thread is left with a whole task while the others have nothing.
PAGES_PER_TASK = 2


def task_firsts(total: int, threads: int) -> list[int]:
    """The first page of each task for ``total`` pages on ``threads`` threads:
    ``PAGES_PER_TASK`` pages to a task until no more than ``2 * threads`` are left, then
    one a task."""
    firsts, first = [], 0
    while first < total:
        firsts.append(first)
        first += PAGES_PER_TASK if total - first > 2 * threads else 1
    return firsts


def _in_pool(page: Callable[[int], tuple[Page, int]], total: int) -> Iterator[tuple[Page, int]]:
    """``page(0)``, ..., ``page(total - 1)`` submitted to the pool's threads now, in tasks
    of ``task_firsts``; their results in order."""
    pool = _pool()
    firsts = task_firsts(total, _POOL_THREADS)

    def pages(task: int) -> list[tuple[Page, int]]:
        return [page(index) for index in range(firsts[task], firsts[task + 1] if task + 1 < len(firsts) else total)]

    pending = [pool.submit(pages, task) for task in range(len(firsts))]

    def results() -> Iterator[tuple[Page, int]]:
        try:
            for future in pending:
                yield from future.result()
        finally:  # an error (or a caller that stops early) leaves no page queued
            for future in pending:
                future.cancel()

    return results()
