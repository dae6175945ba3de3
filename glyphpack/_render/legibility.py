"""Legibility under downscaling: simulate a provider's resize, measure what survives.

Providers do not document their resampling filter, so every plausible Pillow filter is
tried. A shrunk page is measured the way the best reader could read it: scaled back to
the original grid, thresholded, and each glyph position matched to the nearest atlas
glyph of the same width (least differing pixels). On an unresized page the nearest
glyph is the exact glyph, so legibility is exactly 1.0.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np
from PIL import Image

from .._errors import GlyphpackError
from .._providers.profile import Profile
from .._providers.resolve import resolve
from .._types import Layout, public
from .fonts import FontAtlas
from .kernels import close_pairs, nearest_glyphs, parallel_launch
from .layout import lay_out
from .png import decode_png
from .reader import read_page
from .render import render
from .shapes import Shape, get_shape
from .text import normalize

if TYPE_CHECKING:
    from .render import Page

#: Pillow's resampling filters, by the names used in reports.
FILTERS = {
    "nearest": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
    "box": Image.Resampling.BOX,
}


#: A page as the measurements take it: a Page, PNG bytes, or uint8/float32[H, W] ink.
PageInput = Union["Page", bytes, np.ndarray]


def _pixels_of(page: PageInput) -> np.ndarray:
    """uint8[H, W], 1 = ink, from a Page, PNG bytes or a pixel array."""
    if isinstance(page, (bytes, bytearray)):
        return decode_png(bytes(page))
    if isinstance(page, np.ndarray):
        return page
    return decode_png(page.png)


def _filter(name: str) -> Image.Resampling:
    try:
        return FILTERS[name]
    except KeyError:
        raise GlyphpackError(f"unknown filter {name!r}; choose one of {', '.join(FILTERS)}") from None


def resample(pixels: np.ndarray, size: tuple[int, int], filter: str = "bicubic") -> np.ndarray:
    """Ink pixels resized to ``size`` (width, height).

    Args:
        pixels: uint8[H, W], 1 = ink (or float ink coverage 0..1).

    Returns:
        float32[size[1], size[0]] ink coverage, 0 (paper) .. 1 (ink).
    """
    image = Image.fromarray(np.asarray(pixels, dtype=np.float32) * 255.0, mode="F")
    resized = image.resize(size, _filter(filter))
    return np.clip(np.asarray(resized, dtype=np.float32) / 255.0, 0.0, 1.0)


@public
def downscale(page: PageInput, factor: float, filter: str = "bicubic") -> np.ndarray:
    """A page shrunk by ``factor`` (0 < factor <= 1): float32[h, w] ink coverage."""
    if not 0 < factor <= 1:
        raise GlyphpackError(f"a downscale factor must be in (0, 1], not {factor}")
    pixels = _pixels_of(page)
    height, width = pixels.shape
    size = (max(1, round(width * factor)), max(1, round(height * factor)))
    return resample(pixels, size, filter)


@public
def simulate(page: PageInput, profile: Profile | str, filter: str = "bicubic") -> np.ndarray:
    """What ``profile``'s provider would hand the model: float32[h, w] ink coverage
    after its resize (the page itself when the provider leaves it alone)."""
    profile = resolve(profile)
    pixels = _pixels_of(page)
    height, width = pixels.shape
    size = profile.resize(width, height)
    if size == (width, height):
        return pixels.astype(np.float32)
    return resample(pixels, size, filter)


def _packed_rows(bits: np.ndarray) -> np.ndarray:
    """uint64[M, K]: each row of uint8[M, B] 0/1 bits packed into K words."""
    packed = np.packbits(bits, axis=1)
    words = -(-packed.shape[1] // 8)
    out = np.zeros((packed.shape[0], words * 8), dtype=np.uint8)
    out[:, : packed.shape[1]] = packed
    return out.view(np.uint64)


def nearest_read(pixels: np.ndarray, shape: Shape, expected_grid: np.ndarray) -> np.ndarray:
    """Read each glyph position of ``expected_grid`` as the nearest atlas glyph.

    Args:
        pixels: uint8[H, W], 1 = ink, on the original grid.
        expected_grid: int32[R, C] where glyphs are (glyph indices; negative = none).

    Returns:
        int32[R, C]: canonical codepoint read at each glyph position, 0 elsewhere.
    """
    atlas = shape.atlas
    rows, cols = expected_grid.shape
    gh, gw = atlas.glyph_height, atlas.glyph_width
    canvas = np.zeros((rows * shape.pitch, cols * shape.advance + 2 * gw), dtype=np.uint8)
    h, w = min(pixels.shape[0], canvas.shape[0]), min(pixels.shape[1], canvas.shape[1])
    canvas[:h, :w] = pixels[:h, :w]
    read = np.zeros((rows, cols), dtype=np.int32)
    for cells in (1, 2):
        width = gw * cells
        at = np.argwhere((expected_grid >= 0) & (atlas.cell_widths[np.maximum(expected_grid, 0)] == cells))
        candidates = np.flatnonzero(atlas.cell_widths == cells)
        if at.size == 0 or candidates.size == 0:
            continue
        ys = (at[:, 0] * shape.pitch)[:, None] + np.arange(gh)[None, :]
        xs = (at[:, 1] * shape.advance)[:, None] + np.arange(width)[None, :]
        blocks = canvas[ys[:, :, None], xs[:, None, :]].reshape(len(at), gh * width)
        glyph_bits = atlas.bitmaps[candidates, :, :width].reshape(len(candidates), gh * width)
        best = np.empty(len(at), dtype=np.int32)
        with parallel_launch:
            nearest_glyphs(_packed_rows(blocks), _packed_rows(glyph_bits), best)
        read[at[:, 0], at[:, 1]] = atlas.canonical[candidates[best]]
    return read


def expected_grid(text: str, shape: Shape, cols: int, layout: Layout = "flow") -> np.ndarray:
    """int32[R, cols]: where ``text``'s glyphs sit on a page ``cols`` cells wide."""
    laid = lay_out(normalize(text, shape.atlas, layout), shape.with_page_size(cols * shape.advance, shape.max_height), layout)
    return laid.grid


@public
def legibility(
    page_pixels: PageInput,
    shape: Shape | str | None,
    expected_text: str,
    *,
    size: tuple[int, int] | None = None,
    layout: Layout = "flow",
    filter: str = "bicubic",
) -> float:
    """Fraction of the glyphs of ``expected_text`` read correctly from ``page_pixels``.

    Args:
        page_pixels: the page as a Page, PNG bytes, or uint8/float[h, w] ink (float
            coverage from ``downscale`` / ``simulate``).
        shape: the shape the page was drawn with.
        expected_text: the text the page holds (a single page's worth).
        size: (width, height) of the original page; pixels of another size are scaled
            back to it with ``filter`` first. Default: the pixels' own size.

    Returns:
        correct glyphs / glyphs, in [0, 1] (1.0 for a text with no glyphs).
    """
    shape = get_shape(shape)
    pixels = _pixels_of(page_pixels)
    height, width = pixels.shape
    size = size or (width, height)
    if (width, height) != tuple(size):
        pixels = resample(pixels, size, filter)
    ink = (np.asarray(pixels, dtype=np.float32) >= 0.5).astype(np.uint8)
    cols = size[0] // shape.advance
    grid = expected_grid(expected_text, shape, cols, layout)
    rows = min(grid.shape[0], size[1] // shape.pitch)
    if grid.shape[0] > rows:
        raise GlyphpackError(f"the expected text needs {grid.shape[0]} rows; a {size[0]}x{size[1]} page holds {rows}")
    atlas: FontAtlas = shape.atlas
    glyph_at = grid >= 0
    blank = atlas.canonical[np.maximum(grid, 0)] == 0x20
    counted = glyph_at & ~blank & (grid != atlas.wrap_index)
    if not counted.any():
        return 1.0
    read = nearest_read(ink, shape, grid)
    truth = atlas.canonical[np.maximum(grid, 0)]
    return float(np.count_nonzero((read == truth) & counted) / np.count_nonzero(counted))


@public
def confusable_pairs(shape: Shape | str, max_distance: int = 2) -> list[tuple[str, str, int]]:
    """Glyph pairs of the same width whose bitmaps differ in at most ``max_distance``
    pixels: (char, char, distance), closest first. Distance 0 pairs are identical
    bitmaps (they read back as one canonical character)."""
    atlas = get_shape(shape).atlas
    pairs: list[tuple[str, str, int]] = []
    for cells in (1, 2):
        # Markers outside Unicode (the wrap marker) are no character a text can hold.
        index = np.flatnonzero((atlas.cell_widths == cells) & (atlas.codepoints <= 0x10FFFF))
        if index.size < 2:
            continue
        width = atlas.glyph_width * cells
        bits = atlas.bitmaps[index, :, :width].reshape(index.size, -1)
        first, second, distance = hamming_pairs(_packed_rows(bits), max_distance)
        for i, j, d in zip(first.tolist(), second.tolist(), distance.tolist()):
            pairs.append((chr(atlas.codepoints[index[i]]), chr(atlas.codepoints[index[j]]), d))
    pairs.sort(key=lambda p: (p[2], p[0], p[1]))
    return pairs


def hamming_pairs(packed: np.ndarray, max_distance: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, distance) for i < j with popcount(packed[i] ^ packed[j]) <= max_distance."""
    counts = np.zeros(packed.shape[0], dtype=np.int64)
    starts = np.zeros(packed.shape[0] + 1, dtype=np.int64)
    with parallel_launch:
        close_pairs(packed, max_distance, starts, counts, np.empty((0, 3), dtype=np.int64))
        starts[1:] = np.cumsum(counts)
        out = np.empty((int(starts[-1]), 3), dtype=np.int64)
        if out.shape[0]:
            close_pairs(packed, max_distance, starts, counts, out)
    return out[:, 0], out[:, 1], out[:, 2]


#: A fixed sample for sweeps: prose, code, numbers and the punctuation pairs that
#: differ by one pixel (, ; . :), so every shape is measured on the same characters.
SAMPLE_TEXT = (
    "The quick brown fox jumps over the lazy dog; 0123456789. "
    "def resize(w, h): return (w * 28 // 32, h + 1)  # a, b; c: d. "
    "if (x[i] != y[j]) { total += 3.14159; } else { return -1; } "
    "Error: file 'config.yaml', line 42: expected ':' but found ',' (see --help). "
)
SAMPLE_CJK = "日本語のテキストと中文字符，한국어 문장도 함께 읽습니다。"
SWEEP_FACTORS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5)
#: Below this legibility a page counts as unreadable in sweep summaries.
UNREADABLE_BELOW = 0.5


def sweep(
    shapes: list[Shape],
    factors: Sequence[float] = SWEEP_FACTORS,
    filters: Sequence[str] = tuple(FILTERS),
    page_size: tuple[int, int] = (800, 400),
    progress: Callable[[], object] | None = None,
) -> list[dict[str, Any]]:
    """Legibility of a full sample page per shape, filter and downscale factor.

    Returns:
        one dict per measurement: shape, filter, factor, legibility.
    """
    records = []
    for shape in shapes:
        sized = shape.with_page_size(*page_size)
        sample = SAMPLE_CJK + SAMPLE_TEXT if shape.atlas.has_wide else SAMPLE_TEXT
        page = render(sample * (sized.cells_per_page // len(sample) + 1), shape=sized)[0]
        page_text = read_page(page, sized)  # exactly what the first (full) page holds
        for filter_name in filters:
            for factor in factors:
                shrunk = downscale(page, factor, filter_name)
                score = legibility(shrunk, sized, page_text, size=(page.width, page.height), filter=filter_name)
                records.append({"shape": shape.name, "filter": filter_name, "factor": factor, "legibility": round(score, 4)})
                if progress is not None:
                    progress()
    return records


def unreadable_below(records: list[dict[str, Any]], shape: str) -> float | None:
    """The largest factor at which even the kindest filter leaves the shape unreadable."""
    best: dict[float, float] = {}
    for r in records:
        if r["shape"] == shape:
            best[r["factor"]] = max(best.get(r["factor"], 0.0), r["legibility"])
    failing = [f for f, score in best.items() if score < UNREADABLE_BELOW]
    return max(failing) if failing else None


def plot_sweep(records: list[dict[str, Any]]) -> bytes:
    """A PNG plot: legibility against scale factor, a panel per shape, a line per filter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys(r["shape"] for r in records))
    columns = min(4, len(shapes))  # a grid: one row of many panels is too wide to read
    rows = -(-len(shapes) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 3.0 * rows), sharey=True, squeeze=False)
    for ax in axes.ravel()[len(shapes) :]:
        ax.set_visible(False)
    for ax, shape in zip(axes.ravel(), shapes):
        for filter_name in dict.fromkeys(r["filter"] for r in records):
            points = sorted((r["factor"], r["legibility"]) for r in records if r["shape"] == shape and r["filter"] == filter_name)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=filter_name)
        ax.axhline(UNREADABLE_BELOW, color="grey", linewidth=0.6, linestyle=":")
        ax.set_title(shape)
        ax.set_xlabel("scale factor")
        ax.invert_xaxis()
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("glyphs read correctly")
    axes.ravel()[len(shapes) - 1].legend(fontsize="small")
    figure.suptitle("Legibility of a downscaled page (nearest-glyph reader)")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()
