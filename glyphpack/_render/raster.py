"""Rasterization: the thin Python that validates cell grids and calls the kernel."""

from __future__ import annotations

import functools
import sys

import numpy as np

from .._errors import UsageError
from .kernels import EMPTY, parallel_launch, rasterize
from .layout import GridLayout
from .shapes import Shape

if sys.byteorder != "little":  # pragma: no cover - every platform numba supports today
    raise ImportError("glyphpack's rasterizer packs pixel bytes little-endian; this machine is big-endian")


@functools.lru_cache(maxsize=16)
def glyph_row_words(shape: Shape) -> np.ndarray:
    """uint64[N, gh, K]: each glyph's rows as bytes (0/1) padded to its cell span.

    A narrow glyph spans ``advance`` bytes, a wide one ``2 * advance``; K words of
    eight bytes hold the widest span, little-endian, so the kernel stores eight
    pixels at a time.
    """
    atlas = shape.atlas
    n, gh, gw_total = atlas.bitmaps.shape
    max_span = shape.advance * int(atlas.cell_widths.max())
    words = -(-max_span // 8)
    padded = np.zeros((n, gh, words * 8), dtype=np.uint8)
    width = min(gw_total, max_span)
    padded[:, :, :width] = atlas.bitmaps[:, :, :width]
    # A narrow glyph's bitmap is zero beyond its own width, so copying the full
    # bitmap width never leaks ink past its advance.
    return np.ascontiguousarray(padded).view("<u8")


def page_buffer(shape: Shape, pages: int, rows: int | None = None) -> np.ndarray:
    """uint8[pages, rows * pitch, W]: room to rasterize ``pages`` pages of ``rows`` rows
    (default: full pages; W is the page width rounded up to whole 8-byte words)."""
    padded_width = -(-shape.page_width // 8) * 8
    return np.empty((pages, (rows or shape.max_rows) * shape.pitch, padded_width), dtype=np.uint8)


def rasterize_pages(layout: GridLayout, first_page: int, stop_page: int, buffer: np.ndarray | None = None) -> list[np.ndarray]:
    """Pixels of pages ``first_page`` to ``stop_page - 1``.

    Args:
        buffer: from ``page_buffer`` with room for the pages, reused between calls;
            None allocates one.

    Returns:
        one uint8[rows_on_page * pitch, cols * advance] array per page, 1 = ink, each
        cropped to the rows that page uses; views into ``buffer``.
    """
    shape = layout.shape
    atlas = shape.atlas
    if not 0 <= first_page <= stop_page <= layout.pages:
        raise IndexError(f"pages {first_page}..{stop_page} outside 0..{layout.pages}")
    count = stop_page - first_page
    if count == 0:
        return []
    if buffer is None:
        buffer = page_buffer(shape, count)
    start_row = first_page * shape.max_rows
    stop_row = min(stop_page * shape.max_rows, layout.rows)
    rows = layout.grid[start_row:stop_row]
    # Rows per page the kernel draws: a full page's, or fewer in a buffer made for one
    # short page (a small call draws only the rows it uses).
    page_rows = buffer.shape[1] // shape.pitch
    needed = shape.max_rows if count > 1 else rows.shape[0]
    if buffer.shape[0] < count or page_rows < needed or buffer.shape[2] != page_buffer(shape, 0).shape[2]:
        raise UsageError(f"a pixel buffer of shape {buffer.shape} cannot hold {count} pages of shape {shape.name!r}")
    # The kernel wants whole pages: pad the last page's grid with empty rows, then crop.
    padded = np.full((count * page_rows, shape.cols), EMPTY, dtype=np.int32)
    padded[: rows.shape[0]] = rows
    grid = padded.reshape(count, page_rows, shape.cols)
    pixels = buffer[:count]
    with parallel_launch:
        rasterize(grid, glyph_row_words(shape), atlas.cell_widths, shape.advance, shape.pitch, pixels.view(np.uint64))
    out = []
    for i in range(count):
        rows_on_page = min(shape.max_rows, layout.rows - (first_page + i) * shape.max_rows)
        out.append(pixels[i, : rows_on_page * shape.pitch, : shape.page_width])
    return out
