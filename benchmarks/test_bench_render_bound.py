"""The renderer against its bound: what its output cannot be made with less of.

For each shape, on the 1M-character corpus, pages sized for Claude, in one run:

- the bound's parts, each alone on one core: code points to glyph indices (a table
  lookup reading the str where it lies), the glyph copy (each cell's glyph rows into the
  page's scanlines, the cells already placed), deflate (ISA-L level 2, the same
  scanlines glyphpack deflates) and PNG assembly (checksums and joins of the same
  deflated pages);
- ``glyphpack.render`` end to end with 1 page thread and with 2
  (``GLYPHPACK_RENDER_THREADS``);
- the share: the bound's sum / glyphpack on one thread, and the speed-up of 2 threads.

The glyph copy and the lookup are this file's own kernels, written for nothing but
their one job: they share no code with glyphpack's. Run:
``python -m pytest benchmarks/test_bench_render_bound.py -s``; the table is printed
at the end (and is what docs/benchmarks.md quotes).
"""

from __future__ import annotations

import os
import time
import warnings
import zlib

import numba
import numpy as np
import pytest
from conftest import TABLES
from isal import isal_zlib
from numba.cpython.unicode import _get_code_point as _code_point  # the str read where it lies

import glyphpack
import glyphpack._render.render as render_module
from glyphpack._render.layout import lay_out
from glyphpack._render.png import DEFLATE_LEVEL
from glyphpack._render.raster import draw, glyph_cell_bits
from glyphpack._render.render import RENDER_THREADS_VARIABLE

MODEL = "claude-sonnet-4-5"
SHAPES = ("5x8", "9x15-loose")
ROUNDS = 15


def fastest(run, rounds: int = ROUNDS) -> float:
    """The fastest of ``rounds`` runs, in ms: the least disturbed by the machine."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


@numba.njit(nogil=True, cache=True)
def lookup_alone(text, table, glyphs):
    """Each code point's glyph by one table lookup: the least a renderer does with a
    text (no cleaning, no counting, no fonts past the BMP)."""
    for i in range(len(text)):
        glyphs[i] = table[np.uint32(_code_point(text, i)) & np.uint32(0xFFFF)]


@numba.njit(nogil=True, cache=True)
def glyph_copy_alone(cells, glyph_bits, advance, pitch, words, scanlines):
    """Copy each cell's glyph into the page: ``cells`` uint32[R, C] rows of
    ``glyph_bits`` (uint64[G, gh], one cell's pixel rows as ``advance`` bits each), 32
    bits at a time into ``words`` (a uint32 view of the scanlines past each filter
    byte), the rows' last bits into ``scanlines``; rows below the glyphs zeroed."""
    rows, cols = cells.shape
    gh = glyph_bits.shape[1]
    acc = np.zeros(gh, np.uint64)
    step = np.uint64(advance)
    for r in range(rows):
        top = r * pitch
        held = np.uint64(0)
        w = 0
        for c in range(cols):
            bits = glyph_bits[cells[r, c]]
            for y in range(gh):
                acc[y] = (acc[y] << step) | bits[y]
            held += step
            if held >= 32:
                held -= np.uint64(32)
                for y in range(gh):
                    v = (acc[y] >> held) & np.uint64(0xFFFFFFFF)
                    words[top + y, w] = np.uint32(
                        ((v & np.uint64(0xFF)) << np.uint64(24))
                        | ((v & np.uint64(0xFF00)) << np.uint64(8))
                        | ((v >> np.uint64(8)) & np.uint64(0xFF00))
                        | (v >> np.uint64(24))
                    )
                w += 1
        for y in range(gh):
            line = scanlines[top + y]
            line[0] = 0
            k = 1 + 4 * w
            left = held
            while left >= 8:
                left -= np.uint64(8)
                line[k] = np.uint8((acc[y] >> left) & np.uint64(0xFF))
                k += 1
            if left > 0:
                line[k] = np.uint8((acc[y] << (np.uint64(8) - left)) & np.uint64(0xFF))
                k += 1
            for x in range(k, line.shape[0]):
                line[x] = 0
        for y in range(gh, pitch):
            scanlines[top + y, :] = 0


IDAT_CRC = zlib.crc32(b"IDAT")


def assembly_alone(deflated: list[bytes], head: bytes) -> list[bytes]:
    """PNG files of pages already deflated: the IDAT's checksum and one join each."""
    end = b"\x00\x00\x00\x00IEND\xaeB`\x82"
    return [
        b"".join((head, len(data).to_bytes(4, "big"), b"IDAT", data, isal_zlib.crc32(data, IDAT_CRC).to_bytes(4, "big"), end))
        for data in deflated
    ]


def with_threads(count: int):
    """``glyphpack.render`` on a pool of ``count`` page threads (made anew)."""
    os.environ[RENDER_THREADS_VARIABLE] = str(count)
    render_module._POOL = None


@pytest.mark.parametrize("shape_name", SHAPES)
def test_render_against_its_bound(shape_name, corpus, results):
    warnings.simplefilter("ignore")  # the 9x15 pages need two requests: said once, not per round
    saved = os.environ.get(RENDER_THREADS_VARIABLE)
    try:
        with_threads(1)
        pages = glyphpack.render(corpus, shape=shape_name, model=MODEL)
        plan = render_module._prepare(corpus, shape_name, "flow", None, MODEL)
        shape, normalized = plan.shape, plan.normalized
        assert len(pages) == plan.pages
        # The bound's inputs, made outside its timing: each page's scanlines (glyphpack's,
        # checked identical to the copy's), its cells as glyph_bits rows, its deflated bytes.
        glyph_bits, right_halves = glyph_cell_bits(shape)
        grid = lay_out(normalized, shape, "flow").grid
        cells = np.where(grid >= 0, grid, right_halves.size).astype(np.uint32)
        tails = np.flatnonzero((grid[:, 1:] == -2).ravel()) if (grid == -2).any() else None
        if tails is not None:  # a wide glyph's right cell draws its second half
            flat = cells[:, 1:].ravel()
            flat[tails] = right_halves[grid[:, :-1].ravel()[tails]]
            cells[:, 1:] = flat.reshape(cells[:, 1:].shape)
        pitch, rows_per_page = shape.pitch, shape.max_rows
        scan_pages = [draw(normalized.glyphs, plan.breaks, index, shape, -1).scanlines.copy() for index in range(plan.pages)]
        row_bytes = scan_pages[0].shape[1]
        scratch = np.zeros((rows_per_page * pitch, row_bytes), np.uint8)
        words = np.ndarray((scratch.shape[0], (row_bytes - 1) // 4), np.uint32, scratch, 1, (row_bytes, 4))
        page_cells = [np.ascontiguousarray(cells[k : k + rows_per_page]) for k in range(0, cells.shape[0], rows_per_page)]

        def copy_all():
            for page in page_cells:
                glyph_copy_alone(page, glyph_bits, shape.advance, pitch, words, scratch)

        for page, expected in zip(page_cells, scan_pages):
            glyph_copy_alone(page, glyph_bits, shape.advance, pitch, words, scratch)
            assert np.array_equal(scratch[: expected.shape[0]], expected), "the glyph copy draws glyphpack's pixels"
        deflated = [isal_zlib.compress(page, DEFLATE_LEVEL) for page in scan_pages]
        head = pages[0].png[: pages[0].png.index(b"IDAT") - 4]
        table = shape.atlas.bmp_lookup
        glyphs = np.empty(len(corpus), np.int32)
        lookup_alone(corpus, table, glyphs)

        parts = {
            "code points to glyph indices": lambda: lookup_alone(corpus, table, glyphs),
            "glyph copy": copy_all,
            "deflate": lambda: [isal_zlib.compress(page, DEFLATE_LEVEL) for page in scan_pages],
            "PNG assembly": lambda: assembly_alone(deflated, head),
        }
        pools = {}
        for threads in (1, 2):
            with_threads(threads)
            glyphpack.render(corpus, shape=shape_name, model=MODEL)  # the pool's threads started, warm
            pools[threads] = render_module._POOL
        # Round by round, every part once and glyphpack once per thread count: a busy
        # moment of the machine falls on all of them alike; each keeps its fastest round.
        times: dict[str, list[float]] = {}
        for _ in range(ROUNDS):
            for name, run in parts.items():
                times.setdefault(name, []).append(fastest(run, 1))
            for threads, pool in pools.items():
                render_module._POOL, render_module._POOL_THREADS = pool, threads
                times.setdefault(f"threads {threads}", []).append(fastest(lambda: glyphpack.render(corpus, shape=shape_name, model=MODEL), 1))
        bound = {name: min(times[name]) for name in parts}
        ours = {threads: min(times[f"threads {threads}"]) for threads in pools}
        for pool in pools.values():
            pool.shutdown()
    finally:
        if saved is None:
            os.environ.pop(RENDER_THREADS_VARIABLE, None)
        else:
            os.environ[RENDER_THREADS_VARIABLE] = saved
        render_module._POOL = None

    total = sum(bound.values())
    share = total / ours[1]
    MEASURED[shape_name] = {f"bound: {name}": f"{value:.2f}" for name, value in bound.items()} | {
        "bound: sum": f"{total:.2f}",
        "glyphpack end to end, 1 thread": f"{ours[1]:.2f}",
        "glyphpack end to end, 2 threads": f"{ours[2]:.2f}",
        "pages": f"{len(pages)}",
        "**share of the bound, 1 thread**": f"**{100 * share:.0f}%**",
        "**2 threads / 1 thread throughput**": f"**{ours[1] / ours[2]:.2f}x**",
    }
    shapes = list(MEASURED)
    TABLES[f"renderer against its bound (ms, fastest of {ROUNDS}; one run; 1M characters, pages for Claude)"] = [
        "| | " + " | ".join(shapes) + " |",
        "|---|" + "---:|" * len(shapes),
        *(f"| {row} | " + " | ".join(MEASURED[shape][row] for shape in shapes) + " |" for row in MEASURED[shapes[0]]),
    ]
    results[f"{shape_name}: share of the bound, 1 thread"] = (100 * share, "%")
    results[f"{shape_name}: 2 threads / 1 thread"] = (ours[1] / ours[2], "x")
    results[f"{shape_name}: end to end, 1 thread"] = (len(corpus) / ours[1] / 1000, "M chars/s")


#: shape -> row -> value, for the table.
MEASURED: dict[str, dict[str, str]] = {}
