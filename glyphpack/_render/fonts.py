"""Bitmap fonts: the ``FontAtlas``, how it is built from a parsed font, and its disk cache.

Three layers, as in Pillow's font code: the parsers (``bdf.py``, ``unifont_hex.py``)
turn a file into a ``ParsedFont`` (a dict of glyph bitmaps), ``_build_atlas`` turns
that into the sorted arrays the kernels use, and ``FontAtlas`` is the runtime value. ``load_atlas`` adds two caches:
one per process and one on disk keyed by the font file's content hash, so a second
process loads a compiled atlas without parsing.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import io
import os
import unicodedata
from pathlib import Path

import numpy as np

from .._errors import FontError, UsageError
from .._files import atomic_write, cache_dir
from .._types import public
from .bdf import parse_bdf
from .parsed import ParsedFont
from .unifont_hex import parse_hex


def _font_dir() -> Path:
    """Where the shipped fonts are: ``glyphpack/fonts`` in an installed wheel, the
    repository's ``fonts/`` in an editable install or a source checkout."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "fonts"
    if installed.is_dir():
        return installed
    return package.parent / "fonts"


FONT_DIR = _font_dir()

#: The shipped fonts, by the name shapes use.
FONT_FILES = {
    "5x8": "5x8.bdf",
    "6x13": "6x13.bdf",
    "8x13": "8x13.bdf",
    "7x14": "7x14.bdf",
    "9x15": "9x15.bdf",
    "9x18": "9x18.bdf",
    "10x20": "10x20.bdf",
    "unifont": "unifont.hex.gz",
}

#: The font whose glyphs a shape draws where its own font has none, when its cells hold them.
FALLBACK_FONT = "unifont"

#: Codepoint that the newline marker glyph reads back as (flow layout draws it).
NEWLINE = 0x0A
#: The replacement glyph for characters no font glyph or fold covers.
REPLACEMENT = 0xFFFD
# ``lookup`` without classes to count.
_NO_POSITIONS = np.zeros(0, dtype=np.int64)
_NO_CLASSES = np.zeros(0, dtype=np.uint8)
#: The wrap marker ending a row that a long line continues on (lines layout).
#: Outside Unicode, so no input character can ever collide with it.
WRAP = 0x110000

# Bump when parsing or atlas building changes: it is part of the disk cache key.
_ATLAS_FORMAT = 5

# Categories never drawn as glyphs: controls, format characters, surrogates and
# private use are all handled by text normalization instead. Combining marks are
# drawn in a cell of their own where NFC cannot compose them (Thai vowels, Devanagari
# signs): a reader sees the mark after its letter instead of losing it.
_UNDRAWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
#: Marks that only choose how the character before them looks (variation selectors,
#: the grapheme joiner): invisible, so never drawn and dropped by normalization.
INVISIBLE_MARKS = frozenset({0x034F, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)})


@public
@dataclasses.dataclass(frozen=True, eq=False)
class FontAtlas:
    """A compiled bitmap font.

    Attributes:
        name: the font's name (``"5x8"``, ``"unifont"``, or a file stem).
        codepoints: int32[N], sorted ascending, the codepoint each glyph draws.
        bitmaps: uint8[N, glyph_height, glyph_width * max_cells], 1 = ink. A narrow
            glyph occupies the left ``glyph_width`` columns.
        cell_widths: uint8[N], 1 for a narrow glyph, 2 for a wide one.
        canonical: int32[N], the codepoint each glyph reads back as: the smallest
            codepoint among glyphs of the same width with identical bitmaps.
        glyph_width, glyph_height: pixel size of one narrow cell.
        ascent: pixel rows from the cell's top to the baseline.
        source_sha256: content hash of the font file the atlas was built from (of
            both files, for an atlas with a fallback font).
    """

    name: str
    codepoints: np.ndarray
    bitmaps: np.ndarray
    cell_widths: np.ndarray
    canonical: np.ndarray
    glyph_width: int
    glyph_height: int
    ascent: int
    source_sha256: str

    def __len__(self) -> int:
        return int(self.codepoints.shape[0])

    def __repr__(self) -> str:
        return (
            f"FontAtlas({self.name!r}, glyphs={len(self)}, "
            f"cell={self.glyph_width}x{self.glyph_height})"
        )

    def index_of(self, codepoint: int) -> int:
        """Glyph index of ``codepoint``, or -1 when the font has no glyph for it."""
        i = int(np.searchsorted(self.codepoints, codepoint))
        if i < len(self) and int(self.codepoints[i]) == codepoint:
            return i
        return -1

    def has(self, codepoint: int) -> bool:
        return self.index_of(codepoint) >= 0

    @functools.cached_property
    def space_index(self) -> int:
        return self.index_of(0x20)

    @functools.cached_property
    def newline_index(self) -> int:
        return self.index_of(NEWLINE)

    @functools.cached_property
    def wrap_index(self) -> int:
        return self.index_of(WRAP)

    @functools.cached_property
    def replacement_index(self) -> int:
        return self.index_of(REPLACEMENT)

    @functools.cached_property
    def bmp_lookup(self) -> np.ndarray:
        """int32[0x10000]: glyph index per Basic Multilingual Plane codepoint, -1 if absent.

        A table lookup is several times faster than a binary search over
        ``codepoints`` for the bulk of any text.
        """
        table = np.full(0x10000, -1, dtype=np.int32)
        in_bmp = np.flatnonzero(self.codepoints < 0x10000)
        table[self.codepoints[in_bmp]] = in_bmp.astype(np.int32)
        return table

    def lookup(
        self, codepoints: np.ndarray, *, line_breaks: bool = False, classes: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Glyph indices of code points, in one pass (``map_codepoints``).

        Args:
            codepoints: uint32[n] (other integer arrays are converted).
            line_breaks: map LF to ``LINE_BREAK`` (the ``lines`` layout).
            classes: uint8[0x110000], a class (0..7) per code point, to count them by.

        Returns:
            int32[n] glyph indices, ``NO_GLYPH`` (-4) where the font has none (LF is
            ``LINE_BREAK`` with ``line_breaks``); int64[1] or, with
            ``classes``, int64[9]: how many code points have no glyph, then how many
            fall in each class 0..7.
        """
        # numba is imported when a text is mapped, not to list fonts
        from .kernels import CLASS_COUNT, COUNTS, MISSING, NO_GLYPH, map_codepoints

        codepoints = np.ascontiguousarray(codepoints, dtype=np.uint32)
        classes = _NO_CLASSES if classes is None else classes
        glyphs = np.empty(codepoints.shape[0], dtype=np.int32)
        counts = np.zeros(COUNTS + CLASS_COUNT, dtype=np.int64)
        map_codepoints(
            codepoints, self.bmp_lookup, code_point_increments(self, classes, _NO_CLASSES), self.codepoints,
            self.cell_widths, classes, _NO_CLASSES, line_breaks, 0, glyphs, _NO_POSITIONS, counts,
        )  # fmt: skip
        np.maximum(glyphs, NO_GLYPH, out=glyphs)  # which code point had no glyph is the caller's to see
        return glyphs, np.concatenate((counts[MISSING : MISSING + 1], counts[COUNTS:] if classes.size else counts[:0]))

    @functools.cached_property
    def has_wide(self) -> bool:
        return bool((self.cell_widths == 2).any())

    @classmethod
    def load(cls, font: str | os.PathLike[str]) -> FontAtlas:
        """Load a shipped font by name (``"5x8"``) or any BDF / ``.hex[.gz]`` file."""
        return load_atlas(font)


#: (atlas, classes, suspects) ids -> (the three, their increments): a few, made once each.
_INCREMENTS: dict[tuple[int, int, int], tuple[FontAtlas, np.ndarray, np.ndarray, np.ndarray]] = {}


def code_point_increments(atlas: FontAtlas, classes: np.ndarray, suspects: np.ndarray) -> np.ndarray:
    """uint64[0x10000]: what each BMP code point adds to ``map_codepoints``'s counters:
    1 in the byte lane of its class in ``classes`` (uint8[0x110000], values 0..5, or
    empty: class 0), 1 in lane ``SUSPECT_LANE`` where ``suspects`` (``nfc_suspects``, or
    empty) marks it, 1 in lane ``WIDE_LANE`` where its glyph in ``atlas`` is wide: one
    load counts all three. Made once per combination (kept here with the tables it was
    made from, so their ids stay theirs)."""
    from .kernels import CLASS_COUNT, SUSPECT_LANE, WIDE_LANE  # numba is imported when a text is mapped

    key = (id(atlas), id(classes), id(suspects))
    made = _INCREMENTS.get(key)
    if made is None:
        if classes.size and int(classes.max()) >= CLASS_COUNT:
            raise UsageError(f"a class table holds values 0..{CLASS_COUNT - 1}; this one holds {int(classes.max())}")
        lanes = classes[:0x10000].astype(np.uint64) if classes.size else np.zeros(0x10000, dtype=np.uint64)
        increments = np.left_shift(np.uint64(1), lanes * np.uint64(8))
        glyphs = atlas.bmp_lookup
        wide = (glyphs >= 0) & (atlas.cell_widths[np.maximum(glyphs, 0)] == 2)
        increments |= wide.astype(np.uint64) << np.uint64(8 * WIDE_LANE)
        if suspects.size:
            marked = np.unpackbits(suspects[: 0x10000 // 8], bitorder="little").astype(np.uint64)
            increments |= marked << np.uint64(8 * SUSPECT_LANE)
        if len(_INCREMENTS) >= 16:
            _INCREMENTS.clear()
        made = _INCREMENTS[key] = (atlas, classes, suspects, increments)
    return made[3]


# --------------------------------------------------------------------- atlas building


def _marker_bitmaps(w: int, h: int) -> dict[int, np.ndarray]:
    """Synthetic glyphs drawn to the cell size: newline marker, wrap marker, replacement.

    They are shapes no text font draws in a cell (``_build_atlas`` checks), so a page
    reader can always tell them apart from real characters.
    """
    ink_w = max(w - 1, 3)  # leave the font's right-hand spacing column free
    base = h - 3 if h >= 8 else h - 2  # sit on the text baseline, above descenders
    newline = np.zeros((h, w), np.uint8)  # a return arrow: down the right, left along the base
    newline[max(base - max(h // 3, 2), 0) : base + 1, ink_w - 1] = 1
    newline[base, 0:ink_w] = 1
    newline[base - 1, 1] = 1
    newline[min(base + 1, h - 1), 1] = 1

    wrap = np.zeros((h, w), np.uint8)  # a dotted vertical rule: "continues below"
    wrap[1 : h - 1 : 2, ink_w - 1] = 1
    wrap[h - 2, 0 : ink_w] = 1

    replacement = np.zeros((h, w), np.uint8)  # a checkerboard block: plainly not a letter
    for y in range(1, h - 1):
        replacement[y, (y % 2) : ink_w : 2] = 1
    return {NEWLINE: newline, WRAP: wrap, REPLACEMENT: replacement}


def _drawable(codepoint: int) -> bool:
    if codepoint > 0x10FFFF or codepoint in INVISIBLE_MARKS:
        return False
    return unicodedata.category(chr(codepoint)) not in _UNDRAWN_CATEGORIES


#: Characters whose glyph is rightly empty although they are not spaces (Braille's blank
#: pattern, Hangul fillers).
BLANK_BY_NATURE = frozenset({0x2800, 0x115F, 0x1160, 0x3164, 0xFFA0})


def _inked(codepoint: int, bitmap: np.ndarray) -> bool:
    """Whether a font's glyph draws its character: a glyph with no ink for a character
    that is not a space is a hole in the font (5x8 has two, Ѝ and ѝ); left out, the
    character folds to one the font draws (И) or is replaced, and the report counts it."""
    return bool(bitmap.any()) or unicodedata.category(chr(codepoint)) == "Zs" or codepoint in BLANK_BY_NATURE


def _build_atlas(parsed: ParsedFont, sha256: str) -> FontAtlas:
    """Sorted arrays from a parsed font: drop undrawable codepoints and empty glyphs of
    characters that have ink, add markers, canonicalize."""
    w, h = parsed.glyph_width, parsed.glyph_height
    glyphs = {cp: g for cp, g in parsed.glyphs.items() if _drawable(cp) and _inked(cp, g[0])}
    if 0x20 not in glyphs:
        glyphs[0x20] = (np.zeros((h, w), np.uint8), 1)
    markers = _marker_bitmaps(w, h)
    glyphs[NEWLINE] = (markers[NEWLINE], 1)
    glyphs[WRAP] = (markers[WRAP], 1)
    if REPLACEMENT not in glyphs:
        glyphs[REPLACEMENT] = (markers[REPLACEMENT], 1)

    max_cells = max(cells for _, cells in glyphs.values())
    # Wide glyphs whose halves are both narrow glyphs would read back as two narrow
    # characters; leaving them out makes text normalization fold or replace them.
    narrow_keys = {bm.tobytes() for bm, cells in glyphs.values() if cells == 1}
    glyphs = {
        cp: (bm, cells)
        for cp, (bm, cells) in glyphs.items()
        if cells == 1
        or not (
            np.ascontiguousarray(bm[:, :w]).tobytes() in narrow_keys
            and np.ascontiguousarray(bm[:, w:]).tobytes() in narrow_keys
        )
    }

    codepoints = np.array(sorted(glyphs), dtype=np.int32)
    bitmaps = np.zeros((len(codepoints), h, w * max_cells), dtype=np.uint8)
    cell_widths = np.empty(len(codepoints), dtype=np.uint8)
    for i, cp in enumerate(codepoints.tolist()):
        bm, cells = glyphs[cp]
        bitmaps[i, :, : bm.shape[1]] = bm
        cell_widths[i] = cells
    return _atlas(parsed.name, codepoints, bitmaps, cell_widths, w, h, parsed.ascent, sha256)


def _atlas(
    name: str, codepoints: np.ndarray, bitmaps: np.ndarray, cell_widths: np.ndarray, w: int, h: int, ascent: int, sha256: str
) -> FontAtlas:
    """The atlas of glyphs sorted by codepoint, with each one's canonical codepoint:
    the smallest among glyphs of the same width and bitmap (what a reader reads back)."""
    keys = np.concatenate([cell_widths[:, None], bitmaps.reshape(len(codepoints), -1)], axis=1)
    keys = np.ascontiguousarray(keys).view(f"V{keys.shape[1]}").ravel()
    # Codepoints ascend, so each bitmap's first occurrence is its smallest codepoint.
    _, first, group = np.unique(keys, return_index=True, return_inverse=True)
    canonical = codepoints[first][group.ravel()].astype(np.int32)
    for marker in (NEWLINE, WRAP):
        i = int(np.searchsorted(codepoints, marker))
        if canonical[i] != marker or int((canonical == canonical[i]).sum()) != 1:
            raise FontError(f"{name}: a font glyph has the same bitmap as marker U+{marker:04X}")
    return FontAtlas(
        name=name,
        codepoints=codepoints,
        bitmaps=bitmaps,
        cell_widths=cell_widths,
        canonical=canonical,
        glyph_width=w,
        glyph_height=h,
        ascent=ascent,
        source_sha256=sha256,
    )


def with_fallback(atlas: FontAtlas, fallback: FontAtlas) -> FontAtlas:
    """``atlas`` with ``fallback``'s glyph for every character it lacks (``_merged``),
    from the disk cache when a process built it before (0.3-0.6 s to build)."""
    key = hashlib.sha256((atlas.source_sha256 + fallback.source_sha256).encode()).hexdigest()
    cache_file = cache_dir() / f"atlas-v{_ATLAS_FORMAT}-{key[:32]}.npz"
    cached = _read_cached(cache_file)
    if cached is not None and cached.source_sha256 == key:
        return cached
    merged = _merged(atlas, fallback, key)
    _write_cached(cache_file, merged)
    return merged


def _merged(atlas: FontAtlas, fallback: FontAtlas, key: str) -> FontAtlas:
    """``atlas`` with ``fallback``'s glyph for every character it lacks, in one cell grid.

    The cell is as large as both fonts' cells; ``atlas``'s glyphs keep their pixels
    (top left, as before), the fallback's sit on ``atlas``'s baseline where the cell
    has room. Decided per glyph: a text draws each character in the first font that
    has it. Wide fallback glyphs whose halves both read as narrow glyphs are left out,
    as in any atlas, and the markers stay ``atlas``'s.
    """
    w, h = max(atlas.glyph_width, fallback.glyph_width), max(atlas.glyph_height, fallback.glyph_height)
    top = min(max(atlas.ascent - fallback.ascent, 0), h - fallback.glyph_height)
    adds = ~np.isin(fallback.codepoints, atlas.codepoints) & ~np.isin(fallback.codepoints, (NEWLINE, WRAP, REPLACEMENT))
    added = np.flatnonzero(adds)
    cells = np.concatenate([atlas.cell_widths, fallback.cell_widths[added]])
    bitmaps = np.zeros((cells.size, h, w * int(cells.max())), dtype=np.uint8)
    own = atlas.bitmaps
    bitmaps[: len(atlas), : own.shape[1], : own.shape[2]] = own
    theirs = fallback.bitmaps[added]
    bitmaps[len(atlas) :, top : top + theirs.shape[1], : theirs.shape[2]] = theirs
    codepoints = np.concatenate([atlas.codepoints, fallback.codepoints[added]])
    narrow = cells == 1
    narrow_keys = {row.tobytes() for row in bitmaps[narrow, :, :w]}
    wide = np.flatnonzero(~narrow)
    keep = np.ones(cells.size, dtype=bool)
    for i in wide[wide >= len(atlas)].tolist():
        halves = np.ascontiguousarray(bitmaps[i, :, :w]).tobytes(), np.ascontiguousarray(bitmaps[i, :, w : 2 * w]).tobytes()
        keep[i] = not (halves[0] in narrow_keys and halves[1] in narrow_keys)
    order = np.argsort(codepoints[keep], kind="stable")
    return _atlas(
        f"{atlas.name}+{fallback.name}",
        codepoints[keep][order],
        bitmaps[keep][order],
        cells[keep][order],
        w,
        h,
        atlas.ascent,
        key,
    )


# ------------------------------------------------------------------------- loading


def _resolve_font_path(font: str | os.PathLike[str]) -> Path:
    if isinstance(font, str) and font in FONT_FILES:
        return FONT_DIR / FONT_FILES[font]
    path = Path(font)
    if not path.is_file():
        known = ", ".join(sorted(FONT_FILES))
        raise FontError(f"font {str(font)!r} is neither a shipped font ({known}) nor a readable file")
    return path


def _read_cached(cache_file: Path) -> FontAtlas | None:
    try:
        with np.load(cache_file, allow_pickle=False) as z:
            meta = z["meta"].tolist()
            return FontAtlas(
                name=str(meta[0]),
                codepoints=z["codepoints"],
                bitmaps=z["bitmaps"],
                cell_widths=z["cell_widths"],
                canonical=z["canonical"],
                glyph_width=int(meta[1]),
                glyph_height=int(meta[2]),
                ascent=int(meta[3]),
                source_sha256=str(meta[4]),
            )
    except (OSError, KeyError, ValueError, IndexError):
        return None  # absent or damaged: rebuild from the font file


def _write_cached(cache_file: Path, atlas: FontAtlas) -> None:
    """Best effort: a read-only or full cache directory only costs the next process a
    parse. Not fsynced: a cache lost in a power cut is rebuilt."""
    buffer = io.BytesIO()
    np.savez(
        buffer,
        codepoints=atlas.codepoints,
        bitmaps=atlas.bitmaps,
        cell_widths=atlas.cell_widths,
        canonical=atlas.canonical,
        meta=np.array(
            [atlas.name, str(atlas.glyph_width), str(atlas.glyph_height), str(atlas.ascent), atlas.source_sha256]
        ),
    )
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cache_file, buffer.getvalue(), durable=False)
    except OSError:
        pass


@functools.cache
def _load_atlas_from(path: Path) -> FontAtlas:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FontError(f"{path}: cannot read font file ({exc.strerror})") from None
    sha256 = hashlib.sha256(data).hexdigest()
    cache_file = cache_dir() / f"atlas-v{_ATLAS_FORMAT}-{sha256[:32]}.npz"
    cached = _read_cached(cache_file)
    if cached is not None and cached.source_sha256 == sha256:
        return cached
    atlas = _build_atlas(parse_font_bytes(path, data), sha256)
    _write_cached(cache_file, atlas)
    return atlas


def parse_font_bytes(path: Path, data: bytes) -> ParsedFont:
    """Pick the parser by file name: ``.hex`` / ``.hex.gz`` is Unifont, anything else BDF."""
    name = path.name.lower()
    if name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise FontError(f"{path}: damaged gzip data ({exc})") from None
        name = name[:-3]
    if name.endswith(".hex"):
        return parse_hex(path, data)
    return parse_bdf(path, data)


def load_atlas(font: str | os.PathLike[str]) -> FontAtlas:
    """The compiled atlas for a shipped font name or a font file path (cached)."""
    if isinstance(font, str) and font in FONT_FILES:
        return _load_shipped(font)
    return _load_atlas_from(_resolve_font_path(font).resolve())


@functools.cache
def _load_shipped(name: str) -> FontAtlas:
    # Shipped fonts by name skip the path resolution on every access.
    return _load_atlas_from((FONT_DIR / FONT_FILES[name]).resolve())


#: Unicode blocks that coverage tables report: name -> [first, stop) codepoints.
COVERAGE_BLOCKS: dict[str, tuple[int, int]] = {
    "ASCII": (0x20, 0x7F),
    "Latin-1": (0xA0, 0x100),
    "Greek": (0x391, 0x3CA),
    "Cyrillic": (0x410, 0x450),
    "box": (0x2500, 0x2580),
    "CJK": (0x4E00, 0xA000),
    "Hangul": (0xAC00, 0xD7A4),
}


def coverage(atlas: FontAtlas, blocks: dict[str, tuple[int, int]] = COVERAGE_BLOCKS) -> dict[str, float]:
    """Share of each block's codepoints the atlas draws (the rest is folded or replaced):
    its BMP table, as ``lookup`` reads it (no kernel: listing fonts compiles nothing)."""

    def drawn(lo: int, hi: int) -> np.ndarray:
        return atlas.bmp_lookup[lo:hi] >= 0 if hi <= 0x10000 else atlas.lookup(np.arange(lo, hi))[0] >= 0

    return {name: float(np.mean(drawn(lo, hi))) for name, (lo, hi) in blocks.items()}
