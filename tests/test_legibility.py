"""Legibility under downscaling.

Each property was seen to fail with the code under it broken (checked by hand when
these tests were written): pages 32 px wider than the profile's page size fail
the first; a ``downscale`` that returns its input unchanged fails the second; a
``resample`` that keeps the pixels fails the third (the curve stays flat); a renderer
that perturbs one pixel per pass fails the byte-identity half.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import glyphpack
from glyphpack._providers.resolve import all_profiles
from glyphpack._render.legibility import (
    FILTERS,
    SAMPLE_TEXT,
    confusable_pairs,
    downscale,
    legibility,
    resample,
    simulate,
    sweep,
    unreadable_below,
)
from glyphpack._render.png import decode_png
from glyphpack._render.shapes import SHAPES

PROFILES = all_profiles()


@pytest.fixture(scope="module")
def sample_page():
    shape = SHAPES["5x8"].with_page_size(640, 320)
    page = glyphpack.render(SAMPLE_TEXT * 40, shape=shape)[0]
    return page, shape, glyphpack.read_page(page, shape)


@given(
    text=st.text(min_size=1, max_size=400),
    profile_index=st.integers(0, len(PROFILES) - 1),
    filter_name=st.sampled_from(sorted(FILTERS)),
)
def test_pages_rendered_for_a_profile_survive_its_resize(text, profile_index, filter_name):
    profile = PROFILES[profile_index]
    pages = glyphpack.render(text * 20, model=profile)
    for page in pages[:2]:
        served = simulate(page, profile, filter_name)
        assert served.shape == (page.height, page.width)
        expected = glyphpack.read_page(page)
        assert legibility(served, page.shape, expected, size=(page.width, page.height)) == 1.0


@pytest.mark.slow  # hypothesis over resampling filters: CI runs it
@given(factor=st.floats(0.5, 0.95), filter_name=st.sampled_from(sorted(FILTERS)))
def test_downscaling_a_5x8_page_loses_glyphs(sample_page, factor, filter_name):
    page, shape, text = sample_page
    shrunk = downscale(page, factor, filter_name)
    score = legibility(shrunk, shape, text, size=(page.width, page.height), filter=filter_name)
    assert score < 1.0


def test_measured_bounds(sample_page):
    """Bounds measured on the sample page (this repository's run: 0.61 and 0.02)."""
    page, shape, text = sample_page

    def score(factor, filter_name):
        return legibility(downscale(page, factor, filter_name), shape, text, size=(page.width, page.height), filter=filter_name)

    assert score(0.8, "bicubic") < 0.9
    assert score(0.5, "bicubic") < 0.1
    assert score(1.0, "bicubic") == 1.0


def test_snapshots_must_be_re_rendered_from_source_text(sample_page):
    page, shape, text = sample_page
    # From the stored source text: every pass gives the same bytes.
    passes = [glyphpack.render(SAMPLE_TEXT * 40, shape=shape)[0].png for _ in range(4)]
    assert all(p == passes[0] for p in passes)
    # From the previous pass's pixels (shrink to 90% and restore): a monotone loss.
    pixels = decode_png(page.png).astype(np.float32)
    curve = [1.0]
    for _ in range(6):
        shrunk = resample(pixels, (round(page.width * 0.9), round(page.height * 0.9)), "bicubic")
        pixels = resample(shrunk, (page.width, page.height), "bicubic")
        curve.append(legibility(pixels, shape, text))
    assert all(later <= earlier for earlier, later in zip(curve, curve[1:])), curve
    assert curve[-1] < 0.5, curve


def test_confusables_include_the_usual_victims():
    pairs = {(a, b): d for a, b, d in confusable_pairs("5x8")}
    assert pairs[(";", "\u037e")] == 0  # Greek question mark: identical to the semicolon
    assert all(d <= 2 for d in pairs.values())
    identical = [(a, b) for (a, b), d in pairs.items() if d == 0]
    atlas = SHAPES["5x8"].atlas
    for a, b in identical[:20]:  # identical bitmaps read back as one canonical character
        assert atlas.canonical[atlas.index_of(ord(a))] == atlas.canonical[atlas.index_of(ord(b))]


def test_sweep_and_unreadable_factor():
    records = sweep([SHAPES["5x8"]], factors=(1.0, 0.8, 0.5), filters=("bicubic", "lanczos"), page_size=(400, 160))
    assert len(records) == 6
    assert {r["legibility"] for r in records if r["factor"] == 1.0} == {1.0}
    assert unreadable_below(records, "5x8") == 0.5


def test_legibility_rejects_bad_input(sample_page):
    page, shape, text = sample_page
    with pytest.raises(glyphpack.GlyphpackError, match="downscale factor"):
        downscale(page, 1.5)
    with pytest.raises(glyphpack.GlyphpackError, match="unknown filter"):
        downscale(page, 0.5, "sinc")
    with pytest.raises(glyphpack.GlyphpackError, match="rows"):
        legibility(page, shape, text * 3)
