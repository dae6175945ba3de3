"""Compaction of generated agent sessions: 100k, 1M, 10M and 50M characters, for a
Claude, a GPT and a Gemini profile. Records time per rung, pages, tokens before and
after, the snapshot rung's compression against the estimated text tokens of the same
middle, and the time of the same compaction with the history already priced (a
harness passes its cost model, as ``Session`` does); prints a table at the end."""

import time

import pytest
from conftest import TABLES

from glyphpack._compaction.cost import CostModel
from glyphpack._compaction.ladder import compact, shake
from glyphpack._compaction.results import CompactionPolicy
from glyphpack._providers.resolve import resolve
from glyphpack.testing import generate_session

SIZES = (100_000, 1_000_000, 10_000_000, 50_000_000)
MODELS = ("claude-sonnet-4-5", "gpt-5.4", "gemini-3-pro")
ROWS: list[dict] = []


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"{n // 1000}k")
def session(request):
    return request.param, generate_session(request.param, seed=11)


DENSE = CompactionPolicy(fidelity="dense")


@pytest.mark.parametrize("model", MODELS)
def test_compact(benchmark, session, model):
    size, history = session
    profile = resolve(model)
    cost = CostModel(profile)
    # Tight enough that every rung up to snapshots runs.
    budget = max(2_000, cost.history(shake(history, profile).view) // 4)
    benchmark.group = f"compact {size:,} chars"
    # Dense 5x8 pages (fidelity="dense"), as the README's table was measured; the default
    # is the reader's exact shape.
    result = benchmark.pedantic(compact, args=(history, profile, budget), kwargs={"policy": DENSE},
                                rounds=1 if size >= 10_000_000 else 3, iterations=1)
    cost.history(history)  # priced once, as a session's cost model has it
    started = time.perf_counter()
    compact(history, profile, budget, policy=DENSE, cost=cost)
    priced = time.perf_counter() - started
    rungs = {r.rung: r for r in result.report.rungs}
    snap = rungs.get("snapshot")
    compression = None
    if snap is not None and snap.pages:
        compression = snap.middle_text_tokens / snap.image_tokens
    ROWS.append(
        {
            "chars": size,
            "model": model,
            "before": result.report.tokens_before,
            "after": result.report.tokens_after,
            "budget": budget,
            "pages": len(result.pages),
            "seconds": benchmark.stats.stats.min,
            "priced seconds": priced,
            **{f"{name} s": round(r.seconds, 3) for name, r in rungs.items()},
            "snapshot compression": compression,
        }
    )
    assert result.report.fits


@pytest.fixture(scope="module", autouse=True)
def table():
    yield
    lines = [
        "| chars | model | tokens before | after (budget) | pages | elision s | image drop s | snapshot s | total s | µs per 1k chars | history priced before: total s | snapshot compression |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in ROWS:
        comp = f"{r['snapshot compression']:.1f}x" if r["snapshot compression"] else "-"
        lines.append(
            f"| {r['chars']:,} | {r['model']} | {r['before']:,} | {r['after']:,} ({r['budget']:,}) | {r['pages']} | "
            f"{r.get('elision s', 0):.3f} | {r.get('image drop s', 0):.3f} | {r.get('snapshot s', 0):.3f} | "
            f"{r['seconds']:.3f} | {1e6 * r['seconds'] / (r['chars'] / 1000):.0f} | {r['priced seconds']:.3f} | {comp} |"
        )
    TABLES["compaction of generated sessions (one run)"] = lines
