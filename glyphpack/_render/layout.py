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
from .raster import PageBreaks, pad_glyph, page_starts
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

    def text(self) -> str:
        """What a reader of all the pages sees (see ``grid_text``)."""
        return grid_text(self.grid, self.shape.atlas, self.layout)


def wrap_glyph(atlas: FontAtlas, layout: Layout) -> int:
    """The wrap marker's glyph index in the ``lines`` layout; -1 (none) in ``flow``."""
    return atlas.wrap_index if layout == "lines" else -1


def page_breaks(normalized: NormalizedText, shape: Shape, layout: Layout) -> PageBreaks:
    """The pages the glyph stream needs on ``shape``, without placing a cell."""
    return page_starts(normalized.glyphs, shape, wrap_glyph(shape.atlas, layout), normalized.narrow)


def lay_out(normalized: NormalizedText, shape: Shape, layout: Layout) -> GridLayout:
    """Place the whole glyph stream on a grid of ``shape.cols`` columns."""
    atlas = shape.atlas
    grid = np.full((page_breaks(normalized, shape, layout).rows, shape.cols), EMPTY, dtype=np.int32)
    wrap = wrap_glyph(atlas, layout)
    place_cells(normalized.glyphs, atlas.cell_widths, shape.cols, wrap, pad_glyph(atlas, wrap), grid)
    return GridLayout(shape, layout, grid)


def grid_text(grid: np.ndarray, atlas: FontAtlas, layout: Layout) -> str:
    """The text a cell grid shows.

    Args:
        grid: int32[rows, cols] as built by ``lay_out`` or read back from pixels.

    ``flow``: rows run together (the newline marker reads as LF); trailing blanks at the
    end are dropped. ``lines``: rows end with LF, their trailing blanks dropped, except
    a row ending in the wrap marker, which continues on the next row. Blank cells read
    as spaces; the wrap marker a wide glyph leaves at a row's end in ``flow`` reads as
    nothing; ``UNREADABLE`` cells read as U+FFFD.
    """
    if grid.shape[0] == 0:
        return ""
    codepoints = np.where(grid >= 0, atlas.canonical[np.maximum(grid, 0)], 0x20)
    codepoints[grid == WIDE_TAIL] = 0
    codepoints[grid == UNREADABLE] = 0xFFFD
    if layout == "flow":
        codepoints[grid == atlas.wrap_index] = 0  # the pad a wide glyph left at a row's end
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
