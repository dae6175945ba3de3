"""What a font parser produces: glyph bitmaps keyed by codepoint, before any filtering."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class ParsedFont:
    """A font file's glyphs.

    Attributes:
        name: the font's name (the file name's stem).
        glyph_width, glyph_height: pixel size of one narrow cell.
        ascent: pixel rows from the cell's top to the baseline.
        glyphs: codepoint -> (uint8[glyph_height, glyph_width * cells] bitmap, 1 = ink; cells 1 or 2).
    """

    name: str
    glyph_width: int
    glyph_height: int
    ascent: int
    glyphs: dict[int, tuple[np.ndarray, int]]
