"""Adobe BDF 2.1 parser: one function for the header, one per glyph record (as Pillow's
``bdf_char``). Errors name the file, the line and what was expected."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from .._errors import FontError
from .parsed import ParsedFont


@dataclasses.dataclass(frozen=True)
class _Lines:
    """The file's lines, with error messages that point at one of them."""

    path: Path
    lines: list[str]

    def fail(self, lineno: int, expected: str) -> FontError:
        got = self.lines[lineno - 1].strip() if 0 < lineno <= len(self.lines) else "end of file"
        return FontError(f"{self.path}:{lineno}: expected {expected}, found {got!r}")

    def ints(self, lineno: int, fields: list[str], count: int, what: str) -> list[int]:
        if len(fields) != count:
            raise self.fail(lineno, what)
        try:
            return [int(f) for f in fields]
        except ValueError:
            raise self.fail(lineno, what) from None


@dataclasses.dataclass(frozen=True)
class _Cell:
    """The font's cell: size, baseline and the bounding box's left offset."""

    width: int
    height: int
    ascent: int
    x_offset: int


def _header(src: _Lines) -> tuple[_Cell, int]:
    """The cell from the header, and the index of the first line after it."""
    if not src.lines or not src.lines[0].startswith("STARTFONT"):
        raise src.fail(1, "'STARTFONT 2.1' (is this a BDF file?)")
    bbox = ascent = descent = None
    i = 1
    while i < len(src.lines) and not src.lines[i].startswith("STARTCHAR"):
        fields = src.lines[i].split()
        if fields and fields[0] == "FONTBOUNDINGBOX":
            bbox = src.ints(i + 1, fields[1:], 4, "'FONTBOUNDINGBOX w h xoff yoff'")
        elif fields and fields[0] == "FONT_ASCENT":
            (ascent,) = src.ints(i + 1, fields[1:], 1, "'FONT_ASCENT n'")
        elif fields and fields[0] == "FONT_DESCENT":
            (descent,) = src.ints(i + 1, fields[1:], 1, "'FONT_DESCENT n'")
        i += 1
    if bbox is None:
        raise FontError(f"{src.path}: no FONTBOUNDINGBOX line before the first STARTCHAR")
    box_w, box_h, box_x, box_y = bbox
    if ascent is None or descent is None:
        ascent, descent = box_h + box_y, -box_y
    cell = _Cell(box_w, ascent + descent, ascent, box_x)
    if cell.width <= 0 or cell.height <= 0:
        raise FontError(f"{src.path}: glyph cell {cell.width}x{cell.height} is empty")
    return cell, i


def _glyph(src: _Lines, start: int, cell: _Cell) -> tuple[int, np.ndarray, int, int]:
    """One ``STARTCHAR .. ENDCHAR`` record starting at line index ``start``.

    Returns (codepoint, uint8[cell.height, cell.width * cells] bitmap, cells, index of
    the next line); codepoint is negative for an unencoded glyph.
    """
    lines = src.lines
    encoding = dwidth = bbx = None
    i = start + 1
    while i < len(lines) and not lines[i].startswith("BITMAP"):
        fields = lines[i].split()
        if not fields:
            pass
        elif fields[0] == "ENCODING":
            encoding = src.ints(i + 1, fields[1:2], 1, "'ENCODING codepoint'")[0]
        elif fields[0] == "DWIDTH":
            dwidth = src.ints(i + 1, fields[1:], 2, "'DWIDTH x y'")[0]
        elif fields[0] == "BBX":
            bbx = src.ints(i + 1, fields[1:], 4, "'BBX w h xoff yoff'")
        elif fields[0] in ("STARTCHAR", "ENDCHAR", "ENDFONT"):
            raise src.fail(i + 1, f"'BITMAP' for the glyph started at line {start + 1}")
        i += 1
    if i >= len(lines):
        raise src.fail(i + 1, f"'BITMAP' for the glyph started at line {start + 1}")
    if encoding is None or bbx is None:
        raise src.fail(i + 1, f"ENCODING and BBX before BITMAP (glyph at line {start + 1})")
    w, h, x_offset, y_offset = bbx
    if w < 0 or h < 0:
        raise src.fail(i, "a BBX with a non-negative width and height")
    rows = _bitmap_rows(src, i + 1, w, h)
    i += 1 + h
    if i >= len(lines) or not lines[i].startswith("ENDCHAR"):
        raise src.fail(i + 1, f"'ENDCHAR' after {h} bitmap rows")
    cells = 2 if dwidth is not None and dwidth >= 2 * cell.width else 1
    bitmap = np.zeros((cell.height, cell.width * cells), dtype=np.uint8)
    if w and h:
        bits = np.unpackbits(np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(h, -1), axis=1)[:, :w]
        top = cell.ascent - (y_offset + h)
        left = x_offset - cell.x_offset if cell.x_offset < 0 else x_offset
        # Clip ink outside the cell: charcell fonts keep to their cell, and a stray
        # overhang must not bleed into the neighbouring cell.
        y0, y1 = max(top, 0), min(top + h, cell.height)
        x0, x1 = max(left, 0), min(left + w, cell.width * cells)
        if y0 < y1 and x0 < x1:
            bitmap[y0:y1, x0:x1] = bits[y0 - top : y1 - top, x0 - left : x1 - left]
    return encoding, bitmap, cells, i + 1


def _bitmap_rows(src: _Lines, first: int, w: int, h: int) -> list[bytes]:
    """``h`` rows of hex digits from line index ``first``, each ``w`` bits wide."""
    digits = 2 * ((w + 7) // 8)
    rows = []
    for r in range(h):
        index = first + r
        row = src.lines[index].strip() if index < len(src.lines) else ""
        try:
            if len(row) < digits:
                raise ValueError
            rows.append(bytes.fromhex(row[:digits]))
        except ValueError:
            raise src.fail(index + 1, f"a bitmap row of {digits} hex digits") from None
    return rows


def parse_bdf(path: Path, data: bytes) -> ParsedFont:
    """Parse an Adobe BDF 2.1 file (latin-1 text: every byte decodes)."""
    src = _Lines(path, data.decode("latin-1").splitlines())
    cell, i = _header(src)
    glyphs: dict[int, tuple[np.ndarray, int]] = {}
    while True:
        if i >= len(src.lines):
            raise src.fail(len(src.lines) + 1, "'ENDFONT'")
        line = src.lines[i]
        if line.startswith("ENDFONT"):
            break
        if not line.strip() or line.startswith("COMMENT"):
            i += 1
            continue
        if not line.startswith("STARTCHAR"):
            raise src.fail(i + 1, "'STARTCHAR name' or 'ENDFONT'")
        codepoint, bitmap, cells, i = _glyph(src, i, cell)
        if codepoint >= 0:  # an unencoded glyph: nothing can ask for it
            glyphs[codepoint] = (bitmap, cells)
    if not glyphs:
        raise FontError(f"{path}: no encoded glyphs")
    return ParsedFont(path.name.split(".")[0], cell.width, cell.height, cell.ascent, glyphs)
