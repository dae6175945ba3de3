"""Provider profiles: every worked example of PROVIDERS.md, resolve(), page geometry, blocks."""

import base64
import json
import math
import uuid
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import glyphpack
from glyphpack import ProfileWarning, TextOnlyModelError, resolve
from glyphpack._providers.catalog import EXAMPLE_MODELS
from glyphpack._providers.resolve import all_profiles
from glyphpack._render.shapes import SHAPES

# ---------------------------------------------------------------- PROVIDERS.md examples

ANTHROPIC_STANDARD = [((1000, 1000), (1000, 1000), 1296), ((1092, 1092), (1092, 1092), 1521), ((1920, 1080), (1456, 819), 1560)]
ANTHROPIC_HIGHRES = [((1920, 1080), (1920, 1080), 2691), ((2000, 1500), (2000, 1500), 3888), ((3840, 2160), (2576, 1449), 4784)]


@pytest.mark.parametrize("size, served, tokens", ANTHROPIC_STANDARD)
def test_anthropic_standard_worked_examples(size, served, tokens):
    profile = resolve("claude-sonnet-4-5")
    assert profile.resize(*size) == served
    assert profile.tokens(*size) == tokens


@pytest.mark.parametrize("size, served, tokens", ANTHROPIC_HIGHRES)
def test_anthropic_highres_worked_examples(size, served, tokens):
    profile = resolve("claude-opus-4-8")
    assert profile.resize(*size) == served
    assert profile.tokens(*size) == tokens


def test_largest_never_resized_claude_pages():
    standard, highres = resolve("claude-sonnet-4-5"), resolve("claude-opus-4-7")
    assert standard.resize(1568, 784) == (1568, 784) and standard.tokens(1568, 784) == 1568
    assert highres.resize(2576, 1456) == (2576, 1456) and highres.tokens(2576, 1456) == 4784
    assert highres.resize(1932, 1932) == (1932, 1932) and highres.tokens(1932, 1932) == 4761
    assert standard.resize(1569, 784) != (1569, 784)


def test_openai_patch_worked_example():
    profile = resolve("gpt-5.4:high")
    assert profile.resize(2048, 2048) == (1600, 1600)
    assert profile.tokens(2048, 2048) == 3000


def test_openai_tile_models():
    gpt4o = resolve("gpt-4o")
    assert gpt4o.resize(768, 2048) == (768, 2048)  # the largest never-resized page
    assert gpt4o.tokens(768, 2048) == 85 + 170 * 8
    assert gpt4o.resize(2048, 2048) == (768, 768)  # short side scaled to 768
    assert resolve("gpt-5").tokens(512, 512) == 70 + 140
    assert resolve("o3").tokens(512, 512) == 75 + 150


def test_gemini_billing():
    assert resolve("gemini-3-pro").tokens(2048, 2048) == 1120
    assert resolve("gemini-3-pro:low").tokens(100, 100) == 280
    assert resolve("gemini-3-pro:ultra_high").tokens(100, 100) == 2240
    gemini2 = resolve("gemini-2.5-pro")
    assert gemini2.tokens(384, 384) == 258
    assert gemini2.tokens(1536, 768) == 2 * 258


def test_multipliers():
    assert resolve("gpt-4.1-mini").tokens(1024, 1024) == int(np.ceil(1024 * 1.62))
    assert resolve("gpt-4.1-nano").tokens(64, 64) == int(np.ceil(4 * 2.46))
    assert resolve("o4-mini").tokens(64, 64) == int(np.ceil(4 * 1.72))


# ------------------------------------------------------------------------------ resolve

SPELLINGS = [
    ("claude-opus-4-8", "claude-highres", "anthropic"),
    ("claude-sonnet-4-5-20250929", "claude", "anthropic"),
    ("Claude-Sonnet-4.5", "claude", "anthropic"),
    ("anthropic/claude-sonnet-4.5", "claude", "anthropic"),
    ("openrouter/anthropic/claude-sonnet-4.5", "claude", "openrouter"),
    ("~anthropic/claude-sonnet-latest", "claude", "anthropic"),
    ("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude", "bedrock"),
    ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude", "bedrock"),
    ("global.anthropic.claude-opus-4-7-v1:0", "claude-highres", "bedrock"),
    ("vertex_ai/claude-opus-4-7", "claude-highres", "vertex"),
    ("claude-sonnet-4-5@20250929", "claude", "vertex"),
    ("github_copilot/claude-sonnet-4.6", "claude", "github-copilot"),
    ("claude-opus-4.7", "claude-highres", "anthropic"),
    ("gemini/gemini-3-pro-preview", "gemini-3-high", "google-ai"),
    ("models/gemini-2.5-flash", "gemini-2", "google-ai"),
    ("gpt-5.4", "gpt-5.4-original", "openai"),
    ("gpt-5.4-mini", "gpt-5.4-original", "openai"),
    ("openai/gpt-5.4:high", "gpt-5.4-high", "openai"),
    ("azure/gpt-4.1", "gpt-4.1", "azure"),
    ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini", "openai"),
    ("GPT-4o-2024-08-06", "gpt-4o", "openai"),
    ("gpt-4o-mini", "gpt-4o-mini", "openai"),
    ("o3", "o3", "openai"),
    ("o4-mini", "o4-mini", "openai"),
    ("gpt-5.6", "gpt-5.6-original", "openai"),
    ("gpt-5.5:high", "gpt-5.5-high", "openai"),
    ("gpt-5", "gpt-5", "openai"),
    ("gpt-5.1", "gpt-5.1", "openai"),
]


@pytest.mark.parametrize("model_id, reader, route", SPELLINGS)
def test_resolve_spellings(model_id, reader, route):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile = resolve(model_id)
    assert (profile.reader.name, profile.route.name) == (reader, route)


def test_unknown_model_gets_conservative_limits_and_a_warning_once():
    model = f"acme-vision-{uuid.uuid4().hex[:8]}"  # new to this process, however many runs it has hosted
    with pytest.warns(ProfileWarning, match=f"unknown model '{model}'") as warned:
        profile = resolve(model)
        resolve(model)  # a run resolves a model at every page and request: named once
    assert len(warned) == 1
    assert profile.reader.name == "conservative"
    width, height = profile.page_size(SHAPES["5x8"])
    for known in all_profiles():  # a page for an unknown model is safe on every known reader
        assert known.reader.resize.fits(width, height), known.name


@pytest.mark.parametrize(("typed", "meant", "provider"), [
    ("claude-sonet-4-5", "claude-sonnet-4-5", "anthropic"), ("gpt5", "gpt-5", "openai"), ("gemni-3-pro", "gemini-3-pro", "google-ai"),
    ("gpt-7", None, "openai"), ("o5-mini", None, "provider unknown"), ("claude-nova-2", None, "anthropic"), ("llama-4-maverick", None, "provider unknown"),
])
def test_an_unknown_model_says_what_it_was_likely_meant_to_be_and_never_guesses_its_provider_wrong(typed, meant, provider):
    """A mistyped model drew with a warning whose advice was for the Python API and no
    "did you mean"; ``gpt5`` was labelled "(conservative via anthropic)". A typo gets
    the id it most likely meant; a family's new version (``gpt-7``, ``o5-mini``) gets no
    such guess; the provider is the family's, or said to be unknown."""
    from glyphpack._providers.resolve import closest_model

    assert closest_model(typed) == meant
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profile = resolve(f"{typed}")
    for warning in caught:  # said once a run: here, unless an earlier test resolved it
        assert str(warning.message).startswith(f"unknown model {typed!r}" + (f" (did you mean {meant!r}?)" if meant else ":"))
    assert profile.reader.name == "conservative" and profile.route.name == provider
    assert profile.name == f"conservative via {provider}"


def test_text_only_models():
    for model_id in ("o3-mini", "gpt-3.5-turbo", "deepseek-chat"):
        profile = resolve(model_id)
        assert profile.vision is False
        with pytest.raises(TextOnlyModelError, match="does not take images"):
            glyphpack.render("hello", model=profile)
    declared = resolve("claude-sonnet-4-5", vision=False)
    assert not declared.vision
    with pytest.raises(TextOnlyModelError):
        glyphpack.count_pages("hello", model=declared)


def test_overrides_and_bad_ids():
    assert resolve("claude-sonnet-4-5", route="bedrock").route.name == "bedrock"
    with pytest.raises(glyphpack.GlyphpackError, match="unknown route"):
        resolve("claude-sonnet-4-5", route="carrier-pigeon")
    with pytest.raises(glyphpack.GlyphpackError, match="unknown reader fields"):
        resolve("claude-sonnet-4-5", colour=True)
    with pytest.raises(glyphpack.GlyphpackError, match="not a detail level"):
        resolve("gpt-5.4:ultra")
    with pytest.raises(glyphpack.GlyphpackError, match="non-empty string"):
        resolve("")


# ----------------------------------------------------------------------- page geometry


def test_page_sizes_per_provider():
    shape = SHAPES["5x8"]
    assert resolve("claude-sonnet-4-5").page_size(shape) == (1565, 784)
    assert resolve("claude-opus-4-8").page_size(shape) == (2575, 1456)
    # more than 20 images in a request: every page within 2000 x 2000
    assert max(resolve("claude-opus-4-8").page_size(shape, pages=21)) <= 2000
    w, h = resolve("gpt-4o").page_size(shape)
    assert min(w, h) <= 768 and max(w, h) <= 2048


def test_many_pages_use_the_smaller_page():
    text = "x" * 95_000 * 22
    pages_small = glyphpack.count_pages(text, model="claude-opus-4-8")
    assert pages_small > 20
    report = glyphpack.plan(text, model="claude-opus-4-8")
    assert max(report.page_width, report.page_height) <= 2000


def test_byte_limits_shrink_pages_before_rendering():
    from glyphpack._providers.catalog import ROUTES
    from glyphpack._providers.geometry import worst_case_png_bytes
    from glyphpack._providers.profile import Profile

    tiny_route = ROUTES["anthropic"].__class__("tiny", max_image_bytes=40_000)
    profile = Profile("claude-sonnet-4-5", resolve("claude-sonnet-4-5").reader, tiny_route)
    width, height = profile.page_size(SHAPES["5x8"])
    assert worst_case_png_bytes(width, height) <= 40_000
    noise = "".join(chr(c) for c in np.random.default_rng(0).integers(33, 127, 200_000))
    for page in glyphpack.render(noise, model=profile):
        assert len(page.png) <= 40_000


def test_image_count_is_reported_before_rendering():
    profile = resolve("bedrock/anthropic.claude-sonnet-4-5-v1:0")
    report = glyphpack.plan("y" * 30674 * 25, model=profile, fidelity="dense")
    assert report.pages == 25 and report.requests == 2
    with pytest.warns(ProfileWarning, match="25 pages exceed claude via bedrock's 20 images per request: they need 2"):
        glyphpack.render("y" * 30674 * 25, model=profile, fidelity="dense")


VISION_PROFILES = [p for p in all_profiles()]

# Token formulas written out again from PROVIDERS.md, independently of glyphpack's
# geometry classes, for images that are served unresized.
GPT_PATCH_MULTIPLIERS = {
    "gpt-5.6-original": Fraction(6, 5), "gpt-5.6-high": Fraction(6, 5), "gpt-5.5-original": Fraction(6, 5),
    "gpt-5.5-high": Fraction(6, 5), "gpt-5.4-original": Fraction(6, 5), "gpt-5.4-high": Fraction(6, 5),
    "gpt-5.4-low": Fraction(6, 5), "gpt-5.2": Fraction(6, 5), "gpt-5-mini": Fraction(6, 5), "gpt-5-nano": Fraction(3, 2),
    "gpt-4.1-mini": Fraction(162, 100), "gpt-4.1-nano": Fraction(246, 100), "o4-mini": Fraction(172, 100),
}
GPT_TILES = {"gpt-4o": (85, 170), "gpt-4o-mini": (2833, 5667), "gpt-4.1": (85, 170), "gpt-4.5": (85, 170),
             "gpt-5": (70, 140), "gpt-5.1": (70, 140), "o1": (75, 150), "o3": (75, 150)}
GEMINI_3_FLAT = {"gemini-3-high": 1120, "gemini-3-low": 280, "gemini-3-medium": 560, "gemini-3-ultra-high": 2240}


def published_tokens(reader: str, route: str, w: int, h: int) -> int:
    up = lambda a, b: math.ceil(Fraction(a, b))
    if route == "github-copilot":
        return 0  # premium requests: image area is not billed
    if reader in ("claude", "claude-highres", "conservative"):
        return up(w, 28) * up(h, 28)
    if reader in GPT_PATCH_MULTIPLIERS:
        return math.ceil(up(w, 32) * up(h, 32) * GPT_PATCH_MULTIPLIERS[reader])
    if reader in GPT_TILES:
        base, per_tile = GPT_TILES[reader]
        return base + per_tile * up(w, 512) * up(h, 512)
    if reader in GEMINI_3_FLAT:
        return GEMINI_3_FLAT[reader]
    if reader == "gemini-2":
        return 258 if w <= 384 and h <= 384 else 258 * up(w, 768) * up(h, 768)
    raise AssertionError(f"no published formula written for {reader}")


def test_every_catalog_reader_has_a_published_formula():
    for profile in VISION_PROFILES:
        published_tokens(profile.reader.name, profile.route.name, 100, 100)


@pytest.mark.parametrize("shape_name", ["5x8", "8x13-loose", "unifont"])
@given(text=st.text(min_size=1, max_size=3000), profile_index=st.integers(0, len(VISION_PROFILES) - 1))
def test_every_page_is_untouched_by_its_profile_and_billed_exactly(shape_name, text, profile_index):
    """Catches a wrong token formula (checked against formulas written out again from
    PROVIDERS.md, not against ``profile.tokens``) and a page the provider would resize."""
    profile = VISION_PROFILES[profile_index]
    pages = glyphpack.render(text * 40, model=profile, shape=shape_name)
    for page in pages:
        assert profile.resize(page.width, page.height) == (page.width, page.height)
        assert page.tokens == published_tokens(profile.reader.name, profile.route.name, page.width, page.height)
        if profile.max_image_bytes is not None:
            assert len(page.png) <= profile.max_image_bytes
    assert pages.report.image_tokens == sum(p.tokens for p in pages)
    assert glyphpack.plan(text * 40, model=profile, shape=shape_name).image_tokens == pages.report.image_tokens


# ------------------------------------------------------------------------ content blocks


@pytest.fixture(scope="module")
def claude_page():
    return glyphpack.render("hello blocks", model="claude-sonnet-4-5")[0]


def test_anthropic_block_validates_against_the_sdk(claude_page):
    from anthropic.types import ImageBlockParam
    from pydantic import TypeAdapter

    block = claude_page.to_block("anthropic")
    assert TypeAdapter(ImageBlockParam).validate_python(block) == block
    assert base64.b64decode(block["source"]["data"]) == claude_page.png
    cached = claude_page.to_block("anthropic", cache=True)
    assert TypeAdapter(ImageBlockParam).validate_python(cached) == cached
    assert cached["cache_control"] == {"type": "ephemeral"}
    with pytest.raises(ValueError, match="only in the anthropic API"):
        claude_page.to_block("gemini", cache=True)


def test_openai_blocks_validate_against_the_sdk():
    from openai.types.chat import ChatCompletionContentPartImageParam
    from openai.types.responses import ResponseInputImageParam
    from pydantic import TypeAdapter

    page = glyphpack.render("hello blocks", model="gpt-5.4")[0]
    chat = page.to_block("openai-chat")
    assert TypeAdapter(ChatCompletionContentPartImageParam).validate_python(chat) == chat
    assert chat["image_url"]["detail"] == "original"
    responses = page.to_block("openai-responses")
    assert TypeAdapter(ResponseInputImageParam).validate_python(responses) == responses
    assert responses["image_url"].startswith("data:image/png;base64,")
    assert glyphpack.render("x", model="gpt-4o")[0].to_block("openai-chat")["image_url"]["detail"] == "high"


def test_gemini_block_validates_against_the_sdk():
    from google.genai import types

    page = glyphpack.render("hello blocks", model="gemini-3-pro")[0]
    block = page.to_block("gemini")
    part = types.Part.model_validate_json(json.dumps(block))
    assert part.inline_data.data == page.png
    assert part.inline_data.mime_type == "image/png"
    assert part.media_resolution.level == types.PartMediaResolutionLevel.MEDIA_RESOLUTION_HIGH
    assert types.Part.model_validate_json(json.dumps(glyphpack.render("x", model="gemini-2.5-pro")[0].to_block("gemini")))


def test_unknown_api(claude_page):
    with pytest.raises(ValueError, match="api must be one of"):
        claude_page.to_block("carrier-pigeon")


def test_every_example_model_resolves_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for model_id in EXAMPLE_MODELS:
            resolve(model_id)


def test_an_explicit_page_size_the_model_would_resize_is_warned_about():
    with pytest.warns(ProfileWarning, match="will be resized by claude via anthropic"):
        pages = glyphpack.render("x" * 100_000, model="claude-sonnet-4-5", page_size=(2000, 2000))
    assert pages[0].tokens == resolve("claude-sonnet-4-5").tokens(pages[0].width, pages[0].height)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        glyphpack.render("x" * 1000, model="claude-sonnet-4-5", page_size=(1000, 500))


def reference_class(char: str) -> int:
    """The script class of one character, from the ranges the estimator documents."""
    cp = ord(char)
    if cp in (0x20, 0x0A) or 0x30 <= cp < 0x3A or 0x41 <= cp < 0x5B or 0x61 <= cp < 0x7B or 0xC0 <= cp < 0x250:
        return 0  # latin
    if cp < 0x80:
        return 1  # punctuation
    if 0x370 <= cp < 0x530:
        return 2  # cyrillic and greek
    if any(lo <= cp < hi for lo, hi in ((0x2E80, 0xA000), (0xAC00, 0xD7B0), (0xF900, 0xFB00), (0xFF00, 0xFFF0))):
        return 3  # cjk
    return 4


@given(st.text(alphabet=st.characters(codec=None), max_size=300) | st.text(alphabet="aZ9 \n.,{}ÄжΩ中한😀\ud800", max_size=300))
def test_text_counts_match_a_plain_reference(text):
    expected = [0] * 5
    for char in text:
        expected[reference_class(char)] += 1
    assert glyphpack.TextEstimator().counts(text).tolist() == expected


@given(
    st.text(alphabet="aZ9 \n.,{}ÄжΩ中한😀", max_size=300),
    st.tuples(st.floats(0.01, 3.0), st.floats(0.01, 3.0), st.floats(0.01, 3.0), st.floats(0.01, 3.0), st.floats(0.01, 3.0)),
)
def test_estimate_is_the_rate_weighted_count_rounded_up(text, rates):
    estimator = glyphpack.TextEstimator(*rates)
    weighted = sum(rate * sum(1 for char in text if reference_class(char) == k) for k, rate in enumerate(rates))
    expected = max(1, math.ceil(weighted)) if text else 0
    assert estimator.estimate(text) == expected
    assert estimator.estimate_counts(estimator.counts(text)) == expected


#: Every distinct resize rule a vision profile uses.
RESIZES = sorted({p._vision()[0] for p in all_profiles() if p.vision}, key=repr)


@given(w=st.integers(1, 12_000), h=st.integers(1, 12_000), which=st.integers(0, len(RESIZES) - 1))
def test_every_resize_serves_a_size_it_leaves_alone_never_larger_and_the_same_turned(w, h, which):
    resize = RESIZES[which]
    served = resize(w, h)
    assert bool(resize.fits(*served))  # a second pass changes nothing
    assert served[0] <= w and served[1] <= h and min(served) >= 1
    assert resize(h, w) == served[::-1]  # a portrait page is the landscape one turned
    if bool(resize.fits(w, h)):
        assert served == (w, h)


def test_resizes_at_the_extremes_and_turned_worked_examples():
    standard = resolve("claude-sonnet-4-5")
    assert standard.resize(1080, 1920) == (819, 1456)  # PROVIDERS.md's 1920x1080, turned
    assert standard.resize(1, 5_000) == (1, 1568)  # a side of one pixel stays one pixel
    assert resolve("claude-opus-4-7").resize(2160, 3840) == (1449, 2576)
    tile = resolve("gpt-4o")
    assert tile.resize(4096, 8192) == (768, 1536)  # fit 2048, then the short side to 768
    assert tile.resize(1, 9_000) == (1, 2048)
    patch = resolve("gpt-5.4")
    assert patch.resize(1, 9_000)[0] == 1 and patch.resize(9_000, 1)[1] == 1


def test_openais_patch_budget_rule_worked_through_both_ways():
    from glyphpack._providers.geometry import PatchBudgetResize

    high = PatchBudgetResize(max_edge=2048, budget=2500, patch=32)
    assert high(2048, 2048) == (1600, 1600)  # PROVIDERS.md's worked example
    # 3000x2000: fitted to 2048x1365, 2,752 patches; shrunk by sqrt(32*32*2500/(w*h)), then
    # down to whole patches along the tighter side (40.8 -> 40 rows): 1920x1280, 2,400 patches.
    assert high(3000, 2000) == (1920, 1280) and high(2000, 3000) == (1280, 1920)


def test_a_provider_familys_rate_multiple_reaches_every_estimate(monkeypatch, tmp_path):
    from glyphpack._compaction.cost import CostModel
    from glyphpack._providers import catalog

    monkeypatch.setitem(catalog.TEXT_RATE_SCALE, "openai", 0.5)
    gpt, claude = resolve("gpt-5.4"), resolve("claude-sonnet-4-5")
    assert CostModel.for_model(gpt).text("word " * 200) * 2 == CostModel.for_model(claude).text("word " * 200) == 250
    assert CostModel(gpt).estimator == CostModel.for_model(gpt).estimator  # built directly: the same default
    with glyphpack.open_session(tmp_path / "ws", "c", "a", model="gpt-5.4") as s:
        assert s.cost().estimator.latin == 0.125


@pytest.mark.parametrize("route_edge", [None, 1000, 600])
def test_a_routes_edge_limit_bounds_the_page(route_edge):
    """The page-size search is shared by profiles with the same rules; a route's own edge
    limit is one of them (a page over it would be refused or resized on that route)."""
    import dataclasses

    from glyphpack._providers.resolve import resolve
    from glyphpack._render.shapes import SHAPES

    base = resolve("claude-sonnet-4-5")
    profile = dataclasses.replace(base, route=dataclasses.replace(base.route, max_edge=route_edge))
    cells = SHAPES["5x8"]  # a Shape has the cell geometry page_size takes
    width, height = profile.page_size(cells)
    assert bool(profile.fits(width, height))
    if route_edge is None:
        assert (width, height) == base.page_size(cells) and max(width, height) > 1000
    else:
        assert max(width, height) <= route_edge and max(width + cells.advance, height + cells.pitch) > route_edge * 0.9


def test_a_profile_row_carries_the_profiles_limits_and_both_notes():
    """``glyphpack profiles`` prints these rows (and ``--json`` them): each field is the
    profile's own, the reader's and the route's notes joined, cells whole."""
    from glyphpack._providers.resolve import all_profiles, profile_row
    from glyphpack._render.shapes import SHAPES

    profile = next(p for p in all_profiles() if p.name == "gpt-5.2 via azure")
    assert profile.reader.notes and profile.route.notes and profile.max_images and profile.max_image_bytes
    row = profile_row(profile, "7x14", SHAPES["7x14"])
    width, height = profile.page_size(SHAPES["7x14"])
    assert (row.profile, row.shape, row.page_width, row.page_height) == (profile.name, "7x14", width, height)
    assert (row.max_images, row.max_image_bytes, row.billing) == (profile.max_images, profile.max_image_bytes, "native")
    assert row.notes == f"{profile.reader.notes}; {profile.route.notes}"
    assert row.chars_per_page == (width // 7) * (height // 14) and isinstance(row.chars_per_page, int)
    assert row.tokens_per_page == profile.tokens(width, height)
