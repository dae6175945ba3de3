import glyphpack


def test_public_api_is_pinned():
    assert glyphpack.__all__ == sorted(glyphpack.__all__)
    assert set(glyphpack.__all__) == {
        "SHAPES", "FontAtlas", "FontError", "GlyphpackError", "LimitError", "Page", "PageError", "Pages",
        "RenderReport", "Shape", "ShapeError", "count_pages", "plan", "read_grid", "read_page", "read_pages", "render",
        "Profile", "ProfileWarning", "TextOnlyModelError", "resolve", "TextEstimator", "estimate_text_tokens",
        "confusable_pairs", "downscale", "legibility", "simulate",
    }
    for name in glyphpack.__all__:
        assert getattr(glyphpack, name) is not None


def test_errors_share_one_root():
    for error in (glyphpack.FontError, glyphpack.LimitError, glyphpack.ShapeError, glyphpack.PageError,
                  glyphpack.TextOnlyModelError):
        assert issubclass(error, glyphpack.GlyphpackError)
