"""The numba kernels: cell placement and rasterization.

Kernels take only C-contiguous arrays and scalars, write into preallocated outputs
and return nothing. Every kernel is compiled with the one policy below; ``prange``
runs only over disjoint outputs (one page per iteration).

Cell grid values: a glyph index >= 0, ``EMPTY`` (-1) for a blank cell, ``WIDE_TAIL``
(-2) for the right half of a wide glyph, ``UNREADABLE`` (-3) in a grid read back from
pixels that match no glyph.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

# numba's OpenMP threads otherwise spin after every parallel raster, burning a core
# between calls (CPU time twice the wall time of a small render, measured here); passive
# waiting costs no wall time. Read when the OpenMP runtime starts, at the first parallel
# launch; a caller's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numba
import numpy as np

from .._files import cache_dir

# numba caches compiled kernels beside their source file by default: inside
# site-packages, where the files outlive an uninstall and leave a folder that shadows
# a later editable install. The user cache directory instead, unless the caller chose
# one with NUMBA_CACHE_DIR (numba reads this when each kernel below is decorated).
_numba_config: Any = numba.config
if not _numba_config.CACHE_DIR:
    _numba_config.CACHE_DIR = str(cache_dir() / "numba")

#: The one JIT policy: cached to disk so a second process does not compile, and
#: releasing the GIL so callers can run kernels from threads.
jit: Any = functools.partial(numba.njit, cache=True, nogil=True)

#: Held around every launch of a ``parallel=True`` kernel. Numba's fallback threading
#: layer (workqueue, used where neither OpenMP nor TBB is available) aborts the
#: process when two threads launch parallel kernels at once; a parallel kernel uses
#: every core anyway, so taking turns costs no throughput.
parallel_launch = threading.Lock()

EMPTY = -1
WIDE_TAIL = -2
UNREADABLE = -3  # only in grids read back from pixels: the cell matches no glyph
#: Glyph-stream value for a line break in the ``lines`` layout (never in a grid).
LINE_BREAK = -1


@jit
def place_cells(glyphs, cell_widths, cols, wrap_glyph, grid, rows_used):
    """Lay a glyph stream out on rows of ``cols`` cells.

    Args:
        glyphs: int32[n] glyph indices; ``LINE_BREAK`` starts a new row.
        cell_widths: uint8[N] cells per glyph index (1 or 2).
        cols: cells per row (>= 4).
        wrap_glyph: glyph index of the wrap marker for the ``lines`` layout, or -1 for
            ``flow`` (rows simply continue; no marker).
        grid: int32[R, cols] prefilled with ``EMPTY`` and receiving the glyphs, or an
            array with 0 rows to only count.
        rows_used: int64[1], receives the number of rows the stream needs.

    A wide glyph never splits across rows. In the ``lines`` layout the last column of
    a row is kept for the wrap marker unless the glyph placed there ends its line.
    """
    write = grid.shape[0] > 0
    n = glyphs.shape[0]
    row = 0
    col = 0
    for i in range(n):
        g = glyphs[i]
        if g == LINE_BREAK:
            row += 1
            col = 0
            continue
        width = cell_widths[g]
        if wrap_glyph >= 0:
            ends_line = i + 1 == n or glyphs[i + 1] == LINE_BREAK
            if col + width > cols - 1 and not (ends_line and col + width <= cols):
                if write:
                    grid[row, cols - 1] = wrap_glyph
                row += 1
                col = 0
        elif col + width > cols:
            row += 1
            col = 0
        if write:
            grid[row, col] = g
            if width == 2:
                grid[row, col + 1] = WIDE_TAIL
        col += width
    rows_used[0] = row + 1 if n > 0 else 0


@jit(inline="always")
def _append_bytes(out_words, word, acc, pending, value, count):
    """Append ``count`` (1..8) little-endian bytes of ``value`` to a row being written.

    ``acc`` holds ``pending`` (0..7) bytes not yet stored; full 8-byte words go to
    ``out_words[word]``. Returns the new (word, acc, pending).
    """
    acc |= value << np.uint64(8 * pending)
    if pending + count < 8:
        return word, acc, pending + count
    out_words[word] = acc
    consumed = 8 - pending
    acc = value >> np.uint64(8 * consumed) if consumed < 8 else np.uint64(0)
    return word + 1, acc, pending + count - 8


@jit(parallel=True)
def rasterize(grid, row_words, cell_widths, advance, pitch, pixel_words):
    """Draw cell grids into page pixel arrays, eight pixels (bytes) per store.

    Args:
        grid: int32[P, R, C] cell grids, one per page.
        row_words: uint64[N, gh, K] each glyph's pixel rows, one byte per pixel (1 =
            ink), zero-padded to ``advance * cell_width`` bytes and packed
            little-endian into K words (see ``glyph_row_words``).
        cell_widths: uint8[N].
        advance, pitch: cell step, px.
        pixel_words: uint64[P, R * pitch, W // 8] with W >= C * advance: the pages'
            uint8[P, R * pitch, W] pixels viewed as words. Every word is written, so
            the array need not be zeroed first.
    """
    n_pages, n_rows, n_cols = grid.shape
    glyph_height = row_words.shape[1]
    for p in numba.prange(n_pages):
        for r in range(n_rows):
            for y in range(glyph_height):
                out_words = pixel_words[p, r * pitch + y]
                word = 0
                acc = np.uint64(0)
                pending = 0
                for c in range(n_cols):
                    g = grid[p, r, c]
                    if g == WIDE_TAIL:
                        continue  # the wide glyph's own span already covered this cell
                    if g < 0:
                        pending += advance  # blank: zero bytes, only the position moves
                        while pending >= 8:
                            out_words[word] = acc
                            acc = np.uint64(0)
                            word += 1
                            pending -= 8
                        continue
                    span = advance * cell_widths[g]
                    if span <= 8:  # the common case: one word holds the whole cell row
                        word, acc, pending = _append_bytes(out_words, word, acc, pending, row_words[g, y, 0], span)
                        continue
                    k = 0
                    while span > 0:
                        count = min(span, 8)
                        word, acc, pending = _append_bytes(out_words, word, acc, pending, row_words[g, y, k], count)
                        span -= count
                        k += 1
                if pending > 0:
                    out_words[word] = acc
                    word += 1
                while word < out_words.shape[0]:
                    out_words[word] = 0
                    word += 1
            for y in range(glyph_height, pitch):
                pixel_words[p, r * pitch + y, :] = 0


@jit(inline="always")
def _popcount(x):
    """Set bits of a uint64 (SWAR: numba has no popcount intrinsic to call)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@jit(parallel=True)
def nearest_glyphs(cells, glyphs, out):
    """Index of the glyph nearest (fewest differing pixels) to each cell.

    Args:
        cells: uint64[M, K] packed cell bitmaps.
        glyphs: uint64[N, K] packed glyph bitmaps (same packing).
        out: int32[M], receives the index into ``glyphs``; ties go to the lower index.
    """
    n_cells, words = cells.shape
    for m in numba.prange(n_cells):
        best = 0
        best_distance = 1 << 30
        for g in range(glyphs.shape[0]):
            distance = 0
            for k in range(words):
                distance += _popcount(cells[m, k] ^ glyphs[g, k])
            if distance < best_distance:
                best_distance = distance
                best = g
        out[m] = best


@jit(inline="always")
def _distance(packed, i, j, max_distance):
    """Differing bits of rows i and j of uint64[N, K], counted only up to max_distance + 1."""
    distance = 0
    for k in range(packed.shape[1]):
        distance += _popcount(packed[i, k] ^ packed[j, k])
        if distance > max_distance:
            break
    return distance


@jit(parallel=True)
def close_pairs(packed, max_distance, starts, counts, out):
    """Pairs of rows at most ``max_distance`` bits apart, in two passes.

    Args:
        packed: uint64[N, K] packed bitmaps.
        starts: int64[N + 1] prefix sums of ``counts`` (second pass only).
        counts: int64[N]: the first pass (``out`` with 0 rows) stores, per row i,
            how many j > i are close.
        out: int64[total, 3]: the second pass fills ``out[starts[i]:starts[i+1]]``
            with (i, j, distance) rows.
    """
    n = packed.shape[0]
    write = out.shape[0] > 0
    for i in numba.prange(n):
        row = starts[i] if write else 0
        for j in range(i + 1, n):
            distance = _distance(packed, i, j, max_distance)
            if distance <= max_distance:
                if write:
                    out[row, 0] = i
                    out[row, 1] = j
                    out[row, 2] = distance
                row += 1
        if not write:
            counts[i] = row
