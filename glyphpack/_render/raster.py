"""Rasterization: the thin Python around the page kernel (glyph bits, scratch buffers)."""

from __future__ import annotations

import dataclasses
import functools
import threading

import numpy as np

from .fonts import FontAtlas
from .kernels import draw_page
from .shapes import Shape


def pad_glyph(atlas: FontAtlas, wrap: int) -> int:
    """In ``flow`` (``wrap`` -1) with wide glyphs, the wrap marker: drawn in the cell a
    wide glyph leaves at a row's end, so the reader does not read a space there."""
    return atlas.wrap_index if wrap < 0 and atlas.has_wide else -1


def glyph_cell_bits(shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    """``_cell_bits`` of the shape's atlas and advance (shapes differing only in page
    size share them)."""
    return _cell_bits(shape.atlas, shape.advance)


@functools.lru_cache(maxsize=32)
def _cell_bits(atlas: FontAtlas, advance: int) -> tuple[np.ndarray, np.ndarray]:
    """Each glyph's pixel rows as bits, a cell at a time, for ``draw_page``.

    Returns:
        uint64[N + 1 + W, gh]: row g holds glyph g's first cell (``advance`` bits per
        pixel row, the leftmost pixel most significant), row N is all 0 (blank cells),
        and rows N + 1 .. N + W the second cells of the W wide glyphs: a cell's pixel
        rows side by side, read at once;
        int32[N]: the row of each wide glyph's second cell, -1 for a narrow glyph.
    A glyph's bitmap is zero beyond its own width, so spacing columns are 0.
    """
    n, gh, bitmap_width = atlas.bitmaps.shape
    wide = np.flatnonzero(atlas.cell_widths == 2)
    right_halves = np.full(n, -1, dtype=np.int32)
    right_halves[wide] = n + 1 + np.arange(wide.size, dtype=np.int32)
    # Pixel x of a cell weighs 2 ** (advance - 1 - x).
    weights = np.left_shift(np.uint64(1), np.arange(advance - 1, -1, -1, dtype=np.uint64))

    def cells(first_pixel: int, glyphs: np.ndarray) -> np.ndarray:
        """uint64[len(glyphs), gh]: the cell starting at bitmap column ``first_pixel``."""
        ink = np.zeros((glyphs.size, gh, advance), dtype=np.uint64)
        available = max(0, min(advance, bitmap_width - first_pixel))
        ink[:, :, :available] = atlas.bitmaps[glyphs, :, first_pixel : first_pixel + available]
        return (ink * weights).sum(axis=2, dtype=np.uint64)

    bits = np.zeros((n + 1 + wide.size, gh), dtype=np.uint64)
    bits[:n] = cells(0, np.arange(n))
    if wide.size:
        bits[n + 1 :] = cells(advance, wide)
    return bits, right_halves


@dataclasses.dataclass(frozen=True)
class DrawnPage:
    """One page drawn by ``draw``: its PNG scanlines and what it holds.

    Attributes:
        scanlines: uint8[rows * pitch, 1 + ceil(width / 8)], filter byte then packed
            1-bit pixels per image row (a view into the thread's scratch buffer, valid
            until that thread draws its next page).
        rows: cell rows used; chars: characters drawn (wrap markers not counted);
        cells: cells holding anything (wide glyphs count two).
    """

    scanlines: np.ndarray
    rows: int
    chars: int
    cells: int


def scanline_words(scanlines: np.ndarray) -> np.ndarray:
    """uint32[H, (B - 1) // 4]: the pixel bytes of uint8[H, B] C-contiguous scanlines
    after each row's filter byte, a 32-bit word at a time (a view: unaligned, each row
    ``B`` bytes after the last), for ``draw_page`` to store a word at once."""
    height, row_bytes = scanlines.shape
    if height == 0 or row_bytes < 5:  # no whole word: the kernel stores bytes
        return np.empty((height, 0), dtype=np.uint32)
    return np.ndarray(
        shape=(height, (row_bytes - 1) // 4), dtype=np.uint32, buffer=scanlines, offset=1, strides=(row_bytes, 4)
    )


_scratch = threading.local()


def _buffers(shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    """This thread's (scanlines, their words) scratch for pages of ``shape``: reused,
    since allocating a fresh page each time costs more in page faults than drawing it."""
    key = (shape.max_rows, shape.pitch, shape.page_width)
    cached = getattr(_scratch, "buffers", None)
    if cached is None or cached[0] != key:
        scanlines = np.empty((shape.max_rows * shape.pitch, 1 + -(-shape.page_width // 8)), dtype=np.uint8)
        cached = _scratch.buffers = (key, scanlines, scanline_words(scanlines))
    return cached[1], cached[2]


@dataclasses.dataclass(frozen=True, eq=False)
class PageBreaks:
    """Where a glyph stream's pages begin, for one shape and layout.

    Attributes:
        starts: int64[pages], the first glyph index of each page.
        rows: cell rows of the whole stream.
        row_starts: int32[rows + 1], the first glyph index of every row, then the
            stream's length; None in ``flow`` without wide glyphs (every row holds
            ``cols`` glyphs: nothing to lay out).
    """

    starts: np.ndarray
    rows: int
    row_starts: np.ndarray | None = None

    @property
    def pages(self) -> int:
        return int(self.starts.size)


_NO_ROWS = np.zeros(1, dtype=np.int32)


def _kernel(glyphs: np.ndarray, shape: Shape, wrap_glyph: int, narrow_flow: bool, row_starts: np.ndarray, start: int, first_row: int, pixels: bool) -> np.ndarray:
    """int64[4] ``draw_page``'s stats: the page beginning at ``glyphs[start]`` (row
    ``first_row``; ``narrow_flow``: drawn straight from the stream) drawn into this
    thread's scratch scanlines, or with ``pixels`` False the whole stream laid out into
    ``row_starts``."""
    scanlines, words = _buffers(shape)
    cell_bits, right_halves = glyph_cell_bits(shape)
    stats = np.zeros(4, dtype=np.int64)
    draw_page(
        glyphs, start, shape.atlas.cell_widths, shape.cols, wrap_glyph, pad_glyph(shape.atlas, wrap_glyph),
        narrow_flow, row_starts, first_row, cell_bits, right_halves, shape.advance, shape.pitch,
        shape.max_rows, scanlines, words, stats, pixels,
    )  # fmt: skip
    return stats


def draw(glyphs: np.ndarray, breaks: PageBreaks, index: int, shape: Shape, wrap_glyph: int) -> DrawnPage:
    """Draw page ``index`` of the int32[n] glyph stream as ``page_starts`` cut it;
    ``wrap_glyph`` is -1 in the ``flow`` layout."""
    row_starts = _NO_ROWS if breaks.row_starts is None else breaks.row_starts
    rows, chars, cells, _ = (
        int(v)
        for v in _kernel(glyphs, shape, wrap_glyph, breaks.row_starts is None, row_starts, int(breaks.starts[index]), index * shape.max_rows, True)
    )
    return DrawnPage(_buffers(shape)[0][: rows * shape.pitch], rows, chars, cells)


def page_starts(glyphs: np.ndarray, shape: Shape, wrap_glyph: int, narrow: bool) -> PageBreaks:
    """Where each page of the int32[n] glyph stream begins, the rows of all of them, and
    (but in ``flow`` with ``narrow`` glyphs only, where every row holds ``cols``) where
    each row begins: the stream laid out once, for the pages to be drawn from."""
    if wrap_glyph < 0 and narrow:
        return PageBreaks(np.arange(0, glyphs.size, shape.cols * shape.max_rows, dtype=np.int64), -(-glyphs.size // shape.cols))
    laid = np.empty(glyphs.size + 2, dtype=np.int32)  # rows <= glyphs + 1; the pages past the rows are never touched
    rows = int(_kernel(glyphs, shape, wrap_glyph, False, laid, 0, 0, False)[0])
    row_starts = laid[: rows + 1].copy()
    return PageBreaks(row_starts[:rows:shape.max_rows].astype(np.int64), rows, row_starts)
