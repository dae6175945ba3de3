"""PNG encoding of page pixels: 1-bit palette images, deterministic bytes.

The container (signature, IHDR, PLTE, IDAT, IEND) is a few lines of ``struct``; the
time goes into deflate, so the encoder uses ISA-L's deflate (``isal``), several times
faster than zlib at a smaller size for these pages. It releases the GIL, so pages are
compressed in parallel threads by the caller. Every row uses PNG filter 0 (the page
kernel writes it with the pixels): on 1-bit text the adaptive filters cost time and
save next to nothing.
"""

from __future__ import annotations

import functools
import io
import struct

import numpy as np
from isal import isal_zlib

from .._errors import PageError, UsageError

#: ISA-L level 2: faster than zlib level 1 on these pages, and smaller.
DEFLATE_LEVEL = 2

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Palette index 0 = paper (white), 1 = ink (black): packed pixel bits are the indices.
_PALETTE = bytes((255, 255, 255, 0, 0, 0))


def _chunk_parts(kind: bytes, data: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """A chunk's length, kind, data and checksum, to be joined once with the rest of the
    file: the checksum runs on past the kind into the data, which is never copied for it."""
    return struct.pack(">I", len(data)), kind, data, struct.pack(">I", isal_zlib.crc32(data, isal_zlib.crc32(kind)))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return b"".join(_chunk_parts(kind, data))


@functools.lru_cache(maxsize=64)
def _head(width: int, height: int) -> bytes:
    """Signature, IHDR and PLTE of a page of this size: the same for every page of a render."""
    header = struct.pack(">IIBBBBB", width, height, 1, 3, 0, 0, 0)
    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"PLTE", _PALETTE)


_IEND = _chunk(b"IEND", b"")


#: The keyword of the text chunk that says how a page was drawn (``page_metadata``).
METADATA_KEYWORD = b"glyphpack"


def encode_png(scanlines: np.ndarray, width: int, metadata: dict[str, str] | None = None) -> bytes:
    """PNG bytes of one page.

    Args:
        scanlines: uint8[H, 1 + ceil(width / 8)], C-contiguous: per image row the
            filter byte (0) and the 1-bit pixels, most significant bit first, 1 = ink
            (as ``draw_page`` writes them).
        width: the page width in px.
        metadata: written as a ``tEXt`` chunk (keyword ``glyphpack``, ``key=value``
            pairs joined by ``;``): the shape and layout, so a reader of the file alone
            knows how to decode it (``page_metadata``).

    Returns:
        a 1-bit palette PNG (black ink on white), byte-identical for identical pixels
        and metadata.
    """
    height = scanlines.shape[0] if scanlines.ndim == 2 else 0
    if height < 1 or width < 1 or scanlines.shape[1] != 1 + -(-width // 8) or not scanlines.flags.c_contiguous:
        raise UsageError(f"scanlines of shape {scanlines.shape} are not a contiguous {width} px wide page")
    deflated = isal_zlib.compress(scanlines, DEFLATE_LEVEL)
    text = _metadata_chunk(tuple(metadata.items())) if metadata else b""
    return b"".join((_head(width, height), text, *_chunk_parts(b"IDAT", deflated), _IEND))


@functools.lru_cache(maxsize=64)
def _metadata_chunk(metadata: tuple[tuple[str, str], ...]) -> bytes:
    """The ``tEXt`` chunk of ``metadata`` (its pairs in order): made once per render."""
    for key, value in metadata:
        if any(c in key + value for c in ";=\0") or not (key + value).isascii():
            raise UsageError(f"page metadata {key!r}={value!r} must be ASCII without ';', '=' or NUL")
    text = ";".join(f"{key}={value}" for key, value in metadata)
    return _chunk(b"tEXt", METADATA_KEYWORD + b"\0" + text.encode("ascii"))


def page_metadata(png: bytes) -> dict[str, str]:
    """The ``key=value`` pairs of a page's ``glyphpack`` text chunk (empty when it has
    none: not a page glyphpack drew, or one from before pages carried it). Walks the
    chunks before the image data; nothing is decoded."""
    if png[:8] != _SIGNATURE:
        return {}
    at = 8
    while at + 8 <= len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        if kind == b"tEXt" and data.startswith(METADATA_KEYWORD + b"\0"):
            text = data[len(METADATA_KEYWORD) + 1 :].decode("latin-1")
            return dict(pair.partition("=")[::2] for pair in text.split(";") if "=" in pair)
        if kind in (b"IDAT", b"IEND"):
            return {}
        at += 12 + length
    return {}


#: No page glyphpack makes or reads is larger than this on a side (shapes check it too);
#: an image declaring more is refused before it is decoded.
MAX_PAGE_EDGE = 6000


def check_png_size(png: bytes) -> tuple[int, int]:
    """(width, height) an image declares, read from its header; ``PageError`` when it is
    unreadable or larger than any page, before any pixel is decoded."""
    from PIL import Image, UnidentifiedImageError

    if png[:8] == _SIGNATURE and png[12:16] == b"IHDR" and len(png) >= 24:
        width, height = struct.unpack(">II", png[16:24])  # the header alone: Pillow refuses bombs less politely
    else:
        try:
            with Image.open(io.BytesIO(png)) as image:
                width, height = image.size
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:  # Pillow raises SyntaxError for a broken PNG chunk
            raise PageError(f"not a readable image ({exc})") from None
    if max(width, height) > MAX_PAGE_EDGE:
        raise PageError(
            f"the image declares {width}x{height} px, larger than any page ({MAX_PAGE_EDGE} px a side); not decoded"
        )
    return int(width), int(height)


def decode_png(png: bytes) -> np.ndarray:
    """uint8[H, W], 1 where a PNG is dark (luminance < 128): ink on any page image."""
    from PIL import Image, UnidentifiedImageError

    check_png_size(png)
    try:
        with Image.open(io.BytesIO(png)) as image:
            gray = np.asarray(image.convert("L"))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:  # Pillow raises SyntaxError for a broken PNG chunk
        raise PageError(f"not a readable image ({exc})") from None
    return (gray < 128).astype(np.uint8)
