"""glyphpack: text packed into pages of 5-pixel bitmap glyphs for vision models.

    >>> import glyphpack
    >>> pages = glyphpack.render("hello, world")
    >>> glyphpack.read_page(pages[0])
    'hello, world'
"""

from ._errors import FontError, GlyphpackError, LimitError, PageError, ShapeError
from ._fonts import FontAtlas
from ._reader import read_grid, read_page, read_pages
from ._render import Page, Pages, RenderReport, count_pages, plan, render
from ._shapes import SHAPES, Shape

__all__ = [
    "FontAtlas",
    "FontError",
    "GlyphpackError",
    "LimitError",
    "Page",
    "PageError",
    "Pages",
    "RenderReport",
    "SHAPES",
    "Shape",
    "ShapeError",
    "count_pages",
    "plan",
    "read_grid",
    "read_page",
    "read_pages",
    "render",
]

__version__ = "0.1.0"
