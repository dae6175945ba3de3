"""Rendered pages stay byte-identical across changes to the renderer: digests of a
fixed set of renderings (every shape, both layouts, several readers, text with
controls, ANSI escapes, tabs, CJK and combining marks) are stored in
``tests/data/page_digests.json``. Regenerate them only for a change that means to alter
the pixels: ``python tests/test_digests.py --write``."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import glyphpack

DIGESTS = Path(__file__).parent / "data" / "page_digests.json"


def corpus() -> str:
    parts = []
    for i in range(400):
        parts.append(f"line {i:04d}: def f_{i}(x):\treturn x * {i} + 0x{i * 7919:08x}  # résumé naïve\n")
        if i % 50 == 0:
            parts.append("\x1b[31mred\x1b[0m \x0c form feed \x00 nul \x07 bell e\u0301 \u201cquoted\u201d \u2014 dash\n")
        if i % 80 == 0:
            parts.append("漢字の文章がここに続きます。한국어 문장. Ελληνικά. Русский текст.\n")
    return "".join(parts)


CASES = [
    ("5x8", "flow", "claude-sonnet-4-5"),
    ("5x8", "lines", "gpt-5.4"),
    ("6x13", "flow", "gemini-3-pro"),
    ("8x13", "lines", None),
    ("8x13-loose", "flow", "claude-opus-4-7"),
    ("unifont", "flow", "claude-sonnet-4-5"),
    ("9x15-loose", "lines", "claude-opus-4-8"),
    ("8x13-tall", "flow", "gemini-3-pro"),
    ("10x20", "flow", "gpt-5.4"),
    (None, "flow", "gpt-4o"),
]
#: Renderings of many pages (the text repeated): page boundaries, the many-image rule
#: (over 20 pages for Claude makes them smaller) and batches of pages in parallel.
MANY_PAGE_CASES = [
    (24, "5x8", "flow", "claude-sonnet-4-5"),
    (6, "5x8", "lines", "gpt-5.4"),
    (6, "8x13-loose", "flow", None),
    (4, "unifont", "lines", "gemini-3-pro"),
]
#: Text without a wide character in fonts that have wide glyphs, and in one without
#: (pages cut and drawn straight from the glyph stream in ``flow``).
ASCII_CASES = [
    ("9x15-loose", "flow", "claude-opus-4-8"),
    ("unifont", "flow", None),
    ("5x8", "flow", "gpt-5.4"),
    ("7x14", "lines", None),
]


def digests() -> dict[str, list[str]]:
    text = corpus()
    out = {}
    for shape, layout, model in CASES:
        pages = glyphpack.render(text, shape=shape, layout=layout, model=model)
        out[f"{shape}/{layout}/{model}"] = [hashlib.sha256(p.png).hexdigest() for p in pages]
    for repeat, shape, layout, model in MANY_PAGE_CASES:
        pages = glyphpack.render(text * repeat, shape=shape, layout=layout, model=model)
        out[f"{repeat}x/{shape}/{layout}/{model}"] = [hashlib.sha256(p.png).hexdigest() for p in pages]
    ascii_text = text.encode("ascii", "ignore").decode()
    for shape, layout, model in ASCII_CASES:
        pages = glyphpack.render(ascii_text * 3, shape=shape, layout=layout, model=model)
        out[f"ascii/{shape}/{layout}/{model}"] = [hashlib.sha256(p.png).hexdigest() for p in pages]
    return out


def test_rendered_pages_are_byte_identical_to_the_stored_digests():
    assert digests() == json.loads(DIGESTS.read_text())


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    DIGESTS.write_text(json.dumps(digests(), indent=1) + "\n")
