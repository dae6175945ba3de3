"""The page PNG encoder on its own: a page without metadata, every malformed scanline
array refused before any work, the metadata chunk read back and nothing else taken for it."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from PIL import Image

from glyphpack import UsageError
from glyphpack._render.png import _chunk, encode_png, page_metadata


def scanlines(width: int, height: int) -> np.ndarray:
    rows = np.zeros((height, 1 + -(-width // 8)), dtype=np.uint8)
    rows[:, 1] = 0b1010_0000  # ink in the first and third pixel of every row
    return rows


def test_a_page_without_metadata_is_a_plain_one_bit_png_that_decodes_to_its_pixels():
    png = encode_png(scanlines(13, 3), 13)
    assert b"tEXt" not in png and page_metadata(png) == {}
    with Image.open(io.BytesIO(png)) as image:
        assert (image.size, image.mode) == ((13, 3), "P")
        assert np.asarray(image)[:, :4].tolist() == [[1, 0, 1, 0]] * 3
    assert png.endswith(struct.pack(">I", 0) + b"IEND" + bytes.fromhex("ae426082"))  # IEND's fixed checksum


@pytest.mark.parametrize(("rows", "width"), [
    (np.zeros(3, dtype=np.uint8), 8),  # not two-dimensional
    (np.zeros((0, 2), dtype=np.uint8), 8),  # no rows
    (scanlines(8, 2), 0),  # no width
    (scanlines(16, 2), 8),  # rows of another width
    (np.asfortranarray(scanlines(16, 2)), 16),  # not C-contiguous
])
def test_scanlines_that_are_not_a_page_are_refused_by_their_shape(rows, width):
    with pytest.raises(UsageError, match=rf"^scanlines of shape \({rows.shape[0]},"):
        encode_png(rows, width)


def test_one_pixel_wide_pages_are_pages():
    assert Image.open(io.BytesIO(encode_png(scanlines(1, 1), 1))).size == (1, 1)


def test_the_metadata_chunk_is_read_back_and_found_only_before_the_image_data():
    png = encode_png(scanlines(8, 1), 8, {"shape": "5x8", "layout": "flow"})
    assert page_metadata(png) == {"shape": "5x8", "layout": "flow"}
    assert page_metadata(b"not a png") == {}
    plain = encode_png(scanlines(8, 1), 8)
    idat, iend = plain.index(b"IDAT") - 4, plain.index(b"IEND") - 4
    late = plain[:iend] + _chunk(b"tEXt", b"glyphpack\0shape=5x8") + plain[iend:]
    assert page_metadata(late) == {}  # after the image data: not the page's
    other = plain[:idat] + _chunk(b"tEXt", b"Comment\0shape=5x8") + plain[idat:]
    assert page_metadata(other) == {}  # another keyword's text
    both = plain[:idat] + _chunk(b"tEXt", b"Comment\0x=y") + _chunk(b"tEXt", b"glyphpack\0shape=9x15;odd;layout=lines") + plain[idat:]
    assert page_metadata(both) == {"shape": "9x15", "layout": "lines"}  # past another chunk; a pair without '=' skipped
