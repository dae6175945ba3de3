"""The figures the docs quote, written from the code that uses them, never typed.

Each figure lives in a page between ``<!-- figures: NAME -->`` and ``<!-- /figures -->``;
this script rewrites every such block from the catalog, the reading profiles and the
page geometry. ``--check`` rewrites nothing and exits 1 naming each stale block (the
test suite runs it, so a change to a provider fact that the docs do not follow fails).

    python scripts/docs_figures.py           # rewrite the blocks
    python scripts/docs_figures.py --check   # exit 1 if any is stale
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from glyphpack._providers.catalog import CACHE_PRICES, CONTEXT_WINDOWS, INPUT_WINDOWS, OUTPUT_PRICES, READERS
from glyphpack._providers.reading import READING_EXAMPLES
from glyphpack._providers.resolve import default_shapes
from glyphpack._render.shapes import SHAPES

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- figures: ([a-z-]+) -->\n)(.*?)(<!-- /figures -->)", re.S)
def reading_profiles() -> list[str]:
    rows = [
        "| reader (example id) | exact: shape, characters per image token | gist: shape, characters per image token | exact's source |",
        "|---|---|---|---|",
    ]
    for name, model in READING_EXAMPLES.items():
        found = default_shapes(model, SHAPES)
        rows.append(
            f"| {name} (`{model}`) | `{found.exact}`, {_per_token(found.exact_chars_per_token)} "
            f"| `{found.gist}`, {_per_token(found.gist_chars_per_token)} | {found.source} |"
        )
    return rows


def _per_token(value: float | None) -> str:
    return "free" if value is None else f"{value:.1f}"


def readers() -> list[str]:
    rows = ["| reader | provider | vision | resize (so nothing is downscaled) | billing | images per request | bytes per image |", "|---|---|---|---|---|---|---|"]
    for reader in READERS.values():
        size = f"{reader.max_image_bytes / 2**20:.1f} MiB" if reader.max_image_bytes else "—"
        rows.append(
            f"| `{reader.name}` | {reader.provider} | {'yes' if reader.vision else 'no'} | `{reader.resize}` | `{reader.billing}` "
            f"| {reader.max_images or '—'} | {size} |"
        )
    return rows


def economics() -> list[str]:
    rows = ["| provider | context window (default) | cache write | cache read | output |", "|---|---|---|---|---|"]
    for provider, window in CONTEXT_WINDOWS.items():
        write, read = CACHE_PRICES[provider]
        rows.append(f"| {provider} | {window:,} | {write}x | {read}x | {OUTPUT_PRICES[provider]}x |")
    return rows


def windows() -> list[str]:
    rows = ["| model names starting | input tokens a request may carry |", "|---|---|"]
    for prefix, window in sorted(INPUT_WINDOWS.items(), key=lambda item: (item[0].split("-")[0], item[0])):
        rows.append(f"| `{prefix}` | {window:,} |")
    return rows


FIGURES: dict[str, Callable[[], list[str]]] = {"reading-profiles": reading_profiles, "readers": readers, "economics": economics, "windows": windows}


def rewrite(text: str, where: str, stale: list[str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in FIGURES:
            raise SystemExit(f"{where}: no figures named {name!r} (known: {', '.join(FIGURES)})")
        body = "\n".join(FIGURES[name]()) + "\n"
        if body != match.group(3):
            stale.append(f"{where}: {name}")
        return match.group(1) + body + match.group(4)

    return BLOCK.sub(one, text)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale: list[str] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        new = rewrite(text, str(path.relative_to(ROOT)), stale)
        if new != text and not check:
            path.write_text(new)
    if check and stale:
        print("stale figures (run python scripts/docs_figures.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
