"""Bitmap fonts: BDF and Unifont ``.hex`` parsers, the ``FontAtlas`` and its disk cache.

Three layers, as in Pillow's font code: the parsers turn a file into a ``_ParsedFont``
(a dict of glyph bitmaps), ``_build_atlas`` turns that into the sorted arrays the
kernels use, and ``FontAtlas`` is the runtime value. ``load_atlas`` adds two caches:
one per process and one on disk keyed by the font file's content hash, so a second
process loads a compiled atlas without parsing.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import os
import tempfile
import unicodedata
from pathlib import Path

import numpy as np

from ._errors import FontError

def _font_dir() -> Path:
    """Where the shipped fonts are: ``glyphpack/fonts`` in an installed wheel, the
    repository's ``fonts/`` in an editable install or a source checkout."""
    installed = Path(__file__).resolve().parent / "fonts"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parent.parent / "fonts"


FONT_DIR = _font_dir()

#: The shipped fonts, by the name shapes use.
FONT_FILES = {
    "5x8": "5x8.bdf",
    "6x13": "6x13.bdf",
    "8x13": "8x13.bdf",
    "unifont": "unifont.hex.gz",
}

#: Codepoint that the newline marker glyph reads back as (flow layout draws it).
NEWLINE = 0x0A
#: The replacement glyph for characters no font glyph or fold covers.
REPLACEMENT = 0xFFFD
#: The wrap marker ending a row that a long line continues on (lines layout).
#: Outside Unicode, so no input character can ever collide with it.
WRAP = 0x110000

# Bump when parsing or atlas building changes: it is part of the disk cache key.
_ATLAS_FORMAT = 3

# Categories never drawn as glyphs: controls, format characters, surrogates,
# private use and combining marks are all handled by text normalization instead.
_UNDRAWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me"})


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
        source_sha256: content hash of the font file the atlas was built from.
    """

    name: str
    codepoints: np.ndarray
    bitmaps: np.ndarray
    cell_widths: np.ndarray
    canonical: np.ndarray
    glyph_width: int
    glyph_height: int
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

    def lookup(self, codepoints: np.ndarray) -> np.ndarray:
        """int32[n] glyph index of each of int32[n] codepoints, -1 where the font has none."""
        table = self.bmp_lookup
        glyphs = table[np.minimum(codepoints, 0xFFFF)]
        astral = np.flatnonzero(codepoints > 0xFFFF)
        if astral.size:
            at = np.minimum(np.searchsorted(self.codepoints, codepoints[astral]), len(self) - 1)
            glyphs[astral] = np.where(self.codepoints[at] == codepoints[astral], at, -1)
        return glyphs

    @property
    def has_wide(self) -> bool:
        return bool((self.cell_widths == 2).any())

    @classmethod
    def load(cls, font: str | os.PathLike) -> "FontAtlas":
        """Load a shipped font by name (``"5x8"``) or any BDF / ``.hex[.gz]`` file."""
        return load_atlas(font)


@dataclasses.dataclass
class _ParsedFont:
    """What a parser read: glyph bitmaps keyed by codepoint, before any filtering."""

    name: str
    glyph_width: int
    glyph_height: int
    glyphs: dict[int, tuple[np.ndarray, int]]  # codepoint -> (uint8[h, w*cells], cells)


# --------------------------------------------------------------------------- parsers


def _parse_bdf(path: Path, data: bytes) -> _ParsedFont:
    """Parse an Adobe BDF 2.1 file. Errors name the file, the line and what was expected."""
    try:
        text = data.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise FontError(f"{path}: not a text file ({exc})") from None
    lines = text.splitlines()

    def fail(lineno: int, expected: str) -> FontError:
        got = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else "end of file"
        return FontError(f"{path}:{lineno}: expected {expected}, found {got!r}")

    def ints(lineno: int, fields: list[str], count: int, what: str) -> list[int]:
        if len(fields) != count:
            raise fail(lineno, what)
        try:
            return [int(f) for f in fields]
        except ValueError:
            raise fail(lineno, what) from None

    if not lines or not lines[0].startswith("STARTFONT"):
        raise fail(1, "'STARTFONT 2.1' (is this a BDF file?)")

    bbox = None
    ascent = descent = None
    i = 1
    # Header: up to the first STARTCHAR.
    while i < len(lines) and not lines[i].startswith("STARTCHAR"):
        fields = lines[i].split()
        if fields and fields[0] == "FONTBOUNDINGBOX":
            bbox = ints(i + 1, fields[1:], 4, "'FONTBOUNDINGBOX w h xoff yoff'")
        elif fields and fields[0] == "FONT_ASCENT":
            (ascent,) = ints(i + 1, fields[1:], 1, "'FONT_ASCENT n'")
        elif fields and fields[0] == "FONT_DESCENT":
            (descent,) = ints(i + 1, fields[1:], 1, "'FONT_DESCENT n'")
        i += 1
    if bbox is None:
        raise FontError(f"{path}: no FONTBOUNDINGBOX line before the first STARTCHAR")
    fbb_w, fbb_h, fbb_x, fbb_y = bbox
    if ascent is None or descent is None:
        ascent, descent = fbb_h + fbb_y, -fbb_y
    cell_w, cell_h = fbb_w, ascent + descent
    if cell_w <= 0 or cell_h <= 0:
        raise FontError(f"{path}: glyph cell {cell_w}x{cell_h} is empty")

    glyphs: dict[int, tuple[np.ndarray, int]] = {}
    while i < len(lines):
        line = lines[i]
        if line.startswith("ENDFONT"):
            break
        if not line.strip() or line.startswith("COMMENT"):
            i += 1
            continue
        if not line.startswith("STARTCHAR"):
            raise fail(i + 1, "'STARTCHAR name' or 'ENDFONT'")
        start = i
        encoding = dwidth = bbx = None
        i += 1
        while i < len(lines) and not lines[i].startswith("BITMAP"):
            fields = lines[i].split()
            if not fields:
                pass
            elif fields[0] == "ENCODING":
                encoding = ints(i + 1, fields[1:2], 1, "'ENCODING codepoint'")[0]
            elif fields[0] == "DWIDTH":
                dwidth = ints(i + 1, fields[1:], 2, "'DWIDTH x y'")[0]
            elif fields[0] == "BBX":
                bbx = ints(i + 1, fields[1:], 4, "'BBX w h xoff yoff'")
            elif fields[0] in ("STARTCHAR", "ENDCHAR", "ENDFONT"):
                raise fail(i + 1, f"'BITMAP' for the glyph started at line {start + 1}")
            i += 1
        if i >= len(lines):
            raise fail(i + 1, f"'BITMAP' for the glyph started at line {start + 1}")
        if encoding is None or bbx is None:
            raise fail(i + 1, f"ENCODING and BBX before BITMAP (glyph at line {start + 1})")
        w, h, xoff, yoff = bbx
        if w < 0 or h < 0:
            raise fail(i, "a BBX with a non-negative width and height")
        digits = 2 * ((w + 7) // 8)
        rows = []
        for r in range(h):
            row = lines[i + 1 + r].strip() if i + 1 + r < len(lines) else ""
            if len(row) < digits:
                raise fail(i + 2 + r, f"a bitmap row of {digits} hex digits")
            try:
                rows.append(bytes.fromhex(row[:digits]))
            except ValueError:
                raise fail(i + 2 + r, f"a bitmap row of {digits} hex digits") from None
        i += 1 + h
        if i >= len(lines) or not lines[i].startswith("ENDCHAR"):
            raise fail(i + 1, f"'ENDCHAR' after {h} bitmap rows")
        i += 1
        if encoding < 0:
            continue  # unencoded glyph: nothing can ask for it
        cells = 2 if dwidth is not None and dwidth >= 2 * cell_w else 1
        bitmap = np.zeros((cell_h, cell_w * cells), dtype=np.uint8)
        if w and h:
            bits = np.unpackbits(np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(h, -1), axis=1)[:, :w]
            top = ascent - (yoff + h)
            left = xoff - fbb_x if fbb_x < 0 else xoff
            # Clip ink outside the cell: charcell fonts keep to their cell, and a stray
            # overhang must not bleed into the neighbouring cell.
            y0, y1 = max(top, 0), min(top + h, cell_h)
            x0, x1 = max(left, 0), min(left + w, cell_w * cells)
            if y0 < y1 and x0 < x1:
                bitmap[y0:y1, x0:x1] = bits[y0 - top : y1 - top, x0 - left : x1 - left]
        glyphs[encoding] = (bitmap, cells)
    else:
        raise fail(len(lines) + 1, "'ENDFONT'")
    if not glyphs:
        raise FontError(f"{path}: no encoded glyphs")
    return _ParsedFont(path.name.split(".")[0], cell_w, cell_h, glyphs)


def _parse_hex(path: Path, data: bytes) -> _ParsedFont:
    """Parse GNU Unifont ``.hex``: ``CODEPOINT:HEXBITS``, 32 digits = 8x16, 64 = 16x16."""
    narrow_cps, narrow_hex, wide_cps, wide_hex = [], [], [], []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        line = raw.strip()
        if not line:
            continue
        cp_text, sep, bits = line.partition(b":")
        if sep and len(bits) not in (32, 64):
            raise FontError(f"{path}:{lineno}: expected 32 or 64 hex digits after ':', found {len(bits)}")
        try:
            if not sep:
                raise ValueError
            codepoint = int(cp_text, 16)
            bytes.fromhex(bits.decode("ascii"))
        except ValueError:
            raise FontError(
                f"{path}:{lineno}: expected 'CODEPOINT:HEXDIGITS', found {line[:40].decode('latin-1')!r}"
            ) from None
        if len(bits) == 32:
            narrow_cps.append(codepoint)
            narrow_hex.append(bits)
        else:
            wide_cps.append(codepoint)
            wide_hex.append(bits)
    glyphs: dict[int, tuple[np.ndarray, int]] = {}
    for cps, hexes, cells in ((narrow_cps, narrow_hex, 1), (wide_cps, wide_hex, 2)):
        if not cps:
            continue
        packed = np.frombuffer(bytes.fromhex(b"".join(hexes).decode("ascii")), dtype=np.uint8)
        bits = np.unpackbits(packed.reshape(len(cps), 16, cells), axis=2)
        for codepoint, bitmap in zip(cps, bits):
            glyphs[codepoint] = (bitmap, cells)
    if not glyphs:
        raise FontError(f"{path}: no glyphs")
    return _ParsedFont(path.name.split(".")[0], 8, 16, glyphs)


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
    if codepoint > 0x10FFFF:
        return False
    return unicodedata.category(chr(codepoint)) not in _UNDRAWN_CATEGORIES


def _build_atlas(parsed: _ParsedFont, sha256: str) -> FontAtlas:
    """Sorted arrays from a parsed font: drop undrawable codepoints, add markers, canonicalize."""
    w, h = parsed.glyph_width, parsed.glyph_height
    glyphs = {cp: g for cp, g in parsed.glyphs.items() if _drawable(cp)}
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
    canonical = np.empty(len(codepoints), dtype=np.int32)
    first_with_bitmap: dict[tuple[int, bytes], int] = {}
    for i, cp in enumerate(codepoints.tolist()):
        bm, cells = glyphs[cp]
        bitmaps[i, :, : bm.shape[1]] = bm
        cell_widths[i] = cells
        key = (cells, bm.tobytes())
        # Sorted order makes the first codepoint seen the smallest: the canonical one.
        canonical[i] = first_with_bitmap.setdefault(key, cp)

    for marker in (NEWLINE, WRAP):
        i = int(np.searchsorted(codepoints, marker))
        if canonical[i] != marker or int((canonical == canonical[i]).sum()) != 1:
            raise FontError(f"{parsed.name}: a font glyph has the same bitmap as marker U+{marker:04X}")
    return FontAtlas(
        name=parsed.name,
        codepoints=codepoints,
        bitmaps=bitmaps,
        cell_widths=cell_widths,
        canonical=canonical,
        glyph_width=w,
        glyph_height=h,
        source_sha256=sha256,
    )


# ------------------------------------------------------------------------- loading


def cache_dir() -> Path:
    """Where compiled atlases live: ``$GLYPHPACK_CACHE_DIR``, else the user cache dir."""
    explicit = os.environ.get("GLYPHPACK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "glyphpack"


def _resolve_font_path(font: str | os.PathLike) -> Path:
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
                source_sha256=str(meta[3]),
            )
    except (OSError, KeyError, ValueError, IndexError):
        return None  # absent or damaged: rebuild from the font file


def _write_cached(cache_file: Path, atlas: FontAtlas) -> None:
    """Best effort: a read-only or full cache directory only costs the next process a parse."""
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_file.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(
                    f,
                    codepoints=atlas.codepoints,
                    bitmaps=atlas.bitmaps,
                    cell_widths=atlas.cell_widths,
                    canonical=atlas.canonical,
                    meta=np.array(
                        [atlas.name, str(atlas.glyph_width), str(atlas.glyph_height), atlas.source_sha256]
                    ),
                )
            os.replace(tmp, cache_file)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


@functools.lru_cache(maxsize=None)
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


def parse_font_bytes(path: Path, data: bytes) -> _ParsedFont:
    """Pick the parser by file name: ``.hex`` / ``.hex.gz`` is Unifont, anything else BDF."""
    name = path.name.lower()
    if name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise FontError(f"{path}: damaged gzip data ({exc})") from None
        name = name[:-3]
    if name.endswith(".hex"):
        return _parse_hex(path, data)
    return _parse_bdf(path, data)


def load_atlas(font: str | os.PathLike) -> FontAtlas:
    """The compiled atlas for a shipped font name or a font file path (cached)."""
    return _load_atlas_from(_resolve_font_path(font).resolve())
