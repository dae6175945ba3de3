"""Shapes: a font plus cell advance, line pitch and page size limits."""

from __future__ import annotations

import dataclasses
import functools

from .._errors import LimitError, ShapeError
from .._providers.profile import Profile
from .._providers.reading import ReadingProfile, local_profiles_path, warn_once
from .._providers.resolve import reading_profile
from .._types import Fidelity, public
from .fonts import FALLBACK_FONT, FONT_FILES, FontAtlas, load_atlas, with_fallback
from .png import MAX_PAGE_EDGE

#: The largest page standard Claude models never resize (56 x 28 patches = 1568 tokens).
DEFAULT_PAGE_SIZE = (1568, 784)


#: Widest cell step a shape may have: the rasterizer draws a cell's pixels 32 at most
#: at a time.
MAX_ADVANCE = 32


@public
@dataclasses.dataclass(frozen=True)
class Shape:
    """How glyphs sit on a page.

    Attributes:
        name: catalog name.
        font: shipped font name or font file path.
        advance: horizontal step between narrow cells, px (>= glyph width).
        pitch: vertical step between rows, px (>= glyph height).
        max_width, max_height: page size limit, px. The page width is fixed at
            ``cols * advance``; the height hugs the rows actually used.
        description: one line for listings.
    """

    name: str
    font: str
    advance: int
    pitch: int
    max_width: int = DEFAULT_PAGE_SIZE[0]
    max_height: int = DEFAULT_PAGE_SIZE[1]
    description: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.advance <= MAX_ADVANCE or self.pitch < 1:
            raise ShapeError(
                f"shape {self.name!r}: cells of {self.advance}x{self.pitch} px; the advance must be 1 to "
                f"{MAX_ADVANCE} px (the rasterizer draws a cell's pixels at most 32 at a time)"
            )
        if max(self.max_width, self.max_height) > MAX_PAGE_EDGE:
            raise LimitError(
                f"page size {self.max_width}x{self.max_height} is over the largest page glyphpack makes "
                f"({MAX_PAGE_EDGE} px a side)"
            )
        # Four columns is the least a row needs: a wide glyph, a wrap marker, room to move.
        if self.cols < 4 or self.max_rows < 1:
            raise ShapeError(
                f"shape {self.name!r}: page size {self.max_width}x{self.max_height} holds {self.cols} "
                f"columns and {self.max_rows} rows of {self.advance}x{self.pitch} cells; it needs at "
                f"least 4 columns and 1 row"
            )

    @property
    def atlas(self) -> FontAtlas:
        """The shape's font atlas, checked to fit the cell (loading is cached): the
        font, and Unifont's glyph for each character the font lacks when the cell
        holds Unifont's 8x16 glyphs (``has_fallback``)."""
        return _shape_atlas(self.font, self.advance, self.pitch, self.name)


    @property
    def cols(self) -> int:
        return self.max_width // self.advance

    @property
    def max_rows(self) -> int:
        return self.max_height // self.pitch

    @property
    def page_width(self) -> int:
        return self.cols * self.advance

    def page_height(self, rows: int) -> int:
        return rows * self.pitch

    @property
    def cells_per_page(self) -> int:
        return self.cols * self.max_rows

    def with_page_size(self, width: int, height: int) -> Shape:
        """The same glyph grid on a different page size limit."""
        return dataclasses.replace(self, max_width=int(width), max_height=int(height))


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("5x8", "5x8", 5, 8, description="misc-fixed 5x8: the dense default, 5-pixel glyphs"),
        Shape("6x13", "6x13", 6, 13, description="misc-fixed 6x13: larger, easier to read"),
        Shape("8x13", "8x13", 8, 13, description="misc-fixed 8x13: large and legible"),
        Shape(
            "8x13-loose",
            "8x13",
            11,
            16,
            description="8x13 glyphs on an 11 px advance and 16 px pitch (peer-tested legibility)",
        ),
        Shape("7x14", "7x14", 7, 14, description="misc-fixed 7x14: about the 14 px text peers found GPT and Opus 5 read"),
        Shape("9x15", "9x15", 9, 15, description="misc-fixed 9x15: 14 px text on a 9 px advance"),
        Shape(
            "9x15-loose",
            "9x15",
            10,
            16,
            description="9x15 glyphs on 10x16 cells (Opus 4.8 read 95% of ids exactly at 10x16)",
        ),
        Shape("9x18", "9x18", 9, 18, description="misc-fixed 9x18: large"),
        Shape("10x20", "10x20", 10, 20, description="misc-fixed 10x20: the largest"),
        Shape(
            "8x13-tall",
            "8x13",
            8,
            22,
            description="8x13 glyphs on a 22 px pitch (a peer's legible default for Gemini and OpenAI)",
        ),
        Shape("unifont", "unifont", 8, 16, description="GNU Unifont 8x16 / 16x16: all of the BMP, CJK"),
    )
}

DEFAULT_SHAPE = "5x8"
#: Chosen automatically when most of a text's characters are missing from the default font.
WIDE_SCRIPT_SHAPE = "unifont"


@functools.cache
def _shape_atlas(font: str, advance: int, pitch: int, shape_name: str) -> FontAtlas:
    atlas = load_atlas(font)
    if advance < atlas.glyph_width or pitch < atlas.glyph_height:
        raise ShapeError(
            f"shape {shape_name!r}: advance {advance} and pitch {pitch} must be at least "
            f"the glyph cell {atlas.glyph_width}x{atlas.glyph_height} of font {font!r}"
        )
    fallback = load_atlas(FALLBACK_FONT)
    if atlas is fallback or advance < fallback.glyph_width or pitch < fallback.glyph_height:
        return atlas  # Unifont itself, or cells too small for its glyphs
    return with_fallback(atlas, fallback)


#: The version of the page metadata (``shape_metadata``) this code writes and reads.
PAGE_METADATA_VERSION = "1"


def shape_metadata(shape: Shape, layout: str) -> dict[str, str]:
    """What a page's PNG says about how it was drawn: enough to read it back alone."""
    font = shape.font if shape.font in FONT_FILES else ""
    return {
        "v": PAGE_METADATA_VERSION, "shape": shape.name, "font": font, "cell": f"{shape.advance}x{shape.pitch}", "layout": layout,
    }  # fmt: skip


def shape_from_metadata(metadata: dict[str, str]) -> Shape:
    """The shape a page's metadata names: the catalog's when the name and cell agree,
    else one rebuilt from its shipped font and cell (``ShapeError`` when it cannot be)."""
    name, font, cell = metadata.get("shape", ""), metadata.get("font", ""), metadata.get("cell", "")
    known = SHAPES.get(name)
    if known is not None and f"{known.advance}x{known.pitch}" == cell:
        return known
    advance, _, pitch = cell.partition("x")
    if font not in FONT_FILES or not (advance.isdigit() and pitch.isdigit()):
        raise ShapeError(f"the page was drawn in shape {name!r} (font {font or 'not shipped'!r}, cells {cell!r}), which this glyphpack cannot rebuild; pass the shape")
    return Shape(name, font, int(advance), int(pitch))


def reading_shape(profile: Profile, fidelity: Fidelity) -> tuple[Shape, ReadingProfile]:
    """The shape ``profile``'s reader is known to read for ``fidelity``, and the reading
    profile that says so. A measured profile naming a shape glyphpack does not have (an
    edited or newer file) is named in a warning, once, and the published profile serves."""
    reading = reading_profile(profile)
    shape = reading.evidence(fidelity).shape
    if shape not in SHAPES:
        warn_once(
            f"{local_profiles_path()}: the reading profile of {profile.model} names shape {shape!r}, which glyphpack "
            f"does not have ({', '.join(SHAPES)}); the published profile is used",
        )
        reading = reading_profile(profile, measured=False)
        shape = reading.evidence(fidelity).shape
    return SHAPES[shape], reading


def get_shape(shape: Shape | str | None) -> Shape:
    """A ``Shape`` from a shape, a catalog name, or None (the default)."""
    if shape is None:
        return SHAPES[DEFAULT_SHAPE]
    if isinstance(shape, Shape):
        return shape
    try:
        return SHAPES[shape]
    except KeyError:
        raise ShapeError(f"unknown shape {shape!r}; choose one of {', '.join(SHAPES)}") from None
