"""The numba kernels: code points to glyphs, cell placement, drawing pages, and the
page reader's glyph matching.

Kernels take only C-contiguous arrays and scalars, write into preallocated outputs
and return nothing. Every kernel is compiled with the one policy below. Rendering runs
no parallel region: each page is one call on one of the caller's threads (the page
pool in ``render``), since the kernels release the GIL. ``prange`` runs only in the
legibility kernels, over disjoint outputs.

Compiling costs more than running on a first use (about 0.2-0.9 s per kernel here,
more with its callees), so the rendering path keeps to two entry points,
``map_codepoints`` and ``draw_page``, and the cache keeps them across processes.

Cell grid values: a glyph index >= 0, ``EMPTY`` (-1) for a blank cell, ``WIDE_TAIL``
(-2) for the right half of a wide glyph, ``UNREADABLE`` (-3) in a grid read back from
pixels that match no glyph.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path
from typing import Any

# numba's OpenMP threads otherwise spin after every parallel launch (the legibility
# kernels; rendering has none since issue 16), burning a core between calls; passive
# waiting costs no wall time. Read when the OpenMP runtime starts, at the first parallel
# launch; a caller's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numba
import numba.core.caching
import numba.extending
import numpy as np

# numba's own reader of a str's code points (a str passed to a kernel is its PEP 393
# buffer; this reads 1, 2 or 4 bytes a character as its kind says).
from numba.cpython.unicode import _get_code_point as _str_code_point

from .._files import cache_dir
from .prebuilt import seed_kernel_cache

# numba caches compiled kernels beside their source file by default: inside
# site-packages, where the files outlive an uninstall and leave a folder that shadows
# a later editable install. The user cache directory instead, unless the caller chose
# one with NUMBA_CACHE_DIR (numba reads this when each kernel below is decorated).
_numba_config: Any = numba.config
if not _numba_config.CACHE_DIR:
    _numba_config.CACHE_DIR = str(cache_dir() / "numba")


def _seed_from_the_package() -> None:
    """Put the kernels the package was built with where numba looks for this file's
    cache (``prebuilt``): the first render of a fresh install loads them."""
    locator: Any = numba.core.caching._CacheLocator  # numba's own rule for the folder of a source file
    seed_kernel_cache(Path(_numba_config.CACHE_DIR) / locator.get_suitable_cache_subpath(__file__))


_seed_from_the_package()


def kernel_cache_dir() -> str:
    """Where the compiled kernels are cached (numba's cache directory)."""
    return str(_numba_config.CACHE_DIR)


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
#: ``map_codepoints`` writes a code point the font has no glyph for as ``NO_GLYPH - cp``
#: (so at most ``NO_GLYPH``, the value for U+0000): normalization resolves every one
#: before layout.
NO_GLYPH = -4
#: Glyph-stream value for a line break in the ``lines`` layout (never in a grid).
LINE_BREAK = -1


#: Classes ``map_codepoints`` counts (class values 0..5): its per-block counters are the
#: eight byte lanes of one uint64, the last two counting NFC suspects and wide glyphs.
CLASS_COUNT = 6
# Code points per block: a block's counts are kept in the eight byte lanes of one
# uint64 (one add per code point, no counter that waits on itself through a run of one
# class), which hold up to 255 each.
_CLASS_BLOCK = 255
#: The lanes of a code point's increment (``code_point_increments``) past its class's.
SUSPECT_LANE, WIDE_LANE = 6, 7
#: ``map_codepoints``'s counts before the classes: glyphs written, code points without a
#: glyph, wide glyphs written, code points NFC may change.
WRITTEN, MISSING, WIDE, NFC_SUSPECTS = range(4)
COUNTS = 4


def _code_point(text, i):
    """Code point ``i`` of ``text``, a str or a uint32 array (compiled: see below)."""
    raise NotImplementedError("only called from compiled code")


@numba.extending.overload(_code_point, inline="always")
def _code_point_compiled(text, i):
    """A str is read where it lies (numba passes its PEP 393 buffer, no copy)."""
    if isinstance(text, numba.types.UnicodeType):
        return lambda text, i: np.uint32(_str_code_point(text, i))
    return lambda text, i: np.uint32(text[i])


@jit
def _astral(cp, atlas_codepoints, cell_widths, classes, nfc_suspects):
    """(glyph index or -1, increment) of a code point past the BMP, as
    ``map_codepoints``'s tables give them for the BMP: the glyph found by a binary
    search over the sorted glyph code points. A call of its own: inlined in
    ``map_codepoints``'s loop it made the loop three times slower."""
    lo = 0
    hi = atlas_codepoints.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if atlas_codepoints[mid] < cp:
            lo = mid + 1
        else:
            hi = mid
    glyph = lo if lo < atlas_codepoints.shape[0] and atlas_codepoints[lo] == cp else -1
    lane = np.uint64(classes[cp]) if classes.shape[0] > 0 else np.uint64(0)
    increment = np.uint64(1) << (lane << np.uint64(3))
    if glyph >= 0 and cell_widths[glyph] == 2:
        increment |= np.uint64(1) << np.uint64(8 * WIDE_LANE)
    if nfc_suspects.shape[0] > 0 and (nfc_suspects[cp >> 3] >> (cp & 7)) & 1:
        increment |= np.uint64(1) << np.uint64(8 * SUSPECT_LANE)
    return glyph, increment


@jit
def map_codepoints(
    text, bmp_table, increments, atlas_codepoints, cell_widths, classes, nfc_suspects, line_breaks, tab_size, glyphs, missing_at, counts
):
    """A text's code points to glyph indices, cleaned on the way, with its counts: one
    pass, two table loads per code point.

    Args:
        text: a str (read in place, lone surrogates as code points), or uint32[n]
            code points (at most 0x10FFFF).
        bmp_table: int32[0x10000], glyph index per BMP code point, -1 if absent.
        increments: uint64[0x10000], what each BMP code point adds to a block's
            counters (``code_point_increments``): 1 in its class's byte lane, 1 in lane
            ``SUSPECT_LANE`` where NFC may change a text holding it, 1 in lane
            ``WIDE_LANE`` where its glyph is wide.
        atlas_codepoints: int32[N] sorted, the code point of each glyph; cell_widths:
            uint8[N], cells per glyph; classes: uint8[0x110000] (values 0..5) or
            uint8[0]; nfc_suspects: uint8[0x22000] or uint8[0]: the tables' sources, for
            code points past the BMP.
        line_breaks: True maps LF to ``LINE_BREAK`` (the ``lines`` layout).
        tab_size: over 0 cleans the text as it goes: CRLF and a lone CR become LF, and
            a tab becomes the spaces to the next multiple of ``tab_size`` columns
            (columns counted in code points since the line began, as
            ``str.expandtabs``); 0 maps each code point to one glyph, faster (for a
            text without CR or tab).
        glyphs: int32[>= n + (tab_size - 1) * tabs], receives the glyph indices;
            ``NO_GLYPH - cp`` where the font has no glyph for ``cp``.
        missing_at: int64[K], receives the positions in ``glyphs`` of the first K code
            points without a glyph.
        counts: int64[COUNTS + CLASS_COUNT], receives the glyphs written, the code
            points without a glyph, then of the input's code points (before cleaning)
            the wide ones, those NFC may change, and those of each class.
    """
    n = len(text)
    space = bmp_table[0x20]
    space = space if space >= 0 else NO_GLYPH - 0x20
    counts[:] = 0
    out = 0
    line_start = 0  # where the current line's glyphs begin: a tab's column is out - line_start
    missing = 0
    for first in range(0, n, _CLASS_BLOCK):
        last = min(first + _CLASS_BLOCK, n)
        lanes = np.uint64(0)
        if tab_size == 0:  # one glyph per code point: a loop without cleaning or branches
            unresolved = 0
            for i in range(first, last):
                cp = _code_point(text, i)
                in_bmp = cp < 0x10000
                row = cp if in_bmp else np.uint32(0xFFFF)  # past the BMP: put right below
                g = bmp_table[row] if in_bmp else -1
                lanes += increments[row]
                glyphs[i] = g
                unresolved += g < 0
            for i in range(first, last if unresolved > 0 else first):  # code points past the BMP or without a glyph
                if glyphs[i] >= 0:
                    continue
                cp = _code_point(text, i)
                g = -1
                if cp >= 0x10000:  # counted as U+FFFF: counted again as itself
                    g, increment = _astral(cp, atlas_codepoints, cell_widths, classes, nfc_suspects)
                    _count_increment(counts, increment, 1)
                    _count_increment(counts, increments[0xFFFF], -1)
                if g >= 0:
                    glyphs[i] = g
                    continue
                if missing < missing_at.shape[0]:
                    missing_at[missing] = i
                missing += 1
                glyphs[i] = NO_GLYPH - np.int64(cp)
            if line_breaks:
                for i in range(first, last):
                    if _code_point(text, i) == 0x0A:
                        glyphs[i] = LINE_BREAK  # the newline marker's glyph: never missing
            out = last
        else:
            for i in range(first, last):
                cp = _code_point(text, i)
                if cp < 0x10000:
                    g = bmp_table[cp]
                    lanes += increments[cp]
                else:
                    g, increment = _astral(cp, atlas_codepoints, cell_widths, classes, nfc_suspects)
                    lanes += increment
                if cp <= 0x0D:  # CR, tab and LF
                    if cp == 0x0D:
                        if i + 1 < n and _code_point(text, i + 1) == 0x0A:
                            continue  # CRLF: its LF is the line break
                        cp = np.uint32(0x0A)
                        g = bmp_table[0x0A]
                    elif cp == 0x09:
                        spaces = tab_size - (out - line_start) % tab_size
                        for _ in range(spaces):
                            glyphs[out] = space
                            out += 1
                        continue
                    if cp == 0x0A:
                        line_start = out + 1
                        if line_breaks:
                            glyphs[out] = LINE_BREAK
                            out += 1
                            continue
                glyphs[out] = g if g >= 0 else NO_GLYPH - np.int64(cp)
                if g < 0:
                    if missing < missing_at.shape[0]:
                        missing_at[missing] = out
                    missing += 1
                out += 1
        for k in range(CLASS_COUNT):
            counts[COUNTS + k] += (lanes >> np.uint64(8 * k)) & np.uint64(0xFF)
        counts[NFC_SUSPECTS] += (lanes >> np.uint64(8 * SUSPECT_LANE)) & np.uint64(0xFF)
        counts[WIDE] += lanes >> np.uint64(8 * WIDE_LANE)
    counts[WRITTEN] = out
    counts[MISSING] = missing


@jit(inline="always")
def _count_increment(counts, increment, sign):
    """Add one code point's ``increment`` (its byte lanes) to ``counts``, ``sign`` times."""
    for k in range(CLASS_COUNT):
        counts[COUNTS + k] += sign * np.int64((increment >> np.uint64(8 * k)) & np.uint64(0xFF))
    counts[NFC_SUSPECTS] += sign * np.int64((increment >> np.uint64(8 * SUSPECT_LANE)) & np.uint64(0xFF))
    counts[WIDE] += sign * np.int64(increment >> np.uint64(8 * WIDE_LANE))


@jit(inline="always")
def _place(glyphs, start, cell_widths, cols, wrap_glyph, pad_glyph, grid, row_limit, write, row_starts):
    """Lay the glyph stream out from ``glyphs[start]`` on at most ``row_limit`` rows.

    The one layout loop: ``place_cells`` writes a whole grid with it and ``draw_page``
    lays the whole stream out with it, row by row. A row always begins at column 0 with
    no other state, so resuming at any row's first glyph lays the rest out exactly as
    one pass over the whole stream would.

    Returns (the glyph index the next row begins at, rows used). Without ``write``
    nothing is written to ``grid``; ``row_starts`` (int32[> rows], or int32[0] for
    none) receives the glyph index each row begins at.
    """
    n = glyphs.shape[0]
    recording = row_starts.shape[0] > 0
    if recording:
        row_starts[0] = start
    row = 0
    col = 0
    i = start
    while i < n:
        g = glyphs[i]
        if g == LINE_BREAK:
            if row + 1 == row_limit:
                return i + 1, row_limit
            row += 1
            col = 0
            i += 1
            if recording:
                row_starts[row] = i
            continue
        width = cell_widths[g]
        if wrap_glyph >= 0:
            ends_line = i + 1 == n or glyphs[i + 1] == LINE_BREAK
            if col + width > cols - 1 and not (ends_line and col + width <= cols):
                if write:
                    grid[row, cols - 1] = wrap_glyph
                if row + 1 == row_limit:
                    return i, row_limit
                row += 1
                col = 0
                if recording:
                    row_starts[row] = i
        elif col + width > cols:
            if write and pad_glyph >= 0 and col < cols:
                grid[row, col] = pad_glyph  # the cell a wide glyph leaves: marked, or it reads as a space
            if row + 1 == row_limit:
                return i, row_limit
            row += 1
            col = 0
            if recording:
                row_starts[row] = i
        if write:
            grid[row, col] = g
            if width == 2:
                grid[row, col + 1] = WIDE_TAIL
        col += width
        i += 1
    return n, row + 1 if n > start else 0


@jit
def place_cells(glyphs, cell_widths, cols, wrap_glyph, pad_glyph, grid):
    """Lay a whole glyph stream out on rows of ``cols`` cells.

    Args:
        glyphs: int32[n] glyph indices; ``LINE_BREAK`` starts a new row.
        cell_widths: uint8[N] cells per glyph index (1 or 2).
        cols: cells per row (>= 4).
        wrap_glyph: glyph index of the wrap marker for the ``lines`` layout, or -1 for
            ``flow`` (rows simply continue; no marker).
        pad_glyph: in ``flow``, the glyph drawn in a row's last cell when a wide glyph
            does not fit there and moves on (the wrap marker), or -1: left blank.
        grid: int32[R, cols] prefilled with ``EMPTY``, R the rows the stream needs
            (``page_breaks``); receives the glyphs.

    A wide glyph never splits across rows. In the ``lines`` layout the last column of
    a row is kept for the wrap marker unless the glyph placed there ends its line.
    """
    _place(glyphs, 0, cell_widths, cols, wrap_glyph, pad_glyph, grid, grid.shape[0], True, np.zeros(0, dtype=np.int32))


@jit(inline="always")
def _draw_row(cells, offset, count, cols, blank, glyph_bits, step, pitch, scanlines, words, base, rows_bits):
    """Draw one row of ``cols`` cells as the ``pitch`` scanlines from ``base`` on: cell
    ``c`` is glyph_bits row ``cells[offset + c]`` for ``c < count``, blank after.

    Cell-major: each cell's glyph is read once, all its pixel rows at once, and shifted
    into one accumulator per pixel row (``rows_bits``, uint64[gh] scratch); a 32-bit
    word is stored to every pixel row whenever one is complete (one store through
    ``words``: a row of ``C * advance`` bits has room for every whole word of it), then
    the rows' last bits, zero-padded to a whole byte, and zeros to the row's end. The
    pitch's rows below the glyphs are zero. ``step`` (the advance, at most 32 bits) never lets an accumulator overflow:
    under 32 bits are pending before a cell is shifted in.
    """
    glyph_height = glyph_bits.shape[1]
    width_bytes = scanlines.shape[1]
    word = 0  # the next 32-bit word of every pixel row: bytes 1 + 4 * word on
    pending = np.uint64(0)  # bits shifted in and not yet stored, the same for every pixel row
    for c in range(cols):
        bits = glyph_bits[np.uint32(cells[offset + c]) if c < count else np.uint32(blank)]  # unsigned: no negative-index checks
        for y in range(glyph_height):
            rows_bits[y] = (rows_bits[y] << step) | bits[y]
        pending += step
        if pending >= 32:
            pending -= np.uint64(32)
            for y in range(glyph_height):
                words[base + y, word] = _big_endian(rows_bits[y] >> pending)
            word += 1
    position = 1 + 4 * word
    for y in range(glyph_height):
        line = scanlines[base + y]
        line[0] = 0  # PNG filter type 0 (None)
        at = position
        left = pending
        while left > 0:
            if left >= 8:
                left -= np.uint64(8)
                line[at] = np.uint8((rows_bits[y] >> left) & np.uint64(0xFF))
            else:
                line[at] = np.uint8((rows_bits[y] << (np.uint64(8) - left)) & np.uint64(0xFF))
                left = np.uint64(0)
            at += 1
        for k in range(at, width_bytes):
            line[k] = 0
    for y in range(glyph_height, pitch):
        scanlines[base + y, :] = 0


@jit(inline="always")
def _big_endian(word):
    """The low 32 bits of ``word`` as a uint32 whose bytes in memory are big-endian (a
    byte swap on this little-endian machine: LLVM makes it one instruction)."""
    word &= np.uint64(0xFFFFFFFF)
    swapped = ((word & np.uint64(0xFF)) << np.uint64(24)) | ((word & np.uint64(0xFF00)) << np.uint64(8))
    swapped |= ((word >> np.uint64(8)) & np.uint64(0xFF00)) | (word >> np.uint64(24))
    return np.uint32(swapped)


@jit
def draw_page(
    glyphs, start, cell_widths, cols, wrap_glyph, pad_glyph, narrow_flow, row_starts, first_row, glyph_bits, right_halves,
    advance, pitch, rows_per_page, scanlines, words, stats, draw,
):  # fmt: skip
    """Draw one page from ``glyphs[start]`` as PNG scanlines, or lay the whole stream
    out (one kernel for both: each costs a compile).

    Args:
        glyphs, cell_widths, cols, wrap_glyph, pad_glyph: as for ``place_cells``; a stream does
            not end with ``LINE_BREAK`` (normalization trims them; one would leave an
            empty row on a page of its own).
        start: the page's first glyph index.
        narrow_flow: the ``flow`` layout of a stream without wide glyphs: every row
            holds ``cols`` glyphs in order (``row_starts`` unused).
        row_starts: int32[rows + 1], the glyph index each row of the stream begins at,
            then the stream's length: filled without ``draw``, read with it.
        first_row: the page's first row (``start`` is ``row_starts[first_row]``).
        glyph_bits: uint64[N + 1 + W, gh] each glyph's pixel rows as bits, one cell
            (``advance`` bits, at most 32) each, the leftmost pixel most significant: a
            wide glyph's left cell in its own row, its right cell in row
            ``right_halves[g]``; row N is 0, drawn for blank cells
            (``raster.glyph_cell_bits``).
        right_halves: int32[N], the glyph_bits row of each wide glyph's right cell
            (-1 for a narrow glyph).
        advance, pitch: cell step, px.
        scanlines: uint8[>= rows * pitch, 1 + ceil(cols * advance / 8)], receives the
            rows as PNG scanlines: filter byte 0, then 1-bit pixels, most significant
            bit first, 1 = ink; the bits past the page width are 0.
        words: uint32[same rows, (scanlines.shape[1] - 1) // 4], the same memory from
            byte 1 of each scanline on, a word at a time (``raster.scanline_words``;
            unaligned): where whole words are stored.
        rows_per_page: rows of a full page.
        stats: int64[4], receives (rows used, characters drawn, cells used, the next
            page's first glyph index); without ``draw``, ``stats[0]`` the stream's rows.
        draw: False to lay the whole stream out instead (``row_starts``, ``stats[0]``).
    """
    marker = wrap_glyph if wrap_glyph >= 0 else pad_glyph  # not a character: not counted
    n = glyphs.shape[0]
    if not draw:
        _, stats[0] = _place(glyphs, 0, cell_widths, cols, wrap_glyph, pad_glyph, np.zeros((0, 0), dtype=np.int32), n + 2, False, row_starts)
        row_starts[stats[0]] = n
        return
    if narrow_flow:
        end = min(start + rows_per_page * cols, n)
        stats[3] = end
        stats[0] = -(-(end - start) // cols)
        _draw_stream(glyphs, start, end, cols, marker, glyph_bits, right_halves, advance, pitch, scanlines, words, stats)
        return
    last_row = min(first_row + rows_per_page, row_starts.shape[0] - 1)
    blank = right_halves.shape[0]
    column = np.empty(cols, dtype=np.uint32)
    rows_bits = np.zeros(glyph_bits.shape[1], dtype=np.uint64)
    step = np.uint64(advance)
    chars = 0
    cells = 0
    for r in range(first_row, last_row):
        begin, finish = row_starts[r], row_starts[r + 1]
        c = 0
        for i in range(begin, finish):
            g = glyphs[i]
            if g == LINE_BREAK:
                continue  # a row's last glyph: it ended the row
            column[c] = g
            chars += g != marker
            right_half = right_halves[np.uint32(g)]  # unsigned: no negative-index check
            if right_half >= 0:
                column[c + 1] = right_half
                c += 2
                cells += 2
            else:
                c += 1
                cells += 1
        for k in range(c, cols):
            column[k] = blank
        if finish < n and glyphs[finish - 1] != LINE_BREAK:  # the row was cut before a glyph
            if wrap_glyph >= 0:
                column[cols - 1] = wrap_glyph  # a wrapped line's marker
                cells += 1
            elif pad_glyph >= 0 and c < cols:
                column[c] = pad_glyph  # the cell a wide glyph leaves: marked, or it reads as a space
                cells += 1
        _draw_row(column, 0, cols, cols, blank, glyph_bits, step, pitch, scanlines, words, (r - first_row) * pitch, rows_bits)
    stats[0] = last_row - first_row
    stats[1] = chars
    stats[2] = cells
    stats[3] = row_starts[last_row]


@jit(inline="always")
def _draw_stream(glyphs, start, end, cols, marker, glyph_bits, right_halves, advance, pitch, scanlines, words, stats):
    """Draw ``glyphs[start:end]`` (narrow glyphs only) ``cols`` to a row; fills
    ``stats[:3]``."""
    blank = right_halves.shape[0]
    rows_bits = np.zeros(glyph_bits.shape[1], dtype=np.uint64)
    step = np.uint64(advance)
    rows = 0
    for first in range(start, end, cols):
        _draw_row(glyphs, first, min(cols, end - first), cols, blank, glyph_bits, step, pitch, scanlines, words, rows * pitch, rows_bits)
        rows += 1
    markers = 0
    if marker >= 0:  # a font with wide glyphs: its pad glyph's own character is drawn, not counted
        for i in range(start, end):
            markers += glyphs[i] == marker
    stats[0] = rows
    stats[1] = end - start - markers
    stats[2] = end - start


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
