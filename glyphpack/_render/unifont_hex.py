"""GNU Unifont ``.hex`` parser: ``CODEPOINT:HEXBITS``, 32 digits = 8x16, 64 = 16x16."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._errors import FontError
from .parsed import ParsedFont

GLYPH_WIDTH, GLYPH_HEIGHT = 8, 16
#: Unifont's baseline: 14 rows above a 2-row descent.
ASCENT = 14


def parse_hex(path: Path, data: bytes) -> ParsedFont:
    """Parse Unifont ``.hex`` bytes. Errors name the file, the line and what was expected."""
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
        bits_array = np.unpackbits(packed.reshape(len(cps), GLYPH_HEIGHT, cells), axis=2)
        for codepoint, bitmap in zip(cps, bits_array):
            glyphs[codepoint] = (bitmap, cells)
    if not glyphs:
        raise FontError(f"{path}: no glyphs")
    return ParsedFont(path.name.split(".")[0], GLYPH_WIDTH, GLYPH_HEIGHT, ASCENT, glyphs)
