"""A deterministic benchmark corpus from text every Python installation has.

Standard-library source files (sorted by path; their docstrings come with them), the
licence text, and a fixed multilingual sample (Cyrillic, Greek, CJK). The same Python
version always gives the same corpus.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

MULTILINGUAL = (
    "Съешь же ещё этих мягких французских булок, да выпей чаю. "
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. "
    "天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。"
    "いろはにほへと ちりぬるを わかよたれそ つねならむ。"
    "다람쥐 헌 쳇바퀴에 타고파. "
)


def stdlib_corpus(min_chars: int = 1_000_000) -> str:
    """At least ``min_chars`` characters: stdlib sources, the licence, multilingual text."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts: list[str] = []
    licence = stdlib / "LICENSE.txt"
    if licence.is_file():
        parts.append(licence.read_text(encoding="utf-8", errors="replace"))
    total = sum(map(len, parts))
    for path in sorted(stdlib.glob("*.py")):
        if total >= min_chars:
            break
        text = path.read_text(encoding="utf-8", errors="replace")
        parts.append(text)
        parts.append(MULTILINGUAL * 4 + "\n")
        total += len(text) + len(MULTILINGUAL) * 4 + 1
    if total < min_chars:
        raise RuntimeError(f"the standard library at {stdlib} holds only {total:,} characters of source")
    return "".join(parts)
