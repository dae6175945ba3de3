"""Layout: a normalized glyph stream placed on a cell grid, split into pages.

Also the inverse used by the page reader: ``grid_text`` turns cell grids back into the
text a reader sees, so the renderer's canonical text and the reader's output come from
one function.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._types import Layout
from .fonts import FontAtlas
from .kernels import EMPTY, UNREADABLE, WIDE_TAIL, place_cells
from .shapes import Shape
from .text import NormalizedText


@dataclasses.dataclass(frozen=True, eq=False)
class GridLayout:
    """A text on cells.

    Attributes:
        shape: the shape laid out for.
        layout: ``"flow"`` or ``"lines"``.
        grid: int32[rows, cols], glyph index per cell, ``EMPTY`` (-1) or ``WIDE_TAIL`` (-2).
    """

    shape: Shape
    layout: Layout
    grid: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.grid.shape[0])

    @property
    def pages(self) -> int:
        return pages_for_rows(self.rows, self.shape)

    def page_grid(self, page: int) -> np.ndarray:
        """int32[rows_on_page, cols]: the cells of one page (a view)."""
        start = page * self.shape.max_rows
        return self.grid[start : start + self.shape.max_rows]

    def page_chars(self, page: int) -> int:
        return drawn_chars(self.page_grid(page), self.shape.atlas)

    def text(self) -> str:
        """What a reader of all the pages sees (see ``grid_text``)."""
        return grid_text(self.grid, self.shape.atlas, self.layout)


def drawn_chars(grid: np.ndarray, atlas: FontAtlas) -> int:
    """Characters drawn in an int32 cell grid: glyph cells other than wrap markers."""
    return int(np.count_nonzero(grid >= 0)) - int(np.count_nonzero(grid == atlas.wrap_index))


def pages_for_rows(rows: int, shape: Shape) -> int:
    return -(-rows // shape.max_rows)


def _wrap_glyph(atlas: FontAtlas, layout: Layout) -> int:
    return atlas.wrap_index if layout == "lines" else -1


def count_rows(normalized: NormalizedText, shape: Shape, layout: Layout) -> int:
    """Rows the glyph stream needs, without building the grid."""
    atlas = shape.atlas
    rows = np.zeros(1, dtype=np.int64)
    place_cells(
        normalized.glyphs,
        atlas.cell_widths,
        shape.cols,
        _wrap_glyph(atlas, layout),
        np.empty((0, shape.cols), dtype=np.int32),
        rows,
    )
    return int(rows[0])


def lay_out(normalized: NormalizedText, shape: Shape, layout: Layout, rows: int | None = None) -> GridLayout:
    """Place the glyph stream on a grid of ``shape.cols`` columns (``rows`` if already counted)."""
    atlas = shape.atlas
    if rows is None:
        rows = count_rows(normalized, shape, layout)
    grid = np.full((rows, shape.cols), EMPTY, dtype=np.int32)
    used = np.zeros(1, dtype=np.int64)
    if rows:
        place_cells(normalized.glyphs, atlas.cell_widths, shape.cols, _wrap_glyph(atlas, layout), grid, used)
    return GridLayout(shape, layout, grid)


def grid_text(grid: np.ndarray, atlas: FontAtlas, layout: Layout) -> str:
    """The text a cell grid shows.

    Args:
        grid: int32[rows, cols] as built by ``lay_out`` or read back from pixels.

    ``flow``: rows run together (the newline marker reads as LF); trailing blanks at the
    end are dropped. ``lines``: rows end with LF, their trailing blanks dropped, except
    a row ending in the wrap marker, which continues on the next row. Blank cells read
    as spaces, including the one left when a wide glyph moves to the next row;
    ``UNREADABLE`` cells read as U+FFFD.
    """
    if grid.shape[0] == 0:
        return ""
    codepoints = np.where(grid >= 0, atlas.canonical[np.maximum(grid, 0)], 0x20)
    codepoints[grid == WIDE_TAIL] = 0
    codepoints[grid == UNREADABLE] = 0xFFFD
    if layout == "flow":
        return _decode(codepoints.ravel()).rstrip(" ")
    wrap = atlas.wrap_index
    wrapped = grid[:, -1] == wrap
    parts = []
    for row_cps, is_wrapped in zip(codepoints, wrapped.tolist()):
        if is_wrapped:
            parts.append(_decode(row_cps[:-1]))
        else:
            parts.append(_decode(row_cps).rstrip(" "))
            parts.append("\n")
    return "".join(parts).rstrip("\n") if not wrapped[-1] else "".join(parts)


def _decode(codepoints: np.ndarray) -> str:
    """Codepoints to str; zeros (wide-glyph tails) are left out."""
    cps = codepoints[codepoints != 0].astype(np.uint32)
    return cps.tobytes().decode("utf-32-le", "surrogatepass")
