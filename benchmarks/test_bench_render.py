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
import glyphpack._render.render as render_module
from glyphpack._render.fonts import FONT_DIR, FONT_FILES
from glyphpack._render.png import encode_png
from glyphpack._render.raster import draw
from glyphpack._render.shapes import SHAPES

SHAPE = SHAPES["5x8"]


def fastest(benchmark) -> float:
    """Fastest round: the least disturbed by other work on the machine."""
    return benchmark.stats.stats.min


CLAUDE = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def claude_plan(corpus):
    """What the end-to-end render for Claude decides before drawing: the glyph stream
    and where its pages begin."""
    glyphpack.render("warm up the kernels", model=CLAUDE)
    return render_module._prepare(corpus, "5x8", "flow", None, CLAUDE)


def draw_all(plan, pool_map) -> list[bytes]:
    shape, glyphs = plan.shape, plan.normalized.glyphs

    def page(index):
        return encode_png(draw(glyphs, plan.breaks, index, shape, -1).scanlines, shape.page_width)

    return list(pool_map(page, range(plan.pages)))


def test_page_work_bound(benchmark, claude_plan, results):
    """The deflate-plus-raster bound: drawing and deflating every page on every core,
    with the text already laid out (what a render cannot avoid)."""
    pool = render_module._pool()
    draw_all(claude_plan, pool.map)
    benchmark.group = "page work"
    benchmark.pedantic(draw_all, args=(claude_plan, pool.map), rounds=15, iterations=1)
    results["bound: draw + deflate every page on every core"] = (fastest(benchmark) * 1000, "ms")


def test_page_work_serial(benchmark, claude_plan, results):
    benchmark.group = "page work"
    benchmark.pedantic(draw_all, args=(claude_plan, map), rounds=5, iterations=1)
    results["draw + deflate every page on one thread"] = (fastest(benchmark) * 1000, "ms")


def test_end_to_end_glyphpack(benchmark, corpus, results):
    glyphpack.render("warm up the kernels", model=CLAUDE)
    benchmark.group = "end to end"
    pages = benchmark.pedantic(glyphpack.render, args=(corpus,), kwargs={"shape": "5x8", "model": CLAUDE}, rounds=15, iterations=1)
    results["end to end glyphpack 5x8 for Claude (text -> PNG)"] = (len(corpus) / fastest(benchmark) / 1e6, "M chars/s")
    results["PNG bytes per full page"] = (np.mean([len(p.png) for p in pages[:-1]]) / 1024, "KiB")
    results["pages"] = (len(pages), "")
    bound = results.get("bound: draw + deflate every page on every core")
    if bound is not None:
        results["bound / end to end"] = (100 * bound[0] / (fastest(benchmark) * 1000), "%")


def test_end_to_end_8x13_loose(benchmark, corpus, results):
    glyphpack.render("warm up", shape="8x13-loose")
    benchmark.group = "end to end"
    benchmark.pedantic(glyphpack.render, args=(corpus,), kwargs={"shape": "8x13-loose"}, rounds=7, iterations=1)
    results["end to end glyphpack 8x13-loose (11x16 cells)"] = (len(corpus) / fastest(benchmark) / 1e6, "M chars/s")


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
    ours = results["end to end glyphpack 5x8 for Claude (text -> PNG)"][0]
    results["glyphpack / Pillow end to end"] = (ours / results["end to end Pillow ImageDraw.text + PNG save"][0], "x")


PROBE = "import time; t = time.perf_counter(); import glyphpack; glyphpack.render('x' * 40000); print(time.perf_counter() - t)"


def run_probe(env) -> float:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout)


LLVM_PROBE = (
    "import time; t = time.perf_counter(); import numba\n"
    "@numba.njit\ndef one(x): return x + 1\n"
    "one(1); print(time.perf_counter() - t)"
)


def test_jit_compile_and_cached_start(results):
    with tempfile.TemporaryDirectory() as numba_cache, tempfile.TemporaryDirectory() as atlas_cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=numba_cache, GLYPHPACK_CACHE_DIR=atlas_cache)
        cold = run_probe(env)
        warm = min(run_probe(env) for _ in range(3))
        floor = float(subprocess.run([sys.executable, "-c", LLVM_PROBE], env=env, capture_output=True, text=True, check=True).stdout)
    results["first process: import + JIT compile + first render"] = (cold, "s")
    results["of which any numba JIT costs first (import numba, compile one trivial function)"] = (floor, "s")
    results["second process (cached kernels and atlas): import + first render"] = (warm, "s")


def with_controls(corpus: str) -> str:
    """The corpus with terminal bytes sprinkled in: a form feed, a bell and an escape
    sequence every ~4,000 characters (each drawn in caret notation or stripped)."""
    step = 4000
    return "".join(corpus[i : i + step] + "\x0c\x07\x1b[1m" for i in range(0, len(corpus), step))


@pytest.mark.parametrize("kind", ["plain", "controls"])
def test_end_to_end_with_and_without_controls(benchmark, corpus, results, kind):
    text = corpus if kind == "plain" else with_controls(corpus)
    glyphpack.render(text, model="claude-sonnet-4-5", fidelity="dense")  # warm: the 5x8 engine
    benchmark.group = "controls"
    benchmark(glyphpack.render, text, model="claude-sonnet-4-5", fidelity="dense")
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
    glyphpack.render(text, model=model, fidelity="dense")
    times = []
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(300):
        started = time.perf_counter()
        glyphpack.render(text, model=model, fidelity="dense")
        times.append(time.perf_counter() - started)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    results[f"small call {size // 1000}k chars, {model}: median"] = (float(np.median(times)) * 1000, "ms")
    results[f"small call {size // 1000}k chars, {model}: p90"] = (float(np.quantile(times, 0.9)) * 1000, "ms")
    results[f"small call {size // 1000}k chars, {model}: CPU time / wall time"] = (cpu / wall, "x")


MEMORY_PROBE = """
import sys, time
sys.path.insert(0, {benchmarks!r})
from corpus import stdlib_corpus
import glyphpack
size = {size}
base = stdlib_corpus()
text = (base * (size // len(base) + 1))[:size]
glyphpack.render(base[:200_000], model="claude-sonnet-4-5", fidelity="dense")  # warm: kernels, pool, atlas

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

before = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current size
started = time.perf_counter()
pages = glyphpack.render(text, model="claude-sonnet-4-5", max_pages=100_000, fidelity="dense")
seconds = time.perf_counter() - started
print((status("VmHWM:") - before) / size, seconds, len(pages), sum(len(p.png) for p in pages) / size)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's peak-RSS reset")
@pytest.mark.parametrize("size", [1_000_000, 10_000_000, 50_000_000], ids=["1M", "10M", "50M"])
def test_peak_memory_per_character(results, size):
    """Peak resident memory a render adds, per input character, in a fresh process (the
    input text itself excluded, the pages returned included)."""
    script = MEMORY_PROBE.format(benchmarks=os.path.dirname(__file__), size=size)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    per_char, seconds, pages, png_per_char = float(out[0]), float(out[1]), int(out[2]), float(out[3])
    label = f"{size // 1_000_000}M chars"
    results[f"peak memory added by a render, {label} (pages held: {png_per_char:.2f} B/char)"] = (per_char, "bytes per char")
    results[f"render time, {label}, {pages:,} pages for Claude"] = (size / seconds / 1e6, "M chars/s")
