"""Rasterization: the thin Python around the page kernel (glyph bits, scratch buffers)."""

from __future__ import annotations

import dataclasses
import functools
import math
import threading

import numpy as np

from .kernels import draw_page
from .shapes import Shape


@functools.lru_cache(maxsize=32)
def glyph_row_bits(shape: Shape) -> np.ndarray:
    """uint64[gh, N + 1]: each glyph's pixel rows as bits, leftmost pixel most
    significant; column N is all 0 (drawn for blank cells).

    A narrow glyph's row is ``advance`` bits wide, a wide one's ``2 * advance``; a
    glyph's bitmap is zero beyond its own width, so the cell's spacing columns are 0.
    """
    atlas = shape.atlas
    n, gh, bitmap_width = atlas.bitmaps.shape
    spans = shape.advance * atlas.cell_widths.astype(np.int64)  # at most 64 (``MAX_ADVANCE``)
    width = min(bitmap_width, int(spans.max()))
    # Bit weight of pixel x in a span of s bits: 2 ** (s - 1 - x), per glyph.
    x = np.arange(width, dtype=np.int64)
    shifts = spans[:, None] - 1 - x[None, :]  # int64[N, width]; negative only past the span
    weights = np.where(shifts >= 0, np.left_shift(np.uint64(1), np.maximum(shifts, 0).astype(np.uint64)), np.uint64(0))
    ink = atlas.bitmaps[:, :, :width].astype(np.uint64)  # uint64[N, gh, width]
    bits = np.zeros((gh, n + 1), dtype=np.uint64)
    bits[:, :n] = (ink * weights[:, None, :]).sum(axis=2, dtype=np.uint64).T
    return bits


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


def byte_group(advance: int) -> int:
    """Cells whose pixels end on a byte boundary together (8 for a 5 px advance: 40
    bits), or 0 when they take more than the kernel's 64-bit word."""
    cells = 8 // math.gcd(advance, 8)
    return cells if cells * advance <= 64 else 0


_scratch = threading.local()


def _buffers(shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    """This thread's (grid, scanlines) scratch for pages of ``shape``: reused, since
    allocating a fresh page each time costs more in page faults than drawing it."""
    key = (shape.cols, shape.max_rows, shape.pitch, shape.page_width)
    cached = getattr(_scratch, "buffers", None)
    if cached is None or cached[0] != key:
        grid = np.empty((shape.max_rows, shape.cols), dtype=np.int32)
        scanlines = np.empty((shape.max_rows * shape.pitch, 1 + -(-shape.page_width // 8)), dtype=np.uint8)
        cached = _scratch.buffers = (key, grid, scanlines)
    return cached[1], cached[2]


def draw(glyphs: np.ndarray, start: int, shape: Shape, wrap_glyph: int) -> DrawnPage:
    """Lay out and draw the page beginning at ``glyphs[start]`` (int32[n] glyph stream,
    ``start`` from ``page_starts``); ``wrap_glyph`` is -1 in the ``flow`` layout."""
    atlas = shape.atlas
    grid, scanlines = _buffers(shape)
    stats = np.zeros(4, dtype=np.int64)
    draw_page(
        glyphs, start, atlas.cell_widths, shape.cols, wrap_glyph,
        glyph_row_bits(shape), shape.advance, shape.pitch, byte_group(shape.advance), grid, scanlines, stats, True,
    )  # fmt: skip
    rows, chars, cells, _ = (int(v) for v in stats)
    return DrawnPage(scanlines[: rows * shape.pitch], rows, chars, cells)


def page_starts(glyphs: np.ndarray, shape: Shape, wrap_glyph: int) -> tuple[np.ndarray, int]:
    """int64[pages], where each page of the int32[n] glyph stream begins, and the rows
    of all of them (``draw_page`` laying out without drawing, page after page)."""
    atlas = shape.atlas
    if wrap_glyph < 0 and not atlas.has_wide:
        # Flow with narrow glyphs only: every row holds ``cols`` glyphs, no counting.
        rows = -(-glyphs.size // shape.cols)
        return np.arange(0, glyphs.size, shape.cols * shape.max_rows, dtype=np.int64), rows
    grid, scanlines = _buffers(shape)
    row_bits = glyph_row_bits(shape)
    stats = np.zeros(4, dtype=np.int64)
    starts = []
    rows = 0
    start = 0
    while start < glyphs.size:
        starts.append(start)
        draw_page(
            glyphs, start, atlas.cell_widths, shape.cols, wrap_glyph,
            row_bits, shape.advance, shape.pitch, 0, grid, scanlines, stats, False,
        )  # fmt: skip
        rows += int(stats[0])
        start = int(stats[3])
    return np.array(starts, dtype=np.int64), rows
