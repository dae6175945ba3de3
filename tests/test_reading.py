"""Reading profiles: which shape each reader is known to read, and ``fidelity=``."""

from __future__ import annotations

import pytest

import glyphpack
from glyphpack import reading_profile
from glyphpack._providers.reading import READING_PROFILES
from glyphpack._render.shapes import SHAPES


@pytest.mark.parametrize(
    "model, name, exact, gist",
    [
        ("claude-opus-4-8", "claude-opus-4-8", "9x15-loose", "9x15-loose"),
        ("bedrock/us.anthropic.claude-opus-4-8-v1:0", "claude-opus-4-8", "9x15-loose", "9x15-loose"),
        ("claude-opus-5-20260101", "claude-opus-5", "9x15", "5x8"),
        ("claude-fable-5", "claude-fable-5", "5x8", "5x8"),
        ("gpt-5.6:high", "gpt-5.6", "9x15-loose", "9x15-loose"),
        ("gemini-3-pro", "gemini-3", "8x13-tall", "8x13-tall"),
        ("claude-sonnet-4-5", "conservative", "9x15-loose", "9x15-loose"),
    ],
)
def test_profiles_resolve_from_model_ids(model, name, exact, gist):
    profile = reading_profile(model)
    assert (profile.name, profile.exact.shape, profile.gist.shape) == (name, exact, gist)


def test_every_profile_names_real_shapes_and_a_source():
    """Also catches a gist shape less dense than the exact one (what is read exactly
    keeps its gist): cells per page of the gist shape are at least the exact shape's."""
    for profile in READING_PROFILES.values():
        for evidence in (profile.exact, profile.gist):
            assert evidence.shape in SHAPES and evidence.source and evidence.note and evidence.recorded
        assert SHAPES[profile.gist.shape].cells_per_page >= SHAPES[profile.exact.shape].cells_per_page, profile.name


def test_fidelity_picks_the_shape_and_the_report_says_why():
    """Catches a reader that cannot read 5x8 exactly getting 5x8 pages when exactness
    was asked for, and a report silent on why its shape was chosen."""
    report = glyphpack.plan("an id: 5f3a9c0e " * 2000, model="claude-opus-4-8", fidelity="exact")
    assert report.shape == "9x15-loose" and "claude-opus-4-8" in report.shape_reason and "NOT-OCR" in report.shape_reason
    assert glyphpack.plan("x", model="claude-opus-4-8", shape="6x13", fidelity="exact").shape == "6x13"  # a given shape wins
    with pytest.raises(glyphpack.UsageError, match="fidelity 'exact' needs a model"):
        glyphpack.plan("x", fidelity="exact")
    assert glyphpack.plan("x", model="claude-opus-4-8", fidelity="dense").shape == "5x8"
    assert glyphpack.plan("x", fidelity="dense").shape == "5x8"  # dense needs no reader
    with pytest.raises(glyphpack.UsageError, match="fidelity must be one of"):
        glyphpack.plan("x", model="gpt-5.4", fidelity="perfect")


def test_the_ladder_snapshots_in_the_shape_the_reader_reads():
    from glyphpack import CompactionPolicy
    from glyphpack._compaction.cost import CostModel

    history = glyphpack.generate_session(200_000, seed=2)
    profile = glyphpack.resolve("claude-opus-4-8")
    budget = CostModel(profile).history(glyphpack.shake(history, profile).view) // 2
    result = glyphpack.compact(history, profile, budget, policy=CompactionPolicy(fidelity="exact"))
    assert result.pages and {p.shape for p in result.pages} == {"9x15-loose"}


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-opus-5", "claude-opus-4-8", "gpt-5.4", "gemini-3-pro", "gpt-4o"])
def test_one_default_per_reader_everywhere(model):
    """``render``, ``plan``, ``count_pages``, the CLI's ``render`` and ``profiles`` and a
    compaction's pages all start from the same shape for a reader: the one it is known to
    read exactly (``render(text, model=M)`` once drew 5x8 where the CLI drew the reader's
    shape); without a model, 5x8."""
    from glyphpack._compaction.snapshot import snapshot_shape
    from glyphpack._render.shapes import reading_shape

    profile = glyphpack.resolve(model)
    exact = reading_shape(profile, "exact")[0].name
    text = "def f(x):\n    return x + 1\n" * 200
    assert glyphpack.plan(text, model=model).shape == exact
    assert glyphpack.render(text, model=model)[0].shape == exact
    assert glyphpack.count_pages(text, model=model) == glyphpack.plan(text, model=model, fidelity="exact").pages
    assert snapshot_shape(profile, glyphpack.CompactionPolicy()).name == exact
    assert glyphpack.plan(text).shape == "5x8" and glyphpack.render(text)[0].shape == "5x8"


def test_a_policy_takes_dense_by_name_and_refuses_none():
    assert glyphpack.CompactionPolicy(fidelity="dense").fidelity == "dense"
    with pytest.raises(glyphpack.UsageError, match="fidelity must be one of"):
        glyphpack.CompactionPolicy(fidelity=None)  # type: ignore[arg-type]
