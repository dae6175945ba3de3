"""Text normalization: a str becomes an int32 stream of glyph indices for one atlas.

Everything that depends on characters happens here, in Python and numpy, so that no
string ever reaches a numba kernel. The bulk of the work is vectorized: each distinct
character the font lacks is resolved once (fold, caret notation, drop or replace)
and the resolution is scattered to every place it occurs.

Rules, in order:
  1. CRLF and lone CR become LF; ANSI escape sequences are stripped.
  2. NFC composes combining marks where Unicode can.
  3. Tabs expand to tab stops (``str.expandtabs``, per source line).
  4. Per character: the font's glyph; else a fold to characters the font has
     (typographic quotes, dashes, ellipsis, arrows, box drawing, NFKD without marks);
     a symbol (emoji) by its name (``:rocket:``); C0 controls and DEL become caret
     notation (``^@``, ``^[``, ``^?``); C1 controls, format characters and variation
     selectors (all invisible) are dropped; anything else, a combining mark the font
     lacks included, is the replacement glyph. Every change is counted.
  5. Blanks at the end of the text are removed, and in the ``lines`` layout blanks at
     the end of every line and line breaks at the end of the text (a reader cannot
     see them). In ``flow``, newline markers at the end are dropped too.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from typing import Any

import numpy as np

from .._files import atomic_write, cache_dir
from .._types import LAYOUTS, Layout, check_kind
from .fonts import INVISIBLE_MARKS, FontAtlas, code_point_increments
from .kernels import (
    CLASS_COUNT,
    COUNTS,
    LINE_BREAK,
    MISSING,
    NFC_SUSPECTS,
    NO_GLYPH,
    WIDE,
    WRITTEN,
    map_codepoints,
)

TAB_SIZE = 8
#: Up to this many dropped or expanded characters are spliced in slice by slice; more
#: take vectorized passes (per-character offsets).
_SPLICE_LIMIT = 4096

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"  # two-character escapes
)

# Folds tried before NFKD, for characters whose decomposition does not help.
# fmt: off
_FOLDS: dict[str, str] = {
    "\u2018": "'", "\u2019": "'", "\u201a": ",", "\u201b": "'", "\u2032": "'", "\u2035": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"', "\u00ab": "<<", "\u00bb": ">>",
    "\u2039": "<", "\u203a": ">",
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "--", "\u2015": "--", "\u2212": "-",
    "\u2026": "...", "\u2022": "*", "\u2023": ">", "\u2043": "-", "\u25cf": "*", "\u25e6": "o", "\u00b7": ".",
    "\u2190": "<-", "\u2192": "->", "\u2191": "^", "\u2193": "v", "\u2194": "<->", "\u21d0": "<=",
    "\u21d2": "=>", "\u21d4": "<=>", "\u27f6": "-->", "\u27f5": "<--",
    "\u2713": "v", "\u2714": "v", "\u2717": "x", "\u2718": "x", "\u00d7": "x",
    "\u2264": "<=", "\u2265": ">=", "\u2260": "!=", "\u2248": "~=",
    "\u00a0": " ", "\u2007": " ", "\u202f": " ", "\u3000": "  ",
}
# fmt: on
# Box drawing, for fonts without it: horizontals to '-' (double ones to '='), verticals
# to '|', corners, tees and crosses to '+'. Derived from the names so the whole block
# is covered.
for _cp in range(0x2500, 0x2580):
    _name = unicodedata.name(chr(_cp), "")
    if "HORIZONTAL" in _name and "VERTICAL" not in _name:
        _FOLDS[chr(_cp)] = "=" if "DOUBLE" in _name else "-"
    elif "VERTICAL" in _name and "HORIZONTAL" not in _name and "AND" not in _name:
        _FOLDS[chr(_cp)] = "|"
    else:
        _FOLDS[chr(_cp)] = "+"


@dataclasses.dataclass(frozen=True)
class TextCounts:
    """What normalization changed, counted in source characters."""

    folded: int = 0  # replaced by a close equivalent the font has
    replaced: int = 0  # drawn as the replacement glyph
    dropped: int = 0  # removed: C1 controls, format characters, variation selectors
    controls: int = 0  # C0 controls and DEL made visible in caret notation
    ansi_sequences: int = 0  # ANSI escape sequences stripped
    #: the replaced characters per script (``script_of``), most first
    replaced_scripts: dict[str, int] = dataclasses.field(default_factory=dict)


@functools.lru_cache(maxsize=8192)
def script_of(codepoint: int) -> str:
    """A character's script as its Unicode name starts (``CJK``, ``HANGUL``, ``THAI``,
    ``LATIN``); ``symbols`` for symbols, ``private use``, and ``unassigned`` for any
    other code point without a name."""
    if 0xD800 <= codepoint <= 0xDFFF:
        return "surrogate"
    char = chr(codepoint)
    category = unicodedata.category(char)
    if category.startswith("S"):
        return "symbols"
    if category == "Co":
        return "private use"
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0].split("-", 1)[0] if name else "unassigned"


def by_script(codepoints: dict[int, int]) -> dict[str, int]:
    """Occurrences per codepoint summed per script, the largest first."""
    scripts: dict[str, int] = {}
    for codepoint, occurrences in codepoints.items():
        script = script_of(codepoint)
        scripts[script] = scripts.get(script, 0) + occurrences
    return dict(sorted(scripts.items(), key=lambda item: (-item[1], item[0])))


@dataclasses.dataclass(frozen=True, eq=False)
class NormalizedText:
    """A text ready for layout.

    Attributes:
        glyphs: int32[n], atlas glyph indices; ``LINE_BREAK`` (-1) marks a row break
            in the ``lines`` layout.
        counts: what was changed on the way.
        source_chars: length of the input string.
        classes_counted: int64[6], the input's characters per class of the
            ``classes`` table given to ``normalize``; None when not asked for.
        narrow: no glyph of the stream is wide (two cells): in ``flow`` every row then
            holds the same number of glyphs, and pages are cut without laying out.
    """

    glyphs: np.ndarray
    counts: TextCounts
    source_chars: int
    classes_counted: np.ndarray | None = None
    narrow: bool = True


def _caret(codepoint: int) -> str:
    return "^?" if codepoint == 0x7F else "^" + chr(codepoint + 0x40)


@functools.lru_cache(maxsize=8192)
def _resolve_missing(codepoint: int, atlas: FontAtlas) -> tuple[list[int], str]:
    """Glyph indices for a character the atlas lacks, and which count it adds to
    (remembered: every piece of a text asks again). The list is not to be changed."""

    def indices(replacement: str) -> list[int] | None:
        found = [atlas.index_of(ord(c)) for c in replacement]
        return found if replacement and all(i >= 0 for i in found) else None

    if codepoint < 0x20 or codepoint == 0x7F:
        caret = indices(_caret(codepoint))
        if caret is not None:
            return caret, "controls"
        return [atlas.replacement_index], "replaced"
    if 0xD800 <= codepoint <= 0xDFFF:
        return [atlas.replacement_index], "replaced"  # a lone surrogate draws nothing real
    char = chr(codepoint)
    category = unicodedata.category(char)
    if 0x80 <= codepoint <= 0x9F or category == "Cf" or codepoint in INVISIBLE_MARKS:
        return [], "dropped"
    fold = _FOLDS.get(char)
    if fold is not None and (found := indices(fold)) is not None:
        return found, "folded"
    decomposed = "".join(c for c in unicodedata.normalize("NFKD", char) if unicodedata.category(c) not in ("Mn", "Me"))
    if decomposed and decomposed != char and (found := indices(decomposed)) is not None:
        return found, "folded"
    name = unicodedata.name(char, "")
    if category == "So" and name and (found := indices(f":{name.lower().replace(' ', '_')}:")) is not None:
        return found, "folded"  # an emoji the fonts lack, by its name: ':rocket:'
    return [atlas.replacement_index], "replaced"


def replaced_characters(text: str, atlas: FontAtlas) -> dict[int, int]:
    """Occurrences of each character of ``text`` that ``normalize`` would draw as the
    replacement glyph for ``atlas`` (empty for most texts: ASCII is answered at once)."""
    if text.isascii():
        return {}
    composed = unicodedata.normalize("NFC", text)
    replaced: dict[int, int] = {}
    for char in set(composed):
        codepoint = ord(char)
        if codepoint >= 0x80 and not atlas.has(codepoint) and _resolve_missing(codepoint, atlas)[1] == "replaced":
            replaced[codepoint] = composed.count(char)
    return replaced


def certainly_drawn(text: str) -> int:
    """A lower bound on the glyphs ``normalize`` makes of ``text``, without normalizing:
    printable ASCII other than the space, outside ANSI escape sequences, is always drawn
    (as itself, or composed with a following mark into one character that is drawn,
    folded or replaced: at least one glyph)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    codepoints = _codepoints(text)
    return int(np.count_nonzero((codepoints > 0x20) & (codepoints < 0x7F)))


def _strip_ansi(text: str, classes: np.ndarray | None) -> tuple[str, int, np.ndarray | None]:
    """Rule 1 for a text holding ESC: CRLF and lone CRs become LF first (a sequence may
    span them, as it did before any was stripped), then ANSI escape sequences go.

    Returns:
        the text left; the sequences stripped; with ``classes`` (uint8[0x110000], a
        class 0..7 per code point), int64[8]: the input's characters per class minus
        the text left's.
    """
    delta = None if classes is None else np.zeros(CLASS_COUNT, dtype=np.int64)
    if "\r" in text:
        returns, pairs = text.count("\r"), text.count("\r\n")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if delta is not None and classes is not None:
            delta[classes[0x0D]] += returns
            delta[classes[0x0A]] -= returns - pairs  # a lone CR became LF
    if delta is not None and classes is not None:
        stripped = _codepoints("".join(_ANSI.findall(text)))
        delta += np.bincount(np.take(classes, stripped), minlength=CLASS_COUNT)[:CLASS_COUNT]
    text, ansi = _ANSI.subn("", text)
    return text, ansi, delta


@functools.cache
def nfc_suspects() -> np.ndarray:
    """uint8[0x22000], a bit per code point (bit ``cp & 7`` of byte ``cp >> 3``) set
    where NFC may change a text holding it: a combining mark (it may be reordered or
    composed), a character NFC replaces, or one that composes with the character
    before it (the second of a canonical pair, Hangul vowel and final jamo). A text
    with none of them is its own NFC. Built from this Python's ``unicodedata`` once per
    Unicode version (0.3 s) and cached on disk (a list of about 2,100 code points)."""
    cache_file = cache_dir() / f"nfc-suspects-{unicodedata.unidata_version}.u32"
    codepoints = None
    try:
        stored = np.frombuffer(cache_file.read_bytes(), dtype="<u4")
        if stored.size and int(stored.max()) < 0x110000:
            codepoints = stored
    except (OSError, ValueError):
        pass  # absent or damaged: built again
    if codepoints is None:
        codepoints = np.array(_nfc_suspect_codepoints(), dtype="<u4")
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(cache_file, codepoints.tobytes(), durable=False)
        except OSError:
            pass  # an unwritable cache: built again next time
    bits = np.zeros(0x110000 // 8, dtype=np.uint8)
    np.bitwise_or.at(bits, codepoints >> 3, (1 << (codepoints & 7)).astype(np.uint8))
    return bits


def _nfc_suspect_codepoints() -> list[int]:
    """The code points ``nfc_suspects`` marks, from ``unicodedata``."""
    found = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))  # Hangul V and T jamo compose with what precedes
    for codepoint in range(0x300, 0x110000):  # below U+0300 NFC changes nothing
        if 0xD800 <= codepoint <= 0xDFFF:
            continue
        char = chr(codepoint)
        if unicodedata.combining(char) or not unicodedata.is_normalized("NFC", char):
            found.add(codepoint)
        decomposition = unicodedata.decomposition(char)
        if decomposition and not decomposition.startswith("<"):
            parts = decomposition.split()
            if len(parts) == 2:
                found.add(int(parts[1], 16))
    return sorted(found)


#: Positions of the first code points without a glyph the kernel keeps; past that many
#: the glyph stream is searched for them.
_MISSING_KEPT = 1 << 14


def normalize(text: str, atlas: FontAtlas, layout: Layout = "flow", classes: np.ndarray | None = None) -> NormalizedText:
    """Normalize ``text`` for ``atlas`` and map it to glyph indices (see module docstring).

    One pass over the code points (``map_codepoints``) does rules 1 to 4 but ANSI
    sequences (stripped before, when the text holds ESC) and NFC (done by ``unicodedata``
    and the pass repeated, only when the pass met a character NFC may change).

    Args:
        classes: uint8[0x110000], a class 0..7 per code point: the input's characters
            are counted per class (``classes_counted``), in the same pass.
    """
    check_kind(layout, LAYOUTS, "layout")
    source_chars = len(text)
    ansi, delta = 0, None
    if "\x1b" in text:
        text, ansi, delta = _strip_ansi(text, classes)
    line_breaks = layout == "lines"
    suspects = _NO_TABLE if text.isascii() else nfc_suspects()
    glyphs, counts, missing_at = _map(text, atlas, line_breaks, classes, suspects)
    classes_counted = None
    if classes is not None:  # the input's: the text mapped, and what stripping took
        classes_counted = counts[COUNTS:] + (0 if delta is None else delta)
    if counts[NFC_SUSPECTS]:
        composed = unicodedata.normalize("NFC", text)
        if composed != text:
            glyphs, counts, missing_at = _map(composed, atlas, line_breaks, None, _NO_TABLE)
    missing = int(counts[MISSING])
    positions = missing_at[:missing] if missing <= missing_at.size else np.flatnonzero(glyphs <= NO_GLYPH)
    glyphs, changes, wide_resolved = _resolve(glyphs, positions, atlas)
    glyphs = _trim_blanks(glyphs, atlas, layout)
    narrow = counts[WIDE] == 0 and not wide_resolved
    return NormalizedText(glyphs, TextCounts(ansi_sequences=ansi, **changes), source_chars, classes_counted, narrow)


#: A table not asked for (no classes to count, no NFC suspects to look for).
_NO_TABLE = np.zeros(0, dtype=np.uint8)


def _map(
    text: str, atlas: FontAtlas, line_breaks: bool, classes: np.ndarray | None, suspects: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``map_codepoints`` over ``text``: int32 glyphs (``NO_GLYPH - cp`` where the font
    has none), its int64 counts, and the int64 positions of the first ``_MISSING_KEPT``
    code points without a glyph."""
    tabs = text.count("\t") if "\t" in text else 0  # counting a long text costs more than finding none
    cleaning = tabs > 0 or "\r" in text
    glyphs = np.empty(len(text) + (TAB_SIZE - 1) * tabs, dtype=np.int32)
    missing_at = np.empty(_MISSING_KEPT, dtype=np.int64)
    counts = np.zeros(COUNTS + CLASS_COUNT, dtype=np.int64)
    classes = _NO_TABLE if classes is None else classes
    map_codepoints(
        text, atlas.bmp_lookup, code_point_increments(atlas, classes, suspects), atlas.codepoints,
        atlas.cell_widths, classes, suspects, line_breaks, TAB_SIZE if cleaning else 0, glyphs, missing_at, counts,
    )  # fmt: skip
    return glyphs[: counts[WRITTEN]], counts, missing_at


def _codepoints(text: str) -> np.ndarray:
    """uint32[n], the code points of ``text``; surrogatepass keeps lone surrogates as
    code points so they can be counted and replaced."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


_CHANGE_KINDS = ("folded", "replaced", "dropped", "controls")


def _resolve(glyphs: np.ndarray, missing_at: np.ndarray, atlas: FontAtlas) -> tuple[np.ndarray, dict[str, Any], bool]:
    """Rule 4 for the characters the font lacks, at the int64 positions ``missing_at``
    of the int32 glyph stream (written there as ``NO_GLYPH - cp``).

    Returns:
        the glyph stream with each resolved (one glyph written in place; none or
        several spliced in); what was changed (counts per kind, and
        ``replaced_scripts``); whether a resolution drew a wide glyph.
    """
    counts: dict[str, Any] = dict.fromkeys(_CHANGE_KINDS, 0)
    counts["replaced_scripts"] = {}
    if missing_at.size == 0:
        return glyphs, counts, False
    codepoints = NO_GLYPH - glyphs[missing_at]
    # The distinct ones, then each one's index among them: sorting the few distinct is
    # cheaper than np.unique's inverse, which sorts every occurrence stably.
    missing_cps = np.unique(codepoints)
    which = np.searchsorted(missing_cps, codepoints)
    occurrences = np.bincount(which, minlength=missing_cps.size)
    resolutions = []
    replaced: dict[int, int] = {}
    for k, cp in enumerate(missing_cps.tolist()):
        resolved, kind = _resolve_missing(cp, atlas)
        counts[kind] += int(occurrences[k])
        if kind == "replaced":
            replaced[cp] = int(occurrences[k])
        resolutions.append(resolved)
    counts["replaced_scripts"] = by_script(replaced)
    wide = any(int(atlas.cell_widths[g]) == 2 for resolved in resolutions for g in resolved)

    # One glyph for one character (most resolutions): written in place, no shifting.
    sizes = np.array([len(r) for r in resolutions], dtype=np.int64)
    singles = np.array([r[0] if len(r) == 1 else -1 for r in resolutions], dtype=np.int32)
    single = sizes[which] == 1
    glyphs[missing_at[single]] = singles[which[single]]
    irregular, irregular_which = missing_at[~single], which[~single]  # dropped (no glyph) or expanded
    if irregular.size == 0:
        return glyphs, counts, wide
    replacements = [np.array(r, dtype=np.int32) for r in resolutions]
    if irregular.size <= _SPLICE_LIMIT:
        return _splice(glyphs, irregular, irregular_which, replacements), counts, wide
    # Many: per-character offsets, a piece of the stream at a time (bounded temporaries).
    pieces = []
    bounds = np.searchsorted(irregular, np.arange(0, glyphs.size + _PIECE, _PIECE))
    for piece, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        first = piece * _PIECE
        pieces.append(
            _expand(glyphs[first : first + _PIECE], irregular[lo:hi] - first, irregular_which[lo:hi], sizes, replacements)
        )
    return np.concatenate(pieces), counts, wide


#: Glyphs per piece when many characters are dropped or expanded.
_PIECE = 1 << 18


def _splice(glyphs: np.ndarray, irregular: np.ndarray, which: np.ndarray, replacements: list[np.ndarray]) -> np.ndarray:
    """A few dropped or expanded glyphs spliced in between slices, without
    per-character temporaries: the glyph at each ``irregular`` position becomes
    ``replacements[which[k]]``."""
    pieces: list[np.ndarray] = []
    previous = 0
    for position, k in zip(irregular.tolist(), which.tolist()):
        pieces += [glyphs[previous:position], replacements[k]]
        previous = position + 1
    pieces.append(glyphs[previous:])
    return np.concatenate(pieces)


def _expand(
    glyphs: np.ndarray, irregular: np.ndarray, which: np.ndarray, sizes: np.ndarray, replacements: list[np.ndarray]
) -> np.ndarray:
    """``_splice`` by per-character offsets (many positions in one piece)."""
    lengths = np.ones(glyphs.size, dtype=np.int64)
    lengths[irregular] = sizes[which]
    starts = np.cumsum(lengths) - lengths
    out = np.empty(int(lengths.sum()), dtype=np.int32)
    kept = np.ones(glyphs.size, dtype=bool)
    kept[irregular] = False
    out[starts[kept]] = glyphs[kept]
    for k, resolved in enumerate(replacements):
        at = starts[irregular[which == k]]
        for offset, glyph in enumerate(resolved.tolist()):
            out[at + offset] = glyph
    return out


def _trim_blanks(glyphs: np.ndarray, atlas: FontAtlas, layout: Layout) -> np.ndarray:
    """Rule 4: drop blanks that end the text (and, in ``lines``, blanks that end a line).

    Done on glyphs, after dropping, so that a line ending in a dropped character is
    trimmed too: a reader cannot see trailing blanks, so the page must not hold them.
    """
    n = glyphs.size
    if n == 0:
        return glyphs
    if layout == "flow":
        # Only the very end: newline markers are visible, so blanks before them stay.
        # Scan back from the end in growing windows: the tail is nearly always short.
        window = 256
        while True:
            tail = glyphs[max(n - window, 0) :]
            solid = np.flatnonzero((atlas.canonical[tail] != 0x20) & (tail != atlas.newline_index))
            if solid.size or window >= n:
                return glyphs[: n - tail.size + (int(solid[-1]) + 1 if solid.size else 0)]
            window *= 4
    blank = (atlas.canonical[np.maximum(glyphs, 0)] == 0x20) & (glyphs >= 0)
    ends_line = glyphs == LINE_BREAK
    solid = np.flatnonzero(~blank)
    # For each position, the next glyph that is not blank (n past the end).
    next_solid = np.full(n, n, dtype=np.int64)
    next_solid[solid] = solid
    next_solid = np.minimum.accumulate(next_solid[::-1])[::-1]
    next_is_break = np.where(next_solid < n, ends_line[np.minimum(next_solid, n - 1)], True)
    keep = ~(blank & next_is_break)
    kept = glyphs[keep]
    # A text ends with its last line, not with line breaks.
    last = np.flatnonzero(kept != LINE_BREAK)
    return kept[: last[-1] + 1] if last.size else kept[:0]
