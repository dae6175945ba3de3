"""Plain-Python reference for the numba kernels: slow, obvious, and the judge of them."""

from __future__ import annotations

import numpy as np

EMPTY, WIDE_TAIL, LINE_BREAK = -1, -2, -1


def place_cells(glyphs, cell_widths, cols, wrap_glyph, pad_glyph=-1):
    """The cell grid (list of rows, each a list of ``cols`` ints) for a glyph stream;
    in flow, ``pad_glyph`` marks the last cell of a row a wide glyph did not fit."""
    rows = [[EMPTY] * cols] if len(glyphs) else []
    col = 0
    glyphs = [int(g) for g in glyphs]
    for i, g in enumerate(glyphs):
        if g == LINE_BREAK:
            rows.append([EMPTY] * cols)
            col = 0
            continue
        width = int(cell_widths[g])
        if wrap_glyph >= 0:
            ends_line = i + 1 == len(glyphs) or glyphs[i + 1] == LINE_BREAK
            fits = col + width <= cols - 1 or (ends_line and col + width <= cols)
            if not fits:
                rows[-1][cols - 1] = wrap_glyph
                rows.append([EMPTY] * cols)
                col = 0
        elif col + width > cols:
            if col == cols - 1 and pad_glyph >= 0:
                rows[-1][col] = pad_glyph
            rows.append([EMPTY] * cols)
            col = 0
        rows[-1][col] = g
        if width == 2:
            rows[-1][col + 1] = WIDE_TAIL
        col += width
    return rows


def rasterize(grid, bitmaps, cell_widths, glyph_width, advance, pitch):
    """uint8[R * pitch, C * advance] pixels of one page's grid (list of rows)."""
    n_rows, n_cols = len(grid), len(grid[0])
    pixels = np.zeros((n_rows * pitch, n_cols * advance), dtype=np.uint8)
    gh = bitmaps.shape[1]
    for r in range(n_rows):
        for c in range(n_cols):
            g = grid[r][c]
            if g < 0:
                continue
            for y in range(gh):
                for x in range(glyph_width * int(cell_widths[g])):
                    if bitmaps[g, y, x]:
                        pixels[r * pitch + y, c * advance + x] = 1
    return pixels


def glyphs_to_text(glyphs, atlas):
    """The text a reader sees in a glyph stream: each glyph's canonical character, a
    line break as LF."""
    return "".join("\n" if int(g) == LINE_BREAK else chr(int(atlas.canonical[max(int(g), 0)])) for g in glyphs)


def normalize(text, atlas, layout, classes=None):
    """``glyphpack._render.text.normalize`` the slow way, rule by rule on strings and
    one character at a time: (glyph list, counts dict, per-class counts of the input or
    None). Only ``_resolve_missing``, the per-character rule for what a font lacks, is
    shared with the code under test."""
    import unicodedata

    from glyphpack._render.text import _ANSI, TAB_SIZE, _resolve_missing, by_script

    input_classes = None if classes is None else [sum(1 for c in text if classes[ord(c)] == k) for k in range(6)]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text, ansi = _ANSI.subn("", text)
    text = unicodedata.normalize("NFC", text).expandtabs(TAB_SIZE)
    glyphs = []
    counts = {"folded": 0, "replaced": 0, "dropped": 0, "controls": 0}
    replaced = {}
    for char in text:
        if layout == "lines" and char == "\n":
            glyphs.append(LINE_BREAK)
            continue
        index = atlas.index_of(ord(char))
        if index >= 0:
            glyphs.append(index)
            continue
        resolved, kind = _resolve_missing(ord(char), atlas)
        glyphs += resolved
        counts[kind] += 1
        if kind == "replaced":
            replaced[ord(char)] = replaced.get(ord(char), 0) + 1
    blank = lambda g: g >= 0 and atlas.canonical[g] == 0x20
    if layout == "flow":
        while glyphs and (blank(glyphs[-1]) or glyphs[-1] == atlas.newline_index):
            glyphs.pop()
    else:
        kept = []
        for i, g in enumerate(glyphs):
            following = next((h for h in glyphs[i:] if not blank(h)), LINE_BREAK)
            if not (blank(g) and following == LINE_BREAK):
                kept.append(g)
        while kept and kept[-1] == LINE_BREAK:
            kept.pop()
        glyphs = kept
    return glyphs, counts | {"ansi_sequences": ansi, "replaced_scripts": by_script(replaced)}, input_classes


def validate_history(messages, allow_pending=True):
    """The history check from the start every time (``validate_history`` resumes where
    it left off): the error's text, or None when the history is valid."""
    open_calls = {}
    seen = set()
    for index, message in enumerate(messages):
        for result in message.tool_results:
            if result.call_id not in open_calls:
                where = "was already answered" if result.call_id in seen else "has no earlier tool call"
                return f"message {index}: the tool result for call {result.call_id!r} {where}"
            del open_calls[result.call_id]
        if message.role == "assistant" and open_calls:
            return f"message {index}: tool calls {', '.join(sorted(open_calls))} have no results before the next assistant turn"
        for call in message.tool_calls:
            if call.id in seen:
                return f"message {index}: duplicate tool call id {call.id!r}"
            seen.add(call.id)
            open_calls[call.id] = index
    if open_calls and not allow_pending:
        return f"mid-turn: tool calls {', '.join(sorted(open_calls))} have no results yet"
    return None
