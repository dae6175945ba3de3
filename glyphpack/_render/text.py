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
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .._types import LAYOUTS, Layout, check_kind
from .fonts import INVISIBLE_MARKS, FontAtlas
from .kernels import CLASS_COUNT, LINE_BREAK, NO_GLYPH, map_codepoints

TAB_SIZE = 8
#: Up to this many dropped or expanded characters are spliced in slice by slice; more
#: take one vectorized pass over the whole text (per-character offsets).
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
        classes_counted: int64[8], the input's characters per class of the
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


def clean_text(text: str, classes: np.ndarray | None = None) -> tuple[str, int, np.ndarray | None]:
    """Steps 1-3 of the rules: the string-level clean-up.

    Returns:
        the cleaned text; the ANSI sequences stripped; and, with ``classes``
        (uint8[0x110000], a class 0..7 per code point), int64[8]: the input's
        characters per class minus the cleaned text's, from what each step removed and
        added (None when NFC composed something: then only a count of the input tells).
    """
    delta = None if classes is None else np.zeros(CLASS_COUNT, dtype=np.int64)

    def changed(char: str, removed: int) -> None:
        if delta is not None and classes is not None:
            delta[classes[ord(char)]] += removed

    if "\r" in text:
        returns, pairs = text.count("\r"), text.count("\r\n")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        changed("\r", returns)
        changed("\n", -(returns - pairs))  # a lone CR became LF
    ansi = 0
    if "\x1b" in text:
        if delta is not None and classes is not None:
            stripped = _codepoints("".join(_ANSI.findall(text)))
            delta += np.bincount(np.take(classes, stripped), minlength=CLASS_COUNT)[:CLASS_COUNT]
        text, ansi = _ANSI.subn("", text)
    if not text.isascii():
        composed = unicodedata.normalize("NFC", text)
        if composed is not text and composed != text:
            delta = None
        text = composed
    if "\t" in text:
        tabs, before = text.count("\t"), len(text)
        text = text.expandtabs(TAB_SIZE)
        changed("\t", tabs)
        changed(" ", -(len(text) - before + tabs))
    return text, ansi, delta


# Stand-ins for the glyph tables when ``map_codepoints`` only counts classes.
_NO_TABLE = np.zeros(0, dtype=np.int32)
_NO_CODEPOINTS = np.zeros(0, dtype=np.int32)
_NO_GLYPHS = np.zeros(0, dtype=np.int32)

#: Characters normalized per piece: pieces are mapped apart (on several threads when the
#: caller gives a ``parallel_map``) so temporaries stay bounded for any text length.
PIECE_CHARS = 1 << 18


def normalize(
    text: str,
    atlas: FontAtlas,
    layout: Layout = "flow",
    classes: np.ndarray | None = None,
    parallel_map: Callable[..., Iterable[Any]] = map,
) -> NormalizedText:
    """Normalize ``text`` for ``atlas`` and map it to glyph indices (see module docstring).

    Args:
        classes: uint8[0x110000], a class 0..7 per code point: the input's characters
            are counted per class (``classes_counted``): the cleaned text's in the
            glyph lookup's pass, plus what cleaning removed and added; in a pass of
            their own only when NFC composed characters.
        parallel_map: a ``map`` that may run pieces of the text at once (an executor's
            ``map``); each piece is ``PIECE_CHARS`` characters of the cleaned text.
    """
    check_kind(layout, LAYOUTS, "layout")
    source_chars = len(text)
    cleaned, ansi, delta = clean_text(text, classes)
    # The input's classes are the cleaned text's plus what cleaning changed, counted in
    # the lookup's pass; only when NFC composed characters is the input counted apart.
    counting = classes if delta is not None else None
    map_piece = functools.partial(_normalize_piece, cleaned, atlas, layout == "lines", counting)
    pieces = _in_pieces(map_piece, len(cleaned), parallel_map)
    glyphs = pieces[0][0] if len(pieces) == 1 else np.concatenate([piece[0] for piece in pieces])
    counts: dict[str, Any] = {kind: sum(piece[1][kind] for piece in pieces) for kind in _CHANGE_KINDS}
    replaced: dict[int, int] = {}
    for piece in pieces:
        for codepoint, occurrences in piece[1]["replaced_chars"].items():
            replaced[codepoint] = replaced.get(codepoint, 0) + occurrences
    counts["replaced_scripts"] = by_script(replaced)
    counted = [piece[2] for piece in pieces if piece[2] is not None]
    if classes is not None and counting is None:  # NFC composed: count the input apart
        counted = _in_pieces(functools.partial(_count_classes, text, classes), len(text), parallel_map)
    classes_counted = np.sum(counted, axis=0) + (0 if delta is None else delta) if counted else None
    glyphs = _trim_blanks(glyphs, atlas, layout)
    narrow = not atlas.has_wide or not bool((atlas.cell_widths[glyphs[glyphs >= 0]] == 2).any())
    return NormalizedText(glyphs, TextCounts(ansi_sequences=ansi, **counts), source_chars, classes_counted, narrow)


def _in_pieces(piece: Callable[[int], Any], length: int, parallel_map: Callable[..., Iterable[Any]]) -> list[Any]:
    """``piece(start)`` for each ``PIECE_CHARS`` of ``length`` characters (at least one
    call), through ``parallel_map`` when there are several."""
    starts = range(0, length, PIECE_CHARS)
    return [piece(0)] if len(starts) <= 1 else list(parallel_map(piece, starts))


def _codepoints(text: str) -> np.ndarray:
    """uint32[n], the code points of ``text``; surrogatepass keeps lone surrogates as
    code points so they can be counted and replaced."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _count_classes(text: str, classes: np.ndarray, start: int) -> np.ndarray:
    """int64[8]: characters of ``text[start:start + PIECE_CHARS]`` per class."""
    codepoints = _codepoints(text[start : start + PIECE_CHARS])
    counts = np.zeros(1 + CLASS_COUNT, dtype=np.int64)
    map_codepoints(codepoints, _NO_TABLE, _NO_CODEPOINTS, False, classes, _NO_GLYPHS, counts, False)
    return counts[1:]


_CHANGE_KINDS = ("folded", "replaced", "dropped", "controls")


def _normalize_piece(
    cleaned: str, atlas: FontAtlas, line_breaks: bool, classes: np.ndarray | None, start: int
) -> tuple[np.ndarray, dict[str, Any], np.ndarray | None]:
    """Glyphs of ``cleaned[start:start + PIECE_CHARS]``, what was changed (counts per
    kind, and ``replaced_chars``: occurrences per replaced codepoint), and the piece's
    characters per class (with ``classes``)."""
    codepoints = _codepoints(cleaned[start : start + PIECE_CHARS])
    glyphs, lookup_counts = atlas.lookup(codepoints, line_breaks=line_breaks, classes=classes)
    classes_counted = lookup_counts[1:] if classes is not None else None
    counts: dict[str, Any] = dict.fromkeys(_CHANGE_KINDS, 0)
    counts["replaced_chars"] = replaced_chars = {}
    if lookup_counts[0] == 0:
        return glyphs, counts, classes_counted

    missing_at = np.flatnonzero(glyphs == NO_GLYPH)
    missing_cps, which, occurrences = np.unique(codepoints[missing_at], return_inverse=True, return_counts=True)
    resolutions = []
    for k, cp in enumerate(missing_cps.tolist()):
        resolved, kind = _resolve_missing(cp, atlas)
        counts[kind] += int(occurrences[k])
        if kind == "replaced":
            replaced_chars[cp] = int(occurrences[k])
        resolutions.append(resolved)

    # One glyph for one character (most resolutions): written in place, no shifting.
    sizes = np.array([len(r) for r in resolutions], dtype=np.int64)
    singles = np.array([r[0] if len(r) == 1 else -1 for r in resolutions], dtype=np.int32)
    single = sizes[which] == 1
    glyphs[missing_at[single]] = singles[which[single]]
    irregular = missing_at[~single]  # dropped (no glyph) or expanded (caret notation, folds)
    if irregular.size == 0:
        return glyphs, counts, classes_counted
    if irregular.size <= _SPLICE_LIMIT:
        # A few: splice them in between slices, without per-character temporaries.
        replacements = [np.array(r, dtype=np.int32) for r in resolutions]
        pieces: list[np.ndarray] = []
        previous = 0
        for position, k in zip(irregular.tolist(), which[~single].tolist()):
            pieces += [glyphs[previous:position], replacements[k]]
            previous = position + 1
        pieces.append(glyphs[previous:])
        return np.concatenate(pieces), counts, classes_counted
    lengths = np.ones(len(codepoints), dtype=np.int64)
    lengths[missing_at] = sizes[which]
    starts = np.cumsum(lengths) - lengths
    out = np.empty(int(lengths.sum()), dtype=np.int32)
    found = np.ones(len(codepoints), dtype=bool)
    found[missing_at] = False
    out[starts[found]] = glyphs[found]
    for k, resolved in enumerate(resolutions):
        at = starts[missing_at[which == k]]
        for offset, glyph in enumerate(resolved):
            out[at + offset] = glyph
    return out, counts, classes_counted


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

