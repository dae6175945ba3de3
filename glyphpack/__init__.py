"""glyphpack: text packed into pages of 5-pixel bitmap glyphs for vision models.

    >>> import glyphpack
    >>> pages = glyphpack.render("hello, world")
    >>> glyphpack.read_page(pages[0])
    'hello, world'
"""

from ._errors import FontError, GlyphpackError, LimitError, PageError, ShapeError
from ._fonts import FontAtlas
from ._legibility import confusable_pairs, downscale, legibility, simulate
from ._providers import Profile, ProfileWarning, TextOnlyModelError, resolve
from ._reader import read_grid, read_page, read_pages
from ._render import Page, Pages, RenderReport, count_pages, plan, render
from ._shapes import SHAPES, Shape
from ._tokens import TextEstimator, estimate_text_tokens

__all__ = [
    "FontAtlas",
    "FontError",
    "GlyphpackError",
    "LimitError",
    "Page",
    "PageError",
    "Pages",
    "Profile",
    "ProfileWarning",
    "RenderReport",
    "SHAPES",
    "Shape",
    "ShapeError",
    "TextEstimator",
    "TextOnlyModelError",
    "confusable_pairs",
    "count_pages",
    "downscale",
    "estimate_text_tokens",
    "legibility",
    "plan",
    "read_grid",
    "read_page",
    "read_pages",
    "render",
    "resolve",
    "simulate",
]

__version__ = "0.1.0"
