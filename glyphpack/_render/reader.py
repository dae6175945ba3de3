"""Reading pages back: every cell matched exactly against the atlas.

The reader is the rasterizer's oracle (reading a rendering's pages gives its text)
and the base of the legibility measurements: a cell that matches no glyph exactly
is ``UNREADABLE``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Union

import numpy as np

from .._errors import PageError, ShapeError
from .._types import LAYOUTS, Layout, public
from .fonts import FontAtlas
from .kernels import EMPTY, UNREADABLE, WIDE_TAIL
from .layout import grid_text
from .png import check_png_size, decode_png, page_metadata
from .shapes import Shape, get_shape, shape_from_metadata

if TYPE_CHECKING:
    from .render import Page

#: A ``Page``, or a page's PNG bytes.
PageOrPng = Union["Page", bytes]


@functools.lru_cache(maxsize=16)
def _glyph_keys(atlas: FontAtlas, cells: int) -> dict[bytes, int]:
    """Packed bitmap -> glyph index of the canonical glyph, for glyphs ``cells`` wide."""
    width = atlas.glyph_width * cells
    indices = np.flatnonzero(atlas.cell_widths == cells)
    packed = np.packbits(atlas.bitmaps[indices, :, :width].reshape(indices.size, -1), axis=1)
    keys: dict[bytes, int] = {}
    for row, index in zip(packed, indices.tolist()):
        keys.setdefault(row.tobytes(), index)  # indices ascend with codepoints: first is canonical
    return keys


def _cell_keys(pixels: np.ndarray, rows: int, cols: int, shape: Shape, cells: int) -> np.ndarray:
    """Packed bits of each cell's glyph box, as an object array [rows, cols] of bytes."""
    atlas = shape.atlas
    gh, width = atlas.glyph_height, atlas.glyph_width * cells
    canvas = np.zeros((rows * shape.pitch, cols * shape.advance + width), dtype=np.uint8)
    canvas[: pixels.shape[0], : pixels.shape[1]] = pixels
    # Gather each cell's box: [rows, cols, gh, width].
    ys = (np.arange(rows) * shape.pitch)[:, None] + np.arange(gh)[None, :]
    xs = (np.arange(cols) * shape.advance)[:, None] + np.arange(width)[None, :]
    boxes = canvas[ys[:, None, :, None], xs[None, :, None, :]]
    packed = np.packbits(boxes.reshape(rows, cols, gh * width), axis=-1)
    return packed.view(f"V{packed.shape[-1]}").reshape(rows, cols)


def _lookup(keys: np.ndarray, table: dict[bytes, int]) -> np.ndarray:
    unique, inverse = np.unique(keys.ravel(), return_inverse=True)
    found = np.array([table.get(u.tobytes(), UNREADABLE) for u in unique], dtype=np.int32)
    return found[inverse].reshape(keys.shape)


@public
def read_grid(pixels: np.ndarray, shape: Shape | str | None = None) -> np.ndarray:
    """Cell grid of page pixels.

    Args:
        pixels: uint8[H, W], 1 = ink; H a multiple of the shape's pitch and W of its advance.

    Returns:
        int32[H // pitch, W // advance]: per cell the canonical glyph index, ``EMPTY``
        (-1) for a blank cell, ``WIDE_TAIL`` (-2) for a wide glyph's right half,
        ``UNREADABLE`` (-3) where the pixels match no glyph.
    """
    shape = get_shape(shape)
    atlas = shape.atlas
    height, width = pixels.shape
    if height % shape.pitch or width % shape.advance:
        raise PageError(
            f"a {width}x{height} image is not a grid of {shape.advance}x{shape.pitch} cells "
            f"(shape {shape.name!r}); is this page from another shape?"
        )
    rows, cols = height // shape.pitch, width // shape.advance
    grid = _lookup(_cell_keys(pixels, rows, cols, shape, 1), _glyph_keys(atlas, 1))
    grid[grid == atlas.space_index] = EMPTY
    if atlas.has_wide and cols > 1:
        wide = _lookup(_cell_keys(pixels, rows, cols - 1, shape, 2), _glyph_keys(atlas, 2))
        for r, c in zip(*np.nonzero(wide >= 0)):
            # Left to right, a wide match wins unless its left cell is another wide glyph's tail.
            if grid[r, c] != WIDE_TAIL:
                grid[r, c], grid[r, c + 1] = wide[r, c], WIDE_TAIL
    return grid


def _page_bytes_and_shape(
    page: PageOrPng, shape: Shape | str | None, layout: Layout | None
) -> tuple[bytes, Shape | str, Layout]:
    """The page's bytes, and the shape and layout to read it with: the caller's, else
    the page's own (a ``Page``'s fields, a PNG's metadata chunk); ``PageError`` for a
    PNG that does not say and a caller who did not either."""
    if not isinstance(page, (bytes, bytearray)):
        return page.png, shape or page.shape, layout or page.layout  # a Page knows its shape and layout
    png = bytes(page)
    check_png_size(png)  # an image too large for any page is refused before anything else
    metadata = page_metadata(png)
    if shape is None:
        if not metadata:
            raise PageError(
                "the page does not say which shape drew it (no glyphpack metadata chunk: another program's image, "
                "or a page from before pages carried it); pass the shape"
            )
        try:
            shape = shape_from_metadata(metadata)
        except ShapeError as exc:
            raise PageError(str(exc)) from None
    stored_layout = metadata.get("layout")
    return png, shape, layout or (stored_layout if stored_layout in LAYOUTS else "flow")


@public
def read_page(page: PageOrPng, shape: Shape | str | None = None, layout: Layout | None = None) -> str:
    """Decode one page back to text.

    Args:
        page: PNG bytes, or a ``Page`` (which supplies its own shape and layout).
        shape: the shape it was drawn with (default: the page's, else the default).
        layout: ``"flow"`` or ``"lines"`` (default: the page's, else ``"flow"``).

    Glyphs with identical bitmaps read as one canonical character (the smallest
    codepoint); a cell that matches no glyph reads as U+FFFD.
    """
    return read_pages([page], shape, layout)


@public
def read_pages(pages: Iterable[PageOrPng], shape: Shape | str | None = None, layout: Layout | None = None) -> str:
    """Decode consecutive pages of one rendering back to its text."""
    grids = []
    chosen: Shape | str | None = shape
    chosen_layout: Layout = layout or "flow"
    for page in pages:
        png, chosen, chosen_layout = _page_bytes_and_shape(page, shape, layout)
        grids.append(read_grid(decode_png(png), chosen))
    if not grids:
        return ""
    resolved = get_shape(chosen)
    cols = {g.shape[1] for g in grids}
    if len(cols) > 1:
        raise PageError(f"pages have different widths ({sorted(cols)} columns): not one rendering")
    return grid_text(np.concatenate(grids), resolved.atlas, chosen_layout)
