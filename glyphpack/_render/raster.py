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
    """Each glyph's pixel rows as bits, a cell at a time, for ``draw_cells``.

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


def _buffers(shape: Shape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This thread's (grid, scanlines, their words) scratch for pages of ``shape``:
    reused, since allocating a fresh page each time costs more in page faults than
    drawing it."""
    key = (shape.cols, shape.max_rows, shape.pitch, shape.page_width)
    cached = getattr(_scratch, "buffers", None)
    if cached is None or cached[0] != key:
        grid = np.empty((shape.max_rows, shape.cols), dtype=np.int32)
        scanlines = np.empty((shape.max_rows * shape.pitch, 1 + -(-shape.page_width // 8)), dtype=np.uint8)
        cached = _scratch.buffers = (key, grid, scanlines, scanline_words(scanlines))
    return cached[1], cached[2], cached[3]


def _page_kernel(glyphs: np.ndarray, start: int, shape: Shape, wrap_glyph: int, narrow: bool, pixels: bool) -> np.ndarray:
    """int64[4] ``draw_page``'s stats for the page beginning at ``glyphs[start]``: drawn
    into this thread's scratch scanlines, or with ``pixels`` False only laid out."""
    grid, scanlines, words = _buffers(shape)
    cell_bits, right_halves = glyph_cell_bits(shape)
    stats = np.zeros(4, dtype=np.int64)
    draw_page(
        glyphs, start, shape.atlas.cell_widths, shape.cols, wrap_glyph, pad_glyph(shape.atlas, wrap_glyph),
        wrap_glyph < 0 and narrow, cell_bits, right_halves, shape.advance, shape.pitch, grid, scanlines, words, stats, pixels,
    )  # fmt: skip
    return stats


def draw(glyphs: np.ndarray, start: int, shape: Shape, wrap_glyph: int, narrow: bool) -> DrawnPage:
    """Lay out and draw the page beginning at ``glyphs[start]`` (int32[n] glyph stream,
    ``start`` from ``page_starts``); ``wrap_glyph`` is -1 in the ``flow`` layout;
    ``narrow``: the stream holds no wide glyph (``NormalizedText.narrow``)."""
    rows, chars, cells, _ = (int(v) for v in _page_kernel(glyphs, start, shape, wrap_glyph, narrow, True))
    return DrawnPage(_buffers(shape)[1][: rows * shape.pitch], rows, chars, cells)


def page_starts(glyphs: np.ndarray, shape: Shape, wrap_glyph: int, narrow: bool) -> tuple[np.ndarray, int]:
    """int64[pages], where each page of the int32[n] glyph stream begins, and the rows
    of all of them (``draw_page`` laying out without drawing, page after page);
    ``narrow`` as for ``draw``."""
    if wrap_glyph < 0 and narrow:
        # Flow with narrow glyphs only: every row holds ``cols`` glyphs, no counting.
        rows = -(-glyphs.size // shape.cols)
        return np.arange(0, glyphs.size, shape.cols * shape.max_rows, dtype=np.int64), rows
    starts = []
    rows = 0
    start = 0
    while start < glyphs.size:
        starts.append(start)
        stats = _page_kernel(glyphs, start, shape, wrap_glyph, narrow, False)
        rows += int(stats[0])
        start = int(stats[3])
    return np.array(starts, dtype=np.int64), rows
