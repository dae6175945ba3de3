"""The renderer: text to PNG pages of bitmap glyphs (numba kernels; never imports history).

    parsed, bdf, unifont_hex   font files -> ParsedFont
    fonts      FontAtlas: sorted glyph arrays, built once and cached on disk
    shapes     Shape: a font on a cell advance, line pitch and page size
    text       normalization: str -> int32 glyph indices, every change counted
    kernels    the numba kernels (placement, raster, glyph matching)
    layout     glyph stream -> cell grid; and the grid back to text
    raster     cell grids -> page pixels (calls the kernel)
    png        page pixels -> 1-bit PNG bytes
    render     the public entry: render, plan, count_pages; Page, Pages, RenderReport
    reader     PNG pages -> text, by exact matching against the atlas
    legibility downscaling simulation and nearest-glyph reading
    sheet      a contact sheet of pages
"""
