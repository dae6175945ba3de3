"""Every error glyphpack raises, as one tree under ``GlyphpackError``.

    GlyphpackError
    ├── FontError            a font file is missing or damaged (names file and line)
    ├── LimitError           an input exceeds a checked limit (text length, pages, bytes);
    │                        raised before any work starts
    ├── ShapeError           an unknown shape name or an impossible page size
    └── PageError            a PNG that is not a page of the given shape

Each message says what was wrong and what to do about it.
"""

from __future__ import annotations


class GlyphpackError(Exception):
    """Root of every error raised on purpose by glyphpack."""


class FontError(GlyphpackError):
    """A font file could not be read or parsed."""


class LimitError(GlyphpackError):
    """An input is over a limit; nothing was rendered or written."""


class ShapeError(GlyphpackError):
    """An unknown shape, or a page size that cannot hold one glyph cell."""


class PageError(GlyphpackError):
    """Bytes that do not decode to a page of the expected shape."""
