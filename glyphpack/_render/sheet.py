"""A contact sheet: every page of a rendering as a labelled thumbnail on one image."""

from __future__ import annotations

import io
from collections.abc import Iterable

from .._errors import GlyphpackError
from .render import Page


def contact_sheet(pages: Iterable[Page], *, columns: int = 4, width: int = 1600, max_pages: int = 64) -> bytes:
    """PNG bytes of up to ``max_pages`` page thumbnails in ``columns`` columns,
    ``width`` px wide in all, each labelled with its number, size and billed tokens.

    Thumbnails are shrunk (box filter), so glyphs are not legible on the sheet: it
    shows how many pages there are and how full each is, not their text.
    """
    from PIL import Image, ImageDraw, ImageFont

    pages = list(pages)[:max_pages]
    if not pages:
        raise GlyphpackError("no pages to put on a contact sheet")
    if columns < 1 or width < columns * 40:
        raise GlyphpackError(f"a contact sheet needs at least 40 px per column, not {width} px for {columns} columns")
    gap, label = 8, 14
    cell_width = (width - gap * (columns + 1)) // columns
    scale = cell_width / max(p.width for p in pages)
    cell_height = max(1, round(max(p.height for p in pages) * scale))
    rows = -(-len(pages) // columns)
    sheet = Image.new("L", (width, gap + rows * (cell_height + label + gap)), 210)
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default()
    for i, page in enumerate(pages):
        with Image.open(io.BytesIO(page.png)) as image:
            thumb = image.convert("L").resize(
                (max(1, round(page.width * scale)), max(1, round(page.height * scale))), Image.Resampling.BOX
            )
        x = gap + (i % columns) * (cell_width + gap)
        y = gap + (i // columns) * (cell_height + label + gap)
        tokens = f", {page.tokens:,} tokens" if page.tokens is not None else ""
        draw.text((x, y), f"page {page.index + 1}: {page.width}x{page.height}{tokens}", fill=0, font=font)
        sheet.paste(thumb, (x, y + label))
    buffer = io.BytesIO()
    # Sixteen grey levels keep thumbnails readable as layout and the file small.
    sheet.quantize(16, dither=Image.Dither.NONE).save(buffer, "PNG", optimize=True)
    return buffer.getvalue()
