"""Every error glyphpack raises, as one tree under ``GlyphpackError``.

    GlyphpackError
    ├── UsageError           an argument a function does not take (also a ValueError
    │                        and a TypeError, for callers that catch those)
    ├── FontError            a font file is missing or damaged (names the file and line)
    ├── LimitError           an input is over a checked limit (text length, pages, bytes,
    │                        images per request); raised before any work starts
    ├── ShapeError           an unknown shape name or an impossible page size
    ├── PageError            bytes that are not a page of the given shape
    ├── TextOnlyModelError   pages were asked for a model that takes no images
    ├── HistoryError         a message or history a provider would reject, or a bad message
    ├── StoreError           a transcript or session tree could not be read or written
    │   └── ConflictError    another writer saved first (compare-and-swap lost)
    └── CompactionError      compaction was asked for something it cannot do

    ProfileWarning           (a UserWarning) a model id was not recognized, or pages
                             will be resized: conservative limits were used

Each message says what was wrong and what to do about it; errors about files name the
file. Nothing already stored is changed by a failed call.
"""

from __future__ import annotations

from ._public import public


@public
class GlyphpackError(Exception):
    """Root of every error raised on purpose by glyphpack."""


@public
class UsageError(GlyphpackError, ValueError, TypeError):
    """An argument outside what the function takes: a kind not in its list, a wrong
    type, a value out of range."""


@public
class FontError(GlyphpackError):
    """A font file could not be read or parsed."""


@public
class LimitError(GlyphpackError):
    """An input is over a limit; nothing was rendered or written."""


@public
class ShapeError(GlyphpackError):
    """An unknown shape, or a page size that cannot hold one glyph cell."""


@public
class PageError(GlyphpackError):
    """Bytes that do not decode to a page of the expected shape."""


@public
class TextOnlyModelError(GlyphpackError):
    """Pages were asked for a model that does not take images (use summarization)."""


@public
class HistoryError(GlyphpackError):
    """A history a provider would reject (an orphaned tool result or call), or a bad message."""


@public
class StoreError(GlyphpackError):
    """A transcript or the session tree could not be read or written (the file named is
    left as it was)."""


@public
class ConflictError(StoreError):
    """Another writer saved first: the save was based on an older revision or tip."""


@public
class CompactionError(GlyphpackError):
    """Compaction was asked for something it cannot do (a bad budget or error)."""


@public
class ProfileWarning(UserWarning):
    """A model id was not recognized (conservative limits were used), or pages will be
    resized by the model's provider."""
