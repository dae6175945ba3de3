"""Render throughput against baselines measured in the same run.

Run: ``python -m pytest benchmarks`` (prints pytest-benchmark's table and a summary of
ratios). The ratios, not the absolute times, are what to compare across machines.
"""

import io
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from PIL import BdfFontFile, Image, ImageDraw, ImageFont

import glyphpack
from glyphpack._render.fonts import FONT_DIR, FONT_FILES
from glyphpack._render.kernels import rasterize
from glyphpack._render.layout import lay_out
from glyphpack._render.raster import glyph_row_words
from glyphpack._render.shapes import SHAPES
from glyphpack._render.text import normalize

SHAPE = SHAPES["5x8"]


def fastest(benchmark) -> float:
    """Fastest round: the least disturbed by other work on the machine."""
    return benchmark.stats.stats.min


@pytest.fixture(scope="module")
def grids(corpus):
    layout = lay_out(normalize(corpus, SHAPE.atlas, "flow"), SHAPE, "flow")
    full = layout.rows // SHAPE.max_rows
    grid = np.ascontiguousarray(layout.grid[: full * SHAPE.max_rows].reshape(full, SHAPE.max_rows, SHAPE.cols))
    chars = int(np.count_nonzero(grid >= 0))
    return grid, chars


def test_rasterize_only(benchmark, grids, results):
    grid, chars = grids
    words = glyph_row_words(SHAPE)
    pages = np.empty((grid.shape[0], SHAPE.max_rows * SHAPE.pitch, -(-SHAPE.page_width // 8) * 8), np.uint8)
    out = pages.view(np.uint64)
    rasterize(grid, words, SHAPE.atlas.cell_widths, SHAPE.advance, SHAPE.pitch, out)  # compile outside timing
    benchmark.group = "rasterize"
    benchmark(rasterize, grid, words, SHAPE.atlas.cell_widths, SHAPE.advance, SHAPE.pitch, out)
    results["rasterize only"] = (chars / fastest(benchmark) / 1e6, "M chars/s")
    results["rasterize only: output bytes/s"] = (pages.nbytes / fastest(benchmark) / 1e9, "GB/s")


def test_copy_bound(benchmark, grids, results):
    grid, chars = grids
    source = np.ones((grid.shape[0], SHAPE.max_rows * SHAPE.pitch, -(-SHAPE.page_width // 8) * 8), np.uint8)
    target = np.empty_like(source)
    benchmark.group = "rasterize"
    benchmark(np.copyto, target, source)
    results["numpy copy of the same bytes (bound)"] = (source.nbytes / fastest(benchmark) / 1e9, "GB/s")
    rate = results["rasterize only: output bytes/s"][0]
    results["rasterize / copy bound"] = (100 * rate / results["numpy copy of the same bytes (bound)"][0], "%")


def test_end_to_end_glyphpack(benchmark, corpus, results):
    glyphpack.render("warm up the kernels")
    benchmark.group = "end to end"
    pages = benchmark.pedantic(glyphpack.render, args=(corpus,), kwargs={"shape": "5x8"}, rounds=5, iterations=1)
    results["end to end glyphpack (text -> PNG)"] = (len(corpus) / fastest(benchmark) / 1e6, "M chars/s")
    results["PNG bytes per full page"] = (np.mean([len(p.png) for p in pages[:-1]]) / 1024, "KiB")
    results["pages"] = (len(pages), "")


@pytest.fixture(scope="module")
def pillow_font():
    """The same 5x8 BDF font loaded the way a Pillow user would (Latin-1 only: Pillow's limit)."""
    directory = tempfile.mkdtemp()
    with open(FONT_DIR / FONT_FILES[SHAPE.font], "rb") as f:
        BdfFontFile.BdfFontFile(f).save(os.path.join(directory, "5x8"))
    return ImageFont.load(os.path.join(directory, "5x8.pil"))


def pillow_render(text: str, font) -> list[bytes]:
    """What a Python user would write: draw rows of text with ImageDraw, save each page as PNG."""
    cols, rows = SHAPE.cols, SHAPE.max_rows
    per_page = cols * rows
    pngs = []
    for start in range(0, len(text), per_page):
        chunk = text[start : start + per_page]
        image = Image.new("1", (SHAPE.page_width, -(-len(chunk) // cols) * SHAPE.pitch), 1)
        draw = ImageDraw.Draw(image)
        for r in range(0, len(chunk), cols):
            draw.text((0, r // cols * SHAPE.pitch), chunk[r : r + cols], font=font, fill=0)
        buffer = io.BytesIO()
        image.save(buffer, "PNG")
        pngs.append(buffer.getvalue())
    return pngs


def test_end_to_end_pillow_baseline(benchmark, corpus, pillow_font, results):
    # Pillow's bitmap fonts cover Latin-1 only, and draw no glyph for a newline.
    text = corpus.encode("latin-1", "replace").decode("latin-1").replace("\n", " ")
    benchmark.group = "end to end"
    benchmark.pedantic(pillow_render, args=(text, pillow_font), rounds=2, iterations=1)
    results["end to end Pillow ImageDraw.text + PNG save"] = (len(text) / fastest(benchmark) / 1e6, "M chars/s")
    ours = results["end to end glyphpack (text -> PNG)"][0]
    results["glyphpack / Pillow end to end"] = (ours / results["end to end Pillow ImageDraw.text + PNG save"][0], "x")


PROBE = "import time; t = time.perf_counter(); import glyphpack; glyphpack.render('x' * 40000); print(time.perf_counter() - t)"


def run_probe(env) -> float:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout)


def test_jit_compile_and_cached_start(results):
    with tempfile.TemporaryDirectory() as numba_cache, tempfile.TemporaryDirectory() as atlas_cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=numba_cache, GLYPHPACK_CACHE_DIR=atlas_cache)
        cold = run_probe(env)
        warm = min(run_probe(env) for _ in range(3))
    results["first process: import + JIT compile + first render"] = (cold, "s")
    results["second process (cached kernels and atlas): import + first render"] = (warm, "s")


def with_controls(corpus: str) -> str:
    """The corpus with terminal bytes sprinkled in: a form feed, a bell and an escape
    sequence every ~4,000 characters (each drawn in caret notation or stripped)."""
    step = 4000
    return "".join(corpus[i : i + step] + "\x0c\x07\x1b[1m" for i in range(0, len(corpus), step))


@pytest.mark.parametrize("kind", ["plain", "controls"])
def test_end_to_end_with_and_without_controls(benchmark, corpus, results, kind):
    text = corpus if kind == "plain" else with_controls(corpus)
    glyphpack.render(text, model="claude-sonnet-4-5")  # warm
    benchmark.group = "controls"
    benchmark(glyphpack.render, text, model="claude-sonnet-4-5")
    results[f"end to end, {kind} corpus"] = (len(text) / fastest(benchmark) / 1e6, "M chars/s")
    if kind == "controls" and "end to end, plain corpus" in results:
        plain = results["end to end, plain corpus"][0]
        results["control-character corpus: time / plain corpus time"] = (plain / results[f"end to end, {kind} corpus"][0], "x")


@pytest.mark.parametrize("size", [1_000, 10_000])
@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "gpt-5.4"])
def test_small_calls(results, size, model):
    """Latency of small renders (a tool result, a message): median and 90th percentile
    over 300 calls, and the process's CPU time per wall time (spinning threads show as
    more than 1)."""
    import time

    text = ("def f(x): return x * 2  # a small call\n" * (size // 38 + 1))[:size]
    glyphpack.render(text, model=model)
    times = []
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(300):
        started = time.perf_counter()
        glyphpack.render(text, model=model)
        times.append(time.perf_counter() - started)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    results[f"small call {size // 1000}k chars, {model}: median"] = (float(np.median(times)) * 1000, "ms")
    results[f"small call {size // 1000}k chars, {model}: p90"] = (float(np.quantile(times, 0.9)) * 1000, "ms")
    results[f"small call {size // 1000}k chars, {model}: CPU time / wall time"] = (cpu / wall, "x")
