"""The public entry: ``render`` text to pages, ``count_pages`` without rasterizing."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._errors import LimitError
from ._kernels import EMPTY
from ._layout import Layout, count_rows, drawn_chars, lay_out, pages_for_rows
from ._png import encode_png
from ._raster import page_buffer, rasterize_pages
from ._shapes import DEFAULT_SHAPE, WIDE_SCRIPT_SHAPE, SHAPES, Shape, get_shape
from ._text import LAYOUTS, NormalizedText, TextCounts, normalize

#: Longest text accepted, in characters (a 10 MB log is well inside it).
MAX_TEXT_CHARS = 64 * 1024 * 1024
#: Default cap on pages per render; pass ``max_pages`` to raise it.
DEFAULT_MAX_PAGES = 5000
# Pages rasterized per batch: bounds memory (a 1568x784 page is 1.2 MB of pixels)
# while giving each thread several pages to encode.
_BATCH_PAGES = 8


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
    """

    png: bytes = dataclasses.field(repr=False)
    width: int
    height: int
    chars: int
    rows: int
    cols: int
    index: int
    shape: str
    layout: str


@dataclasses.dataclass(frozen=True)
class RenderReport:
    """What a rendering did to a text.

    ``folded``, ``replaced``, ``dropped``, ``controls`` and ``ansi_sequences`` count
    source characters changed by normalization (see ``glyphpack._text``);
    ``cells_used`` of ``cells_total`` are the cells on the billed page area that hold
    something; ``png_bytes`` is None when nothing was encoded (``plan``).
    """

    shape: str
    layout: str
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
    png_bytes: int | None = None

    @property
    def cells_used_fraction(self) -> float:
        return self.cells_used / self.cells_total if self.cells_total else 0.0

    def as_dict(self) -> dict:
        return dataclasses.asdict(self) | {"cells_used_fraction": round(self.cells_used_fraction, 4)}


class Pages(list):
    """A ``list[Page]`` that also carries the ``RenderReport`` of its rendering."""

    def __init__(self, pages: list[Page], report: RenderReport):
        super().__init__(pages)
        self.report = report


def _check_text(text: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__} (decode bytes first)")
    if len(text) > MAX_TEXT_CHARS:
        raise LimitError(
            f"text has {len(text):,} characters, over the limit of {MAX_TEXT_CHARS:,}; split it and render the parts"
        )


def _normalize_for(text: str, shape: Shape | str | None, layout: str) -> tuple[Shape, NormalizedText]:
    """Normalize for the shape given; with none, for the default 5x8 shape, or Unifont
    when the default font would draw most of the text as replacement glyphs (CJK text,
    for instance) and Unifont draws fewer."""
    if shape is not None:
        chosen = get_shape(shape)
        return chosen, normalize(text, chosen.atlas, layout)
    default = SHAPES[DEFAULT_SHAPE]
    normalized = normalize(text, default.atlas, layout)
    if normalized.counts.replaced * 2 <= normalized.glyphs.size:
        return default, normalized
    wide = SHAPES[WIDE_SCRIPT_SHAPE]
    wide_normalized = normalize(text, wide.atlas, layout)
    if wide_normalized.counts.replaced < normalized.counts.replaced:
        return wide, wide_normalized
    return default, normalized


def _prepare(
    text: str, shape: Shape | str | None, layout: str, page_size: tuple[int, int] | None
) -> tuple[Shape, NormalizedText, int]:
    _check_text(text)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    if page_size is not None:
        get_shape(shape).with_page_size(*page_size)  # an impossible page size fails before any work
    chosen, normalized = _normalize_for(text, shape, layout)
    if page_size is not None:
        chosen = chosen.with_page_size(*page_size)
    return chosen, normalized, count_rows(normalized, chosen, layout)


def _report(shape: Shape, layout: str, normalized: NormalizedText, rows: int, grid: np.ndarray | None,
            png_bytes: int | None) -> RenderReport:
    pages = pages_for_rows(rows, shape)
    counts: TextCounts = normalized.counts
    if grid is not None:
        cells_used = int(np.count_nonzero(grid != EMPTY))
        chars = drawn_chars(grid, shape.atlas)
    else:  # estimate without a grid: every glyph is a char, wide glyphs take two cells
        chars = int(np.count_nonzero(normalized.glyphs >= 0))
        cells_used = int(shape.atlas.cell_widths[normalized.glyphs[normalized.glyphs >= 0]].sum())
    return RenderReport(
        shape=shape.name,
        layout=layout,
        source_chars=normalized.source_chars,
        chars=chars,
        pages=pages,
        page_width=shape.page_width if rows else 0,
        page_height=shape.page_height(min(rows, shape.max_rows)),
        cells_used=cells_used,
        cells_total=rows * shape.cols,
        png_bytes=png_bytes,
        **dataclasses.asdict(counts),
    )


def plan(
    text: str,
    *,
    shape: Shape | str | None = None,
    layout: str = "flow",
    page_size: tuple[int, int] | None = None,
) -> RenderReport:
    """The ``RenderReport`` of rendering ``text``, without rasterizing or encoding."""
    chosen, normalized, rows = _prepare(text, shape, layout, page_size)
    return _report(chosen, layout, normalized, rows, None, None)


def count_pages(
    text: str,
    *,
    shape: Shape | str | None = None,
    layout: str = "flow",
    page_size: tuple[int, int] | None = None,
) -> int:
    """How many pages ``render`` would produce, without rasterizing."""
    chosen, _, rows = _prepare(text, shape, layout, page_size)
    return pages_for_rows(rows, chosen)


def render(
    text: str,
    *,
    shape: Shape | str | None = None,
    layout: str = "flow",
    page_size: tuple[int, int] | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
    progress: Callable[[int, int], None] | None = None,
) -> Pages:
    """Render ``text`` to pages of bitmap glyphs.

    Args:
        text: any str (lone surrogates, controls and ANSI escapes included).
        shape: a ``Shape``, a name from ``SHAPES``, or None to choose automatically.
        layout: ``"flow"`` (dense; newlines drawn as a marker) or ``"lines"``
            (a row per source line, long lines wrapped with a marker; for code).
        page_size: (width, height) page size limit in px, replacing the shape's.
        max_pages: refuse, before rasterizing, a text that needs more pages.
        progress: called as ``progress(pages_done, pages_total)`` after each batch.

    Returns:
        ``Pages``, a list of ``Page`` with a ``report`` attribute (``RenderReport``).
        An empty or all-whitespace text gives no pages.
    """
    chosen, normalized, rows = _prepare(text, shape, layout, page_size)
    total = pages_for_rows(rows, chosen)
    if total > max_pages:
        raise LimitError(
            f"text needs {total:,} pages of {chosen.page_width}x{chosen.page_height(chosen.max_rows)} px "
            f"with shape {chosen.name!r}, over max_pages={max_pages:,}; raise max_pages or split the text"
        )
    grid_layout = lay_out(normalized, chosen, layout, rows)
    pages = _encode_pages(grid_layout, progress)
    report = _report(chosen, layout, normalized, rows, grid_layout.grid, sum(len(p.png) for p in pages))
    return Pages(pages, report)


def _encode_pages(grid_layout: Layout, progress: Callable[[int, int], None] | None) -> list[Page]:
    shape = grid_layout.shape
    total = grid_layout.pages
    pages: list[Page] = []
    # One pixel buffer serves every batch: allocating fresh pages each time costs more
    # in page faults than rasterizing them.
    buffer = page_buffer(shape, min(_BATCH_PAGES, total))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for start in range(0, total, _BATCH_PAGES):
            stop = min(start + _BATCH_PAGES, total)
            pixels = rasterize_pages(grid_layout, start, stop, buffer)
            for offset, png in enumerate(pool.map(encode_png, pixels)):
                index = start + offset
                pages.append(
                    Page(
                        png=png,
                        width=int(pixels[offset].shape[1]),
                        height=int(pixels[offset].shape[0]),
                        chars=grid_layout.page_chars(index),
                        rows=int(pixels[offset].shape[0]) // shape.pitch,
                        cols=shape.cols,
                        index=index,
                        shape=shape.name,
                        layout=grid_layout.layout,
                    )
                )
            if progress is not None:
                progress(stop, total)
    return pages
